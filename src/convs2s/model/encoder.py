"""The convolutional encoder of ConvS2S (Gehring et al., 2017, §3.1-3.2).

token + position embeddings e -> emb->hid -> n x ConvGLUBlock (residual, √0.5) -> hid->emb = z.

The encoder returns two views of the source for the decoder's attention (§3.3):
``conved`` z, the output of the convolution stack, against which queries are matched (keys), and
``combined`` (z + e)·√0.5, which is averaged (values). Keeping the plain embedding e in the values
gives the decoder direct access to "which word was here", next to z's "what its context says".
"""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from convs2s.model.layers import (
    RESIDUAL_SCALE,
    ConvGLUBlock,
    check_source,
    grad_multiply,
    make_embedding,
    make_linear,
)


class EncoderOut(NamedTuple):
    """What the encoder hands to every attention layer of the decoder.

    Attributes:
        conved: z, ``[batch, src_len, emb_dim]``, zero at padding positions (attention keys).
        combined: (z + e)·√0.5, ``[batch, src_len, emb_dim]`` (attention values).
        src_mask: ``[batch, src_len]`` bool, **True on real tokens**, False on padding.
    """

    conved: Tensor
    combined: Tensor
    src_mask: Tensor

    def index_select(self, index: Tensor) -> EncoderOut:
        """The encoder output for the examples ``index`` (e.g. repeated once per beam)."""
        return EncoderOut(*(t.index_select(0, index) for t in self))


class Encoder(nn.Module):
    """Convolutional encoder.

    Args:
        vocab_size: source vocabulary size.
        emb_dim: size of token/position embeddings and of the encoder outputs z and z + e.
        hid_dim: channels of the convolution stack.
        n_layers: number of ``ConvGLUBlock``s (each with a √0.5-scaled residual connection).
        kernel_size: convolution width (odd: the encoder pads (k-1)/2 on each side).
        dropout: dropout on the embeddings and on every block input.
        max_positions: number of learned position embeddings; longer sources raise ValueError.
        pad_idx: the source padding token. Padding must be on the right; real tokens then keep
            positions 0..len-1 whatever padding follows them.
        weight_norm, init: see :func:`convs2s.model.layers.make_linear`.
        grad_scale: multiplies the gradient flowing back into the convolution stack through z
            (§3.4); ``ConvS2S`` sets it to 1/(2·decoder layers). 1.0 disables it.

    ``forward(src)`` with ``src = [batch, src_len]`` returns an :class:`EncoderOut`.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        emb_dim: int,
        hid_dim: int,
        n_layers: int,
        kernel_size: int,
        dropout: float,
        max_positions: int,
        pad_idx: int,
        weight_norm: bool = True,
        init: str = "paper",
        grad_scale: float = 1.0,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.max_positions = max_positions
        self.pad_idx = pad_idx
        self.grad_scale = grad_scale
        self.tok_embedding = make_embedding(vocab_size, emb_dim, padding_idx=pad_idx, init=init)
        self.pos_embedding = make_embedding(max_positions, emb_dim, init=init)
        self.dropout = nn.Dropout(dropout)
        # Input of emb2hid has had dropout, hence dropout= in its initialisation.
        self.emb2hid = make_linear(
            emb_dim, hid_dim, dropout=dropout, weight_norm=weight_norm, init=init
        )
        self.blocks = nn.ModuleList(
            ConvGLUBlock(
                hid_dim,
                kernel_size,
                padding="same",
                dropout=dropout,
                residual=True,
                weight_norm=weight_norm,
                init=init,
            )
            for _ in range(n_layers)
        )
        self.hid2emb = make_linear(hid_dim, emb_dim, weight_norm=weight_norm, init=init)

    def forward(self, src: Tensor) -> EncoderOut:
        self._check_inputs(src)
        src_len = src.size(1)
        src_mask = src != self.pad_idx  # [batch, src_len], True = real token
        positions = torch.arange(src_len, device=src.device)  # [src_len], 0..len-1
        e = self.tok_embedding(src) + self.pos_embedding(positions)  # [batch, src_len, emb]
        e = self.dropout(e)

        x = self.emb2hid(e).transpose(1, 2)  # x = [batch, hid_dim, src_len]
        for block in self.blocks:
            # The block zeroes pads before its convolution, so nothing leaks from padding.
            x = block(x, mask=src_mask)  # x = [batch, hid_dim, src_len]

        z = self.hid2emb(x.transpose(1, 2))  # z = [batch, src_len, emb_dim]
        z = z.masked_fill(~src_mask.unsqueeze(-1), 0.0)
        # Scale only the gradient into the conv stack; the embeddings' direct path via e keeps
        # its full gradient (the paper excludes "source word embeddings" from the scaling).
        z = grad_multiply(z, self.grad_scale)
        combined = (z + e) * RESIDUAL_SCALE  # [batch, src_len, emb_dim]
        return EncoderOut(conved=z, combined=combined, src_mask=src_mask)

    def _check_inputs(self, src: Tensor) -> None:
        """See :func:`convs2s.model.layers.check_source`."""
        check_source(src, self.vocab_size, self.max_positions, self.pad_idx)
