"""The pages' text for the site's search, opened from disk (``file://``).

Sphinx's search page lists the pages that match from ``searchindex.js`` (a script, which a page
opened from disk may load), then fetches each page to show a few lines around the words found:
a page opened from disk may not ``fetch`` files, so there the browser logs "Failed to fetch" and
shows no lines. The build writes ``_static/search_pages.js`` (:func:`write`): every page's main
text, its article's where it has one (as ``static/site.js`` makes the search read a page
served: not the theme's buttons, contents list and footer that share the main element), as
HTML that keeps only its sections (with their ids, which a result's link may point at) and
their text. ``static/site.js`` loads it on the search page opened from disk only, and
answers the search's requests for the pages from it; served over HTTP nothing changes, and no
page loads the file.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

#: The file, under the site's ``_static``.
FILE = "search_pages.js"
#: Pages that are no page of the course's text.
SKIPPED = {"search.html", "genindex.html"}
#: Elements whose text Sphinx's search drops (with the "¶" links), and elements that hold none.
_DROPPED = {"script", "style"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source",
         "track", "wbr"}


class _MainText(HTMLParser):
    """The text of a page's ``[role="main"]`` element (or, ``article=True``, of its element of
    class ``bd-article``), its ``<section id>``s kept."""

    def __init__(self, article: bool = False):
        super().__init__(convert_charrefs=True)
        self.article = article
        self.out: list[str] = []
        self.stack: list[tuple[str, bool, bool, bool]] = []  # tag, section, dropped, main
        self.depth_main = None
        self.dropping = 0

    def handle_starttag(self, tag, attrs):
        if tag in _VOID:
            return
        attrs = dict(attrs)
        starts_main = self.depth_main is None and (
            "bd-article" in (attrs.get("class") or "").split() if self.article
            else attrs.get("role") == "main")
        if starts_main:
            self.depth_main = len(self.stack)
            self.out.append('<div role="main">')
        inside = self.depth_main is not None
        section = inside and not starts_main and tag == "section" and bool(attrs.get("id"))
        dropped = inside and (tag in _DROPPED or "headerlink" in (attrs.get("class") or ""))
        if section and not self.dropping:
            self.out.append(f'<section id="{html.escape(attrs["id"], quote=True)}">')
        self.dropping += dropped
        self.stack.append((tag, section, dropped, starts_main))

    def handle_endtag(self, tag):
        if tag in _VOID:
            return
        while self.stack:
            open_tag, section, dropped, main = self.stack.pop()
            self.dropping -= dropped
            if section and not self.dropping:
                self.out.append("</section>")
            if main:
                self.out.append("</div>")
                self.depth_main = None
            if open_tag == tag:
                break

    def handle_data(self, data):
        if self.depth_main is not None and not self.dropping:
            # as it is, white space too: the search cuts its lines from this text by position
            self.out.append(html.escape(data, quote=False))


_ARTICLE = re.compile(r"""<[a-z]+\s[^>]*class=["'](?:[^"']*\s)?bd-article[\s"']""")


def main_text(page_html: str) -> str:
    """A page's main text as HTML of sections and text: the same ``textContent`` as the page's
    ``[role="main"]`` (its ``.bd-article`` where it has one) without its scripts, styles and
    "¶" links, which the search summarises. Pure."""
    parser = _MainText(article=bool(_ARTICLE.search(page_html)))
    parser.feed(page_html)
    parser.close()
    return "".join(parser.out)


def write(site: Path) -> Path:
    """Write ``_static/search_pages.js`` for the built site in ``site``; its path."""
    pages = {page.name: main_text(page.read_text(encoding="utf-8"))
             for page in sorted(site.glob("*.html")) if page.name not in SKIPPED}
    data = json.dumps(pages, ensure_ascii=False, separators=(",", ":"))
    path = site / "_static" / FILE
    path.write_text(f"window.convs2sSearchPages = {data};\n", encoding="utf-8")
    return path
