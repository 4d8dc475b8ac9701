"""Small stacks of the package's conv + GLU blocks, built and run for the course's measurements.

Notebook 01 builds stacks with these functions; the measurements of :mod:`~convs2s.course.
dependency` (what each output sees), :mod:`~convs2s.course.gates` (GLU against GTU) and
:mod:`~convs2s.course.normalisation` (variance through a stack) all run on them:

- :func:`conv_glu_stack` -- freshly initialised :class:`~convs2s.model.layers.ConvGLUBlock` s
  (paper init, eval mode, float64), seeded without touching torch's global random state.
- :func:`pad_sequence` -- the zeros a width-k convolution needs for padding ``"none"`` (valid),
  ``"same"`` (encoder) or ``"causal"`` (decoder).
- :func:`stack_activations` -- the one loop that runs a stack layer by layer and keeps every
  layer's output, with or without residual connections (scaled by √0.5 or not). Variances,
  standard deviations and gradients per layer are all read off its list.
- :func:`run_stack` -- a stack's output: its blocks' own ``forward``, or convolution + GLU
  without any padding.

Conventions: stacks work in ``Conv1d`` layout ``[batch, channels, length]``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from convs2s.model.layers import ConvGLUBlock, check_padding
from convs2s.system.arguments import check_choice, check_whole

__all__ = ["STACK_PADDINGS", "pad_sequence", "conv_glu_stack", "stack_activations", "run_stack"]

STACK_PADDINGS = ("none", "same", "causal")
"""The paddings a course stack takes: the model's blocks' two
(:data:`~convs2s.model.layers.BLOCK_PADDINGS`) and ``"none"``. ``"none"``: no padding (a
"valid" convolution; every layer shortens the sequence by k-1). ``"same"``: (k-1)/2 zeros on
each side (the encoder). ``"causal"``: k-1 zeros on the left (the decoder)."""
PADDINGS = STACK_PADDINGS  # the name notebook 01 uses


def check_stack(kernel_size: int, n_layers: int, padding: str | None = None) -> None:
    """Raise ``ValueError`` with one clear line unless these settings make a stack."""
    check_whole(kernel_size, "kernel_size")
    check_whole(n_layers, "n_layers", least=0)
    if padding is not None:
        check_padding(padding, kernel_size, STACK_PADDINGS)


def pad_sequence(x: Tensor, kernel_size: int, padding: str) -> Tensor:
    """``x`` (``[batch, channels, length]``) with the zeros a width-``k`` convolution needs.

    ``"none"``: unchanged. ``"same"``: (k-1)/2 zeros on each side. ``"causal"``: k-1 zeros on the
    left. With ``"same"`` or ``"causal"`` the convolution's output has ``x``'s length.

    Used in notebook 01.
    """
    check_stack(kernel_size, 0, padding)
    k = kernel_size
    if padding == "same":
        return F.pad(x, ((k - 1) // 2, (k - 1) // 2))
    if padding == "causal":
        return F.pad(x, (k - 1, 0))
    return x


def conv_glu_stack(
    kernel_size: int,
    n_layers: int,
    padding: str,
    *,
    hid_dim: int = 4,
    residual: bool = True,
    seed: int = 0,
    dtype: torch.dtype = torch.float64,
) -> list[ConvGLUBlock]:
    """``n_layers`` freshly initialised :class:`ConvGLUBlock` s (eval mode, paper init).

    The weights depend only on ``seed``; torch's global random state is left untouched. For
    ``padding="none"`` the blocks are built as causal blocks, but :func:`run_stack` calls their
    convolution without any padding.

    Used in notebook 01.
    """
    check_stack(kernel_size, n_layers, padding)
    block_padding = "causal" if padding == "none" else padding
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        blocks = [
            ConvGLUBlock(hid_dim, kernel_size, padding=block_padding, residual=residual)
            for _ in range(n_layers)
        ]
    return [b.to(dtype).eval() for b in blocks]


def stack_activations(
    layers: Sequence[Callable[[Tensor], Tensor]],
    x: Tensor,
    *,
    residual_scale: float | None = None,
    mask: Tensor | None = None,
) -> list[Tensor]:
    """``x`` and the output of every layer of a stack: ``[x_0 = x, x_1, ..., x_L]``.

    Without ``residual_scale`` each layer's output is the next layer's input,
    ``x_{l+1} = f_l(x_l)`` (a plain stack, or blocks that add their own residual). With it,
    ``x_{l+1} = (f_l(x_l) + x_l)·residual_scale``: √0.5 is the paper's residual block, 1.0 the
    same without the scale. ``mask`` (bool ``[batch, length]``, True on real tokens) zeroes the
    padding positions of ``x_l`` before each layer, as :class:`ConvGLUBlock` does.

    Runs with autograd as the caller has it, so gradients per layer can be taken from the list
    (call it under ``torch.no_grad()`` for the forward pass alone).

    Used in notebooks 01 and 02 through :func:`convs2s.course.gates.gate_gradient_norms` and
    :func:`convs2s.course.normalisation.glu_stack_variances`.
    """
    outs = [x]
    for layer in layers:
        if mask is not None:
            x = x.masked_fill(~mask.unsqueeze(1), 0.0)
        h = layer(x)  # h = [batch, hid_dim, length]
        x = h if residual_scale is None else (h + x) * residual_scale
        outs.append(x)
    return outs


def run_stack(blocks: Sequence[ConvGLUBlock], x: Tensor, padding: str) -> Tensor:
    """Apply ``blocks`` in turn to ``x`` (``[batch, hid_dim, length]``).

    ``"same"``/``"causal"``: each block's own ``forward`` (padding, convolution, GLU and, if the
    block has one, the √0.5 residual). ``"none"``: convolution + GLU without padding and without
    residual (the output is k-1 shorter than the input, so ``x`` cannot be added to it).

    Used in notebook 01 through :func:`convs2s.course.dependency.dependency_map`, and by its
    checks.
    """
    check_choice(padding, "padding", STACK_PADDINGS)
    if padding == "none":
        layers = [lambda t, b=block: F.glu(b.conv(t), dim=1) for block in blocks]  # k-1 shorter
    else:
        layers = list(blocks)
    return stack_activations(layers, x)[-1]
