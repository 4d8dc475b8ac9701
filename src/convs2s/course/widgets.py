"""The course's interactive widgets, each declared once: read by the notebooks and by the website.

A :class:`Widget` says everything about one notebook widget that is not the notebook's own
code: its name (the id the course's website uses), the notebook it belongs to, its controls
(kind, label, range or options, starting value, in the order of the function's arguments), the
package functions it draws with, and how the website shows it (:data:`SITES`). :data:`WIDGETS`
holds them all.

- In a notebook, :func:`build` makes the widget from its declaration with ipywidgets
  (``ipywidgets.interactive`` over the notebook's drawing function, the controls as declared,
  the widget marked with :func:`css_class` so the saved notebook records which one it is);
  ipywidgets is imported only there, so the package imports without it. Where a control's
  range depends on what the notebook computed (how many epochs were recorded, how many
  validation sentences there are), the declaration leaves it ``None`` and the notebook gives
  it: ``build("attention-by-epoch", show_epoch, epoch={"value": 10, "max": 10})``.
- The website (``tools/site``) finds a notebook's widgets by name (the builder call in the
  cell's code, or the class in the saved widget state), never by their labels, and draws their
  controls from the declaration: renaming a label here renames it in the notebook and on the
  site together.

Notebook 06's translator is declared here too; its cell builds its own layout (a menu of
directions, a text box, a slider and an output, translating on every change), with the
declared labels.
"""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from dataclasses import dataclass, replace

__all__ = ["SITES", "WIDGETS", "Control", "Widget", "build", "css_class", "declared",
           "for_notebook", "show"]

#: How the website shows a widget, which needs a kernel: computed in the page by
#: ``tools/site/static/live.js`` ("live"); every setting computed by the site's build and shown
#: by ``static/flipbook.js`` ("flipbook"); or the shipped model run in the page by
#: ``static/translator.js`` ("translator").
SITES = ("live", "flipbook", "translator")
#: A control's kinds, and the ipywidgets class :func:`build` makes of each.
WIDGET_KINDS = {"slider": "IntSlider", "dropdown": "Dropdown", "text": "Text"}
#: The fields of a control a notebook may set when it builds the widget.
SETTABLE = ("value", "min", "max", "step", "options")


@dataclass(frozen=True)
class Control:
    """One control of a widget: it sets the argument ``name`` of the drawing function.

    A slider runs over the whole numbers ``min``, ``min + step``, ... ``max``; a dropdown over
    ``options``; a text box takes any line. ``None`` for ``value`` or ``max`` (no ``options``):
    the notebook gives it when it builds the widget (what it depends on is computed there)."""

    name: str
    label: str
    kind: str = "slider"
    value: int | str | None = None
    min: int | None = None
    max: int | None = None
    step: int | None = None
    options: tuple[str, ...] = ()

    def __post_init__(self):
        if self.kind not in WIDGET_KINDS:
            raise ValueError(f"control {self.name!r}: kind={self.kind!r} must be one of "
                             f"{', '.join(WIDGET_KINDS)}")
        if not self.label.strip():
            raise ValueError(f"control {self.name!r} needs a label")
        if self.kind == "slider":
            if self.min is None or self.step is None or self.step < 1:
                raise ValueError(f"slider {self.name!r} needs a min and a step of at least 1")
            if self.max is not None and self.max < self.min:
                raise ValueError(f"slider {self.name!r}: max={self.max} is below min={self.min}")
            if self.value is not None and self.max is not None and \
                    self.value not in self.values():
                raise ValueError(f"slider {self.name!r}: value={self.value!r} is not one of "
                                 f"{self.min}, {self.min + self.step}, ... {self.max}")
        elif self.kind == "dropdown":
            if (self.options or self.value is not None) and self.value not in self.options:
                raise ValueError(f"dropdown {self.name!r}: value={self.value!r} is not one of "
                                 f"its options {self.options}")
        elif not isinstance(self.value, str):
            raise ValueError(f"text box {self.name!r} needs a starting text")

    @property
    def complete(self) -> bool:
        """Whether the declaration gives every value (else the notebook gives the rest)."""
        return self.value is not None and (self.kind != "slider" or self.max is not None)

    def values(self) -> list[int | str]:
        """Every value the control can take (a slider's needs its ``max``; a text box: none)."""
        if self.kind == "dropdown":
            if not self.options:
                raise ValueError(f"dropdown {self.name!r}: the notebook gives its options")
            return list(self.options)
        if self.kind == "text":
            return []
        if self.max is None:
            raise ValueError(f"slider {self.name!r}: the notebook gives its max")
        return list(range(self.min, self.max + 1, self.step))

    def given(self, **settings) -> Control:
        """This control with the fields a notebook gives (:data:`SETTABLE`), checked."""
        wrong = sorted(set(settings) - set(SETTABLE))
        if wrong:
            raise ValueError(f"control {self.name!r}: a notebook sets only "
                             f"{', '.join(SETTABLE)}, not {', '.join(wrong)}")
        if "options" in settings:
            settings["options"] = tuple(settings["options"])
        return replace(self, **settings)

    def as_dict(self) -> dict:
        """What the website's scripts read of it (JSON)."""
        return {"name": self.name, "label": self.label, "kind": self.kind,
                "value": self.value, "min": self.min, "max": self.max, "step": self.step,
                "options": list(self.options)}


@dataclass(frozen=True)
class Widget:
    """One notebook widget, declared once (see the module docstring)."""

    name: str  # the id the website uses: "dependency-explorer"
    notebook: str  # the notebook's file name without .ipynb: "01_glu_and_padding"
    controls: tuple[Control, ...]
    draws: tuple[str, ...]  # the package functions it draws with, "convs2s.<module>.<name>"
    site: str  # how the website shows it (SITES)
    label_width: str | None = None  # room for the longest label, so the sliders align
    built_by_notebook: bool = False  # its cell builds its own layout (the translator's)

    def __post_init__(self):
        if self.site not in SITES:
            raise ValueError(f"widget {self.name!r}: site={self.site!r} must be one of "
                             f"{', '.join(SITES)}")
        names = [c.name for c in self.controls]
        if not names or len(set(names)) != len(names):
            raise ValueError(f"widget {self.name!r}: its controls' names must be distinct")
        labels = self.labels
        if len(set(labels)) != len(labels):
            raise ValueError(f"widget {self.name!r}: two controls share a label")

    @property
    def labels(self) -> tuple[str, ...]:
        return tuple(c.label for c in self.controls)

    def control(self, name: str) -> Control:
        for c in self.controls:
            if c.name == name:
                return c
        raise KeyError(f"widget {self.name!r} has no control {name!r} (it has "
                       f"{', '.join(c.name for c in self.controls)})")

    def functions(self) -> list[Callable]:
        """The package functions of :attr:`draws`, imported."""
        found = []
        for dotted in self.draws:
            module, _, attr = dotted.rpartition(".")
            found.append(getattr(importlib.import_module(module), attr))
        return found


_WIDE = "120px"  # the longest label ("sentence length", "change token t") whole

#: Every notebook widget, by name.
WIDGETS: dict[str, Widget] = {w.name: w for w in (
    Widget("dependency-explorer", "01_glu_and_padding", (
        Control("kernel_size", "kernel size k", value=3, min=1, max=9, step=1),
        Control("n_layers", "layers L", value=2, min=1, max=6, step=1),
        # convs2s.course.stacks.STACK_PADDINGS, written out so that the declarations import
        # without torch (the site's builder reads them first; tests/course/test_widgets.py
        # checks that the two agree)
        Control("padding", "padding", "dropdown", value="same",
                options=("none", "same", "causal")),
        Control("length", "sentence length", value=16, min=4, max=32, step=1)),
        ("convs2s.course.dependency.draw_dependency_explorer",), "live", _WIDE),
    Widget("decoder-explorer", "03_causal_decoder", (
        Control("padding", "padding", "dropdown", value="causal", options=("causal", "same")),
        Control("kernel_size", "kernel size", value=3, min=1, max=9, step=2),
        Control("n_layers", "layers", value=2, min=1, max=6, step=1),
        # the notebook gives max: its sentence's last position
        Control("position", "change token t", value=6, min=0, step=1)),
        ("convs2s.course.dependency.visible_positions",
         "convs2s.course.dependency.perturbation_effect",
         "convs2s.course.dependency.plot_visible_positions",
         "convs2s.course.dependency.plot_perturbation"), "flipbook", _WIDE),
    Widget("attention-by-sentence", "04_multi_step_attention", (
        # the notebook gives value and max: its sentence, and the split's last index
        Control("sentence", "validation sentence", min=0, step=1),),
        ("convs2s.course.attention_maps.plot_sentence_attention",
         "convs2s.course.attention_maps.entropy_titles",
         "convs2s.course.attention_maps.attention_entropy",
         "convs2s.course.attention_maps.plot_attention_grid"), "flipbook"),
    Widget("attention-by-epoch", "05_training_on_multi30k", (
        # the notebook gives value and max: the epochs its training recorded
        Control("epoch", "epoch", min=1, step=1),),
        ("convs2s.course.analysis.plot_attention_epoch",
         "convs2s.course.analysis.attention_epoch_line"), "flipbook", "60px"),
    Widget("translator", "06_inference_beam_search_bleu", (
        # the notebook gives the menu: the direction of the model it studies, then every
        # shipped one (analysis.widget_directions)
        Control("direction", "direction", "dropdown"),
        # labelled with the chosen direction's source language, German first; the notebook
        # fills in its starting sentence (analysis.widget_inputs)
        Control("sentence", "German", "text", value=""),
        Control("beam_size", "beam size", value=5, min=1, max=10, step=1)),
        ("convs2s.course.analysis.translate_for_display",
         "convs2s.course.analysis.plot_translation"), "translator", built_by_notebook=True),
    Widget("conv-costs", "08_beyond_convs2s", (
        Control("channels", "channels d", value=256, min=32, max=1024, step=32),
        Control("kernel_size", "kernel k", value=3, min=1, max=15, step=2)),
        ("convs2s.model.variants.conv_costs", "convs2s.model.variants.costs_title",
         "convs2s.course.analysis.plot_conv_costs"), "live"),
)}


def declared(name: str) -> Widget:
    """The declaration of the widget ``name``; KeyError (one line) naming the declared ones."""
    try:
        return WIDGETS[name]
    except KeyError:
        raise KeyError(f"no widget {name!r} is declared in convs2s.course.widgets (declared: "
                       f"{', '.join(WIDGETS)})") from None


def for_notebook(notebook: str) -> list[Widget]:
    """The widgets declared for ``notebook`` (its file name, with or without .ipynb)."""
    stem = notebook.removesuffix(".ipynb")
    return [w for w in WIDGETS.values() if w.notebook == stem]


def css_class(name: str) -> str:
    """The class :func:`build` gives the widget ``name``: the saved notebook records it."""
    return f"convs2s-widget-{name}"


def controls_for(name: str, **given: dict) -> tuple[Control, ...]:
    """The declared controls of ``name`` with what the notebook gives (``control=dict(value=
    ..., max=...)``), checked: every control complete, every setting known. Pure."""
    widget = declared(name)
    unknown = sorted(set(given) - {c.name for c in widget.controls})
    if unknown:
        raise ValueError(f"widget {name!r} has no control {', '.join(map(repr, unknown))} "
                         f"(it has {', '.join(c.name for c in widget.controls)})")
    controls = tuple(c.given(**given.get(c.name, {})) for c in widget.controls)
    for c in controls:
        if not c.complete:
            raise ValueError(f"widget {name!r}: the notebook gives control {c.name!r} its "
                             f"{'value' if c.value is None else 'max'}, as "
                             f"build({name!r}, ..., {c.name}={{'value': ..., 'max': ...}})")
    return controls


def _check_function(name: str, function: Callable, controls: tuple[Control, ...]) -> None:
    try:
        params = inspect.signature(function).parameters
    except (TypeError, ValueError):
        return  # a builtin or C function: ipywidgets will say
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return
    missing = [c.name for c in controls if c.name not in params]
    if missing:
        raise ValueError(f"widget {name!r}: {getattr(function, '__name__', function)} takes no "
                         f"argument {', '.join(map(repr, missing))}, which its controls set")


def build(name: str, function: Callable, **given: dict):
    """The notebook widget ``name``: ``ipywidgets.interactive(function, ...)`` with one control
    per declared control (its label, range and starting value), which calls ``function`` with
    the controls' values as keyword arguments whenever one moves. ``given``: what the notebook
    gives a control (see :func:`controls_for`)."""
    widget = declared(name)
    if widget.built_by_notebook:
        raise ValueError(f"widget {name!r} is built by its notebook's own cell, not here")
    controls = controls_for(name, **given)
    _check_function(name, function, controls)
    import ipywidgets

    style = {"style": {"description_width": widget.label_width}} if widget.label_width else {}
    made = {}
    for c in controls:
        if c.kind == "slider":
            made[c.name] = ipywidgets.IntSlider(value=c.value, min=c.min, max=c.max, step=c.step,
                                                description=c.label, **style)
        elif c.kind == "dropdown":
            made[c.name] = ipywidgets.Dropdown(options=list(c.options), value=c.value,
                                               description=c.label, **style)
        else:
            made[c.name] = ipywidgets.Text(value=c.value, description=c.label,
                                           continuous_update=False, **style)
    box = ipywidgets.interactive(function, **made)
    box.add_class(css_class(name))
    return box


def show(name: str, function: Callable, **given: dict) -> None:
    """Display :func:`build`'s widget (in a notebook's output)."""
    from IPython.display import display

    display(build(name, function, **given))
