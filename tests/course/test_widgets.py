"""The notebooks' widgets, each declared once (convs2s.course.widgets): the declarations hold
together, and the builder makes exactly the declared controls with ipywidgets (which the
package imports only there). Which notebook cell makes which widget, and what the website reads
of the declarations: tests/site_and_tools/test_site_widgets.py."""

from __future__ import annotations

import inspect
import subprocess
import sys
from dataclasses import replace

import pytest

from convs2s.course import widgets
from convs2s.course.stacks import STACK_PADDINGS
from convs2s.course.widgets import Control, Widget


def _recording(*names):
    """A drawing function taking ``names`` that records each call's arguments."""
    calls = []

    def draw(**kwargs):
        calls.append(kwargs)

    draw.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.KEYWORD_ONLY) for n in names])
    return draw, calls


def _given(widget: Widget) -> dict:
    """What a notebook gives the controls the declaration leaves open: the smallest range."""
    return {c.name: {"value": c.min, "max": c.min + (c.step or 1)} for c in widget.controls
            if not c.complete}


def test_every_declaration_holds_together():
    assert widgets.WIDGETS, "the course declares its widgets"
    for name, w in widgets.WIDGETS.items():
        assert w.name == name and w.site in widgets.SITES
        assert w.notebook[:2].isdigit() and not w.notebook.endswith(".ipynb")
        assert widgets.declared(name) is w and w in widgets.for_notebook(w.notebook + ".ipynb")
        functions = w.functions()  # every function it draws with exists in the package
        assert functions and all(callable(f) for f in functions), name
        assert all(d.startswith("convs2s.") for d in w.draws)
        for c in w.controls:
            assert c.kind in widgets.WIDGET_KINDS and c.label.strip()
            # the notebook gives only a slider's range, or what its own cell lays out
            assert c.complete or c.kind == "slider" or w.built_by_notebook, (name, c.name)


def test_the_declared_controls_are_the_notebooks():
    """What the notebooks' widgets showed before they were declared (and what the site showed)."""
    explorer = widgets.declared("dependency-explorer")
    assert [(c.name, c.label, c.value) for c in explorer.controls] == [
        ("kernel_size", "kernel size k", 3), ("n_layers", "layers L", 2),
        ("padding", "padding", "same"), ("length", "sentence length", 16)]
    assert explorer.control("padding").options == STACK_PADDINGS
    assert explorer.control("length").values() == list(range(4, 33))
    costs = widgets.declared("conv-costs")
    assert costs.control("channels").values() == list(range(32, 1025, 32))
    assert costs.control("kernel_size").values() == [1, 3, 5, 7, 9, 11, 13, 15]
    decoder = widgets.declared("decoder-explorer")
    assert decoder.control("kernel_size").values() == [1, 3, 5, 7, 9]
    assert decoder.control("position").max is None, "the notebook gives its sentence's length"


def test_build_makes_the_declared_controls_and_calls_the_function_with_their_values():
    ipywidgets = pytest.importorskip("ipywidgets")
    for name, w in widgets.WIDGETS.items():
        if w.built_by_notebook:
            continue
        draw, calls = _recording(*(c.name for c in w.controls))
        box = widgets.build(name, draw, **_given(w))
        controls = [c for c in box.children if isinstance(c, ipywidgets.ValueWidget)]
        assert [c.description for c in controls] == list(w.labels), name
        assert widgets.css_class(name) in box._dom_classes, "the saved notebook records it"
        for made, declared in zip(controls, widgets.controls_for(name, **_given(w)),
                                  strict=True):
            assert made.value == declared.value
            if declared.kind == "slider":
                assert (made.min, made.max, made.step) == (declared.min, declared.max,
                                                          declared.step)
                assert isinstance(made, ipywidgets.IntSlider)
            else:
                assert isinstance(made, ipywidgets.Dropdown)
                assert tuple(made.options) == declared.options
            if w.label_width:
                assert made.style.description_width == w.label_width
        assert calls[-1] == {c.name: c.value for c in widgets.controls_for(name, **_given(w))}
        first = controls[0]
        first.value = first.options[-1] if isinstance(first, ipywidgets.Dropdown) else first.max
        assert calls[-1][w.controls[0].name] == first.value, "moving it redraws"


def test_what_a_notebook_gives_is_checked_in_one_line():
    draw, _ = _recording("epoch")
    problems = []
    for given in ({}, {"epoch": {"value": 3}}, {"epoch": {"value": 12, "max": 10}},
                  {"epoch": {"label": "x", "value": 1, "max": 2}},
                  {"epochs": {"value": 1, "max": 2}}):
        with pytest.raises(ValueError) as err:
            widgets.build("attention-by-epoch", draw, **given)
        problems.append(str(err.value))
    assert all("\n" not in p for p in problems)
    assert "gives control 'epoch' its value" in problems[0]
    assert "its max" in problems[1] and "value=12" in problems[2]
    assert "not label" in problems[3] and "no control 'epochs'" in problems[4]
    with pytest.raises(ValueError, match="takes no argument 'epoch'"):
        widgets.build("attention-by-epoch", lambda sentence: None,
                      epoch={"value": 1, "max": 2})
    with pytest.raises(KeyError, match="no widget 'nothing' is declared"):
        widgets.build("nothing", draw)
    with pytest.raises(ValueError, match="built by its notebook"):
        widgets.build("translator", draw)
    # a complete declaration needs nothing from the notebook
    assert widgets.controls_for("conv-costs") == widgets.declared("conv-costs").controls


def test_a_declaration_that_does_not_hold_together_is_refused():
    slider = Control("k", "kernel", value=3, min=1, max=9, step=2)
    for bad in (lambda: Control("k", "kernel", value=4, min=1, max=9, step=2),
                lambda: Control("k", "kernel", value=3, min=1, max=9),
                lambda: Control("k", " ", value=3, min=1, max=9, step=1),
                lambda: Control("p", "padding", "dropdown", value="x", options=("a", "b")),
                lambda: Control("k", "kernel", "knob", value=3),
                lambda: Widget("w", "01_x", (slider, slider), (), "live"),
                lambda: Widget("w", "01_x", (slider, replace(slider, name="j")), (), "live"),
                lambda: Widget("w", "01_x", (slider,), (), "picture")):
        with pytest.raises(ValueError):
            bad()


def test_renaming_a_label_in_the_declaration_renames_the_notebooks_control(monkeypatch):
    pytest.importorskip("ipywidgets")
    old = widgets.declared("conv-costs")
    renamed = replace(old, controls=(replace(old.controls[0], label="width d"),
                                     *old.controls[1:]))
    monkeypatch.setitem(widgets.WIDGETS, "conv-costs", renamed)
    draw, _ = _recording("channels", "kernel_size")
    box = widgets.build("conv-costs", draw)
    assert [c.description for c in box.children[:2]] == ["width d", "kernel k"]


def test_the_package_imports_without_ipywidgets():
    code = ("import sys; sys.modules['ipywidgets'] = None\n"
            "from convs2s.course import widgets\n"
            "assert widgets.declared('conv-costs').labels == ('channels d', 'kernel k')\n"
            "try:\n    widgets.build('conv-costs', lambda channels, kernel_size: None)\n"
            "except ImportError:\n    print('no ipywidgets: only build needs it')\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "no ipywidgets: only build needs it"
