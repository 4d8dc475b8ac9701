"""Building blocks shared by the encoder and the decoder of ConvS2S (Gehring et al., 2017).

This module holds the pieces that the paper describes once and uses everywhere:

- the initialisation of §3.5 (``make_embedding``, ``make_linear``, ``make_conv1d``),
- optional weight normalisation (Salimans & Kingma, 2016), which the paper uses on every layer,
- ``ConvGLUBlock``: dropout -> 1-D convolution -> gated linear unit (GLU), §3.2,
- ``GradMultiply``: an identity in the forward pass that scales the gradient (§3.4),
- the scale factors, each named and explained where it is defined.

Tensors inside the convolution stacks use PyTorch's ``Conv1d`` layout, ``[batch, channels, len]``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm as _weight_norm

from convs2s.system.arguments import check_choice, check_fraction, check_whole

RESIDUAL_SCALE = math.sqrt(0.5)
"""Multiply the sum of two terms by √0.5 (paper §3.4).

If ``a`` and ``b`` have the same variance and are roughly independent, ``Var(a + b)`` is twice
that variance; multiplying by √0.5 halves it again, so activations keep their scale however many
residual blocks are stacked. The paper admits the equal-variance assumption "is not always true but
effective in practice". Used for every residual connection, for the attention query
``(W h + b + g)·√0.5`` and for the encoder's ``combined = (z + e)·√0.5``.
"""

INITS = ("paper", "pytorch")
#: The paddings a conv + GLU block takes: ``"same"`` ((k-1)/2 zeros on each side, the
#: encoder's) and ``"causal"`` (k-1 zeros on the left, the decoder's).
BLOCK_PADDINGS = ("same", "causal")


# --------------------------------------------------------------------------------------------
# Initialisation (paper §3.5) and weight normalisation
# --------------------------------------------------------------------------------------------


def make_embedding(
    num_embeddings: int,
    embedding_dim: int,
    *,
    padding_idx: int | None = None,
    init: str = "paper",
) -> nn.Embedding:
    """An ``nn.Embedding``; with ``init="paper"`` its weights are drawn from N(0, 0.1²).

    The paper (§3.5) initialises all embeddings with standard deviation 0.1, much smaller than
    PyTorch's default N(0, 1), so the embeddings do not swamp the residual sums they feed.
    The ``padding_idx`` row is zero either way (and receives no gradient).
    """
    check_choice(init, "init", INITS)
    m = nn.Embedding(num_embeddings, embedding_dim, padding_idx=padding_idx)
    if init == "paper":
        nn.init.normal_(m.weight, mean=0.0, std=0.1)
        if padding_idx is not None:
            with torch.no_grad():
                m.weight[padding_idx].zero_()
    return m


def make_linear(
    in_features: int,
    out_features: int,
    *,
    dropout: float = 0.0,
    weight_norm: bool = False,
    init: str = "paper",
) -> nn.Module:
    """An ``nn.Linear`` with the paper's initialisation and optional weight normalisation.

    ``init="paper"``: weights ~ N(0, (1 - dropout) / in_features), biases 0 (§3.5). With
    std √(1/n) a unit-variance input keeps unit variance. ``dropout`` is the dropout applied to
    this layer's *input*: inverted dropout keeps a unit with probability p = 1 - dropout and
    multiplies it by 1/p, which scales the input variance by 1/p, so the weights are drawn
    √p times smaller to restore it. ``init="pytorch"`` keeps PyTorch's default
    (Kaiming-uniform) initialisation, as most tutorials do.

    ``weight_norm=True`` reparametrises ``W = g · v / ‖v‖`` per output unit (one extra
    parameter per output feature). The paper trains every layer this way; it decouples the
    length of a weight vector from its direction, which speeds up and stabilises SGD.
    """
    check_choice(init, "init", INITS)
    check_fraction(dropout, "dropout")
    m = nn.Linear(in_features, out_features)
    if init == "paper":
        nn.init.normal_(m.weight, mean=0.0, std=math.sqrt((1.0 - dropout) / in_features))
        nn.init.zeros_(m.bias)
    if weight_norm:
        # g starts as ‖v‖, so the weight itself is unchanged by wrapping it.
        m = _weight_norm(m, name="weight", dim=0)
    return m


def make_conv1d(
    in_channels: int,
    out_channels: int,
    kernel_size: int,
    *,
    dropout: float = 0.0,
    glu: bool = True,
    weight_norm: bool = False,
    init: str = "paper",
) -> nn.Module:
    """An ``nn.Conv1d`` (no built-in padding) with the paper's initialisation.

    ``init="paper"`` with ``glu=True`` (the convolution feeds a GLU): weights ~
    N(0, 4·(1 - dropout) / (kernel_size · in_channels)), biases 0. The GLU's output has about
    1/4 of the variance of its input (paper Appendix A), so the convolution is initialised to
    *quadruple* the variance, and the GLU brings it back. ``kernel_size · in_channels`` is the
    number of inputs of each output unit; ``(1 - dropout)`` undoes dropout's variance increase as
    in :func:`make_linear`. With ``glu=False`` the factor 4 is dropped.

    Padding is left to the caller (``ConvGLUBlock``) because the encoder pads on both sides,
    the decoder only on the left, and incremental decoding not at all.
    """
    check_choice(init, "init", INITS)
    check_fraction(dropout, "dropout")
    m = nn.Conv1d(in_channels, out_channels, kernel_size, padding=0)
    if init == "paper":
        glu_gain = 4.0 if glu else 1.0
        std = math.sqrt(glu_gain * (1.0 - dropout) / (kernel_size * in_channels))
        nn.init.normal_(m.weight, mean=0.0, std=std)
        nn.init.zeros_(m.bias)
    if weight_norm:
        # dim=0: one g per output channel, the norm taken over (in_channels, kernel) as fairseq.
        m = _weight_norm(m, name="weight", dim=0)
    return m


# --------------------------------------------------------------------------------------------
# Gradient scaling (paper §3.4)
# --------------------------------------------------------------------------------------------


class GradMultiply(torch.autograd.Function):
    """Identity in the forward pass; multiplies the incoming gradient by ``scale`` backwards.

    Every decoder layer attends to the encoder output, so the encoder receives gradient from all
    of them at once; the paper found it "received too much gradient otherwise" and scales the
    encoder's gradient down (§3.4). Only the backward pass changes: the model computes exactly the
    same outputs with or without it.
    """

    @staticmethod
    def forward(ctx, x: Tensor, scale: float) -> Tensor:
        ctx.scale = scale
        return x.view_as(x)  # a new autograd node over the same values

    @staticmethod
    def backward(ctx, grad_output: Tensor) -> tuple[Tensor, None]:
        return grad_output * ctx.scale, None  # no gradient for the float ``scale``


def grad_multiply(x: Tensor, scale: float) -> Tensor:
    """``x`` unchanged, but its gradient multiplied by ``scale`` (see :class:`GradMultiply`)."""
    if scale == 1.0:
        return x
    return GradMultiply.apply(x, scale)


# --------------------------------------------------------------------------------------------
# A convolution as a matrix product
# --------------------------------------------------------------------------------------------


def conv_as_matmul(h: Tensor, weight: Tensor, bias: Tensor | None) -> Tensor:
    """``F.conv1d(h, weight, bias)`` (stride 1, no padding) as one matrix product ("im2col").

    Output position t of a width-k convolution is a linear function of the window
    ``h[:, :, t : t + k]``: flatten every window into one row of ``channels · k`` numbers and
    the kernel into a ``[out_channels, channels · k]`` matrix, and all positions of all
    sentences are one ``F.linear``. The same sums as the convolution, added in another order
    (so equal up to float rounding). It makes a training step faster on a CPU, whose
    convolution backward pass is slower than its matrix products (``benchmarks/train_step.py``;
    the figures are in ``benchmarks/RESULTS.md``); fairseq computes its convolutions as matrix
    products too (``ConvTBC``, and ``LinearizedConvolution`` for one new position when
    decoding).
    """
    # h = [batch, channels, len + k - 1]; weight = [out_channels, channels, k]
    k = weight.size(2)
    windows = h.transpose(1, 2).unfold(1, k, 1)  # windows = [batch, len, channels, k]
    windows = windows.reshape(h.size(0), windows.size(1), -1)  # [batch, len, channels * k]
    out = F.linear(windows, weight.reshape(weight.size(0), -1), bias)  # [batch, len, out]
    return out.transpose(1, 2)  # out = [batch, out_channels, len]


# --------------------------------------------------------------------------------------------
# The convolutional block (paper §3.2)
# --------------------------------------------------------------------------------------------


class ConvGLUBlock(nn.Module):
    """One convolutional block: dropout -> Conv1d(hid -> 2·hid, kernel k) -> GLU [-> residual].

    The convolution doubles the channels; the gated linear unit splits them into halves ``A``
    and ``B`` and returns ``A ⊙ σ(B)``: the sigmoid gate decides, per channel and position, how
    much of ``A`` passes, while ``A`` itself stays linear, which keeps gradients flowing through
    deep stacks (Dauphin et al., 2017).

    Args:
        hid_dim: channels in and out of the block.
        kernel_size: width ``k`` of the convolution.
        padding: how the sequence is padded so that the output has the input's length:

            - ``"same"`` (encoder): (k-1)/2 zeros on each side, so every position sees k/2
              neighbours in both directions. Needs an odd ``k``.
            - ``"causal"`` (decoder): k-1 zeros on the left only, so position t sees t-k+1..t
              and never a future target token.

            A decoder built with ``"same"`` sees the next tokens it is asked to predict: it
            "cheats", reaching a low training loss but translating badly (the course shows this).
        dropout: dropout on the block input, before the convolution (as fairseq).
        residual: if True the block returns ``(GLU(conv(x)) + x)·√0.5`` (the encoder's block).
            The decoder uses ``residual=False`` because it inserts attention between the GLU
            and the residual connection.
        weight_norm, init: see :func:`make_conv1d`.

    ``forward(x, mask=None, history=None)`` with ``x = [batch, hid_dim, len]``:

    - ``mask`` (bool ``[batch, len]``, True on real tokens): the padding positions are set to
      zero *before* the convolution, so pad embeddings never leak into real positions; zeros
      are exactly what the sequence's own zero padding looks like, so a padded sentence gives
      the same result as the unpadded one.
    - ``history`` (causal only, ``[batch, hid_dim, k-1]``): the previous k-1 inputs, used instead
      of the zero padding during incremental decoding (see :meth:`next_history`).
    """

    def __init__(
        self,
        hid_dim: int,
        kernel_size: int,
        *,
        padding: str = "same",
        dropout: float = 0.0,
        residual: bool = True,
        weight_norm: bool = False,
        init: str = "paper",
    ) -> None:
        super().__init__()
        check_padding(padding, kernel_size)
        self.hid_dim = hid_dim
        self.kernel_size = kernel_size
        self.padding = padding
        self.residual = residual
        self.dropout = nn.Dropout(dropout)
        self.conv = make_conv1d(
            hid_dim,
            2 * hid_dim,
            kernel_size,
            dropout=dropout,
            glu=True,
            weight_norm=weight_norm,
            init=init,
        )

    def _pad(self, x: Tensor) -> Tensor:
        k = self.kernel_size
        if self.padding == "same":
            return F.pad(x, ((k - 1) // 2, (k - 1) // 2))
        return F.pad(x, (k - 1, 0))  # causal: zeros only in the past

    def forward(
        self, x: Tensor, *, mask: Tensor | None = None, history: Tensor | None = None
    ) -> Tensor:
        # x = [batch, hid_dim, len]
        if mask is not None:
            x = x.masked_fill(~mask.unsqueeze(1), 0.0)
        h = self.dropout(x)
        if history is None:
            h = self._pad(h)  # h = [batch, hid_dim, len + k - 1]
        else:
            if self.padding != "causal":
                raise ValueError("history (incremental decoding) needs padding='causal'.")
            h = torch.cat([history, h], dim=2)  # the real past replaces the zero padding
        if self._linearizable():
            # The same convolution as self.conv(h), computed as one matrix product over the
            # k-wide windows of h (see conv_as_matmul): faster on a CPU, for a whole sentence
            # in training and for the single new position of incremental decoding alike.
            h = conv_as_matmul(h, self.conv.weight, self.conv.bias)  # [batch, 2 * hid, len]
        else:
            h = self.conv(h)  # h = [batch, 2 * hid_dim, len]
        h = F.glu(h, dim=1)  # h = [batch, hid_dim, len]
        if self.residual:
            h = (h + x) * RESIDUAL_SCALE
        return h

    def _linearizable(self) -> bool:
        # a plain (possibly weight-normed) Conv1d; a variant's convolution (see
        # convs2s.model.variants) keeps its own forward
        conv = self.conv
        return (isinstance(conv, nn.Conv1d) and conv.groups == 1 and conv.dilation == (1,)
                and conv.stride == (1,) and conv.padding == (0,))

    def empty_history(self, x: Tensor) -> Tensor:
        """The history at the start of a sentence: k-1 zeros, exactly the causal padding."""
        return x.new_zeros(x.size(0), self.hid_dim, self.kernel_size - 1)

    def next_history(self, history: Tensor, x: Tensor) -> Tensor:
        """The last k-1 inputs after appending ``x`` (``[batch, hid_dim, n]``) to ``history``."""
        keep = self.kernel_size - 1
        joined = torch.cat([history, x], dim=2)
        return joined[:, :, joined.size(2) - keep :]  # not [-keep:]: that is everything for k=1


# --------------------------------------------------------------------------------------------
# Input checks shared by the encoder and the decoder
# --------------------------------------------------------------------------------------------


def check_tokens(tokens: Tensor, name: str, vocab_size: int) -> None:
    """Clear errors for the usual mistakes with token tensors (dtype, dims, id range)."""
    if not isinstance(tokens, Tensor):
        raise TypeError(f"{name} must be a torch.Tensor of token ids, got {type(tokens).__name__}.")
    if tokens.dtype not in (torch.int64, torch.int32):
        raise TypeError(
            f"{name} must hold integer token ids (torch.long), got dtype {tokens.dtype}. "
            "Convert with .long()."
        )
    if tokens.dim() != 2:
        raise ValueError(
            f"{name} must be 2-D [batch, seq_len], got shape {tuple(tokens.shape)}. "
            "For a single sentence use tokens.unsqueeze(0)."
        )
    # The id range (and check_source's all-padding rows) are read from the tensor's values:
    # under torch.compile that would split the graph and make a GPU wait, so a compiled caller
    # (the trainer's compile option, whose batches are ids of its own vocabularies) skips them.
    if tokens.numel() and not torch.compiler.is_compiling() and (
            tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            f"{name} holds token ids in [{int(tokens.min())}, {int(tokens.max())}], but the "
            f"vocabulary has {vocab_size} entries (ids 0..{vocab_size - 1})."
        )


def check_padding(padding, kernel_size: int, paddings: tuple = BLOCK_PADDINGS) -> None:
    """``ValueError`` (one line) unless ``padding`` is one of ``paddings`` and fits
    ``kernel_size`` (a whole number >= 1; odd for ``"same"``). Shared by the blocks, the
    decoder, the variants' convolution and the course's stacks."""
    check_choice(padding, "padding", paddings)
    check_whole(kernel_size, "kernel_size")
    if padding == "same" and kernel_size % 2 == 0:
        raise ValueError(
            f"kernel_size={kernel_size} is even, but padding='same' needs an odd kernel size: "
            "(k-1)/2 zeros on each side must be a whole number. Use 1, 3, 5, ..."
        )


def check_positions(length: int, max_positions: int, what: str) -> None:
    """A clear error when a sequence needs more learned positions than the model has (the
    model's check on a tensor; :func:`convs2s.data.check_length` is the one on a sentence's
    tokens, in words for whoever typed it)."""
    if length > max_positions:
        raise ValueError(
            f"The {what} needs {length} positions, but the model was built with "
            f"max_positions={max_positions} learned position embeddings. Shorten the sentence "
            f"(or decode fewer steps), or build the model with max_positions >= {length}."
        )


def check_source(src: Tensor, vocab_size: int, max_positions: int, pad_idx: int) -> None:
    """One clear error for a source an encoder cannot encode: not token ids, not 2-D, ids outside
    the vocabulary, longer than ``max_positions``, or a sentence of padding only (attention over
    it would be undefined). Shared by the convolutional and the recurrent encoder."""
    check_tokens(src, "src", vocab_size)
    check_positions(src.size(1), max_positions, "source sentence")
    if not torch.compiler.is_compiling() and not bool((src != pad_idx).any(dim=1).all()):
        raise ValueError(
            "Every source sentence needs at least one non-pad token: attention over an "
            "all-padding source is undefined."
        )


def select_outputs(x: Tensor, output_mask: Tensor | None, tokens: Tensor) -> Tensor:
    """``x = [batch, n, dim]`` at the positions ``output_mask`` marks, as ``[n_marked, dim]``
    (in row order); all of ``x`` when the mask is None.

    Why: training scores a position only when its next token is real, so a decoder given the
    mask computes its output layer (the largest layer: ``emb_dim x vocab`` per position, about a
    third of a ``cpu_subword`` step's arithmetic) at those positions alone. Every logit it does
    compute is the one a full pass gives; padding's share of that work is skipped.
    ``tokens`` (the decoder input) gives the shape the mask must have."""
    if output_mask is None:
        return x
    if not isinstance(output_mask, Tensor) or output_mask.dtype != torch.bool:
        raise TypeError("output_mask must be a bool tensor (True where a logit is wanted), "
                        f"got {getattr(output_mask, 'dtype', type(output_mask).__name__)}.")
    if output_mask.shape != tokens.shape:
        raise ValueError(f"output_mask has shape {tuple(output_mask.shape)}; it must match the "
                         f"decoder input's {tuple(tokens.shape)}.")
    return x[output_mask]
