"""Poke a model and see what moves: the measurements behind notebooks 03 and 04.

Used by notebooks 03 and 04; 06 and 07 draw attention maps with :func:`plot_attention_grid`
(07 also reads receptive fields with :func:`visible_positions`).

Every function here *measures* a real ``convs2s`` model instead of computing an answer from a
formula, so the notebooks can put the formula next to the measurement:

- :func:`visible_positions`: which decoder inputs each prediction depends on, read off the
  gradients of a freshly built decoder (causal padding: the past only; "same": also the future).
- :func:`perturbation_effect`: change one target token and report, per position, how much the
  logits moved. The decoder widget of notebook 03 draws it as a bar chart.
- :func:`attention_entropy`: how spread out each layer's attention is (notebook 04 measures it
  per layer of a trained model).
- :func:`plot_visible_positions`, :func:`plot_perturbation`, :func:`plot_attention_grid`:
  plotting helpers that draw on matplotlib axes you pass in (or create a figure).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from convs2s.model.convs2s import ConvS2S
from convs2s.model.decoder import Decoder
from convs2s.model.encoder import EncoderOut
from convs2s.model.layers import PADDINGS

__all__ = [
    "visible_positions",
    "perturbation_effect",
    "attention_entropy",
    "plot_visible_positions",
    "plot_perturbation",
    "plot_attention_grid",
]


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

    Builds a small random :class:`convs2s.model.decoder.Decoder` with ``n_layers`` layers of width
    ``kernel_size`` and ``padding`` ("causal" or "same"), feeds it a random target of
    ``length`` tokens (and a random encoder output to attend to), and for every output
    position ``i`` back-propagates a random projection of its logits to the decoder's token
    embeddings. Entry ``[i, j]`` is True when that gradient at input position ``j`` is not
    zero, i.e. when the prediction at ``i`` can see input ``j``.

    The gradient is exactly zero outside the receptive field (no weight connects the two
    positions), so the test ``!= 0`` is exact. Nothing here uses the receptive-field formula:
    for causal padding you should find the band ``i - n_layers·(kernel_size - 1) <= j <= i``;
    with "same" padding, columns right of the diagonal light up too: the decoder sees the
    tokens it is asked to predict.

    Returns a bool tensor ``[length, length]`` (rows: outputs ``i``, columns: inputs ``j``).
    """
    if padding not in PADDINGS:
        raise ValueError(f"padding={padding!r} is not known; choose one of {PADDINGS}.")
    for name, value in (("kernel_size", kernel_size), ("n_layers", n_layers),
                        ("length", length)):
        if not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be a positive integer.")
    decoder = _probe_decoder(kernel_size, n_layers, padding, length, seed)
    g = torch.Generator().manual_seed(seed + 1)
    trg_in = torch.randint(2, 11, (1, length), generator=g)
    # A random "encoder output" for 4 source tokens: attention needs something to look at.
    z = torch.randn(1, 4, 8, generator=g, dtype=torch.float64)
    encoded = EncoderOut(z, z + torch.randn(1, 4, 8, generator=g, dtype=torch.float64),
                         torch.ones(1, 4, dtype=torch.bool))

    captured: list[Tensor] = []

    def make_leaf(_module, _inputs, output):
        # Replace the token embeddings by a leaf tensor, so that we can ask for its gradient.
        leaf = output.detach().requires_grad_(True)
        captured.append(leaf)
        return leaf

    handle = decoder.tok_embedding.register_forward_hook(make_leaf)
    try:
        logits, _ = decoder(trg_in, encoded)  # logits = [1, length, vocab]
    finally:
        handle.remove()
    leaf = captured[0]  # [1, length, emb_dim]
    direction = torch.randn(logits.shape[-1], generator=g, dtype=logits.dtype)
    visible = torch.zeros(length, length, dtype=torch.bool)
    for i in range(length):
        (grad,) = torch.autograd.grad(logits[0, i] @ direction, leaf, retain_graph=True)
        visible[i] = grad[0].abs().sum(dim=-1) > 0  # [length]: input j influences output i
    return visible


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


def attention_entropy(attention: Tensor, *, per_row: bool = False) -> Tensor:
    """Entropy (in nats) of attention distributions, averaged per layer.

    ``attention`` is ``[layers, trg_len, src_len]`` (one sentence, e.g. from
    ``Translator.translate_with_attention``) or ``[trg_len, src_len]`` (one layer); every row
    is a distribution over source positions. Returns ``[layers]`` (the mean over target rows),
    or with ``per_row=True`` the entropy of every row, ``[layers, trg_len]``.

    Uniform attention over ``m`` source tokens has entropy ``log(m)``; attention on a single
    token has entropy 0. Zero weights (e.g. padding) contribute nothing (0·log 0 = 0).
    """
    a = torch.as_tensor(attention, dtype=torch.float64)
    squeeze = a.dim() == 2
    if squeeze:
        a = a.unsqueeze(0)
    if a.dim() != 3:
        raise ValueError(
            f"attention must be [layers, trg_len, src_len] or [trg_len, src_len], got shape "
            f"{tuple(a.shape)}."
        )
    plogp = torch.where(a > 0, a * torch.log(a.clamp_min(1e-300)), torch.zeros_like(a))
    rows = -plogp.sum(dim=-1)  # [layers, trg_len]
    out = rows if per_row else rows.mean(dim=-1)
    return out[0] if squeeze else out


# --------------------------------------------------------------------------------------------
# Plotting helpers (matplotlib is imported lazily)
# --------------------------------------------------------------------------------------------


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
    dark blue. ``highlight`` outlines one input column (the token a perturbation changes).
    Returns the axes.
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


def plot_perturbation(effect: Tensor, position: int, *, ax=None, tokens: Sequence[str] | None
                      = None, title: str | None = None):
    """Bar chart of :func:`perturbation_effect`: max |Δ logits| per position.

    Bars at positions before ``position`` are red (a causal decoder must leave them at 0), the
    changed position orange, later positions blue. ``tokens`` labels the x axis.
    Returns the axes.
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


def plot_attention_grid(
    attention: Tensor,
    src_tokens: Sequence[str],
    trg_tokens: Sequence[str],
    *,
    axes=None,
    fig=None,
    ncols: int | None = None,
    titles: Sequence[str] | None = None,
    cmap: str = "viridis",
    cell: float = 0.28,
):
    """One heatmap per decoder layer, token labels on both axes, one shared colour scale.

    Args:
        attention: ``[layers, trg_len, src_len]`` (rows: target tokens produced, columns:
            source tokens).
        src_tokens, trg_tokens: labels for the columns and the rows.
        axes: a sequence of at least ``layers`` matplotlib axes to draw on; extra axes are
            hidden. Otherwise ``fig`` (a Figure to add subplots to) or a new figure is used.
        ncols: heatmaps per row when the axes are created here (default: up to 4).
        titles: per-layer titles (default "layer 1", "layer 2", ...).
        cell: inches per token when a new figure is made.

    Returns the figure. The shared scale (0 .. the largest weight in any layer) makes the layers
    comparable: a sharper layer shows brighter, fewer cells.
    """
    a = torch.as_tensor(attention).detach().float().cpu()
    if a.dim() == 2:
        a = a.unsqueeze(0)
    if a.dim() != 3:
        raise ValueError(f"attention must be [layers, trg_len, src_len], got {tuple(a.shape)}.")
    n_layers, trg_len, src_len = a.shape
    if len(src_tokens) != src_len or len(trg_tokens) != trg_len:
        raise ValueError(
            f"attention is [{n_layers}, {trg_len}, {src_len}] but got {len(trg_tokens)} target "
            f"and {len(src_tokens)} source labels."
        )
    if axes is None:
        import matplotlib.pyplot as plt

        ncols = ncols or min(n_layers, 4)
        label_every = ncols
        nrows = math.ceil(n_layers / ncols)
        width = max(2.5, cell * src_len + 1.2)
        height = max(2.0, cell * trg_len + 1.0)
        if fig is None:
            fig = plt.figure(figsize=(width * ncols, height * nrows))
        axes = fig.subplots(nrows, ncols, squeeze=False).ravel()
    else:
        axes = list(np.ravel(np.asarray(axes, dtype=object)))
        label_every = 1
        if len(axes) < n_layers:
            raise ValueError(f"{n_layers} layers need {n_layers} axes, got {len(axes)}.")
        fig = axes[0].figure
    vmax = float(a.max()) if a.numel() else 1.0
    image = None
    for layer in range(n_layers):
        ax = axes[layer]
        image = ax.imshow(a[layer].numpy(), cmap=cmap, vmin=0.0, vmax=vmax, aspect="auto",
                          interpolation="nearest")
        ax.set_xticks(range(src_len))
        ax.set_xticklabels(list(src_tokens), rotation=90, fontsize=9)
        ax.set_yticks(range(trg_len))
        first_in_row = layer % label_every == 0
        # Panels in one row share their rows: token labels on the first panel of a row only.
        ax.set_yticklabels(list(trg_tokens) if first_in_row else [], fontsize=9)
        ax.set_title(titles[layer] if titles is not None else f"layer {layer + 1}", fontsize=10)
        ax.set_xlabel("source token")
        if first_in_row:
            ax.set_ylabel("target token")
    for ax in axes[n_layers:]:
        ax.set_visible(False)
    if image is not None:
        fig.colorbar(image, ax=list(axes[:n_layers]), fraction=0.03, pad=0.02,
                     label="attention weight")
    return fig
