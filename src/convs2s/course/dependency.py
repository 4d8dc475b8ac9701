"""What each output can see: dependency maps measured with autograd, and perturbations.

Notebook 01 measures what the outputs of conv + GLU stacks depend on, notebook 03 what each
prediction of a decoder can see (and what moves when one input token changes), notebook 07 how
many layers connect two words. Every map here is a *measurement* of the package's real layers,
never a drawing made by hand, and every map comes from one function, :func:`measure_dependency`:

- :func:`measure_dependency` -- which inputs each output of any function depends on, measured
  with autograd (True where the gradient of output i with respect to input j is non-zero).
- :func:`dependency_map` -- that measurement on a stack of :class:`~convs2s.model.layers.
  ConvGLUBlock` layers (:func:`~convs2s.course.stacks.conv_glu_stack`) with padding ``"none"``
  (valid), ``"same"`` (encoder) or ``"causal"`` (decoder).
- :func:`visible_positions` -- that measurement on a small random
  :class:`~convs2s.model.decoder.Decoder`, from its token embeddings to its logits.
- :func:`future_leaks`, :func:`dependency_summary`, :func:`describe_dependency` -- where an
  output sees inputs to its right ("the future"), and how far.
- :func:`plot_dependency_map`, :func:`dependency_legend_handles`,
  :func:`draw_dependency_explorer` (the logic of notebook 01's widget), and
  :func:`plot_visible_positions` -- the pictures.
- :func:`perturbation_effect`, :func:`plot_perturbation` -- change one target token of a model
  and see how far every position's logits move (notebook 03's decoder widget).

The formula these maps are checked against is :func:`convs2s.course.receptive_field.
receptive_field`. Convention: a dependency map is a bool tensor ``[n_outputs, n_inputs]``
indexed ``[output position i, input position j]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import torch
from torch import Tensor

from convs2s.course.receptive_field import receptive_field
from convs2s.course.stacks import check_stack, conv_glu_stack, run_stack
from convs2s.model.convs2s import ConvS2S
from convs2s.model.decoder import Decoder
from convs2s.model.encoder import EncoderOut
from convs2s.model.layers import BLOCK_PADDINGS
from convs2s.system.arguments import check_choice, check_whole

__all__ = [
    "MAP_COLOURS",
    "MAP_LABELS",
    "measure_dependency",
    "dependency_map",
    "visible_positions",
    "future_leaks",
    "dependency_summary",
    "describe_dependency",
    "dependency_legend_handles",
    "plot_dependency_map",
    "draw_dependency_explorer",
    "plot_visible_positions",
    "perturbation_effect",
    "plot_perturbation",
]

# Colours of a dependency map: no dependence, dependence on the present or past, on the future.
MAP_COLOURS = ("#ffffff", "#4c72b0", "#e4572e")
MAP_LABELS = ("no dependence", "depends (past or present)", "depends on the FUTURE (j > i)")


def _check_map(dep_map: Tensor) -> None:
    if not isinstance(dep_map, Tensor) or dep_map.dtype != torch.bool or dep_map.dim() != 2:
        raise TypeError(
            "a dependency map is a 2-D bool tensor [n_outputs, n_inputs], e.g. from "
            "dependency_map(...)."
        )


# --------------------------------------------------------------------------------------------
# The measurement, and the two models it is made on
# --------------------------------------------------------------------------------------------


def measure_dependency(
    fn: Callable[[Tensor], Tensor], x: Tensor, *, channels_last: bool = False, seed: int = 0
) -> Tensor:
    """Which inputs each output of ``fn`` depends on, measured with autograd.

    Args:
        fn: maps a batch ``[batch, channels, length]`` (or ``[batch, length, channels]`` with
            ``channels_last=True``) to outputs of the same layout, treating batch elements
            independently (no batch statistics; put modules in eval mode).
        x: one example, ``[1, channels, length]`` (or ``[channels, length]``; channels last if
            ``channels_last``).
        seed: for the random positive weights that combine an output's channels into one number
            (so that channels cannot cancel each other out).

    Returns:
        bool ``[n_outputs, n_inputs]``: entry ``[i, j]`` is True when output position i has a
        non-zero gradient with respect to some channel of input position j.

    One backward pass measures every row: ``x`` is copied once per output position, and copy i
    only back-propagates from output position i. :func:`dependency_map` and
    :func:`visible_positions` are this measurement on a conv + GLU stack and on a decoder.

    Used in notebooks 01 and 03 through those two.
    """
    x = x.detach()
    if x.dim() == 2:
        x = x.unsqueeze(0)
    if x.dim() != 3 or x.size(0) != 1:
        raise ValueError(f"x must be one example [1, C, T] or [C, T], got {tuple(x.shape)}.")
    time_dim = 1 if channels_last else 2
    with torch.no_grad():
        n_out = fn(x).size(time_dim)
    copies = x.expand(n_out, *x.shape[1:]).clone().requires_grad_(True)
    y = fn(copies)
    rows = torch.arange(n_out)
    picked = y[rows, rows, :] if channels_last else y[rows, :, rows]  # [n_out, out_channels]
    g = torch.Generator().manual_seed(seed)
    weights = (torch.rand(picked.shape, generator=g, dtype=torch.float64) + 0.5).to(picked)
    (grad,) = torch.autograd.grad((picked * weights).sum(), copies)
    channel_dim = 2 if channels_last else 1
    return grad.ne(0).any(dim=channel_dim)  # [n_out, n_in]


def dependency_map(
    kernel_size: int,
    n_layers: int,
    padding: str,
    length: int = 16,
    seed: int = 0,
    *,
    hid_dim: int = 4,
) -> Tensor:
    """The measured dependency map of a stack of ``n_layers`` conv+GLU blocks.

    Builds :func:`~convs2s.course.stacks.conv_glu_stack` (the package's
    :class:`~convs2s.model.layers.ConvGLUBlock`, residual included for ``"same"``/``"causal"``),
    feeds it a random ``[1, hid_dim, length]`` input and measures with
    :func:`measure_dependency`. Returns bool ``[n_outputs, length]``; entry ``[i, j]`` is True
    when output i depends on input j.

    With ``"same"`` and ``"causal"``, ``n_outputs == length`` and output i sits at input position
    i. With ``"none"`` the output is r-1 shorter (r = :func:`~convs2s.course.receptive_field.
    receptive_field`), so the map has only ``length - r + 1`` rows; row i is PyTorch's output
    i, computed from inputs i..i+r-1. Lined up with input position i, as a decoder would line
    it up, it looks r-1 steps ahead.

    Used in notebook 01 (and by its checks).
    """
    check_stack(kernel_size, n_layers, padding)
    r = receptive_field(kernel_size, n_layers)
    check_whole(length, "length")
    if padding == "none" and length < r:
        raise ValueError(
            f"Without padding, {n_layers} layers of width {kernel_size} need at least r={r} "
            f"inputs to produce one output; length={length} is too short."
        )
    blocks = conv_glu_stack(kernel_size, n_layers, padding, hid_dim=hid_dim, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(1, hid_dim, length, generator=g, dtype=torch.float64)
    return measure_dependency(lambda t: run_stack(blocks, t, padding), x, seed=seed)


def _probe_decoder(kernel_size: int, n_layers: int, padding: str, max_positions: int,
                   seed: int) -> Decoder:
    """A small random Decoder (float64, eval mode, no dropout) with ``padding``."""
    torch.manual_seed(seed)
    decoder = Decoder(
        11, emb_dim=8, hid_dim=8, n_layers=n_layers, kernel_size=kernel_size, dropout=0.0,
        max_positions=max_positions, pad_idx=1, padding=padding,
    )
    return decoder.double().eval()


def visible_positions(
    kernel_size: int, n_layers: int, padding: str, length: int, *, seed: int = 0
) -> Tensor:
    """Which decoder inputs each decoder output depends on, **measured** with autograd.

    Builds a small random :class:`convs2s.model.decoder.Decoder` with ``n_layers`` layers of
    width ``kernel_size`` and ``padding`` ("causal" or "same"), feeds it a random target of
    ``length`` tokens (and a random encoder output to attend to), and measures with
    :func:`measure_dependency` which of the decoder's token embeddings (inputs ``j``) each
    position's logits (outputs ``i``) depend on. Entry ``[i, j]`` is True when the prediction at
    ``i`` can see input ``j``.

    The gradient is exactly zero outside the receptive field (no weight connects the two
    positions), so the test ``!= 0`` is exact. Nothing here uses the receptive-field formula:
    for causal padding you should find the band ``i - n_layers·(kernel_size - 1) <= j <= i``;
    with "same" padding, columns right of the diagonal light up too: the decoder sees the
    tokens it is asked to predict. Building the decoder seeds torch's global random state with
    ``seed``.

    Returns a bool tensor ``[length, length]`` (rows: outputs ``i``, columns: inputs ``j``).

    Used in notebooks 03 and 07.
    """
    check_choice(padding, "padding", BLOCK_PADDINGS)
    for name, value in (("kernel_size", kernel_size), ("n_layers", n_layers),
                        ("length", length)):
        check_whole(value, name)
    decoder = _probe_decoder(kernel_size, n_layers, padding, length, seed)
    g = torch.Generator().manual_seed(seed + 1)
    trg_in = torch.randint(2, 11, (1, length), generator=g)
    # A random "encoder output" for 4 source tokens: attention needs something to look at.
    z = torch.randn(1, 4, 8, generator=g, dtype=torch.float64)
    encoded = EncoderOut(z, z + torch.randn(1, 4, 8, generator=g, dtype=torch.float64),
                         torch.ones(1, 4, dtype=torch.bool))

    def logits_from_embeddings(embedded: Tensor) -> Tensor:
        """The decoder's logits with ``embedded`` ([n, length, emb_dim], n copies of the
        sentence) in place of its token embeddings: [n, length, vocab]."""
        n = embedded.size(0)
        copies = EncoderOut(*(t.expand(n, *t.shape[1:]) for t in encoded))
        handle = decoder.tok_embedding.register_forward_hook(lambda *_: embedded)
        try:
            logits, _ = decoder(trg_in.expand(n, length), copies)
        finally:
            handle.remove()
        return logits

    with torch.no_grad():
        embedded = decoder.tok_embedding(trg_in)  # embedded = [1, length, emb_dim]
    return measure_dependency(logits_from_embeddings, embedded, channels_last=True, seed=seed)


# --------------------------------------------------------------------------------------------
# What a map says
# --------------------------------------------------------------------------------------------


def future_leaks(dep_map: Tensor) -> Tensor:
    """The True entries of ``dep_map`` with j > i: output i depends on a later input j.

    Used in notebook 01 through :func:`dependency_summary` and :func:`plot_dependency_map`.
    """
    _check_map(dep_map)
    return dep_map & torch.ones_like(dep_map).triu(diagonal=1)


def dependency_summary(dep_map: Tensor) -> dict[str, int]:
    """Numbers that describe a dependency map.

    Returns a dict with
        ``n_outputs``, ``n_inputs``: the map's shape;
        ``receptive_field``: the most inputs any single output depends on;
        ``leaking_outputs``: how many outputs depend on at least one later input (j > i);
        ``max_lookahead``: the largest j - i over all dependencies (0 if none looks ahead);
        ``max_lookback``: the largest i - j (0 if none looks back).

    Used in notebook 01 (and by its checks).
    """
    _check_map(dep_map)
    n_out, n_in = dep_map.shape
    out = {
        "n_outputs": n_out,
        "n_inputs": n_in,
        "receptive_field": 0,
        "leaking_outputs": 0,
        "max_lookahead": 0,
        "max_lookback": 0,
    }
    if not bool(dep_map.any()):
        return out
    rows, cols = dep_map.nonzero(as_tuple=True)
    offsets = cols - rows
    out["receptive_field"] = int(dep_map.sum(dim=1).max())
    out["leaking_outputs"] = int(future_leaks(dep_map).any(dim=1).sum())
    out["max_lookahead"] = max(int(offsets.max()), 0)
    out["max_lookback"] = max(int(-offsets.min()), 0)
    return out


def describe_dependency(summary: dict[str, int]) -> str:
    """One line of text for a :func:`dependency_summary`.

    Used in notebook 01.
    """
    s = summary
    text = f"receptive field {s['receptive_field']} inputs; "
    if s["leaking_outputs"]:
        text += (
            f"{s['leaking_outputs']} of {s['n_outputs']} outputs see the FUTURE "
            f"(up to {s['max_lookahead']} positions ahead)"
        )
    else:
        text += f"no output sees the future (looks back up to {s['max_lookback']} positions)"
    return text


# --------------------------------------------------------------------------------------------
# Pictures
# --------------------------------------------------------------------------------------------


def dependency_legend_handles() -> list:
    """Legend entries for the three colours of :func:`plot_dependency_map`.

    For a figure with several maps: ``fig.legend(handles=dependency.dependency_legend_handles(),
    loc="lower center", ncol=3)``.

    Used in notebook 01.
    """
    from matplotlib.patches import Patch

    return [
        Patch(facecolor=c, edgecolor="#999999", label=lab)
        for c, lab in zip(MAP_COLOURS, MAP_LABELS, strict=True)
    ]


def plot_dependency_map(
    ax,
    dep_map: Tensor,
    *,
    title: str | None = None,
    input_labels: Sequence[str] | None = None,
    output_labels: Sequence[str] | None = None,
    legend: bool = True,
):
    """Draw ``dep_map`` on the matplotlib Axes ``ax``; future leaks (j > i) in a distinct colour.

    Rows are output positions, columns input positions; the dashed line marks i = j. Optional
    ``input_labels``/``output_labels`` (e.g. tokens) label the ticks. ``legend=True`` puts the
    colour legend to the right of the Axes. Returns the ``AxesImage``.

    Used in notebook 01.
    """
    from matplotlib.colors import ListedColormap

    _check_map(dep_map)
    n_out, n_in = dep_map.shape
    codes = dep_map.long() + future_leaks(dep_map).long()  # 0 none, 1 past/present, 2 future
    image = ax.imshow(
        codes.numpy(),
        cmap=ListedColormap(MAP_COLOURS),
        vmin=0,
        vmax=2,
        interpolation="nearest",
        origin="upper",
    )
    # Thin grid between cells and the diagonal i = j.
    ax.set_xticks([j - 0.5 for j in range(n_in + 1)], minor=True)
    ax.set_yticks([i - 0.5 for i in range(n_out + 1)], minor=True)
    ax.grid(which="minor", color="#dddddd", linewidth=0.5)
    ax.tick_params(which="minor", length=0)
    diag = min(n_out, n_in)
    ax.plot([-0.5, diag - 0.5], [-0.5, diag - 0.5], ls="--", lw=0.8, color="#555555")
    if input_labels is not None:
        ax.set_xticks(range(n_in), list(input_labels), rotation=90)
    if output_labels is not None:
        ax.set_yticks(range(n_out), list(output_labels))
    ax.set_xlabel("input position j")
    ax.set_ylabel("output position i")
    if title is not None:
        ax.set_title(title)
    if legend:
        ax.legend(
            handles=dependency_legend_handles(),
            loc="upper left",
            bbox_to_anchor=(1.02, 1.0),
            fontsize=9,
            frameon=False,
        )
    return image


def draw_dependency_explorer(
    ax, kernel_size: int, n_layers: int, padding: str, *, length: int = 16
) -> str:
    """Notebook 01's widget: measure the map for these settings, draw it, return a text line.

    Settings the layers reject (an even kernel with ``"same"``, a ``"none"`` stack longer than
    the sequence) are not errors here: the Axes shows the reason and the text line returns it.

    Used in notebook 01.
    """
    try:
        dep = dependency_map(kernel_size, n_layers, padding, length=length)
    except ValueError as e:
        ax.clear()
        ax.text(0.5, 0.5, str(e), ha="center", va="center", wrap=True, fontsize=9)
        ax.set_axis_off()
        return f"not possible: {e}"
    r = receptive_field(kernel_size, n_layers)
    summary = dependency_summary(dep)
    plot_dependency_map(
        ax, dep, title=f"k={kernel_size}, L={n_layers}, padding={padding!r}", legend=True
    )
    formula = f"r = 1 + L·(k-1) = 1 + {n_layers}·{kernel_size - 1} = {r}"
    return f"{formula}; measured: {describe_dependency(summary)}"


def _axes_or_new(ax, figsize):
    if ax is not None:
        return ax.figure, ax
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=figsize)
    return fig, ax


def plot_visible_positions(visible: Tensor, *, ax=None, highlight: int | None = None,
                           title: str | None = None):
    """Draw a :func:`visible_positions` map: rows = predictions, columns = inputs.

    Cells right of the diagonal (the future) are drawn red when visible, the past and present
    dark blue (colours and labels of a decoder: "prediction at position i", "token fed in").
    ``highlight`` outlines one input column (the token a perturbation changes). Returns the axes.

    Used in notebook 03.
    """
    from matplotlib.colors import ListedColormap
    from matplotlib.patches import Rectangle

    v = torch.as_tensor(visible).bool().cpu().numpy()
    n = v.shape[0]
    _, ax = _axes_or_new(ax, (4, 4))
    future = np.triu(np.ones_like(v, dtype=bool), k=1)
    codes = np.where(v & future, 2, np.where(v, 1, 0))  # 0 hidden, 1 past/present, 2 future
    cmap = ListedColormap(["#f2f2f2", "#1f4e79", "#d62728"])
    ax.imshow(codes, cmap=cmap, vmin=0, vmax=2, interpolation="nearest")
    ax.set_xlabel("decoder input position j (token fed in)")
    ax.set_ylabel("prediction at position i")
    step = max(1, n // 8)
    ax.set_xticks(range(0, n, step))
    ax.set_yticks(range(0, n, step))
    if highlight is not None:
        ax.add_patch(Rectangle((highlight - 0.5, -0.5), 1, n, fill=False, edgecolor="orange",
                               linewidth=2))
    leaks = int((v & future).sum())
    ax.set_title(title if title is not None else f"visible inputs ({leaks} future cells seen)")
    return ax


# --------------------------------------------------------------------------------------------
# Perturbation: change one input token, see what moves
# --------------------------------------------------------------------------------------------


@torch.no_grad()
def perturbation_effect(
    model: ConvS2S, src: Tensor, trg_in: Tensor, position: int, *, new_token: int | None = None
) -> Tensor:
    """How much every position's logits move when the target token at ``position`` changes.

    Runs ``model(src, trg_in)`` in eval mode twice: as given, and with ``trg_in[:, position]``
    replaced by ``new_token`` (by default the next id that is not the padding token, wrapping
    around the vocabulary). Returns ``[trg_len]``: for each position the largest absolute logit
    change (max over the vocabulary and the batch). A causal decoder gives exactly 0 before
    ``position``; a "same"-padded one also moves earlier positions: they were reading it.

    The model's train/eval mode is restored afterwards.

    Used in notebook 03.
    """
    if trg_in.dim() != 2:
        raise ValueError(f"trg_in must be [batch, trg_len], got shape {tuple(trg_in.shape)}.")
    trg_len = trg_in.size(1)
    if not isinstance(position, int) or not 0 <= position < trg_len:
        raise ValueError(f"position={position!r} must be an int in [0, {trg_len - 1}].")
    vocab = model.config["trg_vocab_size"]
    pad = model.config["trg_pad_idx"]
    changed = trg_in.clone()
    if new_token is None:
        old = changed[:, position]
        new = (old + 1) % vocab
        new = torch.where(new == pad, (new + 1) % vocab, new)
        changed[:, position] = new
    else:
        if not 0 <= new_token < vocab:
            raise ValueError(f"new_token={new_token} is not a token id below {vocab}.")
        changed[:, position] = new_token
    was_training = model.training
    model.eval()
    try:
        encoded = model.encode(src)
        before, _ = model.decode(trg_in, encoded)  # [batch, trg_len, vocab]
        after, _ = model.decode(changed, encoded)  # [batch, trg_len, vocab]
    finally:
        model.train(was_training)
    return (after - before).abs().amax(dim=(0, 2))  # [trg_len]


def plot_perturbation(effect: Tensor, position: int, *, ax=None, tokens: Sequence[str] | None
                      = None, title: str | None = None):
    """Bar chart of :func:`perturbation_effect`: max |Δ logits| per position.

    Bars at positions before ``position`` are red (a causal decoder must leave them at 0), the
    changed position orange, later positions blue. ``tokens`` labels the x axis.
    Returns the axes.

    Used in notebook 03.
    """
    e = torch.as_tensor(effect).detach().double().cpu().numpy()
    n = len(e)
    _, ax = _axes_or_new(ax, (5, 3))
    colors = ["#d62728" if i < position else "#ff7f0e" if i == position else "#1f77b4"
              for i in range(n)]
    ax.bar(range(n), e, color=colors)
    ax.set_xlabel("output position i" + (" (input token)" if tokens is not None else ""))
    ax.set_ylabel("max |Δ logits|")
    if tokens is not None:
        ax.set_xticks(range(n))
        ax.set_xticklabels(list(tokens), rotation=90, fontsize=9)
    ax.axvline(position, color="#ff7f0e", linestyle=":", linewidth=1)
    moved_before = int((e[:position] > 0).sum())
    ax.set_title(title if title is not None else
                 f"change token {position}: {moved_before} earlier positions move")
    return ax
