"""The recurrent baseline's model: a Bahdanau-style attentional GRU translator.

Gehring et al. (2017) compare ConvS2S with recurrent translators built on the attention of
Bahdanau, Cho & Bengio (2015, "Neural Machine Translation by Jointly Learning to Align and
Translate"). :class:`RNNAttentionSeq2Seq` is such a model, with ConvS2S's call contract
(``logits, attention = model(src, trg_in)``, ``encode``, ``decode`` with an incremental state,
``decoder.reorder_incremental_state``, ``config``), so that decoding, translating, training and
checkpoints work for it unchanged. It sits in the model layer beside
:mod:`convs2s.model.convs2s`; the tools that compare it with ConvS2S are in
:mod:`convs2s.course.baselines` (notebook 07).

The equations (Bahdanau et al., 2015, Appendix A; ``i`` is the output step, ``j`` the source
position):

    h_j = [→h_j ; ←h_j]                         bidirectional GRU annotations, 2·enc_hid
    s_0 = tanh(W_init [→h_m ; ←h_1])            first decoder state (both final states, as
                                                  the PyTorch tutorial; the paper uses ←h_1)
    e_ij = v_a · tanh(W_a s_{i-1} + U_a h_j)    additive attention energy
    α_ij = softmax_j(e_ij)                      over real source tokens (pads get 0)
    c_i = Σ_j α_ij h_j                          context
    s_i = GRU([E y_{i-1} ; c_i], s_{i-1})       decoder state
    t_i = maxout(W_t [s_i ; c_i ; E y_{i-1}] + b_t)    deep output ("readout"), pairs of units
    p(y_i | ...) = softmax(W_o t_i + b_o)            t_i has out_dim units (default emb_dim)

The decoder computes s_i from s_{i-1}: even with teacher forcing, where every input token is
known, the steps run one after the other (a Python loop over target positions). ConvS2S's
decoder has no such loop in training: all positions go through each convolution at once."""

from __future__ import annotations

from typing import NamedTuple

import torch
from torch import Tensor, nn

from convs2s.model.layers import check_positions, check_source, check_tokens, select_outputs
from convs2s.system.arguments import check_fraction, check_token_id, check_whole

__all__ = ["AdditiveAttention", "RNNDecoder", "RNNEncoder", "RNNEncoderOut",
           "RNNAttentionSeq2Seq"]

# --------------------------------------------------------------------------------------------
# The model
# --------------------------------------------------------------------------------------------


class RNNEncoderOut(NamedTuple):
    """What the recurrent encoder hands to the decoder.

    Attributes:
        annotations: h_j, ``[batch, src_len, 2·enc_hid_dim]``, zero at padding (the values).
        keys: U_a h_j + b, ``[batch, src_len, attn_dim]``, computed once per sentence.
        src_mask: ``[batch, src_len]`` bool, **True on real tokens** (as ``EncoderOut``).
        hidden: s_0, ``[batch, dec_hid_dim]``, the decoder's first state.
    """

    annotations: Tensor
    keys: Tensor
    src_mask: Tensor
    hidden: Tensor

    def index_select(self, index: Tensor) -> RNNEncoderOut:
        """The encoder output for the examples ``index`` (e.g. repeated once per beam)."""
        return RNNEncoderOut(*(t.index_select(0, index) for t in self))


class AdditiveAttention(nn.Module):
    """Bahdanau attention: ``e_ij = v · tanh(W s_{i-1} + U h_j)``, softmax over real tokens.

    Args:
        enc_dim: size of the annotations h_j (2·enc_hid_dim for a bidirectional encoder).
        dec_hid_dim: size of the decoder state s (the query).
        attn_dim: size of the space where query and keys are added.

    :meth:`keys` computes ``U h_j + b`` once per sentence; ``forward(hidden, keys, annotations,
    src_mask)`` returns ``(context [batch, enc_dim], weights [batch, src_len])``.
    """

    def __init__(self, enc_dim: int, dec_hid_dim: int, attn_dim: int) -> None:
        super().__init__()
        self.W = nn.Linear(dec_hid_dim, attn_dim, bias=False)  # W_a, applied to s_{i-1}
        self.U = nn.Linear(enc_dim, attn_dim)  # U_a (and the bias), applied to h_j
        self.v = nn.Linear(attn_dim, 1, bias=False)  # v_a

    def keys(self, annotations: Tensor) -> Tensor:
        return self.U(annotations)  # [batch, src_len, attn_dim]

    def forward(
        self, hidden: Tensor, keys: Tensor, annotations: Tensor, src_mask: Tensor
    ) -> tuple[Tensor, Tensor]:
        # hidden = [batch, dec_hid]; keys = [batch, src_len, attn]; annotations = [b, s, enc]
        query = self.W(hidden).unsqueeze(1)  # query = [batch, 1, attn_dim]
        energy = self.v(torch.tanh(query + keys)).squeeze(-1)  # energy = [batch, src_len]
        energy = energy.masked_fill(~src_mask, float("-inf"))  # pads: exp(-inf) = 0
        weights = torch.softmax(energy.float(), dim=-1).type_as(energy)  # [batch, src_len]
        context = torch.bmm(weights.unsqueeze(1), annotations).squeeze(1)  # [batch, enc_dim]
        return context, weights


class RNNEncoder(nn.Module):
    """Embedding -> dropout -> bidirectional GRU (packed: pads are never read).

    ``forward(src)`` returns ``(annotations [batch, src_len, 2·enc_hid], src_mask,
    s_0 [batch, dec_hid])``. Packing makes each sentence's states independent of how much
    padding follows it.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        emb_dim: int,
        enc_hid_dim: int,
        dec_hid_dim: int,
        dropout: float,
        max_positions: int,
        pad_idx: int,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.max_positions = max_positions
        self.pad_idx = pad_idx
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_idx)
        self.rnn = nn.GRU(emb_dim, enc_hid_dim, batch_first=True, bidirectional=True)
        self.fc_init = nn.Linear(2 * enc_hid_dim, dec_hid_dim)  # W_init
        self.dropout = nn.Dropout(dropout)

    def forward(self, src: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        self._check_inputs(src)
        src_len = src.size(1)
        src_mask = src != self.pad_idx  # [batch, src_len], True = real token
        lengths = src_mask.sum(dim=1)
        embedded = self.dropout(self.embedding(src))  # [batch, src_len, emb_dim]
        packed = nn.utils.rnn.pack_padded_sequence(
            embedded, lengths.cpu(), batch_first=True, enforce_sorted=False
        )
        packed_out, h_n = self.rnn(packed)  # h_n = [2, batch, enc_hid]: →h_m and ←h_1
        annotations, _ = nn.utils.rnn.pad_packed_sequence(
            packed_out, batch_first=True, total_length=src_len
        )  # annotations = [batch, src_len, 2 * enc_hid], zeros at pads
        s0 = torch.tanh(self.fc_init(torch.cat([h_n[0], h_n[1]], dim=1)))  # [batch, dec_hid]
        return annotations, src_mask, s0

    def _check_inputs(self, src: Tensor) -> None:
        """See :func:`convs2s.model.layers.check_source`."""
        check_source(src, self.vocab_size, self.max_positions, self.pad_idx)


class RNNDecoder(nn.Module):
    """GRU decoder with additive attention; one step per target token.

    ``forward(trg_in, encoded, incremental_state=None, output_mask=None)`` follows the contract of
    :class:`convs2s.model.decoder.Decoder`: a full pass over ``trg_in = [batch, trg_len]`` (teacher
    forcing), or, with a dict ``incremental_state`` (start with ``{}``), only the **new** tokens,
    continuing from the state saved in the dict (``"hidden"``: s_i, ``"steps"``: how many
    target positions were processed). Returns ``(logits [batch, n, vocab], attention
    [batch, 1, n, src_len])``.
    """

    def __init__(
        self,
        vocab_size: int,
        *,
        emb_dim: int,
        enc_hid_dim: int,
        dec_hid_dim: int,
        attn_dim: int,
        out_dim: int,
        dropout: float,
        max_positions: int,
        pad_idx: int,
    ) -> None:
        super().__init__()
        self.vocab_size = vocab_size
        self.max_positions = max_positions
        self.pad_idx = pad_idx
        enc_dim = 2 * enc_hid_dim
        self.out_dim = out_dim
        self.embedding = nn.Embedding(vocab_size, emb_dim, padding_idx=pad_idx)
        self.attention = AdditiveAttention(enc_dim, dec_hid_dim, attn_dim)
        self.rnn = nn.GRUCell(emb_dim + enc_dim, dec_hid_dim)
        # Bahdanau's deep output: 2·out_dim linear units, max over each pair (maxout)
        self.readout = nn.Linear(dec_hid_dim + enc_dim + emb_dim, 2 * out_dim)
        self.fc_out = nn.Linear(out_dim, vocab_size)
        self.dropout = nn.Dropout(dropout)

    def forward(
        self,
        trg_in: Tensor,
        encoded: RNNEncoderOut,
        incremental_state: dict | None = None,
        output_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        self._check_inputs(trg_in, encoded, incremental_state)
        incremental = incremental_state is not None
        start = incremental_state.get("steps", 0) if incremental else 0
        n_new = trg_in.size(1)
        hidden = encoded.hidden  # s_0 = [batch, dec_hid]
        if incremental and "hidden" in incremental_state:
            hidden = incremental_state["hidden"]

        embedded = self.dropout(self.embedding(trg_in))  # embedded = [batch, n_new, emb_dim]
        states, contexts, weights = [], [], []
        for t in range(n_new):  # the sequential loop: s_t needs s_{t-1}
            context, a = self.attention(hidden, encoded.keys, encoded.annotations,
                                        encoded.src_mask)  # [batch, enc_dim], [batch, src_len]
            hidden = self.rnn(torch.cat([embedded[:, t], context], dim=1), hidden)  # [b, dec]
            states.append(hidden)
            contexts.append(context)
            weights.append(a)
        out = torch.cat([torch.stack(states, 1), torch.stack(contexts, 1), embedded], dim=2)
        # out = [batch, n_new, dec_hid + enc_dim + emb_dim]; the output layers run once, batched
        t = self.readout(out).unflatten(-1, (self.out_dim, 2)).amax(dim=-1)  # [b, n, out_dim]
        t = select_outputs(self.dropout(t), output_mask, trg_in)  # as ConvS2S's decoder
        logits = self.fc_out(t)  # logits = [batch, n_new, vocab_size] (or [n_true, vocab])
        if incremental:
            incremental_state["hidden"] = hidden
            incremental_state["steps"] = start + n_new
        return logits, torch.stack(weights, dim=1).unsqueeze(1)  # [batch, 1, n_new, src_len]

    def _check_inputs(self, trg_in: Tensor, encoded: RNNEncoderOut,
                      incremental_state: dict | None) -> None:
        """As :class:`convs2s.model.decoder.Decoder`'s: token ids, 2-D, in the vocabulary, the
        encoder output's batch size, at most ``max_positions`` positions in all."""
        check_tokens(trg_in, "trg_in", self.vocab_size)
        if trg_in.size(0) != encoded.src_mask.size(0):
            raise ValueError(
                f"trg_in has batch size {trg_in.size(0)} but the encoder output has "
                f"{encoded.src_mask.size(0)}."
            )
        start = incremental_state.get("steps", 0) if incremental_state is not None else 0
        check_positions(start + trg_in.size(1), self.max_positions, "target sequence")

    def reorder_incremental_state(self, incremental_state: dict, new_order: Tensor) -> dict:
        """Make row ``b`` of the cache that of row ``new_order[b]`` (beam search), in place."""
        if "hidden" in incremental_state:
            incremental_state["hidden"] = incremental_state["hidden"].index_select(0, new_order)
        return incremental_state


class RNNAttentionSeq2Seq(nn.Module):
    """Bahdanau-style attentional GRU translator with ConvS2S's interface.

    Args:
        src_vocab_size, trg_vocab_size: vocabulary sizes.
        emb_dim: token embedding size (encoder and decoder).
        enc_hid_dim: GRU size per direction of the bidirectional encoder.
        dec_hid_dim: decoder GRU size.
        attn_dim: size of the additive attention's hidden layer (default: ``dec_hid_dim``).
        out_dim: units of the maxout deep output before the vocabulary projection (default:
            ``emb_dim``; ConvS2S likewise projects to ``emb_dim`` before its output layer).
        dropout: on the embeddings and on the output layer's input.
        max_positions: longest source / decoder input accepted (the RNN has no position
            embeddings; the limit keeps the interface, and the decoders' ``max_len`` check,
            identical to ConvS2S's).
        src_pad_idx, trg_pad_idx: padding tokens (pad on the right).

    PyTorch's default initialisation is used throughout (as in the PyTorch tutorials).
    ``RNNAttentionSeq2Seq(**model.config)`` rebuilds the architecture. Options are checked as
    :class:`convs2s.model.convs2s.ConvS2S` checks its own (``TypeError`` for a wrong type).
    """

    def __init__(
        self,
        src_vocab_size: int,
        trg_vocab_size: int,
        *,
        emb_dim: int = 256,
        enc_hid_dim: int = 512,
        dec_hid_dim: int = 512,
        attn_dim: int | None = None,
        out_dim: int | None = None,
        dropout: float = 0.25,
        max_positions: int = 128,
        src_pad_idx: int,
        trg_pad_idx: int,
    ) -> None:
        super().__init__()
        attn_dim = dec_hid_dim if attn_dim is None else attn_dim
        out_dim = emb_dim if out_dim is None else out_dim
        self.config = dict(
            src_vocab_size=src_vocab_size,
            trg_vocab_size=trg_vocab_size,
            emb_dim=emb_dim,
            enc_hid_dim=enc_hid_dim,
            dec_hid_dim=dec_hid_dim,
            attn_dim=attn_dim,
            out_dim=out_dim,
            dropout=dropout,
            max_positions=max_positions,
            src_pad_idx=src_pad_idx,
            trg_pad_idx=trg_pad_idx,
        )
        for name in ("src_vocab_size", "trg_vocab_size", "emb_dim", "enc_hid_dim",
                     "dec_hid_dim", "attn_dim", "out_dim", "max_positions"):
            self.config[name] = check_whole(self.config[name], name)
        check_fraction(dropout, "dropout")
        for side in ("src", "trg"):
            name = f"{side}_pad_idx"
            self.config[name] = check_token_id(self.config[name], name,
                                               self.config[f"{side}_vocab_size"])
        self.encoder = RNNEncoder(
            src_vocab_size, emb_dim=emb_dim, enc_hid_dim=enc_hid_dim, dec_hid_dim=dec_hid_dim,
            dropout=dropout, max_positions=max_positions, pad_idx=src_pad_idx,
        )
        self.decoder = RNNDecoder(
            trg_vocab_size, emb_dim=emb_dim, enc_hid_dim=enc_hid_dim, dec_hid_dim=dec_hid_dim,
            attn_dim=attn_dim, out_dim=out_dim, dropout=dropout, max_positions=max_positions,
            pad_idx=trg_pad_idx,
        )

    def encode(self, src: Tensor) -> RNNEncoderOut:
        """Encode ``src = [batch, src_len]`` (right-padded token ids)."""
        annotations, src_mask, s0 = self.encoder(src)
        keys = self.decoder.attention.keys(annotations)  # [batch, src_len, attn_dim]
        return RNNEncoderOut(annotations, keys, src_mask, s0)

    def decode(
        self, trg_in: Tensor, encoded: RNNEncoderOut, incremental_state: dict | None = None,
        output_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        """Decoder pass; see :class:`RNNDecoder` for incremental decoding."""
        return self.decoder(trg_in, encoded, incremental_state, output_mask)

    def forward(self, src: Tensor, trg_in: Tensor, *,
                output_mask: Tensor | None = None) -> tuple[Tensor, Tensor]:
        """``(logits [batch, trg_len, trg_vocab], attention [batch, 1, trg_len, src_len])``;
        with ``output_mask``, logits ``[n_true, trg_vocab]`` (as
        :class:`convs2s.model.convs2s.ConvS2S`)."""
        return self.decode(trg_in, self.encode(src), output_mask=output_mask)
