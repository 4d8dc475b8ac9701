"""GLU against GTU: why the paper gates its convolutions with A ⊗ σ(B), measured.

Notebook 01 compares the gated linear unit (GLU, A ⊗ σ(B), the paper's choice) with the gated
tanh unit (GTU, tanh(A) ⊗ σ(B), of WaveNet/PixelCNN) that Dauphin et al. (2017) measure it
against, on the package's own convolutions:

- :func:`gate` -- either gate, on the two halves of a tensor.
- :func:`gate_gradient_norms` -- the gradient's norm at every layer of a deep stack of gated
  convolutions without residual connections (the gradient has to pass every gate).
- :func:`gate_activation_stds` -- the forward pass of the same stack: the activations' scale
  per layer.

Both run their stack with :func:`convs2s.course.stacks.stack_activations`.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor

from convs2s.course.normalisation import ENCODER_INPUT_STD
from convs2s.course.stacks import conv_glu_stack, pad_sequence, stack_activations
from convs2s.system.arguments import check_choice

__all__ = ["GATES", "gate", "gate_gradient_norms", "gate_activation_stds"]

GATES = ("glu", "gtu")
"""``"glu"``: A ⊗ σ(B) (the paper's gated linear unit). ``"gtu"``: tanh(A) ⊗ σ(B) (the gated
tanh unit of WaveNet/PixelCNN that Dauphin et al. 2017 compare it with)."""


def gate(h: Tensor, kind: str = "glu", dim: int = 1) -> Tensor:
    """Split ``h`` into halves A, B along ``dim`` and gate: GLU A⊗σ(B) or GTU tanh(A)⊗σ(B).

    Used in notebook 01.
    """
    check_choice(kind, "gate", GATES)
    a, b = h.chunk(2, dim=dim)
    return (a if kind == "glu" else torch.tanh(a)) * torch.sigmoid(b)


def _gated_stack(
    kind: str, n_layers: int, input_std: float, hid_dim: int, kernel_size: int, length: int,
    batch: int, seed: int,
) -> tuple[list[Callable[[Tensor], Tensor]], Tensor, torch.Generator]:
    """The layers ``h -> gate(conv(pad(h)))`` of ``n_layers`` fresh ConvGLUBlock convolutions
    (no residual), a random input ``[batch, hid_dim, length]`` of std ``input_std``, and the
    generator that drew it (its next draws are the caller's)."""
    check_choice(kind, "gate", GATES)
    blocks = conv_glu_stack(
        kernel_size,
        n_layers,
        "same",
        hid_dim=hid_dim,
        residual=False,
        seed=seed,
        dtype=torch.float64,
    )
    layers = [
        lambda h, b=block: gate(b.conv(pad_sequence(h, kernel_size, "same")), kind)
        for block in blocks
    ]  # each maps [batch, hid_dim, length] to the same shape
    g = torch.Generator().manual_seed(seed + 1)
    x = input_std * torch.randn(batch, hid_dim, length, generator=g, dtype=torch.float64)
    return layers, x, g


def gate_gradient_norms(
    kind: str = "glu",
    *,
    n_layers: int = 20,
    input_std: float = ENCODER_INPUT_STD,
    hid_dim: int = 32,
    kernel_size: int = 3,
    length: int = 32,
    batch: int = 8,
    seed: int = 0,
) -> Tensor:
    """Relative gradient norms through a deep stack of gated convolutions WITHOUT residuals.

    Every layer is the convolution of a :class:`~convs2s.model.layers.ConvGLUBlock` (paper
    initialisation) followed by the gate ``kind`` (:data:`GATES`); no residual connection, so
    the gradient has to pass through every gate. The input is random with standard deviation
    ``input_std``; the loss is a fixed random projection of the output. The same seed gives the
    same weights and input for both gates, so only the gate differs.

    Returns ``[n_layers + 1]``: entry l is ‖∂loss/∂(input of layer l)‖ divided by
    ‖∂loss/∂output‖; entry 0 is the stack's input, entry ``n_layers`` the output (1.0).

    Used in notebook 01.
    """
    layers, x, g = _gated_stack(kind, n_layers, input_std, hid_dim, kernel_size, length, batch,
                                seed)
    activations = stack_activations(layers, x.requires_grad_(True))  # n_layers + 1 tensors
    out = activations[-1]  # out = [batch, hid_dim, length]
    proj = torch.randn(out.shape, generator=g, dtype=torch.float64)
    grads = torch.autograd.grad((out * proj).sum(), activations)
    norms = torch.stack([gr.norm() for gr in grads])
    return (norms / norms[-1]).float()


def gate_activation_stds(
    kind: str = "glu",
    *,
    n_layers: int = 20,
    input_std: float = ENCODER_INPUT_STD,
    hid_dim: int = 32,
    kernel_size: int = 3,
    length: int = 32,
    batch: int = 8,
    seed: int = 0,
) -> Tensor:
    """The forward pass of :func:`gate_gradient_norms`'s stack: activation std per layer.

    Same weights and input as :func:`gate_gradient_norms` for the same arguments. Returns
    ``[n_layers + 1]``: entry 0 is the input's standard deviation, entry l the output's of
    layer l.

    Used in notebook 01.
    """
    layers, x, _ = _gated_stack(kind, n_layers, input_std, hid_dim, kernel_size, length, batch,
                                seed)
    with torch.no_grad():
        activations = stack_activations(layers, x)
    return torch.stack([h.std() for h in activations]).float()
