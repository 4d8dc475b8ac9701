"""Attention maps drawn for a phone's column, and the notebooks' attention maps the site draws
again with them.

The package draws a sentence's attention (``convs2s.course.attention_maps.plot_attention_grid``)
with every decoder layer side by side: 13-17 inches wide, which a 375 px phone shrinks to a
fifth, its token labels to 2-3 px. Here each layer is drawn alone, 3.3 inches wide with its text
as text (:func:`layer_figure`: notebooks 04 and 05's flipbooks show one layer at a time), or the
layers one above the other in one drawing, each with its title and colour bar
(:func:`layers_figure`: a notebook's figure on a phone).

Which of the notebooks' attention figures the site draws again (:func:`notebook_maps`) is
decided by whether the site can compute the notebook's own numbers, never by the caption:

- notebook 06's three maps (section 6) come from the notebook's ``translator``; its stored run
  studied the course's shipped translator (``convs2s.pretrained("de-en")``, the line
  ``analysis.studied_model`` printed says so). The site runs the figure cell's own code with
  that translator and the test sentences as the notebook picks them, and draws again only when
  what this prints and displays is what the stored output printed and displayed, character for
  character (each layer's entropy, the uniform entropy, each figure's size in pixels, which
  follows from the numbers of source and target tokens). Without the Multi30k data it draws
  the numbers its stored outputs carry, as below;
- notebook 04's map comes from the model notebook 04 trains for 3 epochs, and notebook 07's
  from the ConvS2S and GRU models it trains side by side: the site trains nothing (the shipped
  translator's attention would be another model's under the notebook's caption). Their stored
  outputs carry the numbers the package drew (``convs2s.course.figure_data``: the attention,
  the labels, the titles, beside the PNG), and the site draws those numbers again
  (:func:`stored_maps`). A stored output without them (a run before the package stored them)
  keeps the notebook's PNG, which a phone shrinks.
"""

from __future__ import annotations

import ast
import contextlib
import functools
import io
import json
import re
import tempfile
import textwrap
from dataclasses import dataclass

#: A layer's drawing for a phone: 3.3 inches are 317 CSS px, within the flipbook's 321 px
#: column on a 375 px phone (site.css) and a little more than a folded output's 305 px, so the
#: package's 9 pt tick labels show at 11.5-12 px there.
NARROW_INCHES = 3.3
#: Inches per target token (a row) in a layer's drawing: a 9 pt label's height and a little.
ROW_INCHES = 0.17
#: The narrowest column (inches) that takes a rotated 9 pt label of its own: narrower, and
#: every other source token is labelled above the map instead of below it.
LABEL_INCHES = 0.15
#: Characters per line of a stacked drawing's title (10 pt in 3.3 inches).
TITLE_CHARACTERS = 38


# --------------------------------------------------------------------------------------------
# One layer, or the layers one above the other, for a phone
# --------------------------------------------------------------------------------------------


def _as_tensor(attention):
    import torch

    return torch.as_tensor(attention).detach().float().cpu()


def _draw_layer(fig, a, layer: int, src_tokens, trg_tokens, title: str):
    """Layer ``layer`` of ``a`` on ``fig`` (a figure or a subfigure): the package's map of that
    layer alone on the colour scale of all the layers, its colour bar below it; its axes."""
    from convs2s.course import attention_maps

    attention_maps.plot_attention_grid(a[layer:layer + 1], list(src_tokens), list(trg_tokens),
                                       fig=fig, ncols=1, titles=[title])
    ax = fig.axes[0]
    image = ax.images[0]
    image.colorbar.remove()  # the package's stands beside the map: below it here
    image.set_clim(0.0, float(a.max()) if a.numel() else 1.0)
    fig.colorbar(image, ax=ax, location="bottom", fraction=0.04, pad=0.02, aspect=30,
                 label="attention weight")
    return ax


def _label_inches(src_tokens) -> float:
    """The height of the longest rotated 9 pt source label, inches."""
    return 0.078 * max(len(t) for t in src_tokens) + 0.15


def _layer_inches(trg_len: int, label: float, staggered: bool) -> float:
    """A layer's drawing's height: its rows, its source labels (below, and above where
    ``staggered``), its title, axis label and colour bar."""
    return ROW_INCHES * trg_len + (2 if staggered else 1) * label + 1.25


def _label_every_other_above(ax, src_tokens) -> None:
    ax.set_xticks(range(0, len(src_tokens), 2))
    ax.set_xticklabels(list(src_tokens)[0::2], rotation=90, fontsize=9)
    top = ax.secondary_xaxis("top")
    top.set_xticks(range(1, len(src_tokens), 2))
    top.set_xticklabels(list(src_tokens)[1::2], rotation=90, fontsize=9)
    ax.set_xlabel("source token\n(every other one above the map)")


def _too_narrow(fig, ax, src_len: int) -> bool:
    """Whether the map's columns, as laid out, are too narrow for a rotated label each."""
    fig.canvas.draw()  # the layout: how wide the map's columns came out
    return ax.get_window_extent().width / fig.dpi / src_len < LABEL_INCHES and src_len > 1


def layer_figure(attention, layer: int, src_tokens, trg_tokens, title: str):
    """Decoder layer ``layer`` (0-based) of ``attention`` (``[layers, trg_len, src_len]``) for
    a phone's column: the package's ``attention_maps.plot_attention_grid`` of that layer alone,
    on the colour scale of all the layers (as the notebook's figure, so layers stay comparable),
    :data:`NARROW_INCHES` wide, its colour bar below the map. Where the map's columns are too
    narrow for a label each, every other source token is labelled above the map."""
    import matplotlib.pyplot as plt

    a = _as_tensor(attention)
    trg_len, src_len = a.shape[1:]
    fig = plt.figure(figsize=(NARROW_INCHES, 2.0), layout="constrained")
    ax = _draw_layer(fig, a, layer, src_tokens, trg_tokens, title)
    label = _label_inches(src_tokens)
    fig.set_size_inches(NARROW_INCHES, _layer_inches(trg_len, label, False))
    if _too_narrow(fig, ax, src_len):
        _label_every_other_above(ax, src_tokens)
        fig.set_size_inches(NARROW_INCHES, _layer_inches(trg_len, label, True))
    return fig


def layers_figure(attention, src_tokens, trg_tokens, titles, title: str | None = None):
    """Every layer of ``attention`` (``[layers, trg_len, src_len]``) one above the other, each
    drawn as :func:`layer_figure` draws it (its title of ``titles``, its colour bar below it,
    all on one colour scale), under ``title`` wrapped to the width: a notebook's row of maps
    as a phone's column shows it."""
    import matplotlib.pyplot as plt

    a = _as_tensor(attention)
    n, trg_len, src_len = a.shape
    if len(titles) != n:
        raise ValueError(f"{n} layers need {n} titles, got {len(titles)}")
    fig = plt.figure(figsize=(NARROW_INCHES, 2.0 * n), layout="constrained")
    parts = fig.subfigures(n, 1, squeeze=False).ravel()
    axes = [_draw_layer(part, a, layer, src_tokens, trg_tokens, titles[layer])
            for layer, part in enumerate(parts)]
    for ax in axes:
        # the map's own cells in the SVG, which the browser scales up pixelated (it looks as
        # the package's "nearest"): a tenth of the bytes of the map resampled to the drawing's
        # size, which a page of several such drawings would otherwise pay (its 1.2 MB budget)
        ax.images[0].set_interpolation("none")
    head = 0.0
    if title:
        wrapped = textwrap.fill(title, TITLE_CHARACTERS)
        fig.suptitle(wrapped, fontsize=10)
        head = 0.2 * (wrapped.count("\n") + 1) + 0.1
    label = _label_inches(src_tokens)
    fig.set_size_inches(NARROW_INCHES, n * _layer_inches(trg_len, label, False) + head)
    if _too_narrow(fig, axes[0], src_len):  # the layers are laid out alike
        for ax in axes:
            _label_every_other_above(ax, src_tokens)
        fig.set_size_inches(NARROW_INCHES, n * _layer_inches(trg_len, label, True) + head)
    return fig


# --------------------------------------------------------------------------------------------
# Notebook 06's maps: the figure cell's own code, with the shipped translator
# --------------------------------------------------------------------------------------------

#: A cell that draws attention maps of the notebook's ``translator`` (notebook 06's section 6).
_MAPS_CALL = re.compile(r"\btranslator\.translate_with_attention\(.*?plot_attention_grid\(",
                        re.DOTALL)
#: The names the site sets for such a cell as notebook 06's earlier cells set them.
_MODEL_NAMES = ("translator", "model", "src_vocab", "trg_vocab")
_DATA_NAMES = ("sources", "tok_de")
#: What notebook 06's data cell prints about the split ``sources`` comes from.
_SOURCES_PRINTED = re.compile(r"\b(\d+) test sentences\b")


@dataclass
class Drawn:
    """One figure a cell displayed, as the site computed it: what the package drew it from
    (``plot_attention_grid``'s attention and labels, the panels' titles) and the figure's
    own title."""

    attention: object
    src_tokens: list[str]
    trg_tokens: list[str]
    titles: list[str]
    title: str


def _shipped_summary() -> str | None:
    """The line notebook 06's ``analysis.studied_model`` prints where it studies the shipped
    translator (no run of notebook 05 in an empty folder); None where ``CONVS2S_CHECKPOINT``
    names another model."""
    from convs2s.course import analysis

    with tempfile.TemporaryDirectory() as empty:
        studied = analysis.studied_model(False, root=empty)
    return None if studied.own else studied.summary


@functools.lru_cache(maxsize=1)
def _shipped_translator():
    """The shipped German-English translator on the CPU, as notebook 06's setup makes it from
    ``analysis.studied_model``'s checkpoint (loaded once per process)."""
    from convs2s.run import pretrained
    from convs2s.run.translator import Translator

    return Translator.from_checkpoint(pretrained.pretrained_checkpoint("de-en"), device="cpu")


@functools.lru_cache(maxsize=1)
def _test_sources() -> tuple[str, ...] | None:
    """Notebook 06's ``sources``: the Multi30k test sources whose subword tokens fit the model's
    positions (its ``fits``), in order; None where the data is not here (CONVS2S_DATA_DIR)."""
    from convs2s.data.multi30k import DataError, load_multi30k

    translator = _shipped_translator()
    try:
        test = load_multi30k(download=False)["test"]
    except (DataError, OSError):
        return None
    most = translator.model.config["max_positions"]
    return tuple(de for de, _ in test if len(translator.src_tokenizer(de)) <= most)


def _assigned(source: str) -> set[str]:
    """The names a cell's code assigns anywhere (loops and functions included)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    return {n.id for n in ast.walk(tree) if isinstance(n, ast.Name) and
            isinstance(n.ctx, ast.Store)} | {n.name for n in ast.walk(tree) if isinstance(
                n, ast.FunctionDef | ast.ClassDef)} | {
        (a.asname or a.name).split(".")[0] for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom) for a in n.names}


def _set_by(earlier, name: str) -> int | None:
    """The index (in ``earlier``) of the last code cell before that assigns ``name``."""
    return next((i for i in range(len(earlier.sources) - 1, -1, -1)
                 if name in _assigned(earlier.sources[i])), None)


def _the_shipped_translator_is_studied(earlier) -> bool:
    """Whether the notebook's ``translator``, ``model`` and vocabularies are the shipped
    model's: the cell that last set them all printed ``studied_model``'s line for it."""
    summary = _shipped_summary()
    cells = {_set_by(earlier, name) for name in _MODEL_NAMES}
    if summary is None or len(cells) != 1 or None in cells:
        return False
    cell = cells.pop()
    return "studied_model(" in earlier.sources[cell] and summary in earlier.printed[cell]


def _sources_are_the_tests(earlier, sources) -> bool:
    """Whether the cell that last set ``sources`` and ``tok_de`` printed as many test sentences
    as :func:`_test_sources` found."""
    cells = {_set_by(earlier, name) for name in _DATA_NAMES}
    if len(cells) != 1 or None in cells:
        return False
    said = _SOURCES_PRINTED.search(earlier.printed[cells.pop()])
    return bool(said) and int(said.group(1)) == len(sources)


class _Pyplot:
    """``matplotlib.pyplot`` for a cell the site runs: ``show`` records the figure shown."""

    def __init__(self, shown):
        import matplotlib.pyplot as plt

        self._plt, self._shown = plt, shown

    def __getattr__(self, name):
        return getattr(self._plt, name)

    def show(self, *args, **kwargs) -> None:
        self._shown(self._plt.gcf())


def _ran(source: str, earlier) -> tuple[list[tuple[str, str]], list[Drawn]] | None:
    """Notebook 06's attention cell ``source`` run as the notebook runs it, with the shipped
    translator: (what it printed and displayed, in order: ``("text", ...)`` and ``("figure",
    the figure's text/plain)``; each figure's :class:`Drawn`), or None where it cannot be run
    as the notebook ran it."""
    import math

    import matplotlib.pyplot as plt
    import torch

    from convs2s.course import attention_maps
    from convs2s.data import make_tokenizer

    sources = _test_sources()
    if sources is None or not _sources_are_the_tests(earlier, sources):
        return None
    events: list[tuple[str, str]] = []
    drawn: list[Drawn] = []
    made: dict[int, Drawn] = {}
    printed = io.StringIO()

    def flush() -> None:
        if printed.getvalue():
            events.append(("text", printed.getvalue()))
            printed.seek(0)
            printed.truncate()

    def shown(fig) -> None:
        flush()
        events.append(("figure", repr(fig)))
        if id(fig) in made:
            d = made.pop(id(fig))
            suptitle = getattr(fig, "_suptitle", None)  # matplotlib keeps it there
            d.title = suptitle.get_text() if suptitle is not None else ""
            drawn.append(d)
        plt.close(fig)

    def plot_attention_grid(attention, src_tokens, trg_tokens, **kwargs):
        fig = attention_maps.plot_attention_grid(attention, src_tokens, trg_tokens, **kwargs)
        n = _as_tensor(attention).reshape(-1, len(trg_tokens), len(src_tokens)).shape[0]
        titles = kwargs.get("titles") or [f"layer {i + 1}" for i in range(n)]
        made[id(fig)] = Drawn(_as_tensor(attention), list(src_tokens), list(trg_tokens),
                              list(titles), "")
        return fig

    translator = _shipped_translator()
    scope = {"translator": translator, "model": translator.model,
             "src_vocab": translator.src_vocab, "trg_vocab": translator.trg_vocab,
             "sources": list(sources), "tok_de": make_tokenizer("de"), "math": math,
             "torch": torch, "plt": _Pyplot(shown), "plot_attention_grid": plot_attention_grid,
             "attention_entropy": attention_maps.attention_entropy}
    code = compile(source, "<notebook 06's attention cell>", "exec")
    try:
        with contextlib.redirect_stdout(printed):
            exec(code, scope)  # noqa: S102 (the course's own notebook, as flipbooks runs 03's)
    except Exception:  # a cell that needs what the site does not set: left as it is
        return None
    finally:
        plt.close("all")
    flush()
    return events, drawn


def stored_events(outputs: list[dict]) -> list[tuple[str, str]]:
    """What a cell's stored ``outputs`` printed and displayed, in order, as :func:`_ran` gives
    it: consecutive prints (stdout) as one ``("text", ...)``, a figure as ``("figure", its
    text/plain)``; anything else as ``("other", its JSON)``. Pure."""
    events: list[tuple[str, str]] = []
    for out in outputs:
        data = out.get("data", {})
        if out.get("output_type") == "stream" and out.get("name") == "stdout":
            text = out.get("text", "")
            text = "".join(text) if isinstance(text, list) else text
            if events and events[-1][0] == "text":
                events[-1] = ("text", events[-1][1] + text)
            else:
                events.append(("text", text))
        elif "image/png" in data:
            plain = data.get("text/plain", "")
            events.append(("figure", "".join(plain) if isinstance(plain, list) else plain))
        else:
            events.append(("other", json.dumps(out, sort_keys=True)))
    return events


def notebook_maps(source: str, outputs: list[dict], earlier) -> list[Drawn] | None:
    """The attention maps a notebook's code cell displays, as the site computes them, one per
    figure the stored ``outputs`` show; None where the site cannot compute the notebook's own
    numbers (see the module docstring): a cell that does not draw the maps of the notebook's
    ``translator``, or sets it itself, a notebook whose ``translator`` is not the shipped one
    (a model it trains: notebooks 04 and 07), no Multi30k data, or any difference between what
    the cell prints and displays when the site runs it and what its stored output shows.
    ``earlier``: what the notebook's code cells before printed (``figures.Earlier``)."""
    if not _MAPS_CALL.search(source) or _assigned(source) & {*_MODEL_NAMES, *_DATA_NAMES}:
        return None
    if not _the_shipped_translator_is_studied(earlier):
        return None
    ran = _ran(source, earlier)
    if ran is None:
        return None
    events, drawn = ran
    stored = stored_events(outputs)
    figures = [e for e in stored if e[0] == "figure"]
    if events != stored or len(drawn) != len(figures):
        return None
    return drawn


def stored_maps(outputs: list[dict]) -> list[Drawn] | None:
    """The attention maps a cell's stored ``outputs`` show, from the numbers each figure's
    output carries (``convs2s.course.figure_data``, what ``plot_attention_grid`` drew): one per
    figure, in order; None unless every figure carries such numbers, consistent in shape
    (``[layers, trg_len, src_len]``, a label per row and column, a title per layer). Pure."""
    from convs2s.course import figure_data

    drawn = []
    for out in outputs:
        if "image/png" not in out.get("data", {}):
            continue
        data = figure_data.numbers(out, "attention")
        if data is None:
            return None
        try:
            a = _as_tensor(data["attention"])
            src, trg, titles = (list(map(str, data[k]))
                                for k in ("src_tokens", "trg_tokens", "titles"))
            title = str(data.get("title") or "")
        except (KeyError, TypeError, ValueError):
            return None
        if a.dim() != 3 or tuple(a.shape[1:]) != (len(trg), len(src)) or \
                len(titles) != a.shape[0] or not a.numel():
            return None
        drawn.append(Drawn(a, src, trg, titles, title))
    return drawn or None


def stored_alt_text(d: Drawn, figure: int, figures: int, printed: str) -> str:
    """The alt text of a figure :func:`stored_maps` read: what it shows, the tokens on its
    axes, and the line printed below it. Pure."""
    line = " ".join(printed.split())
    named = f" “{' '.join(d.title.split())}”" if d.title.strip() else ""
    return (f"Attention maps{named} of the notebook's own run, {', '.join(d.titles)}: "
            f"{len(d.src_tokens)} source tokens ({' '.join(d.src_tokens)}) × "
            f"{len(d.trg_tokens)} target tokens ({' '.join(d.trg_tokens)})"
            + (f". Figure {figure + 1} of {figures}" if figures > 1 else "")
            + (f", printed below it: {line}" if line else "") + ".")


def alt_text(d: Drawn, figure: int, figures: int, printed: str) -> str:
    """The alt text of notebook 06's ``figure``-th of ``figures`` attention figures: what it
    shows, of which model and translation, and the line printed below it. Pure."""
    line = " ".join(printed.split())
    return (f"Attention maps of the course's shipped translator (convs2s.pretrained(\"de-en\")), "
            f"{', '.join(d.titles)}: {len(d.src_tokens)} source tokens × {len(d.trg_tokens)} "
            f"target tokens of the translation “{d.title}”. Figure {figure + 1} of {figures}"
            + (f", printed below it: {line}" if line else "") + ".")
