"""Architecture diagrams of ConvS2S, drawn by code (matplotlib).

Every notebook opens with :func:`architecture`, its own part highlighted ("you are here"):

    from convs2s.course import diagrams
    diagrams.architecture(highlight="encoder");

- :func:`architecture` -- the whole model, in the spirit of the paper's Figure 1 (Gehring et al.,
  2017): source tokens, token + position embeddings (e = w + p), the encoder's conv-GLU blocks,
  its output (keys z, values z + e), one attention per decoder layer, the causal decoder blocks
  over the target shifted right, and the output layer (linear -> softmax).
- :func:`conv_glu_block` -- one convolution + gated linear unit + residual block, with the tensor
  shapes at every step.
- :func:`padding` -- "same" versus causal padding in a decoder with k = 3: with "same" padding
  output i sees input i+1, the very word it must predict (the "cheating" decoder).
- :func:`multi_step_attention` -- every decoder layer attends with its own query
  d = W h + b + g over the keys z and values z + e.

In the architecture and attention pictures the target embeddings g feed every layer's query
(d = W h + b + g), and the context carries the paper's √m scale (§3.4).

Each function draws a new pyplot figure (so a notebook shows it) and returns the
:class:`~matplotlib.figure.Figure`. All figures are made at 100 dpi with fonts of at least
9 pt, so they are readable at 100% zoom. :func:`architecture` also draws for a dark page
(``theme="dark"``) and for a phone's column (``narrow=True``: the same model, one column
3.5 inches wide, so that its 9 pt text stays 11 CSS px or more in a 320 px column), as the
course's website shows it; :func:`describe` says in words what it draws (the pictures' alt
text). Every text of it has a contrast of 4.5:1 or more with what it is drawn on, in both
themes (WCAG 2's minimum for text). ``python -m convs2s.course.diagrams --out images``
writes the four PNGs (``make images``).
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

import matplotlib.pyplot as plt
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch

__all__ = ["PARTS", "DPI", "THEMES", "architecture", "describe", "conv_glu_block", "padding",
           "multi_step_attention", "main"]

PARTS = ("embeddings", "encoder", "attention", "decoder", "output", "blocks")
"""The names :func:`architecture` can highlight. ``"blocks"`` is the conv-GLU blocks of both
the encoder and the decoder."""

DPI = 100
"""Every figure is drawn (and saved by the CLI) at this many dots per inch."""

FONT = 10  # points; the smallest text anywhere is 9 pt
SMALL = 9
TITLE = 13

# One strong colour per part; the "normal" look is a light tint of it.
COLOURS = {
    "embeddings": "#3b6bb0",
    "encoder": "#277a44",
    "attention": "#b0501c",
    "decoder": "#6b58a8",
    "output": "#b23a48",
}
INK = "#1f1f1f"
GREY_FACE, GREY_EDGE, GREY_INK = "#f1f1f1", "#c3c3c3", "#666666"
MARKER = "#111111"  # the "you are here" badges


@dataclass(frozen=True)
class Palette:
    """The colours :func:`architecture` draws with on a light or a dark page: the page, the
    text, the arrows, the notes, a greyed-out part, the badge, and how a part's colour is
    mixed for its normal (tinted) and strong looks. Every text colour is at 4.5:1 or more
    against the face it sits on."""

    page: str
    ink: str
    arrow: str
    note: str
    grey_face: str
    grey_edge: str
    grey_ink: str
    marker_face: str
    marker_ink: str
    tint_towards: str  # a part's normal face: its colour mixed 78% with this
    token_face: str
    token_edge: str
    label_mix: float  # a part's coloured labels: its colour mixed this much with white


LIGHT = Palette(page="white", ink=INK, arrow="#444444", note="#555555", grey_face=GREY_FACE,
                grey_edge=GREY_EDGE, grey_ink=GREY_INK, marker_face=MARKER,
                marker_ink="white", tint_towards="#ffffff", token_face="white",
                token_edge="#555555", label_mix=0.0)
# the page colour of the website's dark theme (pydata-sphinx-theme's --pst-color-background)
DARK = Palette(page="#14181e", ink="#ececec", arrow="#b4b8be", note="#c4c8ce",
               grey_face="#23272e", grey_edge="#4a4f57", grey_ink="#a9aeb6",
               marker_face="#f2f2f2", marker_ink="#111111", tint_towards="#14181e",
               token_face="#14181e", token_edge="#9aa0a8", label_mix=0.45)
THEMES = {"light": LIGHT, "dark": DARK}
"""The themes :func:`architecture` draws in, by name."""
_palette = LIGHT  # the one being drawn with (set by architecture() while it draws)


# --------------------------------------------------------------------------------------------
# Drawing helpers
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Box:
    """A rectangle in data coordinates: lower-left corner (x, y), width w, height h."""

    x: float
    y: float
    w: float
    h: float

    @property
    def left(self) -> float:
        return self.x

    @property
    def right(self) -> float:
        return self.x + self.w

    @property
    def bottom(self) -> float:
        return self.y

    @property
    def top(self) -> float:
        return self.y + self.h

    @property
    def cx(self) -> float:
        return self.x + self.w / 2

    @property
    def cy(self) -> float:
        return self.y + self.h / 2

    def at(self, side: str, frac: float = 0.5) -> tuple[float, float]:
        """A point on ``side`` ("top", "bottom", "left", "right"), ``frac`` along it."""
        if side in ("top", "bottom"):
            return (self.x + frac * self.w, self.top if side == "top" else self.bottom)
        return (self.left if side == "left" else self.right, self.y + frac * self.h)


@dataclass(frozen=True)
class Look:
    """How a box is drawn: face, edge and text colours, edge width, text weight."""

    face: str
    edge: str
    ink: str
    lw: float
    weight: str = "normal"


def _tint(colour: str, amount: float, towards: str = "#ffffff") -> str:
    """``colour`` mixed with ``towards`` (white; ``amount`` = 0: unchanged, 1: ``towards``)."""
    r, g, b = (int(colour[i:i + 2], 16) for i in (1, 3, 5))
    to = [int(towards[i:i + 2], 16) for i in (1, 3, 5)]
    mix = [round(c + (t - c) * amount) for c, t in zip((r, g, b), to, strict=True)]
    return "#" + "".join(f"{c:02x}" for c in mix)


def _label_colour(colour: str) -> str:
    """A part's colour as text on the page: itself on a light page, lighter on a dark one."""
    return _tint(colour, _palette.label_mix) if _palette.label_mix else colour


def _look(colour: str, state: str) -> Look:
    """The look of a part in ``state``: "normal", "strong" (highlighted) or "grey"."""
    pal = _palette
    if state == "strong":
        return Look(colour, pal.ink, "white", 2.6, "bold")
    if state == "grey":
        return Look(pal.grey_face, pal.grey_edge, pal.grey_ink, 1.0)
    return Look(_tint(colour, 0.78, pal.tint_towards), _label_colour(colour), pal.ink, 1.6)


NEUTRAL = Look("white", "#555555", INK, 1.2)  # tokens: the data, never highlighted


def _canvas(width: float, height: float) -> tuple[Figure, plt.Axes]:
    """A pyplot figure of ``width`` x ``height`` inches whose data units are 0.1 inch."""
    fig = plt.figure(figsize=(width, height), dpi=DPI, facecolor=_palette.page)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width * 10)
    ax.set_ylim(0, height * 10)
    ax.set_axis_off()
    return fig, ax


def _box(ax, box: Box, text: str | Sequence[str], look: Look, *, gid: str | None = None,
         size: float = FONT, rounding: float = 0.8, line_gap: float = 3.2,
         sizes: Sequence[float] | None = None) -> FancyBboxPatch:
    """A rounded box with centred text; ``gid`` names it for tests and SVGs.

    ``text`` is a string (newlines allowed) or a list of lines placed ``line_gap`` apart, for
    formulas whose sub- and superscripts would make matplotlib's own line spacing collide;
    ``sizes``, one per line of such a list, where the lines differ in size.
    """
    patch = FancyBboxPatch((box.x, box.y), box.w, box.h,
                           boxstyle=f"round,pad=0,rounding_size={rounding}",
                           facecolor=look.face, edgecolor=look.edge, linewidth=look.lw,
                           zorder=2)
    if gid:
        patch.set_gid(gid)
    ax.add_patch(patch)
    lines = [text] if isinstance(text, str) else list(text)
    sizes = list(sizes) if sizes is not None else [size] * len(lines)
    for i, (line, line_size) in enumerate(zip(lines, sizes, strict=True)):
        if line:
            y = box.cy + ((len(lines) - 1) / 2 - i) * line_gap
            ax.text(box.cx, y, line, ha="center", va="center", fontsize=line_size,
                    color=look.ink, fontweight=look.weight, zorder=3, linespacing=1.35)
    return patch


def _arrow(ax, start, end, *, colour: str | None = None, lw: float = 1.4,
           gid: str | None = None, head: bool = True, style: str = "-",
           zorder: float = 1.5) -> FancyArrowPatch:
    """A straight arrow from ``start`` to ``end`` that touches both points exactly."""
    colour = colour or _palette.arrow
    arrow = FancyArrowPatch(start, end, arrowstyle="-|>" if head else "-", mutation_scale=13,
                            shrinkA=0, shrinkB=0, color=colour, linewidth=lw, linestyle=style,
                            zorder=zorder)
    if gid:
        arrow.set_gid(gid)
    ax.add_patch(arrow)
    return arrow


def _bus(ax, points: Sequence[tuple[float, float]], colour: str, lw: float, gid: str,
         *, gaps: Sequence[float] = (), gap: float = 0.9) -> None:
    """A vertical-ending line through ``points``, broken around each y in ``gaps`` on its last
    (vertical) leg: where it crosses another arrow it passes under it, it does not join it."""
    *head, (x, y0), (_, y1) = points
    cuts = sorted(g for g in gaps if y0 < g < y1)
    legs = [[*head, (x, y0)]]
    for g in cuts:
        legs[-1].append((x, g - gap))
        legs.append([(x, g + gap)])
    legs[-1].append((x, y1))
    for leg in legs:
        xs, ys = zip(*leg, strict=True)
        ax.add_line(Line2D(xs, ys, color=colour, linewidth=lw, zorder=1.5, gid=gid,
                           solid_capstyle="butt"))


def _polyline_arrow(ax, points: Sequence[tuple[float, float]], **kw) -> None:
    """Line segments through ``points``, the last one with an arrow head."""
    colour, lw = kw.get("colour", "#444444"), kw.get("lw", 1.4)
    xs, ys = zip(*points[:-1], strict=True)
    ax.add_line(Line2D(xs, ys, color=colour, linewidth=lw, zorder=kw.get("zorder", 1.5),
                       solid_capstyle="butt"))
    _arrow(ax, points[-2], points[-1], **kw)


def _label(ax, xy, text: str, *, size: float = FONT, colour: str | None = None,
           ha: str = "center", va: str = "center", **kw):
    return ax.text(*xy, text, fontsize=size, color=colour or _palette.ink, ha=ha, va=va,
                   zorder=4, **kw)


def _you_are_here(ax, xy, targets: Iterable[tuple[float, float]],
                  text: str = "you are here") -> None:
    """A black "you are here" badge at ``xy`` with an arrow to each target point."""
    pal = _palette
    text = ax.text(*xy, text, ha="center", va="center", fontsize=FONT,
                   fontweight="bold", color=pal.marker_ink, zorder=6,
                   bbox={"boxstyle": "round,pad=0.35", "facecolor": pal.marker_face,
                         "edgecolor": pal.marker_face})
    for target in targets:
        arrow = FancyArrowPatch(xy, target, arrowstyle="-|>", mutation_scale=16, shrinkA=0,
                                shrinkB=0, color=pal.marker_face, linewidth=2.2, zorder=5)
        arrow.set_gid("you-are-here")
        ax.add_patch(arrow)
    text.set_gid("you-are-here")


def _tokens(ax, row: Box, words: Sequence[str], look: Look | None = None,
            gid: str | None = None, gap: float = 1.0, size: float = FONT) -> list[Box]:
    """Equal boxes for ``words`` side by side, filling ``row``; returns them."""
    if look is None:  # the data, never highlighted
        look = NEUTRAL if _palette is LIGHT else Look(_palette.token_face, _palette.token_edge,
                                                      _palette.ink, 1.2)
    n = len(words)
    w = (row.w - gap * (n - 1)) / n
    boxes = [Box(row.x + i * (w + gap), row.y, w, row.h) for i in range(n)]
    for box, word in zip(boxes, words, strict=True):
        _box(ax, box, word, look, gid=gid, rounding=0.5, size=size)
    return boxes


# --------------------------------------------------------------------------------------------
# (a) The whole model
# --------------------------------------------------------------------------------------------


def _parse_highlight(highlight) -> frozenset[str] | None:
    """``highlight`` as a set of part names, or None; ValueError naming the valid parts."""
    if highlight is None:
        return None
    names = (highlight,) if isinstance(highlight, str) else highlight
    try:
        names = tuple(names)
    except TypeError:
        names = (highlight,)
    unknown = [n for n in names if not isinstance(n, str) or n not in PARTS]
    if unknown or not names:
        what = f"unknown part(s) {', '.join(map(repr, unknown))}" if unknown else "no part"
        raise ValueError(f"highlight={highlight!r}: {what}; use None, one of "
                         f"{', '.join(map(repr, PARTS))}, or a tuple of them.")
    return frozenset(names)


class _Painter:
    """Draws the parts of :func:`architecture` in their normal, strong or grey look."""

    def __init__(self, ax, highlight: frozenset[str] | None):
        self.ax = ax
        self.highlight = highlight

    def state(self, parts: tuple[str, ...]) -> str:
        if self.highlight is None:
            return "normal"
        return "strong" if self.highlight & set(parts) else "grey"

    def look(self, parts: tuple[str, ...]) -> Look:
        return _look(COLOURS[parts[0]], self.state(parts))

    def ink(self, parts: tuple[str, ...]) -> str:
        """Arrow colour for a connection belonging to ``parts``."""
        return {"normal": _palette.arrow, "strong": _label_colour(COLOURS[parts[0]]),
                "grey": _palette.grey_edge}[self.state(parts)]

    def text_ink(self, parts: tuple[str, ...]) -> str:
        """Colour of a label belonging to ``parts`` (a greyed part's is grey, but readable)."""
        return _palette.grey_ink if self.state(parts) == "grey" else self.ink(parts)

    def box(self, box: Box, text: str | Sequence[str], parts: tuple[str, ...], name: str,
            **kw) -> FancyBboxPatch:
        return _box(self.ax, box, text, self.look(parts), gid=f"{'+'.join(parts)}:{name}", **kw)

    def arrow(self, start, end, parts: tuple[str, ...], name: str, **kw) -> None:
        lw = 2.2 if self.state(parts) == "strong" else 1.4
        _arrow(self.ax, start, end, colour=self.ink(parts), lw=lw,
               gid=f"{'+'.join(parts)}:{name}", **kw)


# Layout of architecture(), in units of 0.1 inch (figure 12.8 x 8.6 inches).
_ENC_X, _DEC_X, _COL_W = 18.0, 80.0, 32.0
_ATT_X, _ATT_W = 57.0, 15.0
_ROW_TOKENS, _ROW_EMB, _ROW_B1, _ROW_BL, _ROW_TOP, _ROW_PRED = 4.0, 12.0, 25.0, 40.0, 54.0, 68.0
_BLOCK_H = 8.5


def architecture(highlight: str | Sequence[str] | None = None, *, theme: str = "light",
                 narrow: bool = False) -> Figure:
    """The whole ConvS2S model (after the paper's Figure 1); returns the pyplot Figure.

    ``highlight``: None (everything in colour), or one of :data:`PARTS` or a tuple of them:
    those parts are drawn in strong colour, the rest in grey, and one "you are here" badge
    points at them (at the whole model when every part is highlighted). ``"blocks"`` means the
    conv-GLU blocks of both stacks. ``theme``: "light" (a white page) or "dark" (the website's
    dark page), :data:`THEMES`. ``narrow``: the same model in one column 3.5 inches wide, the
    encoder below the decoder, for a phone's screen (the badge names the part, under the
    title).
    """
    global _palette
    parts = _parse_highlight(highlight)
    if theme not in THEMES:
        raise ValueError(f"theme={theme!r}: use one of {', '.join(map(repr, THEMES))}.")
    saved, _palette = _palette, THEMES[theme]
    try:
        return (_architecture_narrow if narrow else _architecture_wide)(parts)
    finally:
        _palette = saved


def _architecture_wide(parts: frozenset[str] | None) -> Figure:
    fig, ax = _canvas(12.8, 8.6)
    p = _Painter(ax, parts)
    title = "ConvS2S: the whole model (after Gehring et al., 2017, Figure 1)"
    _label(ax, (64, 83), title, size=TITLE, weight="bold")
    _label(ax, (_ENC_X + _COL_W / 2, 77), "encoder: the source, all positions at once",
           size=11, weight="bold", colour=_label_colour(COLOURS["encoder"]))
    _label(ax, (_DEC_X + _COL_W / 2, 77), "decoder: the target shifted right, causal",
           size=11, weight="bold", colour=_label_colour(COLOURS["decoder"]))

    enc = _draw_encoder(p)
    dec = _draw_decoder(p)
    att = _draw_attention(p, enc, dec)
    _label(ax, (64, 1.4), "Blocks 2 .. L−1 of each stack are not drawn (the stacks may differ in "
           "depth); decoder layer l has its own attention l. fairseq also scales d and z + e by "
           "√0.5.", size=SMALL, colour=_palette.note)
    if parts:
        _draw_markers(ax, parts, enc, dec, att)
    return fig


def _draw_stack_blocks(p: _Painter, x: float, parts: tuple[str, ...], lines: tuple[str, str],
                       prefix: str) -> tuple[Box, Box]:
    """Block 1 and block L of a stack, with the arrow between them; returns both boxes."""
    bx = x + 5.0
    b1 = Box(bx, _ROW_B1, _COL_W - 5.0, _BLOCK_H)
    bl = Box(bx, _ROW_BL, _COL_W - 5.0, _BLOCK_H)
    p.box(b1, f"{prefix} block 1\n{lines[0]}\n{lines[1]}", parts, f"{prefix} block 1")
    p.box(bl, f"{prefix} block L\n{lines[0]}\n{lines[1]}", parts, f"{prefix} block L")
    p.arrow(b1.at("top"), bl.at("bottom"), parts, f"{prefix} blocks")
    _label(p.ax, (b1.cx + 2.5, (b1.top + bl.bottom) / 2), "⋮", size=12,
           colour=p.look(parts).edge if p.state(parts) == "normal" else p.text_ink(parts))
    return b1, bl


def _draw_encoder(p: _Painter) -> dict[str, Box]:
    ax = p.ax
    tokens = _tokens(ax, Box(_ENC_X, _ROW_TOKENS, _COL_W, 4.0), ["ein", "Hund", "läuft", "."])
    emb = Box(_ENC_X, _ROW_EMB, _COL_W, 7.0)
    p.box(emb, "token + position embeddings\n$e_j = w_j + p_j$", ("embeddings",),
          "source embeddings")
    for t in tokens:
        _arrow(ax, t.at("top"), (t.cx, emb.bottom))
    b1, bl = _draw_stack_blocks(p, _ENC_X, ("encoder", "blocks"),
                                ("conv k=3, same padding → GLU", "+ residual, × √0.5"), "encoder")
    p.arrow((b1.cx, emb.top), b1.at("bottom"), ("encoder",), "into block 1")
    out = Box(_ENC_X, _ROW_TOP, _COL_W, 8.0)
    p.box(out, "encoder output\nkeys $z_j$     values $z_j + e_j$", ("encoder",), "z and z+e")
    p.arrow(bl.at("top"), (bl.cx, out.bottom), ("encoder",), "into z")
    # e skips the whole stack: the values carry each source word's own embedding.
    skip_x = _ENC_X + 2.2
    p.arrow((skip_x, emb.top), (skip_x, out.bottom), ("encoder",), "e skips the blocks")
    _label(ax, (skip_x + 1.0, (b1.top + bl.bottom) / 2), "e", size=11, ha="left",
           colour=p.text_ink(("encoder",)), style="italic")
    return {"emb": emb, "b1": b1, "bl": bl, "out": out}


def _draw_decoder(p: _Painter) -> dict[str, Box]:
    ax = p.ax
    words_in = ["<bos>", "a", "dog", "runs", "."]
    tokens = _tokens(ax, Box(_DEC_X, _ROW_TOKENS, _COL_W, 4.0), words_in)
    emb = Box(_DEC_X, _ROW_EMB, _COL_W, 7.0)
    p.box(emb, "token + position embeddings\n$g_i = w_i + p_i$", ("embeddings",),
          "target embeddings")
    for t in tokens:
        _arrow(ax, t.at("top"), (t.cx, emb.bottom))
    b1, bl = _draw_stack_blocks(p, _DEC_X - 5.0, ("decoder", "blocks"),
                                ("conv k=3, causal padding → GLU", "+ attention, + residual"),
                                "decoder")
    p.arrow((b1.cx, emb.top), b1.at("bottom"), ("decoder",), "into block 1")
    out = Box(_DEC_X, _ROW_TOP, _COL_W, 8.0)
    p.box(out, "output: linear → softmax\n$p(y_{i+1} \\mid y_1 \\ldots y_i,\\ x)$", ("output",),
          "linear softmax")
    p.arrow(bl.at("top"), (bl.cx, out.bottom), ("output",), "into output")
    preds = _tokens(ax, Box(_DEC_X, _ROW_PRED, _COL_W, 4.0), ["a", "dog", "runs", ".", "<eos>"],
                    p.look(("output",)), gid="output:predictions")
    for t in preds:
        p.arrow((t.cx, out.top), t.at("bottom"), ("output",), "to predictions")
    return {"emb": emb, "b1": b1, "bl": bl, "out": out}


def _draw_attention(p: _Painter, enc: dict[str, Box], dec: dict[str, Box]) -> dict[str, Box]:
    """One attention per decoder layer, fed by the encoder output and the layer's own query."""
    ax = p.ax
    parts = ("attention",)
    boxes = {}
    bus_x = enc["out"].right + 3.0
    # keys z and values z + e run down a bus from the encoder output to every attention
    ax.add_line(Line2D([enc["out"].right, bus_x, bus_x],
                       [enc["out"].cy, enc["out"].cy, dec["b1"].cy],
                       color=p.ink(parts), linewidth=2.2 if p.state(parts) == "strong" else 1.4,
                       zorder=1.5, gid="attention:bus"))
    _label(ax, (bus_x + 1.0, (enc["bl"].top + enc["out"].bottom) / 2 + 0.6), "keys z, values z+e",
           size=SMALL, ha="left", colour=p.text_ink(parts))
    for name in ("b1", "bl"):
        block = dec[name]
        box = Box(_ATT_X, block.y, _ATT_W, block.h)
        layer = "1" if name == "b1" else "L"
        lines = [f"attention {layer}", r"$a = \mathrm{softmax}(d \cdot z)$",
                 r"$c = \sqrt{m}\,\sum\, a\,(z + e)$"]
        p.box(box, lines, parts, f"attention {layer}", line_gap=2.5)
        p.arrow((bus_x, box.cy), box.at("left"), parts, f"keys values {layer}")
        # the query d = W h + b + g comes from the layer's GLU output h and the target
        # embedding g (the g bus below joins it); the context c goes back into the layer
        p.arrow(block.at("left", 0.3), box.at("right", 0.3), parts, f"query {layer}")
        p.arrow(box.at("right", 0.72), block.at("left", 0.72), parts, f"context {layer}")
        label_x = box.right + 2.0
        _label(ax, (label_x, box.y + 0.3 * box.h + 1.3), "d", size=11, style="italic",
               colour=p.text_ink(parts))
        _label(ax, (label_x, box.y + 0.72 * box.h + 1.3), "c", size=11, style="italic",
               colour=p.text_ink(parts))
        boxes[name] = box
    # g, the target embeddings, goes into every query: up a bus beside the decoder blocks
    g_x = dec["b1"].left - 2.0
    top = boxes["bl"].y + 0.3 * boxes["bl"].h
    lw = 2.2 if p.state(parts) == "strong" else 1.4
    _bus(ax, [dec["emb"].at("left"), (g_x, dec["emb"].cy), (g_x, top)], p.ink(parts), lw,
         "attention:g into the queries", gaps=[boxes["b1"].y + 0.72 * boxes["b1"].h])
    _label(ax, (g_x - 1.0, (dec["emb"].top + boxes["b1"].bottom) / 2 + 1.0), "g", size=11,
           ha="right", style="italic", colour=p.text_ink(parts))
    return boxes


def _marker_targets(enc: dict[str, Box], dec: dict[str, Box],
                    att: dict[str, Box]) -> dict[str, dict[str, list[tuple[float, float]]]]:
    """{spot: {part: the points an arrow from that spot reaches without crossing a box}}.

    The spots are the free spaces of the figure: the left and right margins, and the middle
    column above the attentions ("top") and between the attentions and the embeddings
    ("bottom").
    """
    return {
        "left": {"encoder": [enc["out"].at("left", 0.3), enc["bl"].at("left", 0.7)],
                 "embeddings": [enc["emb"].at("left")]},
        "right": {"decoder": [dec["bl"].at("right")],
                  "output": [dec["out"].at("right", 0.7)],
                  "embeddings": [dec["emb"].at("right")]},
        "bottom": {"embeddings": [enc["emb"].at("right", 0.8), dec["emb"].at("left", 0.2)],
                   "attention": [att["b1"].at("bottom")],
                   "blocks": [enc["b1"].at("right", 0.5), dec["b1"].at("left", 0.3)]},
        "top": {"encoder": [enc["out"].at("right", 0.7)],
                "attention": [att["bl"].at("top", 0.8)],
                "decoder": [dec["bl"].at("left", 0.9)],
                "output": [dec["out"].at("left", 0.7)]},
    }


#: Where the badge goes for a part on its own (then for several, the first spot reaching all).
_HOME = {"encoder": "left", "embeddings": "bottom", "blocks": "bottom", "attention": "bottom",
         "decoder": "right", "output": "right"}


def _draw_markers(ax, parts: frozenset[str], enc: dict[str, Box], dec: dict[str, Box],
                  att: dict[str, Box]) -> None:
    """One "you are here" badge, with an arrow to every highlighted part.

    The badge sits in the free space that reaches every highlighted part; when the highlight
    is the whole model (or no one space reaches all its parts) it names the whole model instead
    of pointing.
    """
    spots = _marker_targets(enc, dec, att)
    order = [_HOME[p] for p in PARTS if p in parts] + ["left", "right", "bottom", "top"]
    spot = next((s for s in dict.fromkeys(order) if parts <= spots[s].keys()), None)
    if spot is None:
        _you_are_here(ax, (64.0, 70.5), [], text="you are here: the whole model")
        return
    targets = [point for part in PARTS if part in parts for point in spots[spot][part]]
    mid_x = _ATT_X + _ATT_W / 2
    ys = [y for _, y in targets]
    if spot == "left":
        xy = (8.5, min(max(sum(ys) / len(ys), enc["emb"].cy), enc["out"].cy))
    elif spot == "right":
        xy = (121.0, sum(ys) / len(ys))
    elif spot == "bottom":
        xy = (mid_x, (enc["emb"].top + att["b1"].bottom) / 2)
    else:
        xy = (mid_x, 70.5)
    _you_are_here(ax, xy, targets)


# --------------------------------------------------------------------------------------------
# (a') The whole model in one narrow column, for a phone
# --------------------------------------------------------------------------------------------

#: What each part is called in words (the narrow picture's badge and :func:`describe`).
PART_WORDS = {"embeddings": "the token + position embeddings", "encoder": "the encoder",
              "attention": "the multi-step attention", "decoder": "the decoder",
              "output": "the output layer", "blocks": "the conv-GLU blocks of both stacks"}


def _part_list(parts: frozenset[str]) -> str:
    words = [PART_WORDS[p] for p in PARTS if p in parts]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _whole_model(parts: frozenset[str]) -> bool:
    return {"embeddings", "encoder", "attention", "decoder", "output"} <= parts


def describe(highlight: str | Sequence[str] | None = None) -> str:
    """What :func:`architecture` draws with this ``highlight``, in words (a picture's alt text):
    the model's parts, and which are highlighted. Pure."""
    parts = _parse_highlight(highlight)
    model = ("The ConvS2S model after the paper's Figure 1: source tokens and their token + "
             "position embeddings, the encoder's conv-GLU blocks and its output (keys z, values "
             "z + e), one attention per decoder layer, the causal decoder's blocks over the "
             "target shifted right, and the output layer (linear, softmax)")
    if parts is None:
        return f"{model}, every part in colour."
    if _whole_model(parts):
        return f"{model}; every part highlighted: you are here, the whole model."
    return f"{model}; highlighted, the rest greyed: {_part_list(parts)} (you are here)."


# Layout of the narrow picture, in units of 0.1 inch (3.5 inches wide); y grows upwards.
#: The narrow picture's formulas with a sub- or superscript: matplotlib draws those at 0.7 of
#: the formula's size, so 13 pt keeps them at 9.1 pt, as the other texts (9 pt or more): 11 CSS
#: px or more where a 375 px phone shows the picture 305 px wide or wider (327 px in a
#: notebook's output).
_N_FORMULA = 13
_N_W = 35.0
_N_LEFT, _N_MID, _N_RIGHT = 1.0, 21.0, 34.0  # the stacks' column, the gap, the right edge
_N_ATT_X, _N_ATT_W = 23.0, 10.6


def _architecture_narrow(parts: frozenset[str] | None) -> Figure:
    """The model bottom to top in one column: the encoder, then the decoder with each layer's
    attention beside it, the output. All text 9 pt or more."""
    height = 12.4 if parts else 11.8
    fig, ax = _canvas(_N_W / 10, height)
    p = _Painter(ax, parts)
    top = height * 10
    _label(ax, (_N_W / 2, top - 2.4), "ConvS2S: the whole model", size=12, weight="bold")
    _label(ax, (_N_W / 2, top - 5.6), "after Gehring et al., 2017, Figure 1", size=SMALL,
           colour=_palette.note)
    if parts:
        badge = ("you are here: the whole model" if _whole_model(parts) else
                 "you are here: " + ", ".join(p_ for p_ in PARTS if p_ in parts))
        _you_are_here(ax, (_N_W / 2, top - 9.6), [], text=badge)
    size = SMALL
    enc_parts, dec_parts = ("encoder", "blocks"), ("decoder", "blocks")
    # the encoder, bottom of the picture
    tokens = _tokens(ax, Box(4.0, 6.0, 17.0, 3.4), ["ein", "Hund", "läuft", "."], gap=0.6,
                     size=size)
    emb = Box(4.0, 12.0, 17.0, 6.0)
    formula = {"sizes": (size, _N_FORMULA), "line_gap": 2.3}
    p.box(emb, ["source embeddings", "$e_j = w_j + p_j$"], ("embeddings",),
          "source embeddings", **formula)
    for t in tokens:
        _arrow(ax, t.at("top"), (t.cx, emb.bottom))
    lines = "conv k=3, same\\npadding → GLU\\n+ residual"
    b1 = Box(6.5, 20.5, 15.0, 8.6)
    bl = Box(6.5, 33.0, 15.0, 8.6)
    p.box(b1, f"encoder block 1\n{lines}".replace("\\n", "\n"), enc_parts, "encoder block 1",
          size=size)
    p.box(bl, f"encoder block L\n{lines}".replace("\\n", "\n"), enc_parts, "encoder block L",
          size=size)
    p.arrow((b1.cx, emb.top), b1.at("bottom"), ("encoder",), "into block 1")
    p.arrow(b1.at("top"), bl.at("bottom"), enc_parts, "encoder blocks")
    _label(ax, (b1.cx + 2.0, (b1.top + bl.bottom) / 2), "⋮", size=12,
           colour=p.look(enc_parts).edge if p.state(enc_parts) == "normal"
           else p.text_ink(enc_parts))
    out = Box(4.0, 44.0, 27.5, 6.5)
    p.box(out, ["encoder output", "keys $z_j$    values $z_j + e_j$"], ("encoder",),
          "z and z+e", **formula)
    p.arrow(bl.at("top"), (bl.cx, out.bottom), ("encoder",), "into z")
    skip_x = 5.2
    p.arrow((skip_x, emb.top), (skip_x, out.bottom), ("encoder",), "e skips the blocks")
    _label(ax, (skip_x - 0.6, (b1.top + bl.bottom) / 2), "e", size=10, ha="right",
           colour=p.text_ink(("encoder",)), style="italic")
    _label(ax, (_N_ATT_X - 0.5, 30.0), "encoder:\nthe source,\nall positions\nat once",
           size=size, weight="bold", ha="left", colour=_label_colour(COLOURS["encoder"]),
           linespacing=1.25)
    # the decoder above it, with each layer's attention on its right
    dtok = _tokens(ax, Box(0.2, 54.0, 21.6, 3.4), ["<bos>", "a", "dog", "runs", "."],
                   gap=0.2, size=size)
    demb = Box(_N_LEFT, 60.0, 20.0, 6.0)
    p.box(demb, ["target embeddings", "$g_i = w_i + p_i$"], ("embeddings",),
          "target embeddings", **formula)
    for t in dtok:
        _arrow(ax, t.at("top"), (t.cx, demb.bottom))
    dlines = "causal conv k=3\\n→ GLU, + attention\\n+ residual"
    d1 = Box(_N_LEFT, 70.0, 18.5, 9.0)
    dl = Box(_N_LEFT, 84.0, 18.5, 9.0)
    for box, layer in ((d1, "1"), (dl, "L")):
        p.box(box, f"decoder block {layer}\n{dlines}".replace("\\n", "\n"), dec_parts,
              f"decoder block {layer}", size=size)
    p.arrow((d1.cx, demb.top), d1.at("bottom"), ("decoder",), "into block 1")
    p.arrow(d1.at("top"), dl.at("bottom"), dec_parts, "decoder blocks")
    _label(ax, (d1.cx + 2.0, (d1.top + dl.bottom) / 2), "⋮", size=12,
           colour=p.look(dec_parts).edge if p.state(dec_parts) == "normal"
           else p.text_ink(dec_parts))
    att_parts = ("attention",)
    lw = 2.2 if p.state(att_parts) == "strong" else 1.4
    bus_x = _N_RIGHT - 0.2
    boxes = []
    for block, layer in ((d1, "1"), (dl, "L")):
        box = Box(_N_ATT_X, block.y, _N_ATT_W, block.h)
        p.box(box, [f"attention {layer}", r"$a = \mathrm{softmax}$", r"$(d \cdot z)$",
                    r"$c = \sqrt{m}\,\sum$", r"$a\,(z + e)$"], att_parts,
              f"attention {layer}", size=size, line_gap=1.72)
        p.arrow(block.at("right", 0.3), box.at("left", 0.3), att_parts, f"query {layer}")
        p.arrow(box.at("left", 0.72), block.at("right", 0.72), att_parts, f"context {layer}")
        _label(ax, ((block.right + box.left) / 2, block.y + 0.3 * block.h - 1.3), "d",
               size=10, style="italic", colour=p.text_ink(att_parts))
        _label(ax, ((block.right + box.left) / 2, block.y + 0.72 * block.h + 1.3), "c",
               size=10, style="italic", colour=p.text_ink(att_parts))
        p.arrow((bus_x, box.cy), box.at("right"), att_parts, f"keys values {layer}")
        boxes.append(box)
    # keys z and values z + e: up the right edge from the encoder output to every attention
    ax.add_line(Line2D([out.right, bus_x, bus_x], [out.cy, out.cy, boxes[1].cy],
                       color=p.ink(att_parts), linewidth=lw, zorder=1.5, gid="attention:bus"))
    _label(ax, (bus_x - 0.8, 58.0), "keys z,\nvalues\nz + e", size=size, ha="right",
           colour=p.text_ink(att_parts), linespacing=1.25)
    # g, the target embeddings, joins every layer's query
    g_x = (d1.right + _N_ATT_X) / 2 + 0.4
    _bus(ax, [demb.at("right"), (g_x, demb.cy), (g_x, dl.y + 0.3 * dl.h)], p.ink(att_parts),
         lw, "attention:g into the queries", gaps=[d1.y + 0.72 * d1.h])
    _label(ax, (g_x + 0.8, demb.cy + 1.6), "g", size=10, ha="left", style="italic",
           colour=p.text_ink(att_parts))
    # the output layer and the predictions
    o = Box(_N_LEFT, 97.0, 20.0, 6.0)
    p.box(o, ["output: linear → softmax", "$p(y_{i+1} \\mid y_1 \\ldots y_i,\\ x)$"],
          ("output",), "linear softmax", **formula)
    p.arrow(dl.at("top"), (dl.cx, o.bottom), ("output",), "into output")
    preds = _tokens(ax, Box(_N_LEFT, 106.0, 20.0, 3.4), ["a", "dog", "runs", ".", "<eos>"],
                    p.look(("output",)), gid="output:predictions", gap=0.5, size=size)
    for t in preds:
        p.arrow((t.cx, o.top), t.at("bottom"), ("output",), "to predictions")
    _label(ax, (_N_ATT_X - 0.5, 101.0), "decoder:\nthe target\nshifted right,\ncausal",
           size=size, weight="bold", ha="left", colour=_label_colour(COLOURS["decoder"]),
           linespacing=1.25)
    _label(ax, (_N_W / 2, 2.2), "Blocks 2 .. L−1 are not drawn; decoder\nlayer l has its own "
           "attention l.", size=size, colour=_palette.note, linespacing=1.25)
    return fig

# --------------------------------------------------------------------------------------------
# (b) One conv-GLU-residual block
# --------------------------------------------------------------------------------------------


def conv_glu_block() -> Figure:
    """One convolution + GLU + residual block with the tensor shape after every step."""
    fig, ax = _canvas(9.0, 9.6)
    enc, glu = _look(COLOURS["encoder"], "normal"), _look(COLOURS["attention"], "normal")
    data = Look("white", "#555555", INK, 1.3)
    _label(ax, (45, 92.5), "One conv-GLU block (encoder and decoder)", size=TITLE, weight="bold")
    cx = 45.0
    x_in = Box(cx - 17, 3, 34, 6)
    conv = Box(cx - 19, 15, 38, 8)
    a, b = Box(cx - 21, 33, 17, 6.5), Box(cx + 4, 33, 17, 6.5)
    sig = Box(b.x, 45, b.w, 5)
    mul, add = (cx, 55.0), (cx, 66.0)
    scale, out = Box(cx - 11, 71, 22, 5.5), Box(cx - 17, 82, 34, 6)
    r = 2.0  # radius of the ⊗ and ⊕ nodes
    _box(ax, x_in, "input x\n[batch, hid_dim, len]", data)
    _box(ax, conv, "Conv1d  hid_dim → 2·hid_dim channels, width k\n"
         "padding: same (encoder) or causal (decoder)", enc)
    _box(ax, a, "A  (first half)\n[batch, hid_dim, len]", glu, size=SMALL)
    _box(ax, b, "B  (second half)\n[batch, hid_dim, len]", glu, size=SMALL)
    _box(ax, sig, "σ(B)  the gate, in (0, 1)", glu, size=SMALL)
    _box(ax, scale, "× √0.5", enc)
    _box(ax, out, "output\n[batch, hid_dim, len]", data)
    for (x, y), sign in ((mul, "×"), (add, "+")):
        ax.add_patch(Circle((x, y), r, facecolor="white", edgecolor=INK, linewidth=1.5, zorder=2))
        _label(ax, (x, y), sign, size=13, weight="bold")
    _arrow(ax, x_in.at("top"), conv.at("bottom"))
    # the convolution's 2·hid_dim channels split into the halves A and B
    split_y = 29.0
    ax.add_line(Line2D([cx, cx], [conv.top, split_y], color="#444444", linewidth=1.4))
    _label(ax, (cx + 1.2, (conv.top + split_y) / 2), "[batch, 2·hid_dim, len]", size=FONT,
           ha="left", weight="bold")
    _polyline_arrow(ax, [(cx, split_y), (a.cx, split_y), a.at("bottom")])
    _polyline_arrow(ax, [(cx, split_y), (b.cx, split_y), b.at("bottom")])
    _arrow(ax, b.at("top"), sig.at("bottom"))
    _polyline_arrow(ax, [a.at("top"), (a.cx, mul[1]), (mul[0] - r, mul[1])])
    _polyline_arrow(ax, [sig.at("top"), (sig.cx, mul[1]), (mul[0] + r, mul[1])])
    _arrow(ax, (cx, mul[1] + r), (cx, add[1] - r))
    _label(ax, (cx + 1.2, 61.0), "GLU output A ⊗ σ(B): [batch, hid_dim, len]",
           size=FONT, ha="left", weight="bold")
    # the residual: the block's input, added back after the GLU
    res_x = x_in.left - 8
    _polyline_arrow(ax, [x_in.at("left"), (res_x, x_in.cy), (res_x, add[1]), (cx - r, add[1])],
                    colour=COLOURS["encoder"], lw=1.8)
    _label(ax, (res_x - 1.0, 40), "residual: x itself", size=FONT, ha="right",
           colour=COLOURS["encoder"], rotation=90)
    _arrow(ax, (cx, add[1] + r), scale.at("bottom"))
    _arrow(ax, scale.at("top"), out.at("bottom"))
    _label(ax, (scale.right + 1.5, scale.cy), "halves the variance of the sum",
           size=SMALL, ha="left", colour="#555555")
    _label(ax, (add[0] + r + 1.5, add[1]), "decoder: the attention's result is added first",
           size=SMALL, ha="left", colour="#555555")
    # the GLU's parts in one frame
    frame = Box(a.x - 2, a.y - 2, b.right - a.x + 4, mul[1] + r + 1.2 - (a.y - 2))
    ax.add_patch(FancyBboxPatch((frame.x, frame.y), frame.w, frame.h,
                                boxstyle="round,pad=0,rounding_size=1.2", facecolor="none",
                                edgecolor=COLOURS["attention"], linewidth=1.2, linestyle="--",
                                zorder=1))
    _label(ax, (frame.right + 1.0, frame.top - 2.0), "gated linear unit\n(Dauphin et al., 2017)",
           size=SMALL, ha="left", va="top", colour=COLOURS["attention"])
    return fig


# --------------------------------------------------------------------------------------------
# (c) "same" versus causal padding in a decoder
# --------------------------------------------------------------------------------------------

PAST, FUTURE, PADDED = "#3b6bb0", "#d1352b", "#9a9a9a"


def padding() -> Figure:
    """What one decoder layer with k = 3 sees under "same" and under causal padding."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(13.0, 5.6), dpi=DPI)
    fig.subplots_adjust(left=0.02, right=0.98, top=0.80, bottom=0.16, wspace=0.06)
    inputs = ["<bos>", "a", "dog", "runs", "."]
    targets = ["a", "dog", "runs", ".", "<eos>"]
    _padding_panel(left, inputs, targets, pad_left=1, pad_right=1,
                   title='"same" padding: (k−1)/2 = 1 zero on each side\n'
                         "output i sees input i+1: the word it must predict")
    _padding_panel(right, inputs, targets, pad_left=2, pad_right=0,
                   title="causal padding: k−1 = 2 zeros on the left\n"
                         "output i sees inputs i−2 .. i only")
    fig.suptitle("A decoder layer with kernel width k = 3: which inputs each output sees",
                 fontsize=TITLE, fontweight="bold")
    handles = [Line2D([], [], color=PAST, lw=2, label="sees the past or present (allowed)"),
               Line2D([], [], color=FUTURE, lw=2.6, label="sees the FUTURE: cheating"),
               Line2D([], [], color=PADDED, lw=1.2, ls="--", label="sees a padding zero")]
    fig.legend(handles=handles, loc="lower center", ncol=3, fontsize=FONT, frameon=False)
    return fig


def _padding_panel(ax, inputs: list[str], targets: list[str], *, pad_left: int, pad_right: int,
                   title: str, k: int = 3) -> None:
    n = len(inputs)
    cells = ["0"] * pad_left + inputs + ["0"] * pad_right
    step, w = 10.0, 7.6
    ax.set_xlim(-6, step * len(cells) + 1)
    ax.set_ylim(-1, 33)
    ax.set_axis_off()
    ax.set_title(title, fontsize=11)
    in_y, out_y, h = 2.0, 19.0, 5.0
    xs = [step * i + 2 for i in range(len(cells))]
    for i, (x, word) in enumerate(zip(xs, cells, strict=True)):
        pad = i < pad_left or i >= pad_left + n
        look = Look(GREY_FACE, GREY_EDGE, GREY_INK, 1.0) if pad else NEUTRAL
        _box(ax, Box(x, in_y, w, h), word, look, rounding=0.6)
    ax.text(xs[0] - 1.0, in_y + h / 2, "input", ha="right", va="center", fontsize=FONT)
    ax.text(xs[0] - 1.0, out_y + h / 2, "output", ha="right", va="center", fontsize=FONT)
    ax.text(xs[0] - 1.0, out_y + h + 3.4, "predicts", ha="right", va="center", fontsize=FONT,
            color="#555555")
    for i in range(n):
        x_out = xs[pad_left + i]
        _box(ax, Box(x_out, out_y, w, h), f"out {i + 1}", _look(COLOURS["decoder"], "normal"),
             rounding=0.6)
        ax.text(x_out + w / 2, out_y + h + 3.4, targets[i], ha="center", va="center",
                fontsize=FONT, color="#555555", style="italic")
        # a convolution over the padded cells: output i reads cells i .. i+k-1
        for c in range(i, i + k):
            cell_is_pad = c < pad_left or c >= pad_left + n
            future = not cell_is_pad and c - pad_left > i
            colour = PADDED if cell_is_pad else FUTURE if future else PAST
            _arrow(ax, (x_out + w / 2, out_y), (xs[c] + w / 2, in_y + h), head=False,
                   colour=colour, lw=2.6 if future else 1.6 if not cell_is_pad else 1.1,
                   style="--" if cell_is_pad else "-", zorder=1.6 if future else 1.5)


# --------------------------------------------------------------------------------------------
# (d) Multi-step attention
# --------------------------------------------------------------------------------------------


def multi_step_attention() -> Figure:
    """One attention per decoder layer: its own query, shared keys z and values z + e."""
    fig, ax = _canvas(12.9, 6.6)
    enc_look = _look(COLOURS["encoder"], "normal")
    att_look = _look(COLOURS["attention"], "normal")
    dec_look = _look(COLOURS["decoder"], "normal")
    _label(ax, (64.5, 63), "Multi-step attention: every decoder layer looks at the source with "
           "its own query", size=TITLE, weight="bold")
    table = _encoder_table(ax, Box(1, 25, 38, 20), enc_look)
    att1, att2 = Box(46, 12, 32, 14), Box(46, 40, 32, 14)
    dec1, dec2 = Box(98, 12, 24, 14), Box(98, 40, 24, 14)
    for layer, att, dec in (("1", att1, dec1), ("2", att2, dec2)):
        _box(ax, att, [f"attention of layer {layer}",
                       f"$a^{layer}_{{ij}} = \\mathrm{{softmax}}_j(d^{layer}_i \\cdot z_j)$",
                       f"$c^{layer}_i = \\sqrt{{m}} \\cdot \\sum_j a^{layer}_{{ij}} (z_j + e_j)$"],
             att_look, line_gap=3.8)
        # h: the GLU output, which builds the query; x: the layer's output (its state)
        _box(ax, dec, [f"decoder layer {layer}", f"causal conv → GLU: $h^{layer}_i$",
                       f"+ context, + residual: $x^{layer}_i$"], dec_look, size=SMALL)
        kv_from = table.at("right", 0.7 if layer == "2" else 0.3)
        _arrow(ax, kv_from, att.at("left"), colour=COLOURS["encoder"], lw=1.8)
        _arrow(ax, dec.at("left", 0.3), att.at("right", 0.3), colour=COLOURS["attention"])
        _arrow(ax, att.at("right", 0.72), dec.at("left", 0.72), colour=COLOURS["attention"])
        gap_x = att.right + 1.0
        _label(ax, (gap_x, att.y + 0.3 * att.h - 1.8),
               f"query $d^{layer}_i = W^{layer} h^{layer}_i + b^{layer} + g_i$", size=SMALL,
               ha="left")
        _label(ax, (gap_x, att.y + 0.72 * att.h + 1.8), f"$c^{layer}_i$ (→ hid) added to "
               f"$h^{layer}_i$", size=SMALL, ha="left")
    _label(ax, (table.right + 1.5, table.cy), "keys z\nvalues z + e", size=SMALL,
           ha="left", colour=COLOURS["encoder"])
    _arrow(ax, dec1.at("top"), dec2.at("bottom"))
    _label(ax, (dec1.cx + 1.5, (dec1.top + dec2.bottom) / 2), "$x^1_i$, with what\n"
           "layer 1 found,\nis layer 2's input", size=SMALL, ha="left")
    g = Box(98, 2, 24, 5.5)
    _box(ax, g, "target embeddings $g_i$", _look(COLOURS["embeddings"], "normal"))
    _arrow(ax, g.at("top"), dec1.at("bottom"))
    # g also goes into every layer's query, up a bus beside the decoder layers
    g_x = dec1.left - 2.5
    _bus(ax, [g.at("left"), (g_x, g.cy), (g_x, dec2.y + 0.3 * dec2.h)],
         COLOURS["embeddings"], 1.6, "g into the queries",
         gaps=[dec1.y + 0.72 * dec1.h])
    _label(ax, (2, 6.8), "Each layer has its own $W^l, b^l$: layer 2's query already holds what "
           "layer 1 found, so it can look again, elsewhere.", size=SMALL, ha="left")
    _label(ax, (2, 3.0), "$h$ is the GLU output (the code's query input; the paper writes the "
           "layer's state). √m is the paper's; the √0.5 on d and z + e is fairseq's.",
           size=SMALL, ha="left", colour="#555555")
    return fig


def _encoder_table(ax, frame: Box, look: Look) -> Box:
    """The encoder output as a table: per source word j, its key z_j and value z_j + e_j."""
    _box(ax, frame, "", look)
    _label(ax, (frame.cx, frame.top - 2.2), "encoder output: one column per source word j",
           size=SMALL, weight="bold", colour=COLOURS["encoder"])
    words = ["ein", "Hund", "läuft", "."]
    cells = Box(frame.x + 9.0, frame.y + 2.0, frame.w - 10.0, frame.h - 6.0)
    col_w = cells.w / len(words)
    row_h = cells.h / 3
    white = Look("white", COLOURS["encoder"], INK, 1.0)
    for j, word in enumerate(words):
        x = cells.x + j * col_w
        _label(ax, (x + col_w / 2, cells.y + 2.5 * row_h), word, size=FONT, style="italic")
        _box(ax, Box(x + 0.3, cells.y + row_h + 0.3, col_w - 0.6, row_h - 0.6),
             f"$z_{j + 1}$", white, rounding=0.3)
        _box(ax, Box(x + 0.3, cells.y + 0.3, col_w - 0.6, row_h - 0.6),
             f"$z_{j + 1} + e_{j + 1}$", white, size=SMALL, rounding=0.3)
    _label(ax, (cells.x - 0.8, cells.y + 1.5 * row_h), "keys", size=SMALL, ha="right")
    _label(ax, (cells.x - 0.8, cells.y + 0.5 * row_h), "values", size=SMALL, ha="right")
    return frame


# --------------------------------------------------------------------------------------------
# Command line: python -m convs2s.course.diagrams --out images
# --------------------------------------------------------------------------------------------

DIAGRAMS = {
    "architecture.png": architecture,
    "conv_glu_block.png": conv_glu_block,
    "padding.png": padding,
    "multi_step_attention.png": multi_step_attention,
}


def _usable_folder(out: Path) -> str | None:
    """Why ``out`` cannot take the PNGs (one line), or None after making sure it exists."""

    from convs2s.system.arguments import dangling_link_problem
    from convs2s.system.atomic_files import cannot_write_in

    dangling = dangling_link_problem(out, "--out")
    if dangling:  # never make a folder at a link's missing target
        return dangling
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file, not a folder: give a folder for the PNGs"
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        return f"cannot create the folder --out {out}: {err.strerror or err}"
    why = cannot_write_in(out)
    if why:
        return f"cannot write into --out {out} ({why}): choose another folder"
    return None


def main(argv: list[str] | None = None) -> int:
    from convs2s.system.arguments import OneLineParser, folder_arg

    parser = OneLineParser(
        prog="python -m convs2s.course.diagrams",
        description="Draw the course's architecture diagrams as PNGs (at 100 dpi): "
                    + ", ".join(DIAGRAMS) + ".")
    parser.add_argument("--out", default="images", type=folder_arg("--out"),
                        help="folder for the PNGs (default: images)")
    args = parser.parse_args(argv)
    plt.switch_backend("Agg")  # files only: no window, no display needed
    from convs2s.system.atomic_files import atomic_write

    out = Path(args.out)
    problem = _usable_folder(out)
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    for name, draw in DIAGRAMS.items():
        fig = draw()
        try:
            atomic_write(out / name, lambda f, fig=fig: fig.savefig(f, format="png", dpi=DPI))
        except OSError as err:
            print(f"error: cannot write {out / name}: {err.strerror or err}", file=sys.stderr)
            return 1
        finally:
            plt.close(fig)
        print(f"wrote {out / name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
