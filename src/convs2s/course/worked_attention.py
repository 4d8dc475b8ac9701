"""Small helpers for teaching attention with numbers you can check by hand (notebook 04).

- :func:`attention_with_weights`: a :class:`convs2s.model.attention.Attention` holding exactly the
  weights you give it (no weight normalisation), so a worked example on 2-dimensional vectors
  can be checked against the package's attention.
- :func:`measured_context_variance`: *measures* (with random values, not with a formula) the
  variance of the √m-scaled context for given attention weights: how far the length scaling
  over-corrects when attention is not uniform.
- :func:`describe_per_layer`: a sentence about a per-layer measurement (e.g. attention entropy)
  computed from the numbers, so that the notebook's words stay true of its stored outputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import Tensor

from convs2s.model.attention import Attention

__all__ = ["attention_with_weights", "measured_context_variance", "describe_per_layer"]


def _matrix(value, name: str) -> Tensor:
    t = torch.as_tensor(value, dtype=torch.get_default_dtype())
    if t.dim() != 2:
        raise ValueError(f"{name} must be a matrix [out_features, in_features], got shape "
                         f"{tuple(t.shape)}.")
    return t


def attention_with_weights(W_d, b_d, W_out, b_out) -> Attention:
    """An :class:`~convs2s.model.attention.Attention` whose projections are exactly these weights.

    ``W_d = [emb_dim, hid_dim]`` and ``b_d = [emb_dim]`` make the query from the decoder's
    ``h``; ``W_out = [hid_dim, emb_dim]`` and ``b_out = [hid_dim]`` project the context back.
    The module has no weight normalisation (its ``.weight`` *is* the matrix you pass) and is
    in eval mode. Raises ValueError when the shapes do not fit together.
    """
    W_d, W_out = _matrix(W_d, "W_d"), _matrix(W_out, "W_out")
    b_d = torch.as_tensor(b_d, dtype=W_d.dtype)
    b_out = torch.as_tensor(b_out, dtype=W_out.dtype)
    emb_dim, hid_dim = W_d.shape
    if tuple(W_out.shape) != (hid_dim, emb_dim):
        raise ValueError(f"W_d is [{emb_dim}, {hid_dim}] (emb_dim, hid_dim), so W_out must be "
                         f"[{hid_dim}, {emb_dim}]; got {list(W_out.shape)}.")
    if tuple(b_d.shape) != (emb_dim,) or tuple(b_out.shape) != (hid_dim,):
        raise ValueError(f"b_d must have {emb_dim} entries and b_out {hid_dim}; got "
                         f"{list(b_d.shape)} and {list(b_out.shape)}.")
    att = Attention(hid_dim, emb_dim, weight_norm=False)
    with torch.no_grad():
        att.hid2emb.weight.copy_(W_d)
        att.hid2emb.bias.copy_(b_d)
        att.emb2hid.weight.copy_(W_out)
        att.emb2hid.bias.copy_(b_out)
    return att.eval()


def measured_context_variance(attention: Tensor, *, draws: int = 512, seed: int = 0) -> Tensor:
    """Measured variance of ``√m · Σ_j a_ij v_j`` for independent values ``v_j`` of variance 1.

    ``attention`` is ``[..., rows, m]``: rows of weights over the ``m`` real source tokens
    (padding already cut off). For every row this draws ``draws`` random value vectors
    ``v ~ N(0, 1)^m``, applies the row's weights and the length scale √m, and returns the
    empirical variance, shaped ``[..., rows]``. Uniform weights give about 1 (the paper's
    assumption); weights concentrated on few tokens give more: that is how far the √m factor
    over-scales a peaked attention. A measurement, so expect noise of about ``√(2/draws)``
    (relative) per row; average over many rows.
    """
    a = torch.as_tensor(attention, dtype=torch.float64)
    if a.dim() < 2 or a.size(-1) < 1:
        raise ValueError(f"attention must be [..., rows, m] with m >= 1, got {tuple(a.shape)}.")
    if draws < 2:
        raise ValueError(f"draws={draws} must be at least 2 to estimate a variance.")
    m = a.size(-1)
    g = torch.Generator().manual_seed(seed)
    values = torch.randn(m, draws, generator=g, dtype=torch.float64)  # values = [m, draws]
    context = (a @ values) * math.sqrt(m)  # context = [..., rows, draws]
    return context.var(dim=-1)  # [..., rows]


def describe_per_layer(values: Sequence[float], quantity: str = "entropy",
                       unit: str = "nats") -> str:
    """One sentence about a per-layer measurement, computed from the numbers as it shows them
    (two decimals): "falls with every layer" / "rises with every layer" only when every shown
    step does; "the same in every layer", or "falls (rises) overall, not at every layer" when
    some shown steps are level; otherwise where the lowest and highest values are, and that the
    change is not monotonic.
    """
    v = [float(x) for x in values]
    if not v:
        raise ValueError("values must hold one number per layer, got none.")
    shown = [round(x, 2) for x in v]  # what the sentence shows is what it describes
    path = " → ".join(f"{x:.2f}" for x in v)
    if len(v) == 1:
        return f"{quantity}: {path} {unit} (one layer)"
    steps = [b - a for a, b in zip(shown, shown[1:], strict=False)]
    if all(s == 0 for s in steps):
        return f"{quantity} is the same in every layer ({path} {unit})"
    if all(s < 0 for s in steps):
        return f"{quantity} falls with every layer ({path} {unit})"
    if all(s > 0 for s in steps):
        return f"{quantity} rises with every layer ({path} {unit})"
    if all(s <= 0 for s in steps):
        return f"{quantity} falls overall, not at every layer ({path} {unit})"
    if all(s >= 0 for s in steps):
        return f"{quantity} rises overall, not at every layer ({path} {unit})"
    low = min(range(len(v)), key=shown.__getitem__)
    high = max(range(len(v)), key=shown.__getitem__)
    return (f"{quantity} is lowest in layer {low + 1} and highest in layer {high + 1}; it does "
            f"not change monotonically with depth ({path} {unit})")
