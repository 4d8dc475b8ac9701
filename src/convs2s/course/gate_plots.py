"""Notebook 01's three measured figures, drawn for the notebook and for a phone's column.

- :func:`gate_curves` / :func:`plot_gate_curves`: GLU next to ReLU, tanh, the sigmoid gate and
  the GTU along ``A = B = x``, and the derivative of each gate's output with respect to its
  content half ``A`` when the gate is mostly open (``B = 2``), measured with autograd;
- :func:`gradient_norms` / :func:`plot_gradient_norms`: the gradient's norm at every layer of
  a 20-layer gated stack without residuals (``gates.gate_gradient_norms``), GLU against GTU,
  at two input scales, over several seeds;
- :func:`padding_maps` / :func:`plot_padding_maps`: what each output of a conv-GLU stack
  depends on, for the three paddings (``dependency.dependency_map``, drawn with
  ``dependency.plot_dependency_map``).

Each drawing has two layouts: ``narrow=False``, the notebook's (panels side by side), and
``narrow=True``, the panels one above the other in a figure :data:`NARROW_INCHES` wide with
every text 9 pt or more and the legends under the panels, which the course's website shows
on a phone (``tools/site/figures.py`` draws it again from the same functions and arguments).

Used in notebook 01.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from convs2s.course import dependency, gates, normalisation, stacks

#: A narrow drawing's width: a 375 px phone's output column is 320-345 CSS px, and 3.3 inches
#: (317 px) keep 9 pt text at 12 px there.
NARROW_INCHES = 3.3
#: The smallest text of a narrow drawing, in points.
NARROW_TEXT = 9
#: The two input scales notebook 01 measures the gradient at: the encoder's at initialisation
#: (notebook 02 measures it) and a large one.
SCALES = {"encoder scale (std 0.14)": normalisation.ENCODER_INPUT_STD,
          "large inputs (std 1)": 1.0}


@dataclass
class GateCurves:
    """What :func:`plot_gate_curves` draws: ``curves`` {name: output} along ``x`` (A = B = x),
    and ``slopes`` {name: ∂output/∂A} along ``a`` with the gate input B fixed at ``b``."""

    x: Tensor
    curves: dict[str, Tensor]
    a: Tensor
    slopes: dict[str, Tensor]
    b: float


def gate_curves(lo: float = -4.0, hi: float = 4.0, n: int = 161, b: float = 2.0) -> GateCurves:
    """The activation curves and the gates' slopes of notebook 01's first figure (``n`` points
    from ``lo`` to ``hi``; the slopes measured with autograd at B = ``b``)."""
    x = torch.linspace(lo, hi, n)  # x = [n]
    curves = {
        "ReLU": torch.relu(x),
        "tanh": torch.tanh(x),
        "sigmoid gate σ(x)": torch.sigmoid(x),
        "GLU  x·σ(x)": x * torch.sigmoid(x),
        "GTU  tanh(x)·σ(x)": torch.tanh(x) * torch.sigmoid(x),
    }
    a = torch.linspace(lo, hi, n, requires_grad=True)  # a = [n]
    b_open = torch.full_like(a, b)  # b_open = [n]
    (d_glu,) = torch.autograd.grad((a * torch.sigmoid(b_open)).sum(), a)
    (d_gtu,) = torch.autograd.grad((torch.tanh(a) * torch.sigmoid(b_open)).sum(), a)
    return GateCurves(x, curves, a.detach(), {"GLU: ∂/∂A = σ(B)": d_glu,
                                              "GTU: ∂/∂A = tanh'(A)·σ(B)": d_gtu}, b)


def _panels(n: int, narrow: bool, wide_size: tuple[float, float], panel_height: float):
    """A figure of ``n`` panels: side by side at ``wide_size``, or one above the other
    :data:`NARROW_INCHES` wide, ``panel_height`` each."""
    import matplotlib.pyplot as plt

    if narrow:
        fig, axes = plt.subplots(n, 1, figsize=(NARROW_INCHES, panel_height * n),
                                 layout="constrained")
    else:
        fig, axes = plt.subplots(1, n, figsize=wide_size)
    return fig, list(axes)


def _legend(ax, narrow: bool) -> None:
    """The panel's legend: in the panel (the notebook's), or under it on a phone, where the
    panel is too narrow to hold it beside its curves."""
    if narrow:
        ax.legend(fontsize=NARROW_TEXT, loc="upper center", bbox_to_anchor=(0.5, -0.33),
                  frameon=False)
    else:
        ax.legend(fontsize=9)


def _title(ax, text: str, narrow: bool) -> None:
    """The panel's title, on lines of at most 30 characters on a phone (about what 3.3 inches
    hold at the titles' 12 pt)."""
    import textwrap

    ax.set_title(textwrap.fill(text, 30) if narrow else text)


def _finish(fig, narrow: bool, rect=None) -> None:
    if narrow:  # laid out by its constrained layout, with room for the legends under panels
        fig.get_layout_engine().set(h_pad=0.1)
    elif rect is None:
        fig.tight_layout()
    else:
        fig.tight_layout(rect=rect)


def plot_gate_curves(data: GateCurves, *, narrow: bool = False):
    """Left (top on a phone): the functions along A = B = x. Right (below): each gate's slope
    with respect to A. Returns the figure."""
    fig, (ax1, ax2) = _panels(2, narrow, (10, 3.4), 3.9)
    for name, y in data.curves.items():
        ax1.plot(data.x, y, label=name, ls="--" if name.startswith("sigmoid") else "-")
    ax1.set_xlabel("x (A = B = x)")
    ax1.set_ylabel("output")
    ax1.set_ylim(-1.5, 4)
    _title(ax1, "activation functions", narrow)
    _legend(ax1, narrow)
    for name, slope in data.slopes.items():
        ax2.plot(data.a, slope, label=name)
    ax2.set_xlabel(f"A  (gate input B fixed at {data.b:g})")
    ax2.set_ylabel("∂ output / ∂A")
    _title(ax2, "the linear path, measured with autograd", narrow)
    _legend(ax2, narrow)
    _finish(fig, narrow)
    return fig


def gradient_norms(n_seeds: int, scales: dict[str, float] | None = None,
                   n_layers: int = 20) -> dict[tuple[str, str], Tensor]:
    """{(scale's name, gate): [n_seeds, n_layers + 1]}: ``gates.gate_gradient_norms`` of every
    gate (:data:`gates.GATES`) at every scale (default :data:`SCALES`), seeds 0 ..
    ``n_seeds - 1``."""
    scales = SCALES if scales is None else scales
    return {(name, kind): torch.stack([
        gates.gate_gradient_norms(kind, n_layers=n_layers, input_std=std, seed=s)
        for s in range(n_seeds)])
        for name, std in scales.items() for kind in gates.GATES}


def plot_gradient_norms(norms: dict[tuple[str, str], Tensor], *, narrow: bool = False):
    """One panel per input scale: every seed's gradient norm by layer (thin) and their median
    (thick), GLU against GTU; a scale named "large..." on a log axis (the two gates are orders
    of magnitude apart there). Returns the figure."""
    scales = list(dict.fromkeys(name for name, _ in norms))
    fig, axes = _panels(len(scales), narrow, (10, 3.4), 3.9)
    for ax, scale_name in zip(axes, scales, strict=True):
        for kind, colour in zip(gates.GATES, ("C0", "C3"), strict=True):
            n = norms[(scale_name, kind)]
            layers = range(n.shape[1])
            for i, row in enumerate(n):
                ax.plot(layers, row, color=colour, alpha=0.15,
                        label=f"{kind.upper()}, single seeds" if i == 0 else None)
            ax.plot(layers, n.median(dim=0).values, color=colour, lw=2,
                    label=f"{kind.upper()}, median of {n.shape[0]}")
        if scale_name.startswith("large"):
            ax.set_yscale("log")
            if narrow:  # 1e8, not 10 with a superscript 8: a superscript is 0.7 of the size
                from matplotlib.ticker import FuncFormatter

                ax.yaxis.set_major_formatter(FuncFormatter(_power_of_ten))
        last = n.shape[1] - 1
        ax.set_xticks(range(0, last + 1, 5))
        ax.set_xlabel(f"layer l\n(0 = stack input, {last} = output)" if narrow
                      else f"layer l (0 = input of the stack, {last} = output)")
        ax.set_ylabel("‖grad at layer l‖ /\n‖grad at output‖" if narrow
                      else "‖grad at layer l‖ / ‖grad at output‖")
        _title(ax, scale_name, narrow)
        _legend(ax, narrow)
    _finish(fig, narrow)
    return fig


def _power_of_ten(value: float, _position=None) -> str:
    """A log axis's tick as ``1e8`` (``1`` for 10^0)."""
    import math

    power = round(math.log10(value)) if value > 0 else 0
    return "1" if power == 0 else f"1e{power}"


def padding_maps(k: int, n_layers: int, length: int) -> dict[str, Tensor]:
    """{padding: ``dependency.dependency_map``} for each of :data:`stacks.PADDINGS`."""
    return {padding: dependency.dependency_map(k, n_layers, padding, length=length)
            for padding in stacks.PADDINGS}


def plot_padding_maps(maps: dict[str, Tensor], k: int, n_layers: int, *,
                      narrow: bool = False):
    """Each padding's map (``dependency.plot_dependency_map``), titled with the padding, k and
    L, and one legend of the three colours. Returns the figure."""
    fig, axes = _panels(len(maps), narrow, (12, 4.4), 3.3)
    for ax, (padding, dep) in zip(axes, maps.items(), strict=True):
        dependency.plot_dependency_map(ax, dep, legend=False)
        _title(ax, f"padding={padding!r}  (k={k}, L={n_layers})", narrow)
    handles = dependency.dependency_legend_handles()
    if narrow:
        fig.legend(handles=handles, loc="outside lower center", ncol=1, frameon=False,
                   fontsize=NARROW_TEXT)
    else:
        fig.legend(handles=handles, loc="lower center", ncol=3, frameon=False)
    _finish(fig, narrow, rect=(0, 0.06, 1, 1))
    return fig
