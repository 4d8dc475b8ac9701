"""Which declared widget (``convs2s.course.widgets``) each widget of a notebook is.

The site never matches a widget by its controls' labels. A notebook widget is known by its
name, read from

1. the saved widget state: :func:`convs2s.course.widgets.build` gives the widget the class
   ``convs2s-widget-<name>``, which the notebook saves with its widget state;
2. the cell's code: the builder call ``widgets.build("<name>", ...)`` (or ``show``), found by
   reading the code (:func:`widget_cells`), so a notebook saved before its widgets had their
   class is read the same;
3. for a widget whose cell builds its own layout (``built_by_notebook``: notebook 06's
   translator), the cell's own ipywidgets calls: a declared widget of that notebook whose every
   label the cell's controls carry.

:func:`widget_cells` also lists every cell that makes a widget with ipywidgets itself, so a
test can fail on a notebook widget that has no declaration.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field

from convs2s.course import widgets as declarations

#: The module of the builder, and its calls that make a widget.
_BUILDER = "convs2s.course.widgets"
_BUILDER_CALLS = {"build", "show"}


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _python(source: str) -> ast.Module | None:
    """A cell's code as Python (its IPython magic and shell lines blanked); None if it is not."""
    lines = ["" if re.match(r"\s*[%!]", line) else line for line in source.splitlines()]
    try:
        return ast.parse("\n".join(lines))
    except SyntaxError:
        return None


@dataclass
class WidgetCell:
    """A code cell that makes widgets: the declared ones it builds (by name, in order), and the
    labels of the controls it makes with ipywidgets itself (``raw``)."""

    index: int
    built: list[str] = field(default_factory=list)
    raw: list[str] = field(default_factory=list)  # description="..." of its own controls
    raw_calls: int = 0  # how many ipywidgets calls it makes itself

    def names(self, notebook: str) -> list[str]:
        """The declared widgets this cell makes, in order: its builder calls, then a widget
        built by the notebook whose labels the cell's own controls all carry."""
        found = list(self.built)
        for w in declarations.for_notebook(notebook):
            if w.built_by_notebook and set(w.labels) <= set(self.raw):
                found.append(w.name)
        return found


class _Names:
    """What the notebook's names stand for so far: ipywidgets, its classes, or the builder."""

    def __init__(self):
        self.ipywidgets: set[str] = set()  # names of the module
        self.classes: set[str] = set()  # names imported from it
        self.builder: set[str] = set()  # names of convs2s.course.widgets
        self.builder_calls: set[str] = set()  # build / show imported from it

    def bind(self, node: ast.stmt) -> None:
        if isinstance(node, ast.Import):
            for a in node.names:
                name = a.asname or a.name.split(".")[0]
                self._forget(name)
                if a.name == "ipywidgets" or a.name.startswith("ipywidgets."):
                    self.ipywidgets.add(name)
                elif a.name == _BUILDER and a.asname:
                    self.builder.add(a.asname)
        elif isinstance(node, ast.ImportFrom) and not node.level:
            for a in node.names:
                name = a.asname or a.name
                self._forget(name)
                if (node.module or "").startswith("ipywidgets"):
                    self.classes.add(name)
                elif node.module == "convs2s.course" and a.name == "widgets":
                    self.builder.add(name)
                elif node.module == _BUILDER and a.name in _BUILDER_CALLS:
                    self.builder_calls.add(name)

    def _forget(self, name: str) -> None:
        for names in (self.ipywidgets, self.classes, self.builder, self.builder_calls):
            names.discard(name)


def _label(call: ast.Call) -> str | None:
    for kw in call.keywords:
        if kw.arg == "description" and isinstance(kw.value, ast.Constant) and \
                isinstance(kw.value.value, str):
            return kw.value.value
    return None


def widget_cells(nb: dict) -> list[WidgetCell]:
    """Every code cell of ``nb`` that makes a widget, in order: its builder calls (by the name
    they build) and its own ipywidgets calls (counted, with their controls' labels). Reads the
    code only; imports in earlier cells count (a cell that imports ipywidgets makes nothing)."""
    names = _Names()
    found = []
    for index, cell in enumerate(nb.get("cells", [])):
        if cell.get("cell_type") != "code":
            continue
        tree = _python(_source(cell))
        if tree is None:
            continue
        here = WidgetCell(index)
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                names.bind(node)
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            f = node.func
            attr = isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name)
            if (attr and f.value.id in names.builder and f.attr in _BUILDER_CALLS) or \
                    (isinstance(f, ast.Name) and f.id in names.builder_calls):
                first = node.args[0] if node.args else None
                here.built.append(first.value if isinstance(first, ast.Constant) and
                                  isinstance(first.value, str) else "?")
            elif (attr and f.value.id in names.ipywidgets) or \
                    (isinstance(f, ast.Name) and f.id in names.classes):
                here.raw_calls += 1
                label = _label(node)
                if label is not None:
                    here.raw.append(label)
        if here.built or here.raw_calls:
            found.append(here)
    return found


def name_in_state(models: list[dict]) -> str | None:
    """The declared widget a saved widget is, by the class :func:`build` gave it; None if it
    has none (a notebook saved before its widgets had one)."""
    if not models:
        return None
    classes = models[0].get("state", {}).get("_dom_classes") or []
    prefix = declarations.css_class("")
    for c in classes:
        if isinstance(c, str) and c.startswith(prefix) and c[len(prefix):] in \
                declarations.WIDGETS:
            return c[len(prefix):]
    return None


def declared_for(notebook: str, cell_index: int, nth: int, models: list[dict],
                 cells: list[WidgetCell]) -> declarations.Widget | None:
    """The declaration of the ``nth`` widget shown by cell ``cell_index`` of ``notebook``
    (whose saved models are ``models``): by its saved class, else by its cell's code."""
    name = name_in_state(models)
    if name is None:
        cell = next((c for c in cells if c.index == cell_index), None)
        made = cell.names(notebook) if cell else []
        name = made[nth] if nth < len(made) else None
    widget = declarations.WIDGETS.get(name) if name else None
    return widget if widget and widget.notebook == notebook else None


def saved_state(nb: dict) -> dict:
    """{model id: model} of the widget state the notebook saved ({} if none)."""
    from tools.site import WIDGET_STATE

    state = (nb.get("metadata", {}).get("widgets") or {}).get(WIDGET_STATE, {})
    state = state.get("state", {}) if isinstance(state, dict) else {}
    return state if isinstance(state, dict) else {}


def saved_models(nb: dict, name: str) -> list[dict] | None:
    """The saved models of the declared widget ``name`` as the notebook last showed it (its own
    model first, then every model it holds), found by name; None if the notebook shows none."""
    from tools.site import WIDGET_VIEW, widget_models

    state, made, found = saved_state(nb), widget_cells(nb), None
    notebook = declarations.declared(name).notebook
    for index, cell in enumerate(nb.get("cells", [])):
        shown = 0
        for out in cell.get("outputs", []) if cell.get("cell_type") == "code" else []:
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                continue
            models = widget_models(state, str(view.get("model_id", "")))
            widget = declared_for(notebook, index, shown, models, made)
            shown += 1
            if widget is not None and widget.name == name and models:
                found = models
    return found


def saved_children(nb: dict, model: dict) -> list[dict]:
    """The saved models a box's ``children`` names, in order (an ``interactive``: its controls,
    in the order of the function's arguments, then its output)."""
    from tools.site import _children

    state = saved_state(nb)
    return [state.get(mid, {}) for mid in _children(model.get("state", {}).get("children", []))]
