"""What a model's attention looks like: one heatmap per decoder layer, and how spread it is.

Used by notebooks 04, 06 and 07 (and by :mod:`convs2s.course.analysis`):

- :func:`attention_entropy`: how spread out each layer's attention is, in nats (notebook 04
  measures it per layer of a trained model, 07 compares ConvS2S with the recurrent baseline).
- :func:`plot_attention_grid`: one heatmap per decoder layer with token labels and one shared
  colour scale.
- :func:`plot_sentence_attention`: notebook 04's widget, one translation's grid titled with each
  layer's entropy (:func:`entropy_titles`), the translation and its reference.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import torch
from torch import Tensor

from convs2s.course import figure_data

__all__ = ["attention_entropy", "entropy_titles", "plot_attention_grid",
           "plot_sentence_attention"]


def attention_entropy(attention: Tensor, *, per_row: bool = False) -> Tensor:
    """Entropy (in nats) of attention distributions, averaged per layer.

    ``attention`` is ``[layers, trg_len, src_len]`` (one sentence, e.g. from
    ``Translator.translate_with_attention``) or ``[trg_len, src_len]`` (one layer); every row
    is a distribution over source positions. Returns ``[layers]`` (the mean over target rows),
    or with ``per_row=True`` the entropy of every row, ``[layers, trg_len]``.

    Uniform attention over ``m`` source tokens has entropy ``log(m)``; attention on a single
    token has entropy 0. Zero weights (e.g. padding) contribute nothing (0·log 0 = 0).

    Used in notebooks 04, 06 and 07.
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

    Returns the figure. A figure made here carries the numbers it draws (the attention, the
    labels, the titles): displayed in a notebook, its output stores them beside the PNG
    (:mod:`convs2s.course.figure_data`), which the course's website draws again for a phone.
    The shared scale (0 .. the largest weight in any layer) makes the layers
    comparable: a sharper layer shows brighter, fewer cells.

    Used in notebooks 04, 06 and 07.
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
    made_here = axes is None and fig is None
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
    if made_here:  # its numbers go with the picture, for the website's phone drawing
        figure_data.attach(fig, "attention", attention=a.tolist(), src_tokens=list(src_tokens),
                           trg_tokens=list(trg_tokens),
                           titles=[ax.get_title() for ax in axes[:n_layers]])
    return fig


def entropy_titles(attention: Tensor) -> list[str]:
    """Each decoder layer's title in notebook 04's attention maps: its number and its
    :func:`attention_entropy` (``"layer 1: H = 1.76"``). ``attention``: ``[layers, trg_len,
    src_len]``. Pure."""
    h = attention_entropy(attention)
    if h.dim() == 0:  # one layer given as [trg_len, src_len]
        h = h.unsqueeze(0)
    return [f"layer {i + 1}: H = {float(v):.2f}" for i, v in enumerate(h)]


def plot_sentence_attention(translation, reference: str):
    """Notebook 04's widget: every decoder layer's attention behind one translation, side by
    side (:func:`plot_attention_grid`, titled by :func:`entropy_titles`), under the translation
    and its ``reference``. ``translation``: what ``Translator.translate_with_attention`` gives
    (its ``attention``, ``source_tokens``, ``tokens`` and ``text``). Returns the new figure (the
    numbers it draws go with it, as :func:`plot_attention_grid`'s)."""
    attention = translation.attention
    a = torch.as_tensor(attention)
    layers = a.shape[0] if a.dim() == 3 else 1  # side by side: one row of every layer
    fig = plot_attention_grid(attention, translation.source_tokens, translation.tokens,
                              ncols=layers, titles=entropy_titles(attention), cell=0.22)
    fig.suptitle(f"{translation.text}\n(reference: {reference})", y=1.06, fontsize=9)
    return fig
