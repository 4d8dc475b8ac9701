"""What came after ConvS2S, as drop-in changes to it: separable convolutions and self-attention.

Used by notebook 08. The classes are models (:class:`convs2s.run.checkpoint.Checkpoint` rebuilds
them), so the module sits in the model layer: it imports only the model's modules.

- :class:`DepthwiseSeparableConv1d`: a depthwise convolution (one kernel of width k per
  channel, ``groups=in_channels``) followed by a pointwise 1x1 convolution that mixes channels,
  as in Xception (Chollet, 2017), SliceNet (Kaiser et al., 2017) and QANet (Yu et al., 2018).
  It maps ``in -> out`` channels like ``nn.Conv1d(in, out, k)`` with about ``k`` times fewer
  weights when ``out`` is large: ``in·k + in·out`` instead of ``in·out·k``.
  It can replace the convolution inside :class:`convs2s.model.layers.ConvGLUBlock` (which pads the
  input itself, so ``"same"``/``"causal"`` padding and incremental decoding keep working), or
  pad on its own (``padding="same"`` / ``"causal"``).
- :class:`SelfAttentionBlock`: multi-head self-attention over the encoder's states (pads masked
  out as keys), with learned or sinusoidal positions and an optional position-wise
  feed-forward layer. Placed after the encoder's convolution blocks it gives QANet's encoder
  block: convolutions for local structure, then self-attention for global interaction.
- :class:`VariantConvS2S` / :func:`make_variant_model`: ConvS2S with either or both changes. A
  subclass of :class:`convs2s.model.convs2s.ConvS2S`: the same call contract, ``config`` (so
  ``VariantConvS2S(**model.config)`` rebuilds it), greedy/beam decoding, training losses.
- :func:`conv1d_parameters`, :func:`separable_conv1d_parameters`, :func:`conv1d_flops`,
  :func:`separable_conv1d_flops`, :func:`conv_costs`: the counts as formulas;
  :func:`costs_title`: what they save, in words (notebook 08's widget's title).
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.parametrizations import weight_norm as _weight_norm

from convs2s.model.convs2s import ConvS2S
from convs2s.model.layers import (
    BLOCK_PADDINGS,
    INITS,
    RESIDUAL_SCALE,
    ConvGLUBlock,
    check_padding,
)
from convs2s.system.arguments import check_bool, check_choice, check_whole

__all__ = [
    "CONVS",
    "POSITIONS",
    "DepthwiseSeparableConv1d",
    "SeparableConvGLUBlock",
    "SelfAttentionBlock",
    "sinusoidal_positions",
    "VariantConvS2S",
    "make_variant_model",
    "conv1d_parameters",
    "separable_conv1d_parameters",
    "conv1d_flops",
    "separable_conv1d_flops",
    "conv_costs",
    "costs_title",
]

CONVS = ("standard", "depthwise")
POSITIONS = ("learned", "sinusoidal", "none")


# --------------------------------------------------------------------------------------------
# Counting
# --------------------------------------------------------------------------------------------


def conv1d_parameters(in_channels: int, out_channels: int, kernel_size: int, *,
                      bias: bool = True, weight_norm: bool = False) -> int:
    """Parameters of ``nn.Conv1d(in, out, k)``: ``in·out·k (+ out bias) (+ out gains)``."""
    return (in_channels * out_channels * kernel_size + (out_channels if bias else 0)
            + (out_channels if weight_norm else 0))


def separable_conv1d_parameters(in_channels: int, out_channels: int, kernel_size: int, *,
                                bias: bool = True, weight_norm: bool = False) -> int:
    """Parameters of :class:`DepthwiseSeparableConv1d`.

    depthwise ``in·k`` (no bias: the pointwise bias absorbs it) + pointwise ``in·out``
    (+ ``out`` bias) (+ weight-norm gains: ``in`` depthwise, ``out`` pointwise).
    """
    return (in_channels * kernel_size + in_channels * out_channels
            + (out_channels if bias else 0)
            + (in_channels + out_channels if weight_norm else 0))


def conv1d_flops(in_channels: int, out_channels: int, kernel_size: int, length: int,
                 batch: int = 1) -> int:
    """Floating-point operations of a standard convolution's forward pass: one multiply and one
    add per weight per output position, ``2·in·out·k·length·batch`` (biases not counted, as
    ``torch.utils.flop_counter`` does)."""
    return 2 * in_channels * out_channels * kernel_size * length * batch


def separable_conv1d_flops(in_channels: int, out_channels: int, kernel_size: int, length: int,
                           batch: int = 1) -> int:
    """FLOPs of :class:`DepthwiseSeparableConv1d`: ``2·(in·k + in·out)·length·batch``."""
    return 2 * (in_channels * kernel_size + in_channels * out_channels) * length * batch


def conv_costs(in_channels: int, out_channels: int, kernel_size: int, length: int = 1) -> dict:
    """Both convolutions' parameters and FLOPs side by side, with the ratios standard/separable.

    The ratio tends to ``1 / (1/out + 1/k)``: about ``k`` when ``out >> k``.
    """
    std_p = conv1d_parameters(in_channels, out_channels, kernel_size)
    sep_p = separable_conv1d_parameters(in_channels, out_channels, kernel_size)
    std_f = conv1d_flops(in_channels, out_channels, kernel_size, length)
    sep_f = separable_conv1d_flops(in_channels, out_channels, kernel_size, length)
    return {"standard_parameters": std_p, "separable_parameters": sep_p,
            "parameter_ratio": std_p / sep_p, "standard_flops": std_f, "separable_flops": sep_f,
            "flop_ratio": std_f / sep_f}


def costs_title(costs: dict, kernel_size: int) -> str:
    """What a separable convolution of width ``kernel_size`` saves, from :func:`conv_costs`'s
    ``costs``, in words (notebook 08's widget titles its chart with it; the course's website
    writes the same): ``"k = 3: 2.97x fewer parameters, 2.98x fewer FLOPs"`` for 256 -> 512
    channels. Pure."""
    return (f"k = {kernel_size}: {costs['parameter_ratio']:.2f}x fewer parameters, "
            f"{costs['flop_ratio']:.2f}x fewer FLOPs")


# --------------------------------------------------------------------------------------------
# Depthwise-separable convolution
# --------------------------------------------------------------------------------------------


class DepthwiseSeparableConv1d(nn.Module):
    """Depthwise convolution (width k, one filter per channel) then a pointwise 1x1 convolution.

    Args:
        in_channels, out_channels, kernel_size: as ``nn.Conv1d``.
        padding: ``None`` (default): no padding, the caller pads, exactly like the
            ``nn.Conv1d`` inside :class:`convs2s.model.layers.ConvGLUBlock` (so this module can
            replace ``block.conv``). ``"same"``: (k-1)/2 zeros on each side (odd k).
            ``"causal"``: k-1 zeros on the left, so output t depends on inputs <= t only.
        dropout, glu, init: the paper's initialisation (see
            :func:`convs2s.model.layers.make_conv1d`)
            split over the two factors: the depthwise weights ~ N(0, (1 - dropout)/k) (each
            output sums k inputs of one channel), the pointwise ones ~ N(0, g/in) with
            g = 4 when the output feeds a GLU; biases 0. ``init="pytorch"`` keeps PyTorch's.
        weight_norm: weight-normalise both convolutions (one gain per output channel each).

    ``forward(x)``: ``x = [batch, in_channels, len]`` -> ``[batch, out_channels, len']`` with
    ``len' = len - k + 1`` without padding, ``len`` with it.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel_size: int,
        *,
        padding: str | None = None,
        dropout: float = 0.0,
        glu: bool = True,
        weight_norm: bool = False,
        init: str = "paper",
    ) -> None:
        super().__init__()
        check_padding(padding, kernel_size, (None, *BLOCK_PADDINGS))
        check_choice(init, "init", INITS)
        self.in_channels, self.out_channels = in_channels, out_channels
        self.kernel_size, self.padding = kernel_size, padding
        depthwise = nn.Conv1d(in_channels, in_channels, kernel_size, groups=in_channels,
                              bias=False)
        pointwise = nn.Conv1d(in_channels, out_channels, 1)
        if init == "paper":
            gain = 4.0 if glu else 1.0
            nn.init.normal_(depthwise.weight, 0.0, math.sqrt((1.0 - dropout) / kernel_size))
            nn.init.normal_(pointwise.weight, 0.0, math.sqrt(gain / in_channels))
            nn.init.zeros_(pointwise.bias)
        if weight_norm:
            depthwise = _weight_norm(depthwise, name="weight", dim=0)
            pointwise = _weight_norm(pointwise, name="weight", dim=0)
        self.depthwise, self.pointwise = depthwise, pointwise

    def forward(self, x: Tensor) -> Tensor:
        # x = [batch, in_channels, len]
        k = self.kernel_size
        if self.padding == "same":
            x = F.pad(x, ((k - 1) // 2, (k - 1) // 2))
        elif self.padding == "causal":
            x = F.pad(x, (k - 1, 0))
        x = self.depthwise(x)  # x = [batch, in_channels, len']: each channel on its own
        return self.pointwise(x)  # [batch, out_channels, len']: channels mixed, per position


class SeparableConvGLUBlock(ConvGLUBlock):
    """:class:`convs2s.model.layers.ConvGLUBlock` whose convolution is depthwise-separable.

    Same arguments and behaviour (dropout -> pad -> conv -> GLU [-> residual], masks,
    incremental ``history``); only ``self.conv`` differs.
    """

    def __init__(self, hid_dim: int, kernel_size: int, *, padding: str = "same",
                 dropout: float = 0.0, residual: bool = True, weight_norm: bool = False,
                 init: str = "paper") -> None:
        super().__init__(hid_dim, kernel_size, padding=padding, dropout=dropout,
                         residual=residual, weight_norm=weight_norm, init=init)
        self.conv = DepthwiseSeparableConv1d(hid_dim, 2 * hid_dim, kernel_size, dropout=dropout,
                                             glu=True, weight_norm=weight_norm, init=init)


# --------------------------------------------------------------------------------------------
# Self-attention block (QANet's "global interaction")
# --------------------------------------------------------------------------------------------


def sinusoidal_positions(length: int, dim: int) -> Tensor:
    """The Transformer's fixed position encoding, ``[length, dim]``: sin on even channels, cos
    on odd ones, wavelengths from 2π to 10000·2π (Vaswani et al., 2017, §3.5)."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)  # [length, 1]
    div = torch.exp(torch.arange(0, dim, 2, dtype=torch.float32) * (-math.log(10000.0) / dim))
    pe = torch.zeros(length, dim)
    pe[:, 0::2] = torch.sin(position * div)
    pe[:, 1::2] = torch.cos(position * div[: dim // 2])
    return pe


class SelfAttentionBlock(nn.Module):
    """Multi-head self-attention (+ optional feed-forward) over ``[batch, channels, len]``.

    ``y = (x + Dropout(MHA(LN(x) + P)))·√0.5``, then, with ``feed_forward=True``,
    ``y = (y + Dropout(FFN(LN(y))))·√0.5``. P are the positions (``"learned"``,
    ``"sinusoidal"`` or ``"none"``), added to the attention's input only. Pads are masked as
    keys, so no real position reads them, and padded positions are set to zero on output. The
    √0.5 residual scaling is ConvS2S's (QANet adds without scaling).

    ``forward(x, *, mask=None)`` has the signature of :class:`convs2s.model.layers.ConvGLUBlock`, so
    the block can simply be appended to ``Encoder.blocks``. Set ``keep_weights = True`` to keep
    the last attention weights (``[batch, len, len]``, averaged over heads) in
    ``last_weights``.
    """

    def __init__(self, channels: int, n_heads: int = 4, *, dropout: float = 0.1,
                 positions: str = "sinusoidal", max_positions: int = 128,
                 feed_forward: bool = True) -> None:
        super().__init__()
        check_choice(positions, "positions", POSITIONS)
        if channels % n_heads:
            raise ValueError(f"channels={channels} must be divisible by n_heads={n_heads}.")
        self.positions, self.max_positions = positions, max_positions
        self.norm = nn.LayerNorm(channels)
        self.attention = nn.MultiheadAttention(channels, n_heads, dropout=dropout,
                                               batch_first=True)
        self.dropout = nn.Dropout(dropout)
        if positions == "learned":
            self.pos_embedding = nn.Embedding(max_positions, channels)
            nn.init.normal_(self.pos_embedding.weight, 0.0, 0.1)  # as the paper's embeddings
        elif positions == "sinusoidal":
            self.register_buffer("pos_table", sinusoidal_positions(max_positions, channels),
                                 persistent=False)
        self.ffn = None
        if feed_forward:
            self.ffn_norm = nn.LayerNorm(channels)
            self.ffn = nn.Sequential(nn.Linear(channels, 2 * channels), nn.ReLU(),
                                     nn.Dropout(dropout), nn.Linear(2 * channels, channels))
        self.keep_weights = False
        self.last_weights: Tensor | None = None

    def position_table(self, length: int, device) -> Tensor | None:
        if length > self.max_positions:
            raise ValueError(f"The sequence needs {length} positions, but the self-attention "
                             f"block has max_positions={self.max_positions}.")
        if self.positions == "learned":
            return self.pos_embedding(torch.arange(length, device=device))
        if self.positions == "sinusoidal":
            return self.pos_table[:length]
        return None

    def forward(self, x: Tensor, *, mask: Tensor | None = None) -> Tensor:
        h = x.transpose(1, 2)  # h = [batch, len, channels]
        q = self.norm(h)
        pos = self.position_table(h.size(1), h.device)
        if pos is not None:
            q = q + pos  # q = [batch, len, channels]
        pad = None if mask is None else ~mask  # True = ignore this key
        out, weights = self.attention(q, q, q, key_padding_mask=pad,
                                      need_weights=self.keep_weights)
        # out = [batch, len, channels]
        if self.keep_weights:
            self.last_weights = weights.detach()  # [batch, len, len]
        h = (h + self.dropout(out)) * RESIDUAL_SCALE
        if self.ffn is not None:
            h = (h + self.dropout(self.ffn(self.ffn_norm(h)))) * RESIDUAL_SCALE
        if mask is not None:
            h = h.masked_fill(~mask.unsqueeze(-1), 0.0)
        return h.transpose(1, 2)  # [batch, channels, len]


# --------------------------------------------------------------------------------------------
# The variant model
# --------------------------------------------------------------------------------------------


class VariantConvS2S(ConvS2S):
    """ConvS2S with depthwise-separable convolutions and/or an encoder self-attention block.

    Args (besides every :class:`convs2s.model.convs2s.ConvS2S` argument):
        conv: ``"standard"`` (ConvS2S as is) or ``"depthwise"`` (every encoder and decoder
            block's convolution becomes a :class:`DepthwiseSeparableConv1d`, same channels,
            same kernel size, same padding).
        encoder_self_attention: append a :class:`SelfAttentionBlock` after the encoder's
            convolution blocks (in ``hid_dim`` channels, before the projection to z).
        attention_heads, attention_positions, attention_feed_forward: its settings.

    The base model is built first and then the modules are swapped, so ``conv="standard",
    encoder_self_attention=False`` is exactly ConvS2S (same random initialisation for the same
    seed). ``VariantConvS2S(**model.config)`` rebuilds the architecture.
    """

    def __init__(
        self,
        src_vocab_size: int,
        trg_vocab_size: int,
        *,
        conv: str = "standard",
        encoder_self_attention: bool = False,
        attention_heads: int = 4,
        attention_positions: str = "sinusoidal",
        attention_feed_forward: bool = True,
        **convs2s_kwargs,
    ) -> None:
        check_choice(conv, "conv", CONVS)
        check_bool(encoder_self_attention, "encoder_self_attention")
        attention_heads = check_whole(attention_heads, "attention_heads")
        check_choice(attention_positions, "attention_positions", POSITIONS)
        check_bool(attention_feed_forward, "attention_feed_forward")
        super().__init__(src_vocab_size, trg_vocab_size, **convs2s_kwargs)
        cfg = self.config
        if conv == "depthwise":
            for block in [*self.encoder.blocks, *self.decoder.blocks]:
                block.conv = DepthwiseSeparableConv1d(
                    cfg["hid_dim"], 2 * cfg["hid_dim"], cfg["kernel_size"],
                    dropout=cfg["dropout"], glu=True, weight_norm=cfg["weight_norm"],
                    init=cfg["init"])
        if encoder_self_attention:
            self.encoder.blocks.append(SelfAttentionBlock(
                cfg["hid_dim"], attention_heads, dropout=cfg["dropout"],
                positions=attention_positions, max_positions=cfg["max_positions"],
                feed_forward=attention_feed_forward))
        self.config.update(conv=conv, encoder_self_attention=encoder_self_attention,
                           attention_heads=attention_heads,
                           attention_positions=attention_positions,
                           attention_feed_forward=attention_feed_forward)

    @property
    def self_attention(self) -> SelfAttentionBlock | None:
        """The encoder's self-attention block, or None."""
        last = self.encoder.blocks[-1]
        return last if isinstance(last, SelfAttentionBlock) else None


def make_variant_model(src_vocab, trg_vocab, *, conv: str = "standard",
                       encoder_self_attention: bool = False, **convs2s_kwargs) -> VariantConvS2S:
    """A :class:`VariantConvS2S`. ``src_vocab``/``trg_vocab`` are vocabulary sizes or
    :class:`convs2s.data.Vocab` objects (whose ``pad_idx`` then fills ``src_pad_idx`` /
    ``trg_pad_idx`` unless given). Other keyword arguments go to ConvS2S (``emb_dim``,
    ``hid_dim``, ``kernel_size``, ...) or set the self-attention block (``attention_heads``,
    ``attention_positions``, ``attention_feed_forward``)."""
    sizes = []
    for side, vocab in (("src", src_vocab), ("trg", trg_vocab)):
        if isinstance(vocab, int):
            sizes.append(vocab)
        else:
            sizes.append(len(vocab))
            convs2s_kwargs.setdefault(f"{side}_pad_idx", vocab.pad_idx)
    return VariantConvS2S(sizes[0], sizes[1], conv=conv,
                          encoder_self_attention=encoder_self_attention, **convs2s_kwargs)
