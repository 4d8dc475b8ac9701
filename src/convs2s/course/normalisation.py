"""The paper's §3.4-3.5 (normalisation, initialisation) and weight normalisation, measured.

Notebook 02 draws its figures from these functions (notebook 01 takes the encoder's input
scale, :data:`ENCODER_INPUT_STD`). Each builds small, seeded models from the package's own
layers, measures one thing and returns numbers; nothing here changes what the model computes
(switching the encoder's gradient scaling off sets ``grad_scale`` on one instance, as a reader
would). Every measurement through a stack runs it with one loop,
:func:`convs2s.course.stacks.stack_activations`.

- :func:`encoder_gradient`: one backward pass of a small :class:`~convs2s.model.convs2s.ConvS2S` at
  initialisation; how much gradient reaches the encoder's output z, through the keys and through
  the values, and how much enters its convolution stack, with or without the scaling by
  1/(2·attention layers) (§3.4, fairseq's factor).
- :func:`glu_variance_ratio`: Var(A ⊗ σ(B)) / Var(A) for Gaussian halves, the 1/4 of the
  paper's Appendix A that the "factor 4" of the initialisation undoes.
- :func:`glu_stack_variances`: the activation variance through a stack of conv + GLU layers,
  with the paper's N(0, 4/n) convolutions, without the factor 4, or with PyTorch's default;
  with residual connections scaled by √0.5 (§3.4), unscaled, or none.
- :func:`residual_stack_activations`: every block's output of given conv + GLU blocks with
  residual connections, scaled by √0.5 or not (e.g. an encoder's blocks without the scale).
- :func:`encoder_depth_profile`: activation scale and gradient through a
  :class:`~convs2s.model.encoder.Encoder` built with ``init="paper"`` or ``init="pytorch"``.
- :func:`weight_norm_parts`, :func:`weight_from_parts`, :func:`weight_norm_gradients`: what
  weight normalisation stores (g and v, w = g·v/‖v‖) and what its gradients look like.

Conventions: convolution stacks use ``Conv1d``'s layout ``[batch, channels, length]``; every
function leaves PyTorch's global random state as it found it.
"""

from __future__ import annotations

import contextlib
import copy
import math
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from convs2s.course.stacks import pad_sequence, stack_activations
from convs2s.model.convs2s import ConvS2S
from convs2s.model.encoder import Encoder, EncoderOut
from convs2s.model.layers import RESIDUAL_SCALE, ConvGLUBlock, make_conv1d
from convs2s.system.arguments import check_choice, check_whole

ENCODER_INPUT_STD = 0.14
"""The scale the encoder's first block sees at initialisation: token and position embeddings are
both drawn from N(0, 0.1²) (paper §3.5), so e = w + p has variance 0.02 (std ≈ 0.14), and the
emb->hid projection is initialised to keep it. GLU is not scale-invariant (σ(B) ≈ 0.5 only for
small B), so the measurements of stacks (here and in :mod:`convs2s.course.gates`) default to
this scale."""

CONV_INITS = ("paper", "paper without the 4", "pytorch")
"""Initialisations of a convolution that feeds a GLU, for :func:`glu_stack_variances`:
``"paper"`` N(0, 4/n_l) (§3.5, what ``make_conv1d(glu=True)`` draws), ``"paper without the 4"``
N(0, 1/n_l) (the rule for layers *not* followed by a GLU), ``"pytorch"`` PyTorch's default
(Kaiming-uniform weights, uniform biases). n_l = kernel_size · in_channels."""


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Build modules from ``seed`` without touching the caller's random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _norm(params) -> float:
    grads = [p.grad for p in params if p.grad is not None]
    return math.sqrt(sum(float(g.double().pow(2).sum()) for g in grads))


# --------------------------------------------------------------------------------------------
# §3.4: scaling the gradient that reaches the encoder
# --------------------------------------------------------------------------------------------


def encoder_gradient(
    dec_layers: int,
    *,
    scaled: bool = True,
    enc_layers: int = 4,
    emb_dim: int = 32,
    hid_dim: int = 64,
    kernel_size: int = 3,
    vocab: int = 60,
    batch: int = 16,
    src_len: int = 12,
    trg_len: int = 10,
    seed: int = 0,
) -> dict[str, float]:
    """How much gradient reaches the encoder of a fresh ConvS2S, with or without §3.4's scaling.

    Builds ``ConvS2S`` (paper initialisation, weight norm, dropout 0) with ``dec_layers``
    decoder layers, i.e. ``dec_layers`` attentions, each of which reads the encoder output z
    twice: as keys, and inside the values (z + e)·√0.5. A random batch (made-up token ids)
    gives a cross-entropy loss; one backward pass. ``scaled=False`` sets the encoder's
    ``grad_scale`` to 1 on this instance (the forward pass is the same either way).

    Returns floats:
        ``grad_scale``: the factor applied, 1/(2·dec_layers) or 1;
        ``at_z``: ‖∂loss/∂z‖, what arrives at z from all attentions (before the scaling);
        ``via_keys``, ``via_values``: the parts of ``at_z`` that come through the keys and
        through the values (measured on a second pass with two separate copies of z);
        ``keys_plus_values``: ‖the two added‖, equal to ``at_z`` (a consistency check);
        ``into_stack``: ‖gradient entering the convolution stack‖ (at the output of its
        last linear map hid2emb), ``grad_scale`` times ``at_z`` at the real tokens;
        ``encoder_blocks``, ``decoder_blocks``: ‖gradient‖ of all weights of the encoder's,
        and of the decoder's, convolutional blocks;
        ``source_embeddings``: ‖gradient‖ of the source token embeddings (they also get
        gradient through e in the values, which is never scaled).

    Used in notebook 02.
    """
    check_whole(dec_layers, "dec_layers")
    check_whole(enc_layers, "enc_layers")
    with _seeded(seed):
        model = ConvS2S(vocab, vocab, emb_dim=emb_dim, hid_dim=hid_dim, enc_layers=enc_layers,
                        dec_layers=dec_layers, kernel_size=kernel_size, dropout=0.0,
                        max_positions=max(src_len, trg_len) + 1, src_pad_idx=1, trg_pad_idx=1)
    if not scaled:
        model.encoder.grad_scale = 1.0
    g = torch.Generator().manual_seed(seed + 1)
    src = torch.randint(4, vocab, (batch, src_len), generator=g)  # src = [batch, src_len]
    trg = torch.randint(4, vocab, (batch, trg_len + 1), generator=g)  # [batch, trg_len + 1]

    def loss_of(encoded) -> Tensor:
        logits, _ = model.decode(trg[:, :-1], encoded)  # logits = [batch, trg_len, vocab]
        return F.cross_entropy(logits.reshape(-1, vocab), trg[:, 1:].reshape(-1))

    stack_out: list[Tensor] = []

    def keep(_module, _inputs, output: Tensor) -> None:  # hid2emb's output, the stack's end
        output.retain_grad()
        stack_out.append(output)

    hook = model.encoder.hid2emb.register_forward_hook(keep)
    try:
        encoded = model.encode(src)
    finally:
        hook.remove()
    encoded.conved.retain_grad()  # z after the scaling node: what arrives from the decoder
    loss_of(encoded).backward()
    out = {
        "grad_scale": float(model.encoder.grad_scale),
        "at_z": float(encoded.conved.grad.norm()),
        "into_stack": float(stack_out[0].grad.norm()),
        "encoder_blocks": _norm(model.encoder.blocks.parameters()),
        "decoder_blocks": _norm(model.decoder.blocks.parameters()),
        "source_embeddings": _norm([model.encoder.tok_embedding.weight]),
    }

    # Keys and values separately: the same numbers, with z fed as two independent leaves.
    with torch.no_grad():
        z = model.encode(src).conved  # z = [batch, src_len, emb_dim]
        positions = torch.arange(src_len)
        e = model.encoder.tok_embedding(src) + model.encoder.pos_embedding(positions)
    z_keys = z.clone().requires_grad_(True)
    z_values = z.clone().requires_grad_(True)
    split = EncoderOut(conved=z_keys, combined=(z_values + e) * RESIDUAL_SCALE,
                       src_mask=src != 1)
    grad_keys, grad_values = torch.autograd.grad(loss_of(split), (z_keys, z_values))
    out["via_keys"] = float(grad_keys.norm())
    out["via_values"] = float(grad_values.norm())
    out["keys_plus_values"] = float((grad_keys + grad_values).norm())
    return out


# --------------------------------------------------------------------------------------------
# §3.5: initialisation
# --------------------------------------------------------------------------------------------


def glu_variance_ratio(input_std: float, *, n: int = 200_000, seed: int = 0) -> float:
    """Var(A ⊗ σ(B)) / Var(A) for independent A, B ~ N(0, input_std²) (``n`` samples).

    The paper's Appendix A: for inputs of mean 0 and "sufficiently small variance" the GLU's
    output has about 1/4 of its input's variance (σ(B) ≈ 1/2 + B/4). For larger inputs the
    gate saturates towards 0 or 1 and more than 1/4 passes.

    Used in notebook 02.
    """
    if not input_std > 0:
        raise ValueError(f"input_std={input_std!r} must be > 0.")
    check_whole(n, "n", least=2)
    g = torch.Generator().manual_seed(seed)
    a = input_std * torch.randn(n, generator=g, dtype=torch.float64)  # a = [n]
    b = input_std * torch.randn(n, generator=g, dtype=torch.float64)  # b = [n]
    return float((a * torch.sigmoid(b)).var() / a.var())


def _glu_conv(hid_dim: int, kernel_size: int, conv_init: str) -> nn.Module:
    if conv_init == "paper":
        return make_conv1d(hid_dim, 2 * hid_dim, kernel_size, glu=True)
    if conv_init == "paper without the 4":
        return make_conv1d(hid_dim, 2 * hid_dim, kernel_size, glu=False)
    return make_conv1d(hid_dim, 2 * hid_dim, kernel_size, init="pytorch")


def glu_stack_variances(
    conv_init: str = "paper",
    *,
    n_layers: int = 10,
    residual: bool = True,
    scale: bool = True,
    input_std: float = ENCODER_INPUT_STD,
    hid_dim: int = 64,
    kernel_size: int = 3,
    length: int = 32,
    batch: int = 16,
    seed: int = 0,
) -> Tensor:
    """Activation variance through ``n_layers`` conv + GLU layers, relative to the input's.

    Each layer is ``GLU(conv(pad(x)))`` ("same" padding, no weight norm: it does not change the
    initial weights), with the convolution initialised as ``conv_init`` (:data:`CONV_INITS`);
    with ``residual=True`` the layer returns ``(GLU(conv(x)) + x)·√0.5``, the encoder's block,
    or ``GLU(conv(x)) + x`` with ``scale=False`` (the block without §3.4's scale). The input is
    random with standard deviation ``input_std``.

    Returns float ``[n_layers + 1]``: entry l is Var(output of layer l) / Var(input); entry 0
    is 1. The same seed draws the same input for every ``conv_init``, and with
    ``conv_init="paper"`` the same weights as :func:`convs2s.course.stacks.conv_glu_stack`.

    Used in notebook 02.
    """
    check_choice(conv_init, "conv_init", CONV_INITS)
    check_whole(n_layers, "n_layers", least=0)
    if kernel_size % 2 == 0:
        raise ValueError(f"kernel_size={kernel_size} must be odd ('same' padding).")
    with _seeded(seed):
        convs = [_glu_conv(hid_dim, kernel_size, conv_init).double() for _ in range(n_layers)]
    g = torch.Generator().manual_seed(seed + 1)
    x = input_std * torch.randn(batch, hid_dim, length, generator=g, dtype=torch.float64)
    pad = (kernel_size - 1) // 2
    layers = [lambda h, c=conv: F.glu(c(F.pad(h, (pad, pad))), dim=1) for conv in convs]
    residual_scale = (RESIDUAL_SCALE if scale else 1.0) if residual else None
    with torch.no_grad():
        activations = stack_activations(layers, x, residual_scale=residual_scale)
    v = torch.stack([h.var() for h in activations])
    return (v / v[0]).float()


def residual_stack_activations(
    blocks: Sequence[ConvGLUBlock],
    x: Tensor,
    *,
    scale: bool = True,
    mask: Tensor | None = None,
) -> list[Tensor]:
    """``x`` and the output of every block of ``x_{l+1} = (GLU(conv(x_l)) + x_l)·s``.

    ``s`` is √0.5 with ``scale=True`` (the paper; then this is exactly what blocks built with
    ``residual=True`` compute) and 1 with ``scale=False``. The blocks' own ``residual`` flag is
    ignored: their padding, dropout and convolution are used, the residual is added here.
    ``mask`` (bool ``[batch, length]``, True on real tokens) zeroes padding before each block,
    as :class:`~convs2s.model.layers.ConvGLUBlock` does.

    Used in notebook 02 (and by its checks).
    """
    layers = [
        lambda h, b=block: F.glu(
            b.conv(pad_sequence(b.dropout(h), b.kernel_size, b.padding)), dim=1
        )  # [batch, hid_dim, length]
        for block in blocks
    ]
    residual_scale = RESIDUAL_SCALE if scale else 1.0
    return stack_activations(layers, x, residual_scale=residual_scale, mask=mask)


def encoder_depth_profile(
    init: str = "paper",
    *,
    n_layers: int = 10,
    emb_dim: int = 32,
    hid_dim: int = 64,
    kernel_size: int = 3,
    vocab: int = 100,
    batch: int = 16,
    src_len: int = 20,
    seed: int = 0,
) -> dict[str, Tensor | float]:
    """Activation scale and gradient through a fresh ``Encoder(init=init)``, block by block.

    The encoder (weight norm, dropout 0) reads random tokens (no padding); the loss is a fixed
    random projection of z. The pass is the encoder's own: embeddings, emb2hid, its blocks,
    hid2emb (the test checks that z equals ``encoder(src).conved``).

    Returns:
        ``embedding_std``: std of e = w + p;
        ``forward_std``: ``[n_layers + 1]`` std of the conv stack's input (entry 0) and of the
        output of each block;
        ``backward``: ``[n_layers + 1]`` ‖∂loss/∂(that activation)‖ divided by the same at the
        last block's output (entry ``n_layers`` is 1);
        ``z_std``: std of z;
        ``z``: z itself, ``[batch, src_len, emb_dim]`` (detached).

    Used in notebook 02.
    """
    check_whole(n_layers, "n_layers", least=0)
    with _seeded(seed):
        enc = Encoder(vocab, emb_dim=emb_dim, hid_dim=hid_dim, n_layers=n_layers,
                      kernel_size=kernel_size, dropout=0.0, max_positions=src_len,
                      pad_idx=1, init=init)
    g = torch.Generator().manual_seed(seed + 1)
    src = torch.randint(4, vocab, (batch, src_len), generator=g)  # src = [batch, src_len]
    e = enc.tok_embedding(src) + enc.pos_embedding(torch.arange(src_len))  # [batch, len, emb]
    x = enc.emb2hid(e).transpose(1, 2)  # x = [batch, hid_dim, src_len]
    xs = stack_activations(list(enc.blocks), x)  # each [batch, hid_dim, src_len]
    z = enc.hid2emb(xs[-1].transpose(1, 2))  # z = [batch, src_len, emb_dim]
    proj = torch.randn(z.shape, generator=g)
    grads = torch.autograd.grad((z * proj).sum(), xs)
    norms = torch.stack([gr.norm() for gr in grads])
    return {
        "embedding_std": float(e.detach().std()),
        "forward_std": torch.stack([t.detach().std() for t in xs]),
        "backward": norms / norms[-1],
        "z_std": float(z.detach().std()),
        "z": z.detach(),
    }


# --------------------------------------------------------------------------------------------
# Weight normalisation (Salimans & Kingma, 2016), used by the paper on every layer
# --------------------------------------------------------------------------------------------


def weight_norm_parts(module: nn.Module) -> tuple[Tensor, Tensor]:
    """``(g, v)`` of a module built with ``weight_norm=True`` (``make_linear``/``make_conv1d``).

    g has one entry per output unit (shape ``[out, 1]`` or ``[out, 1, 1]``), v the weight's
    shape; the module's ``weight`` is recomputed from them as g·v/‖v‖ at every use.

    Used in notebook 02.
    """
    try:
        parts = module.parametrizations.weight
        return parts.original0, parts.original1
    except AttributeError:
        raise ValueError(
            f"{type(module).__name__} is not weight-normalised; build it with "
            "weight_norm=True (make_linear, make_conv1d, or a convs2s model's layers)."
        ) from None


def weight_from_parts(g: Tensor, v: Tensor) -> Tensor:
    """w = g·v/‖v‖, the norm of each output unit's row of v (every dimension but the first).

    Used in notebook 02.
    """
    dims = tuple(range(1, v.dim()))
    return g * v / v.norm(dim=dims, keepdim=True)


def weight_norm_gradients(
    module: nn.Module, x: Tensor, *, v_scale: float = 1.0, seed: int = 0
) -> dict[str, Tensor]:
    """The gradients of a weight-normalised layer, on a copy whose v is multiplied by ``v_scale``.

    Scaling v does not change w = g·v/‖v‖, so the copy computes exactly what ``module``
    computes; only the gradients change. The loss is a fixed random projection of
    ``module(x)``. Returns (all detached):
        ``weight``: the copy's w (equal to ``module.weight``);
        ``grad_g``, ``grad_v``: ∂loss/∂g and ∂loss/∂v;
        ``grad_w``: ∂loss/∂w of the same layer without weight norm (the plain gradient);
        ``cosine``: per output unit, the cosine between its rows of ∂loss/∂v and v (0: the
        gradient only turns v, it cannot lengthen it).

    Used in notebook 02.
    """
    if not v_scale > 0:
        raise ValueError(f"v_scale={v_scale!r} must be > 0.")
    layer = copy.deepcopy(module)
    g, v = weight_norm_parts(layer)
    with torch.no_grad():
        v.mul_(v_scale)
    out = layer(x)
    proj = torch.randn(out.shape, generator=torch.Generator().manual_seed(seed), dtype=out.dtype)
    grad_g, grad_v = torch.autograd.grad((out * proj).sum(), (g, v))

    # The plain gradient ∂loss/∂w: the same computation with w as a leaf.
    w = layer.weight.detach().clone().requires_grad_(True)
    if isinstance(layer, nn.Conv1d):
        plain = F.conv1d(x, w, layer.bias)
    else:
        plain = F.linear(x, w, layer.bias)
    (grad_w,) = torch.autograd.grad((plain * proj).sum(), w)
    rows_v, rows_gv = v.detach().flatten(1), grad_v.flatten(1)  # [out, fan_in]
    return {
        "weight": layer.weight.detach(),
        "grad_g": grad_g.detach(),
        "grad_v": grad_v.detach(),
        "grad_w": grad_w.detach(),
        "cosine": F.cosine_similarity(rows_gv, rows_v, dim=1),
    }
