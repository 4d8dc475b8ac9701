"""Multi-step attention of ConvS2S (Gehring et al., 2017, §3.3).

Every decoder layer has its own attention. For decoder layer l and target position i:

    d_i = (W h_i + b + g_i) · √0.5          query: conv output h (hid -> emb) plus the target
                                              embedding g of the *input* token at position i
    a_ij = softmax_j(d_i · z_j)              over real source positions j (pads get weight 0)
    c_i = (Σ_j a_ij (z_j + e_j)) · √m        m = number of real source tokens of the sentence
    output_i = W_out c_i + b_out             emb -> hid; the decoder adds it to h (residual)

Because each layer attends with its own query, and later layers' h already contain earlier
layers' attention results, the model can look at the source several times, refining "where to
look" layer by layer; this is the "multi-step" in multi-step attention.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from convs2s.model.encoder import EncoderOut
from convs2s.model.layers import RESIDUAL_SCALE, make_linear


class Attention(nn.Module):
    """The attention of one decoder layer.

    Args:
        hid_dim: channels of the decoder's convolutions.
        emb_dim: embedding size (the space where queries, keys z and values z + e live).
        weight_norm, init: see :func:`convs2s.model.layers.make_linear`.

    ``forward(conved, trg_embedded, encoder_out)``:

    - ``conved``: the GLU output h of the decoder layer, ``[batch, trg_len, hid_dim]``
    - ``trg_embedded``: g, the decoder's (dropped-out) token + position embeddings,
      ``[batch, trg_len, emb_dim]``
    - ``encoder_out``: :class:`convs2s.model.encoder.EncoderOut`

    returns ``(attended, attention)``: ``attended = [batch, trg_len, hid_dim]`` (projected back
    to hid; the caller adds the residual h and multiplies by √0.5, as fairseq does) and
    ``attention = [batch, trg_len, src_len]``, rows summing to 1, exactly 0 on source padding.

    The length scale: c is a weighted average of m vectors. If the weights were uniform (1/m)
    and the vectors independent with variance σ², the average would have variance σ²/m. The
    paper (§3.4) multiplies by m·√(1/m) = √m to bring the variance back to σ² ("assuming the
    attention scores are uniformly distributed. This is generally not the case but we found it
    to work well in practice"). m counts only real tokens, so padding a sentence changes nothing.
    """

    def __init__(
        self, hid_dim: int, emb_dim: int, *, weight_norm: bool = True, init: str = "paper"
    ) -> None:
        super().__init__()
        self.hid2emb = make_linear(hid_dim, emb_dim, weight_norm=weight_norm, init=init)
        self.emb2hid = make_linear(emb_dim, hid_dim, weight_norm=weight_norm, init=init)

    def forward(
        self, conved: Tensor, trg_embedded: Tensor, encoder_out: EncoderOut
    ) -> tuple[Tensor, Tensor]:
        z, z_plus_e, src_mask = encoder_out  # z, z_plus_e = [batch, src_len, emb_dim]

        # Adding g lets the query know which word is being processed, not only its context.
        query = (self.hid2emb(conved) + trg_embedded) * RESIDUAL_SCALE  # [batch, trg_len, emb]
        energy = torch.bmm(query, z.transpose(1, 2))  # energy = [batch, trg_len, src_len]
        # -inf before the softmax gives padding exactly zero weight (exp(-inf) = 0).
        energy = energy.masked_fill(~src_mask.unsqueeze(1), float("-inf"))
        attention = torch.softmax(energy.float(), dim=-1).type_as(energy)

        context = torch.bmm(attention, z_plus_e)  # context = [batch, trg_len, emb_dim]
        m = src_mask.sum(dim=1).to(context.dtype).view(-1, 1, 1)  # real source tokens
        length_scale = m * torch.rsqrt(m)  # m·√(1/m) = √m, see the class docstring
        context = context * length_scale

        attended = self.emb2hid(context)  # attended = [batch, trg_len, hid_dim]
        return attended, attention
