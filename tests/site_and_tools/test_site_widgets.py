"""Every notebook widget is declared once (convs2s.course.widgets) and the website reads the
declaration: tools/site/widgets.py, the widget parts of tools/site/__init__.py and
flipbooks.py, and the headers of static/live.js, flipbook.js and translator.js.

Without a browser and without Sphinx: which widget each notebook cell makes (read from its
code), that each has a declaration and a counterpart on the site, that the site finds a widget
by its name (the saved class or the builder call), never by its labels, and that a label renamed
in the declaration is the label the notebook and the site show. What the pages compute, against
the package, for every setting: test_site.py (live.js) and test_site_flipbooks.py.
"""

from __future__ import annotations

import copy
import json
import re
from dataclasses import replace
from pathlib import Path

import pytest

from convs2s.course import widgets as declarations
from tools import screenshots, site
from tools.site import flipbooks
from tools.site import widgets as notebook_widgets

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = site.course_notebooks(ROOT / "notebooks")
STATIC = ROOT / "tools" / "site" / "static"
REPO = "https://github.com/convs2s-course/convs2s"
#: The script that stands for each kind of site counterpart.
SCRIPTS = {"live": "live.js", "flipbook": "flipbook.js", "translator": "translator.js"}


def _load(path: Path) -> dict:
    return site.load_notebook(path)


def _script_widgets(script: str) -> set[str]:
    """The widget names a script's ``const WIDGETS = {...}`` builds."""
    text = (STATIC / script).read_text(encoding="utf-8")
    table = re.search(r"const WIDGETS = \{(.*?)\};", text, re.S)
    return set(re.findall(r'"([\w-]+)"\s*:', table.group(1))) if table else set()


def _header(script: str) -> str:
    """The comments a script opens with."""
    text = (STATIC / script).read_text(encoding="utf-8")
    return text[:text.index("(() => {")]


def notebook_problems(name: str, nb: dict) -> list[str]:
    """Why a widget of notebook ``name`` is not one declaration with a site counterpart: a cell
    that builds an undeclared name or another notebook's widget, makes a widget with ipywidgets
    itself that no declaration (built by the notebook) describes, or carries a control its
    declaration does not; a declared widget its notebook does not make once."""
    problems, made = [], []
    for cell in notebook_widgets.widget_cells(nb):
        where = f"{name}, cell {cell.index}"
        for built in cell.built:
            w = declarations.WIDGETS.get(built)
            if w is None:
                problems.append(f"{where}: builds {built!r}, which is not declared")
            elif w.notebook != name:
                problems.append(f"{where}: builds {built!r}, declared for {w.notebook}")
        names = cell.names(name)
        own = [n for n in names if n in declarations.WIDGETS and
               declarations.declared(n).built_by_notebook]
        if cell.raw_calls and not own:
            problems.append(f"{where}: makes a widget with ipywidgets itself ({cell.raw}), "
                            "which no declaration describes: declare it and use widgets.build")
        for n in own:
            extra = set(cell.raw) - set(declarations.declared(n).labels)
            if extra:
                problems.append(f"{where}: its widget {n!r} has controls {sorted(extra)} that "
                                "its declaration has not")
        made += names
    for w in declarations.for_notebook(name):
        if made.count(w.name) != 1:
            problems.append(f"{name}: makes the declared widget {w.name!r} "
                            f"{made.count(w.name)} times, not once")
    return problems


def site_problems(w: declarations.Widget) -> list[str]:
    """Why the declared widget ``w`` has no counterpart on the site."""
    if w.site == "translator":
        # the site's translator (TRANSLATOR_WIDGET, translator.py) stands for it
        ok = (w.notebook == site.TRANSLATOR_WIDGET[0]
              and set(site.TRANSLATOR_WIDGET[1:]) <= set(w.labels))
        return [] if ok else [f"{w.name}: not the site's translator {site.TRANSLATOR_WIDGET}"]
    problems = []
    if w.name not in _script_widgets(SCRIPTS[w.site]):
        problems.append(f"{w.name}: {SCRIPTS[w.site]} builds no widget of that name")
    if w.site == "live" and w.name not in site.LIVE_SOURCES:
        problems.append(f"{w.name}: its note does not say where its numbers come from")
    if w.site == "flipbook" and flipbooks.NOTEBOOKS.get(w.name) != w.notebook:
        problems.append(f"{w.name}: flipbooks.py makes no flipbook of it")
    return problems


# --------------------------------------------------------------------------------------------
# Every notebook widget: one declaration, a counterpart on the site
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_every_notebook_widget_is_declared_once(path):
    assert notebook_problems(path.stem, _load(path)) == []


def test_every_declaration_belongs_to_a_notebook_and_has_a_site_counterpart():
    stems = {p.stem for p in NOTEBOOKS}
    for w in declarations.WIDGETS.values():
        assert w.notebook in stems, f"{w.name}: no notebook {w.notebook}"
        assert site_problems(w) == [], w.name
    assert site.LIVE_WIDGETS == {n: w.notebook for n, w in declarations.WIDGETS.items()
                                 if w.site in ("live", "flipbook")}


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_notebook_widget_responds_in_its_page(path):
    """The site copy of each notebook, as the committed file stands: one element per declared
    widget that responds in the page (live.js, flipbook.js or the translator), no picture."""
    nb = _load(path)
    out = site.site_notebook(nb, site.read_lesson(path, nb), REPO,
                             {s.image for s in screenshots.WIDGETS.values()},
                             translator_bytes=1000)
    text = "\n".join(site.cell_source(c) for c in out.notebook["cells"]
                     if c.get("cell_type") == "markdown")
    for w in declarations.for_notebook(path.stem):
        if w.site == "translator":
            assert text.count('class="convs2s-translator"') == 1, w.name
        else:
            assert text.count(f'data-widget="{w.name}"') == 1, w.name
    assert out.widgets == len(declarations.for_notebook(path.stem))
    assert out.images == [] and site.WIDGET_NOTE_TITLE not in text, "no widget is a picture"


def test_the_checks_catch_an_undeclared_widget_and_a_missing_counterpart(monkeypatch):
    """Negative controls: what the tests above would say of a widget made without a
    declaration, of a builder call of an unknown name, of a control the declaration lacks, of
    a declared widget the notebook does not make, and of one no script builds."""
    def nb(*sources):
        return {"cells": [{"cell_type": "code", "source": s, "outputs": [], "metadata": {}}
                          for s in sources], "metadata": {}}

    raw = nb("import ipywidgets as w", "w.interactive(f, k=w.IntSlider(description='k'))")
    assert "no declaration describes" in " ".join(notebook_problems("02_x", raw))
    from_import = nb("from ipywidgets import interact\ninteract(f, k=(1, 9))")
    assert notebook_problems("02_x", from_import) != []
    unknown = nb("from convs2s.course import widgets\nwidgets.build('dial', f)")
    assert "'dial', which is not declared" in notebook_problems("02_x", unknown)[0]
    elsewhere = nb("from convs2s.course import widgets\nwidgets.build('conv-costs', f)")
    assert "declared for 08_beyond_convs2s" in notebook_problems("02_x", elsewhere)[0]
    nb06 = _load(ROOT / "notebooks" / "06_inference_beam_search_bleu.ipynb")
    cell = next(c for c in notebook_widgets.widget_cells(nb06) if c.raw)
    extra = copy.deepcopy(nb06)
    extra["cells"][cell.index]["source"] = site.cell_source(nb06["cells"][cell.index]) + \
        "\nknob = widgets.Dropdown(options=['a'], description='speed')\n"
    assert "controls ['speed']" in " ".join(
        notebook_problems("06_inference_beam_search_bleu", extra))
    nothing = nb("import ipywidgets as w  # imports, makes nothing")
    assert notebook_problems("01_glu_and_padding", nothing) == [
        "01_glu_and_padding: makes the declared widget 'dependency-explorer' 0 times, not once"]
    # the builder module bound to another name, and ipywidgets rebound: read as they are
    renamed = nb("import ipywidgets as widgets", "from convs2s.course import widgets as cw\n"
                 "import convs2s.course.widgets as widgets\n"
                 "cw.build('dependency-explorer', f)")
    assert notebook_problems("01_glu_and_padding", renamed) == []
    orphan = replace(declarations.declared("conv-costs"), name="dial", site="live")
    assert len(site_problems(orphan)) == 2, "no live.js widget and no note on its numbers"
    flip = replace(declarations.declared("conv-costs"), name="dial", site="flipbook")
    assert "flipbook.js builds no widget" in site_problems(flip)[0]


# --------------------------------------------------------------------------------------------
# The site finds a widget by its name, never by its labels
# --------------------------------------------------------------------------------------------


def _unlabelled(nb: dict) -> dict:
    """``nb`` with no control label anywhere in its saved widget state or stored outputs."""
    nb = copy.deepcopy(nb)
    for model in notebook_widgets.saved_state(nb).values():
        model.get("state", {}).pop("description", None)
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            out.get("data", {}).pop("text/plain", None)
    return nb


def _page(nb: dict, name: str) -> str:
    path = ROOT / "notebooks" / f"{name}.ipynb"
    out = site.site_notebook(nb, site.read_lesson(path, nb), REPO, set(), translator_bytes=1000)
    return "\n".join(site.cell_source(c) for c in out.notebook["cells"])


def _with_class(nb: dict, name: str) -> dict:
    """``nb`` as saved after a run with the builder: its widget's box has the widget's class,
    and (to show the class alone is read) its cell's code no builder call."""
    nb = copy.deepcopy(nb)
    cell = nb["cells"][next(c.index for c in notebook_widgets.widget_cells(nb)
                            if name in c.built)]
    cell["source"] = "display(some_widget)"
    view = next(out["data"][site.WIDGET_VIEW] for out in cell["outputs"]
                if site.WIDGET_VIEW in out.get("data", {}))
    box = notebook_widgets.saved_state(nb)[view["model_id"]]
    box["state"]["_dom_classes"] = ["widget-interact", declarations.css_class(name)]
    return nb


@pytest.mark.parametrize("name", ["dependency-explorer", "attention-by-sentence"])
def test_the_site_finds_a_widget_by_its_name_without_any_label(name):
    notebook = declarations.declared(name).notebook
    nb = _unlabelled(_load(ROOT / "notebooks" / f"{notebook}.ipynb"))
    assert not site.widget_labels(list(notebook_widgets.saved_state(nb).values()))
    assert f'data-widget="{name}"' in _page(nb, notebook), "by the builder call"
    assert f'data-widget="{name}"' in _page(_with_class(nb, name), notebook), "by the class"
    # and its controls, as the notebook saved them, found by name and order, not label
    if declarations.declared(name).site == "flipbook":
        saved = flipbooks.saved_controls(nb, name)
        assert list(saved) == [c.name for c in declarations.declared(name).controls]
    # negative control: neither the class nor the call: the site does not know it
    anonymous = copy.deepcopy(nb)
    for cell in notebook_widgets.widget_cells(nb):
        anonymous["cells"][cell.index]["source"] = "display(some_widget)"
    for model in notebook_widgets.saved_state(anonymous).values():  # a run saved the class too
        state = model.get("state", {})
        state["_dom_classes"] = [c for c in state.get("_dom_classes", [])
                                 if c != declarations.css_class(name)]
    page = _page(anonymous, notebook)
    assert f'data-widget="{name}"' not in page and site.WIDGET_NOTE_TITLE in page


def test_the_class_of_another_notebooks_widget_is_not_taken():
    nb = _with_class(_load(ROOT / "notebooks" / "08_beyond_convs2s.ipynb"), "conv-costs")
    box = next(m for m in notebook_widgets.saved_state(nb).values()
               if declarations.css_class("conv-costs") in m["state"].get("_dom_classes", []))
    box["state"]["_dom_classes"] = [declarations.css_class("dependency-explorer")]
    assert 'data-widget="dependency-explorer"' not in _page(nb, "08_beyond_convs2s")


def test_a_label_renamed_in_the_declaration_is_what_the_notebook_and_the_site_show(monkeypatch):
    """One place: renaming a label in the declaration renames it in the notebook's widget
    (tests/course/test_widgets.py builds it), on the page (live.js draws the controls the page
    gives it), in a flipbook's controls and in what ``make images`` looks for; the stored
    notebook (saved with the old label) is still found."""
    for name, control in (("dependency-explorer", "kernel_size"), ("decoder-explorer",
                                                                   "position"),
                          ("attention-by-sentence", "sentence")):
        old = declarations.declared(name)
        renamed = replace(old, controls=tuple(
            replace(c, label="RENAMED") if c.name == control else c for c in old.controls))
        monkeypatch.setitem(declarations.WIDGETS, name, renamed)
    page = _page(_load(ROOT / "notebooks" / "01_glu_and_padding.ipynb"), "01_glu_and_padding")
    live = re.search(r'<div class="convs2s-live"[^>]*>', page).group(0)
    controls = json.loads(re.search(r'data-controls="([^"]*)"', live).group(1)
                          .replace("&quot;", '"'))
    assert [c["label"] for c in controls] == ["RENAMED", "layers L", "padding",
                                              "sentence length"]
    assert "RENAMED" in re.search(r'aria-label="([^"]*)"', live).group(1)
    assert "kernel size k" not in live
    nb04 = _load(ROOT / "notebooks" / "04_multi_step_attention.ipynb")
    sentence = flipbooks.saved_controls(nb04, "attention-by-sentence")["sentence"]
    assert (sentence.label, sentence.value, sentence.max) == ("RENAMED", 1, 1013)
    nb03 = _load(ROOT / "notebooks" / "03_causal_decoder.ipynb")
    assert flipbooks.saved_controls(nb03, "decoder-explorer")["position"].label == "RENAMED"
    assert "RENAMED" in screenshots.WIDGETS["padding"].labels


# --------------------------------------------------------------------------------------------
# The scripts: no label of their own, and which Python each mirrors
# --------------------------------------------------------------------------------------------


def test_the_pages_scripts_write_no_declared_label_and_say_what_they_mirror():
    for w in declarations.WIDGETS.values():
        script = SCRIPTS[w.site]
        text = (STATIC / script).read_text(encoding="utf-8")
        if w.site != "translator":  # the translator's page has labels of its own
            written = [label for label in w.labels if " " in label and
                       re.search(rf"[\"'`]{re.escape(label)}[\"'`]", text)]
            assert written == [], f"{script} writes {w.name}'s labels {written} itself"
        header = _header(script)
        assert "Mirrors" in header, f"{script}'s header says which Python it mirrors"
        if w.site != "translator":  # its page runs the model: the search, below
            for dotted in w.draws:
                assert dotted.rsplit(".", 1)[1] in header, f"{script}: {dotted}"
    translator = _header("translator.js")
    assert "beam_search" in translator and "greedy_decode" in translator
    assert "SubwordTokenizer" in translator
    assert "convs2s.course.widgets" in _header("live.js") + _header("flipbook.js")
