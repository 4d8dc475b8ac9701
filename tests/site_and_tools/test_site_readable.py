"""The website read in the theme's dark mode, on a phone, by a screen reader and from disk
and what it says the translator can and cannot do.

In headless Chromium, on the site that conftest.py builds once, in the light and the dark theme
(``html[data-theme]``, as the theme's switch sets it) at 1280 and 375 px:

- every text of every widget (labels, titles, tick labels: HTML and SVG ``<text>`` alike, the
  note above it included) has a WCAG contrast of at least 4.5:1 against what it is drawn on;
- every label a widget draws is at least 11 CSS px, its figure never drawn below its own size
  (a box that scrolls sideways holds it where the column is narrower); a flipbook's picture on
  a phone is at its own size in such a box, and a link opens it alone;
- the translator's attention maps for a long sentence, likewise;
- the translator's note says what the model learned from and what to expect.

Without the browser: no figure's alt text is the bare "Figure under the heading …", none is
shared on a page, none is cut off; a cell with several figures gives each its own. The search
opened from disk (file://) shows its lines of text with nothing failing.
"""

from __future__ import annotations

import html
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from tools import site
from tools import site_screenshots as shots

ROOT = Path(__file__).resolve().parents[2]
MODES = ("light", "dark")
WIDTHS = (1280, shots.PHONE["width"])
#: The pages with a widget that responds in the page, and the settings that draw each one's
#: biggest figure (the longest sentence, the most layers, the widest kernel).
WIDGET_PAGES = {
    "01_glu_and_padding.html": {"length": "32", "n_layers": "6", "kernel_size": "9"},
    "03_causal_decoder.html": {"kernel_size": "9", "n_layers": "6", "position": "15"},
    "04_multi_step_attention.html": {"sentence": "24"},
    "05_training_on_multi30k.html": {"epoch": "10"},
    "08_beyond_convs2s.html": {"channels": "1024", "kernel_size": "15"},
}
WIDGETS = ".admonition.widget-live"
#: WCAG 2's minimum contrast for text, and the smallest label the issue allows.
CONTRAST = 4.5
SMALLEST_PX = 11

# Every text the widgets' notes and widgets show, read in the page: its contrast against the
# colours it is drawn on (its own background and every ancestor's, composited, over the white
# canvas), the size it is drawn at (an SVG text: its font size times the SVG's scale), and
# every figure (SVG or picture): its size against its own, whether it lies in the column, or
# in a box that scrolls sideways inside the column, and whether a link opens a picture alone.
# A disabled control is no text to read (WCAG 1.4.3 leaves inactive controls out).
_FACTS = """(selector) => {
  const parse = (c) => {
    const m = /rgba?\\(([^)]+)\\)/.exec(c || "");
    if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1];
  };
  const channel = (v) => {
    v /= 255;
    return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4;
  };
  const luminance = (c) =>
    0.2126 * channel(c[0]) + 0.7152 * channel(c[1]) + 0.0722 * channel(c[2]);
  const over = (top, below) =>
    [0, 1, 2].map((i) => top[i] * top[3] + below[i] * (1 - top[3])).concat(1);
  const background = (el) => {
    const chain = [];
    for (let e = el; e; e = e.parentElement) chain.unshift(e);
    let bg = [255, 255, 255, 1];
    for (const e of chain) {
      const c = parse(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) bg = over(c, bg);
    }
    return bg;
  };
  const article = document.querySelector('.bd-article').getBoundingClientRect();
  const right = Math.min(article.right, window.innerWidth) + 0.5;
  const inColumn = (b) => b.left >= article.left - 0.5 && b.right <= right;
  const scroller = (el) => {
    for (let e = el.parentElement; e && !e.matches('.bd-article'); e = e.parentElement) {
      if (['auto', 'scroll'].includes(getComputedStyle(e).overflowX)) return e;
    }
    return null;
  };
  const texts = [], figures = [];
  for (const root of document.querySelectorAll(selector)) {
    const widget = root.querySelector('[data-widget]')?.dataset.widget ||
      (root.querySelector('.convs2s-translator') ? 'translator' : '?');
    for (const el of root.querySelectorAll('*')) {
      const own = [...el.childNodes].some((n) => n.nodeType === 3 && n.textContent.trim());
      const field = el.matches('input[type=text], select, button, textarea');
      if ((!own && !field) || el.matches(':disabled, option, title')) continue;
      if (!el.getClientRects().length || !el.checkVisibility({visibilityProperty: true})) continue;
      const style = getComputedStyle(el);
      const svg = el instanceof SVGElement;
      const fg = parse(svg ? style.fill : style.color);
      if (!fg) continue;
      fg[3] *= parseFloat(svg ? style.fillOpacity : '1') * parseFloat(style.opacity);
      const bg = background(el);
      const [a, b] = [luminance(over(fg, bg)), luminance(bg)];
      let scale = 1;
      if (svg) { const m = el.getScreenCTM(); scale = Math.hypot(m.a, m.b); }
      const text = field ? el.value || el.textContent : el.textContent;
      texts.push({widget, text: text.trim().slice(0, 50),
                  contrast: (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05),
                  px: parseFloat(style.fontSize) * scale});
    }
    for (const el of root.querySelectorAll('svg[viewBox], img')) {
      if (!el.getClientRects().length) continue;
      const box = el.getBoundingClientRect();
      const own = el.tagName === 'IMG' ? el.naturalWidth : el.viewBox.baseVal.width;
      const holder = scroller(el);
      const link = el.closest('a');
      figures.push({widget, tag: el.tagName.toLowerCase(), shown: box.width, own,
                    in_column: inColumn(box),
                    scrolls_in_column: !!holder && inColumn(holder.getBoundingClientRect()),
                    opens_alone: !!link && link.getAttribute('href') === el.getAttribute('src')});
    }
  }
  return {texts, figures, theme: document.documentElement.dataset.theme,
          page_width: document.scrollingElement.scrollWidth, window: window.innerWidth};
}"""


def _set(tab, values: dict[str, str]) -> None:
    """Move the widget's controls (by their names) to ``values``, as a reader would."""
    tab.page.evaluate("""(values) => {
      for (const [name, value] of Object.entries(values)) {
        const input = document.querySelector(`.widget-live [name="${name}"]`);
        input.value = value;
        input.dispatchEvent(new Event('input', {bubbles: true}));
        input.dispatchEvent(new Event('change', {bubbles: true}));
      }
    }""", values)


def _open(web, page: str, mode: str, width: int):
    base, browser = web
    tab = shots.SitePage(browser, base)
    # the theme's own switch keeps the reader's choice here and applies it when a page loads
    tab.context.add_init_script(f"localStorage.setItem('mode', '{mode}'); "
                                f"localStorage.setItem('theme', '{mode}');")
    tab.page.set_viewport_size({"width": width, "height": 900})
    tab.open(page)
    return tab


@pytest.fixture(scope="module")
def widget_facts(built, web):
    """{(page, mode, width, "start" | "biggest"): the facts} for every widget page."""
    facts = {}
    for page, biggest in WIDGET_PAGES.items():
        for mode in MODES:
            for width in WIDTHS:
                tab = _open(web, page, mode, width)
                try:
                    facts[page, mode, width, "start"] = tab.page.evaluate(_FACTS, WIDGETS)
                    _set(tab, biggest)
                    # every image in (a lazy one off screen or hidden, e.g. the other theme's
                    # drawing, never loads by itself: its decode() would never settle)
                    tab.page.evaluate("() => Promise.all([...document.images].map(i => {"
                                      " i.loading = 'eager'; return i.decode()"
                                      ".catch(() => null); }))")
                    facts[page, mode, width, "biggest"] = tab.page.evaluate(_FACTS, WIDGETS)
                    facts[page, mode, width, "problems"] = tab.problems()
                finally:
                    tab.close()
    return facts


@pytest.mark.browser
@pytest.mark.slow
def test_the_pages_follow_the_readers_colour_mode(widget_facts):
    for (page, mode, width, state), f in widget_facts.items():
        if state != "problems":
            assert f["theme"] == mode, (page, mode, width)
        else:
            assert f == [], f"{page} ({mode}, {width} px): {f}"


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
def test_every_widget_text_has_a_contrast_of_4_5_to_1(widget_facts, mode):
    """Labels, titles, tick labels and values, in HTML and in the SVG figures, in both themes
    (in the dark one the figures' labels were black on dark grey: 1.42:1)."""
    low, counted = [], 0
    for (page, m, width, state), f in widget_facts.items():
        if m != mode or state == "problems":
            continue
        counted += len(f["texts"])
        low += [f"{page} at {width} px ({state}): {t['widget']} {t['text']!r} "
                f"{t['contrast']:.2f}:1" for t in f["texts"] if t["contrast"] < CONTRAST]
    assert counted > 300, "the widgets' texts were read"
    assert low == [], "\n".join(low[:20])


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("width", WIDTHS)
def test_every_label_a_widget_draws_is_11_px_and_no_figure_is_squeezed(widget_facts, width):
    """At 1280 px and on a 375 px phone every text of a widget is drawn at 11 CSS px or more;
    a figure is never drawn below its own size (where its labels are that big) unless it is a
    flipbook's picture on a wide screen, which a click opens alone; what does not fit the
    column scrolls sideways in a box that does, and the page itself never does."""
    small, squeezed, out = [], [], []
    for (page, mode, w, state), f in widget_facts.items():
        if w != width or state == "problems":
            continue
        where = f"{page} ({mode}, {state})"
        small += [f"{where}: {t['widget']} {t['text']!r} at {t['px']:.1f} px"
                  for t in f["texts"] if t["px"] < SMALLEST_PX - 0.05]
        for fig in f["figures"]:
            picture_on_a_wide_screen = fig["tag"] == "img" and width > 720
            if fig["shown"] < fig["own"] - 0.5 and not picture_on_a_wide_screen:
                squeezed.append(f"{where}: {fig}")
            if picture_on_a_wide_screen and not (fig["in_column"] and fig["opens_alone"]):
                squeezed.append(f"{where}: a picture that does not fit or open alone: {fig}")
            if not (fig["in_column"] or fig["scrolls_in_column"]):
                out.append(f"{where}: {fig}")
        assert f["page_width"] <= f["window"], f"{where}: the page scrolls sideways"
    assert small == [], "\n".join(small[:20])
    assert squeezed == [], "\n".join(squeezed)
    assert out == [], "\n".join(out)


@pytest.mark.browser
@pytest.mark.slow
def test_on_a_phone_a_flipbooks_picture_is_at_its_own_size_and_opens_alone(widget_facts):
    for page in ("04_multi_step_attention.html", "05_training_on_multi30k.html"):
        for state in ("start", "biggest"):
            [fig] = widget_facts[page, "light", shots.PHONE["width"], state]["figures"]
            assert fig["shown"] >= fig["own"] - 0.5 and fig["scrolls_in_column"], fig
            assert fig["opens_alone"], fig


# --------------------------------------------------------------------------------------------
# The translator
# --------------------------------------------------------------------------------------------

TRANSLATOR_PAGE = "06_inference_beam_search_bleu.html"
#: A long caption-like sentence (invented): its maps are far wider than a phone.
LONG = ("Eine Gruppe von jungen Männern in roten und blauen Trikots spielt auf einem großen, "
        "grünen Feld neben einem alten Gebäude mit vielen Fenstern Fußball, während Zuschauer "
        "am Rand stehen und Fotos machen.")


@pytest.mark.browser
@pytest.mark.slow
def test_the_translators_maps_and_texts_are_readable_in_both_modes_at_1280_and_375(web):
    """The model loaded once; then, for a long sentence, in each theme and width: every text of
    the translator and its note at 4.5:1, every label of its maps at 11 px (each map at its own
    size, the row of maps scrolling sideways inside the column)."""
    tab = _open(web, TRANSLATOR_PAGE, "light", 1280)
    try:
        root = tab.page.locator(".convs2s-translator")
        root.locator(".translator-load").click()
        tab.page.wait_for_function("['translated', 'failed'].includes(document.querySelector("
                                   "'.convs2s-translator').dataset.state)", timeout=240_000)
        box = root.get_by_role("textbox", name="German")
        box.fill(LONG)
        box.press("Enter")
        tab.page.wait_for_function("() => document.querySelector('.translator-output')"
                                   ".textContent.startsWith('English: ') && document"
                                   ".querySelectorAll('svg.translator-map').length > 0 && "
                                   "document.querySelector('svg.translator-map')"
                                   ".getAttribute('aria-label')", timeout=240_000)
        tab.page.wait_for_function("() => document.querySelector('.convs2s-translator')"
                                   ".dataset.state === 'translated' && !document.querySelector("
                                   "'.translator-go').disabled", timeout=240_000)
        problems = []
        for mode in MODES:
            tab.page.evaluate("m => { document.documentElement.dataset.theme = m; "
                              "document.documentElement.dataset.mode = m; }", mode)
            for width in WIDTHS:
                tab.page.set_viewport_size({"width": width, "height": 900})
                f = tab.page.evaluate(_FACTS, WIDGETS)
                where = f"{mode}, {width} px"
                labels = [t for t in f["texts"] if t["widget"] == "translator"]
                assert len(labels) > 40, f"{where}: the maps' labels were read"
                problems += [f"{where}: {t['text']!r} {t['contrast']:.2f}:1"
                             for t in labels if t["contrast"] < CONTRAST]
                problems += [f"{where}: {t['text']!r} at {t['px']:.1f} px"
                             for t in labels if t["px"] < SMALLEST_PX - 0.05]
                maps = [g for g in f["figures"] if g["tag"] == "svg"]
                assert len(maps) >= 4, where
                problems += [f"{where}: {g}" for g in maps if g["shown"] < g["own"] - 0.5
                             or not (g["in_column"] or g["scrolls_in_column"])]
                if width < 720:
                    assert any(not g["in_column"] for g in maps), \
                        f"{where}: the long sentence's maps are wider than the phone"
                assert f["page_width"] <= f["window"], f"{where}: the page scrolls sideways"
        assert problems == [], "\n".join(problems[:20])
        assert tab.problems() == []
    finally:
        tab.close()


def test_the_translators_note_says_what_the_model_learned_and_what_to_expect():
    for words in ("Multi30k", "29,000", "captions", "cased German", "lower-case", "all-caps",
                  "translate badly"):
        assert words in site.TRANSLATOR_SCOPE, words
    cell = site._translator_widget(1, 1_000_000)
    assert site.TRANSLATOR_SCOPE in cell["source"]


def test_notebook_06_says_beside_its_translator_what_to_expect():
    nb = json.loads((ROOT / "notebooks" / "06_inference_beam_search_bleu.ipynb")
                    .read_text(encoding="utf-8"))
    cells = nb["cells"]
    widget = next(i for i, c in enumerate(cells) if c["cell_type"] == "code"
                  and "translate_for_display" in site.cell_source(c))
    text = site.cell_source(cells[widget - 1])
    assert cells[widget - 1]["cell_type"] == "markdown"
    for words in ("Multi30k", "29,000", "captions", "cased German", "lower-case", "upper-case",
                  "translate badly", "translate_for_display"):
        assert words in text, words


@pytest.mark.browser
@pytest.mark.slow
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("width", WIDTHS)
def test_the_translators_note_is_shown_and_readable(web, mode, width):
    tab = _open(web, TRANSLATOR_PAGE, mode, width)
    try:
        note = tab.page.locator(WIDGETS, has=tab.page.locator(".convs2s-translator"))
        assert note.is_visible()
        assert "Multi30k alone" in note.inner_text()
        f = tab.page.evaluate(_FACTS, WIDGETS)
        low = [t for t in f["texts"] if t["contrast"] < CONTRAST]
        assert low == [] and f["theme"] == mode
        assert tab.problems() == []
    finally:
        tab.close()


# --------------------------------------------------------------------------------------------
# Alt text
# --------------------------------------------------------------------------------------------

_GENERIC = re.compile(r"^Figure(?: under the heading “[^”]*”)?\.?$")


class _Figures(HTMLParser):
    """The alt text of every figure in a page's article (the notebook's outputs and images)."""

    def __init__(self):
        super().__init__()
        self.alts: list[tuple[str, str]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        if tag == "img" and (attrs.get("src") or "").startswith(("_images/", "images/")):
            self.alts.append((attrs["src"], html.unescape(attrs.get("alt") or "")))


def _alts(page: Path) -> list[tuple[str, str]]:
    parser = _Figures()
    parser.feed(page.read_text(encoding="utf-8"))
    return parser.alts


@pytest.mark.slow
def test_every_figures_alt_text_says_what_it_shows_once_per_page_and_whole(built):
    names = [f"{p.stem}.html" for p in site.course_notebooks(ROOT / "notebooks")]
    bad, count = [], 0
    for name in names:
        alts = _alts(built.out / name)
        count += len(alts)
        seen = set()
        for src, alt in alts:
            if _GENERIC.match(alt):
                bad.append(f"{name}: {src}: only {alt!r}")
            if alt in seen:
                bad.append(f"{name}: {alt!r} twice")
            seen.add(alt)
            if not re.search(r"[.!?…]$", alt) or re.search(r"\b(of|the|a|an|and|to|in|with)\.$",
                                                         alt):
                bad.append(f"{name}: cut off: {alt!r}")
    # (the figures the site draws again, figures.py, are <picture>s: test_site_phone.py)
    assert count >= 30, "the figures were found"
    # (notebook 06's three attention maps are <picture>s the site draws again: any <img>)
    page06 = (built.out / "06_inference_beam_search_bleu.html").read_text(encoding="utf-8")
    three = [html.unescape(alt) for alt in re.findall(r'<img[^>]*\salt="([^"]*)"', page06)
             if " of 3, printed below it" in html.unescape(alt)]
    assert len(three) == 3, "each figure of a cell that draws three is on the page"
    assert bad == [], "\n".join(bad)


def test_the_alt_text_says_what_the_code_draws():
    alt = site.figure_alt("3. A heading", 'fig, ax = plt.subplots()\nax.plot(x, y)\n'
                          'ax.set_xlabel("epoch")\nax.set_ylabel("validation loss")\n'
                          'ax.set_title(f"Untrained encoders, mean of {n_seeds} per depth")')
    # a title with a value the code fills in when it runs is left out: no "…" stands for it
    assert alt == "Plot. Validation loss against epoch."
    # a course function's figure: what it draws; a title that is all placeholders is left out
    alt = site.figure_alt(None, 'dependency.plot_dependency_map(ax, dep, title=f"{p!r} {k}")')
    assert alt.startswith("Dependency maps measured with autograd") and "…" not in alt
    # the code says little: the notebook's paragraph before it, its first sentence, whole
    alt = site.figure_alt("Batches", "ax.imshow(x)",
                          "Every row is a sentence, dark cells padding. More text here.")
    assert alt == "Heat map. Every row is a sentence, dark cells padding."
    # nothing known but the heading: the generic text, which the site's test refuses
    assert _GENERIC.match(site.figure_alt("Results", "show()"))
    assert site.figure_alt(None, "show()", figure=1, figures=2) == "Figure. Figure 2 of 2."


def test_a_cell_with_three_figures_gives_each_its_own_alt_text():
    png = {"image/png": "iVBORw0KGgo=", "text/plain": ["<Figure>"]}
    outputs = []
    for i in range(3):
        outputs += [{"output_type": "display_data", "metadata": {}, "data": dict(png)},
                    {"output_type": "stream", "name": "stdout", "text": [f"entropy {i}\n"]}]
    nb = {"cells": [
        {"cell_type": "markdown", "id": "m0", "metadata": {},
         "source": "# 06 · T\n\n**What you will learn**\n- x\n\n**Estimated time:** 5 minutes"},
        {"cell_type": "markdown", "id": "m1", "metadata": {},
         "source": "## 6. Maps\n\nThree test sentences:"},
        {"cell_type": "code", "id": "c1", "metadata": {}, "execution_count": 1,
         "source": "for s in picks:\n    fig = plot_attention_grid(a, s, t)\n    plt.show()",
         "outputs": outputs}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    lesson = site.Lesson("06_x", "06 · T", "5 minutes", ("x",))
    out = site.site_notebook(nb, lesson, "https://github.com/a/b", set(), hints={})
    figures = [c for c in out.notebook["cells"] if c["cell_type"] == "code"]
    assert len(figures) == 3
    assert figures[0]["source"].startswith("for s in picks")
    assert all(c["source"].startswith("# figure") and "remove-input" in c["metadata"]["tags"]
               for c in figures[1:])  # code, or myst-nb would skip the cell, but not shown
    alts = [c["metadata"]["mystnb"]["image"]["alt"] for c in figures]
    assert len(set(alts)) == 3
    for i, (cell, alt) in enumerate(zip(figures, alts, strict=True)):
        assert alt.startswith("Attention heatmaps")
        assert f"Figure {i + 1} of 3, printed below it: entropy {i}." in alt
        assert [o["output_type"] for o in cell["outputs"]] == ["display_data", "stream"]


# --------------------------------------------------------------------------------------------
# Search, from disk
# --------------------------------------------------------------------------------------------


def test_the_search_pages_text_keeps_sections_and_drops_scripts():
    """The text Sphinx's search reads of a page (its main element's, without scripts and "¶"
    links), white space as it is, with the sections a result's link may point at."""
    from tools.site import search_pages

    page = ('<html><body><nav>menu</nav><main role="main"><h1>Title<a class="headerlink">¶</a>'
            '</h1><section id="one"><p>Causal <b>padding</b> &amp; more</p><script>x()</script>'
            '<img src="a.png"><section id="two">Inner</section></section></main>'
            '<footer>foot</footer></body></html>')
    assert search_pages.main_text(page) == ('<div role="main">Title<section id="one">Causal '
                                            'padding &amp; more<section id="two">Inner'
                                            '</section></section></div>')


_RESULTS = ("() => [...document.querySelectorAll('#search-results li')].map(li => "
            "[li.querySelector('a').getAttribute('href'), li.querySelector('p.context')"
            ".textContent])")


def _search(page, url: str) -> list[list[str]]:
    page.goto(url, wait_until="load")
    page.wait_for_function("() => /Search finished/.test(document.querySelector("
                           "'#search-results').innerText)", timeout=60_000)
    page.wait_for_function("() => [...document.querySelectorAll('#search-results li')]"
                           ".every(li => li.querySelector('p.context'))", timeout=30_000)
    return page.evaluate(_RESULTS)


@pytest.mark.browser
@pytest.mark.slow
def test_search_opened_from_disk_shows_the_lines_it_shows_served(built, web):
    """From disk the search finds the pages it finds on the served site and shows the same
    lines of each, and nothing fails (no "Failed to fetch")."""
    base, browser = web
    served = shots.SitePage(browser, base)
    try:
        expected = _search(served.page, base + "search.html?q=causal+padding")
        assert served.problems() == []
    finally:
        served.close()
    context = browser.browser.new_context()
    try:
        page = context.new_page()
        logged = []
        page.on("console", lambda m: m.type in ("error", "warning") and logged.append(m.text))
        page.on("pageerror", lambda e: logged.append(str(e)))
        found = _search(page, (built.out / "search.html").as_uri() + "?q=causal+padding")
        assert page.url.startswith("file://")
        assert "03_causal_decoder.html" in {href.split("#")[0] for href, _ in found}
        assert found == expected
        assert all(text.strip() for _, text in found)
        assert logged == []
    finally:
        context.close()


def test_the_translators_note_states_the_casing_record_of_the_shipped_model():
    """The note's casing figures are the package's true-casing record's (the one notebook 06
    prints), measured on the model the package ships (they once said 17 and 0 against 42)."""
    from convs2s.course import reference
    from convs2s.run import pretrained

    record = reference.result("truecasing_de_en.json")
    assert record["model_sha256"] == pretrained.record("de-en")["sha256"]
    rows = record["splits"]["valid"]["rows"]
    assert (f"{rows['lower']['sacrebleu']:.0f} and {rows['upper']['sacrebleu']:.0f} BLEU on the "
            f"validation captions, against {rows['cased']['sacrebleu']:.0f} as written"
            ) in site.TRANSLATOR_SCOPE
