"""Sphinx configuration of the course's website (``make site``; see tools/site/__init__.py).

Sphinx reads this file with the staged source folder that ``python -m tools.site`` writes: the
landing page ``index.md`` and a site copy of every notebook. Nothing here fetches anything:
the theme's assets come with ``sphinx-book-theme`` (and ``pydata-sphinx-theme``), the maths is
written into the pages as MathML (``mathml.py``: browsers display it, no maths library is loaded),
and no notebook is executed. A page loads only what it uses: the theme's 1.5 MB icon script is
replaced by the dozen icons the pages show (``icons.py``). ``static/site.css`` fits
figures and code to the column; ``static/site.js`` makes the article header's sidebar buttons work
and makes each figure a link to its image at full size, and lets the search page show its lines
of text when the site is opened from disk (``search_pages.py``); ``static/tables.js`` shows a
table wider than its column as one card per row.
"""

import html
import shutil
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tools.badges import read_repository_url  # noqa: E402
from tools.site import readme_intro  # noqa: E402

REPOSITORY = read_repository_url(ROOT / "pyproject.toml").rstrip("/")

project = "ConvS2S course"
copyright = "the ConvS2S course's authors; MIT licence"
html_title = readme_intro((ROOT / "README.md").read_text(encoding="utf-8"))[0]
language = "en"

extensions = [
    "myst_nb",  # notebooks (and the landing page's markdown) as pages
    "tools.site.mathml",  # formulas as MathML, written at build time (no MathJax)
]
html_math_renderer = "mathml"
exclude_patterns = ["_notebooks", "**/.ipynb_checkpoints"]

# myst-nb: show the stored outputs, run nothing; no widget JavaScript from a CDN (the site
# copies replace every widget by a picture, see tools/site/__init__.py)
nb_execution_mode = "off"
nb_ipywidgets_js = {}
nb_merge_streams = True
# attrs_inline: the landing page's "Start with 00" link is styled as a button ({.start-here})
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "attrs_inline"]
myst_heading_anchors = 3
# Markdown a cell displays (notebook 06's table of the settings tried) read as MyST, like the
# notebooks' own text: myst-nb's default, CommonMark, has no tables.
nb_render_markdown_format = "myst"

html_theme = "sphinx_book_theme"
html_static_path = ["static"]
# icons.css: written after the build (icons.py); translator.css: notebook 06's translator
html_css_files = ["site.css", "icons.css", "translator.css"]
html_favicon = "static/favicon.svg"
# site.js: sidebar buttons that work on a phone, figures open full size; tables.js: a table
# wider than its column as one card per row (a phone); live.js: the widgets
# the page computes itself (notebook 01's dependency explorer)
# (translator.js, notebook 06's translator, only on a page that has one: _translator_script)
html_js_files = ["site.js", "tables.js", "live.js", "flipbook.js"]  # flipbook.js: notebooks 03-05
html_copy_source = False  # the site copies are not the notebooks: each page links to those
html_show_sourcelink = False
html_last_updated_fmt = None
html_theme_options = {
    "repository_url": REPOSITORY,
    "repository_branch": "main",
    "path_to_docs": "notebooks",
    "use_repository_button": True,
    "use_download_button": False,
    "launch_buttons": {"colab_url": "https://colab.research.google.com"},
    # the landing page is the sidebar's title already: not a chapter of its list too
    "home_page_in_toc": False,
    # the footer says whose course it is and its licence (Sphinx's default author is the words
    # "Author name not set")
    "footer_content_items": ["copyright"],
    "show_toc_level": 2,
    "navigation_with_keys": False,
    # the search is the sidebar's field and the article header's button: no second one in a
    # bar of its own above the layout (tools/site/static/site.css hides that empty bar)
    "navbar_persistent": [],
}
# the reader's system preference (prefers-color-scheme) until they choose with the theme's
# switch, which wins from then on; the course's own pictures come in a dark drawing too
# (figures.py), the notebooks' other figures on a white card (the theme's dark style)
html_context = {"default_mode": "auto"}


def _escape_theme_titles(app, pagename, templatename, context, doctree):
    """sphinx-book-theme writes the page's title and the landing page's into every page as the
    text of the heading (``astext()``), without escaping it: escaped here, after the theme set
    them, so a title shows as the characters it holds (tools/site/__init__.py makes titles
    plain text)."""
    for key in ("pagetitle", "root_title"):
        if isinstance(context.get(key), str):
            context[key] = html.escape(context[key], quote=False)


def _drop_theme_templates(app, exception):
    """The themes keep Jinja templates (``webpack-macros.html``, ``sbt-webpack-macros.html``)
    among their static files, so Sphinx copies them into ``_static`` as they are: a page of raw
    ``{% macro %}`` text. They are no page of the site: removed once the build is done, with
    the other theme files no page uses."""
    if exception is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    for page in static.rglob("*.html"):
        text = page.read_text(encoding="utf-8", errors="replace")
        if "{%" in text or "{{ " in text:
            page.unlink()
    # nor are the themes' source maps (for debugging their minified code) and translations
    # (this site is in English): no page loads them, and they were a quarter of the site
    for source_map in static.rglob("*.map"):
        source_map.unlink()
    if language == "en" and (static / "locales").is_dir():
        shutil.rmtree(static / "locales")


def _shrink_icons(app, exception):
    """The theme's icons: only those the pages use, as CSS (tools/site/icons.py)."""
    if exception is not None or app.builder.format != "html":
        return
    from tools.site import icons

    out = Path(app.outdir)
    missing = icons.shrink(out / "_static", sorted(out.rglob("*.html")))
    icons.subset_fonts(out / "_static")
    if missing:
        from sphinx.util import logging

        logging.getLogger(__name__).warning(
            "icons the pages name but Font Awesome does not hold: %s",
            ", ".join(f"{p} {n}" for p, n in sorted(missing)))


def _search_pages(app, exception):
    """The pages' text for the search page opened from disk (tools/site/search_pages.py)."""
    if exception is not None or app.builder.format != "html":
        return
    from tools.site import search_pages

    search_pages.write(Path(app.outdir))


def _translator_script(app, pagename, templatename, context, doctree):
    """translator.js on the pages that hold a translator only (a page without one does not
    download it): called here, Sphinx adds the script to this page alone."""
    if "convs2s-translator" in context.get("body", ""):
        app.add_js_file("translator.js")


def _wrap_printed_sentences(app, pagename, templatename, context, doctree):
    """A printed sentence wraps on a narrow screen, a printed table's row scrolls
    (tools/site/output_lines.py)."""
    from tools.site import output_lines

    if isinstance(context.get("body"), str):
        context["body"] = output_lines.wrap_sentences(context["body"])


def setup(app):
    app.connect("html-page-context", _translator_script)
    app.connect("html-page-context", _wrap_printed_sentences)
    app.connect("html-page-context", _escape_theme_titles, priority=900)
    app.connect("build-finished", _drop_theme_templates)
    app.connect("build-finished", _shrink_icons)
    app.connect("build-finished", _search_pages)
