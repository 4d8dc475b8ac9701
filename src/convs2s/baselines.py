"""The recurrent baseline ConvS2S was measured against, and tools for a fair comparison.

Gehring et al. (2017) compare ConvS2S with recurrent translators built on the attention of
Bahdanau, Cho & Bengio (2015, "Neural Machine Translation by Jointly Learning to Align and
Translate"). This module holds such a model, written so that it plugs into everything the course
built for ConvS2S:

- :class:`RNNAttentionSeq2Seq`: bidirectional GRU encoder, additive ("Bahdanau") attention, GRU
  decoder trained with teacher forcing. Same call contract as :class:`convs2s.model.ConvS2S`:
  ``logits, attention = model(src, trg_in)`` (``attention = [batch, 1, trg_len, src_len]``: one
  attention per output step, where ConvS2S has one per decoder layer), ``model.encode(src)``,
  ``model.decode(trg_in, encoded, incremental_state)``, ``model.decoder.
  reorder_incremental_state`` and ``model.config``. :func:`convs2s.decode.greedy_decode`,
  :func:`convs2s.decode.beam_search`, :class:`convs2s.translate.Translator`,
  :func:`convs2s.train.sequence_loss` and :func:`convs2s.train.evaluate_loss` work unchanged.
- :func:`rnn_parameter_count` (the count as a formula) and :func:`matched_rnn_config` (the
  hidden size whose parameter count is closest to a given ConvS2S's), so that comparisons are
  at matched size.
- :func:`train_side_by_side`: trains several models in one process, interleaving their steps on
  the same sequence of batches with the same optimizer settings, for a fixed number of steps
  each (speed) or an equal training-time budget each (quality at equal wall time).
- :func:`decoding_speed`: sentences per second of greedy decoding or beam search.
- :func:`checkpoint_payload` / :func:`model_from_checkpoint`: checkpoints in the format of
  :mod:`convs2s.checkpoint`, with a ``model_class`` entry so that any of the course's model
  classes (ConvS2S, this baseline, :class:`convs2s.variants.VariantConvS2S`) is rebuilt from
  ``model_config``.

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
decoder has no such loop in training: all positions go through each convolution at once.
"""

from __future__ import annotations

import importlib
import math
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import NamedTuple

import torch
from torch import Tensor, nn

from convs2s.layers import check_length, check_tokens

__all__ = [
    "AdditiveAttention",
    "RNNEncoder",
    "RNNEncoderOut",
    "RNNDecoder",
    "RNNAttentionSeq2Seq",
    "rnn_parameter_count",
    "matched_rnn_config",
    "RunLog",
    "train_side_by_side",
    "decoding_speed",
    "MODEL_CLASSES",
    "checkpoint_payload",
    "model_from_checkpoint",
    "translator_from_checkpoint",
]


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
        check_tokens(src, "src", self.vocab_size)
        src_len = src.size(1)
        check_length(src_len, self.max_positions, "source sentence")
        src_mask = src != self.pad_idx  # [batch, src_len], True = real token
        lengths = src_mask.sum(dim=1)
        if not bool((lengths > 0).all()):
            raise ValueError(
                "Every source sentence needs at least one non-pad token: attention over an "
                "all-padding source is undefined."
            )
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


class RNNDecoder(nn.Module):
    """GRU decoder with additive attention; one step per target token.

    ``forward(trg_in, encoded, incremental_state=None)`` follows the contract of
    :class:`convs2s.decoder.Decoder`: a full pass over ``trg_in = [batch, trg_len]`` (teacher
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
    ) -> tuple[Tensor, Tensor]:
        check_tokens(trg_in, "trg_in", self.vocab_size)
        if trg_in.size(0) != encoded.src_mask.size(0):
            raise ValueError(
                f"trg_in has batch size {trg_in.size(0)} but the encoder output has "
                f"{encoded.src_mask.size(0)}."
            )
        incremental = incremental_state is not None
        start = incremental_state.get("steps", 0) if incremental else 0
        n_new = trg_in.size(1)
        check_length(start + n_new, self.max_positions, "target sequence")
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
        logits = self.fc_out(self.dropout(t))  # logits = [batch, n_new, vocab_size]
        if incremental:
            incremental_state["hidden"] = hidden
            incremental_state["steps"] = start + n_new
        return logits, torch.stack(weights, dim=1).unsqueeze(1)  # [batch, 1, n_new, src_len]

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
    ``RNNAttentionSeq2Seq(**model.config)`` rebuilds the architecture.
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
            value = self.config[name]
            if not isinstance(value, int) or value < 1:
                raise ValueError(f"{name}={value!r} must be a positive integer.")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"dropout={dropout} must be in [0, 1).")
        for name, vocab in (("src_pad_idx", src_vocab_size), ("trg_pad_idx", trg_vocab_size)):
            if not 0 <= self.config[name] < vocab:
                raise ValueError(f"{name}={self.config[name]} is not a token id below {vocab}.")
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
        self, trg_in: Tensor, encoded: RNNEncoderOut, incremental_state: dict | None = None
    ) -> tuple[Tensor, Tensor]:
        """Decoder pass; see :class:`RNNDecoder` for incremental decoding."""
        return self.decoder(trg_in, encoded, incremental_state)

    def forward(self, src: Tensor, trg_in: Tensor) -> tuple[Tensor, Tensor]:
        """``(logits [batch, trg_len, trg_vocab], attention [batch, 1, trg_len, src_len])``."""
        return self.decode(trg_in, self.encode(src))


# --------------------------------------------------------------------------------------------
# Parameter counts and matching
# --------------------------------------------------------------------------------------------


def _gru_parameters(input_size: int, hidden: int) -> int:
    # three gates (reset, update, candidate), each with input and hidden weights and two biases
    return 3 * hidden * (input_size + hidden) + 6 * hidden


def rnn_parameter_count(
    src_vocab_size: int,
    trg_vocab_size: int,
    *,
    emb_dim: int = 256,
    enc_hid_dim: int = 512,
    dec_hid_dim: int = 512,
    attn_dim: int | None = None,
    out_dim: int | None = None,
    **_ignored,
) -> int:
    """The parameter count of :class:`RNNAttentionSeq2Seq`, from the formula (accepts a config).

    encoder embedding V_s·E + bidirectional GRU 2·(3H(E + H) + 6H) + W_init (2H·D + D)
    + attention (D·A + 2H·A + A + A) + decoder embedding V_t·E + GRU cell 3D(E + 2H + D) + 6D
    + maxout readout (D + 2H + E)·2O + 2O + output layer O·V_t + V_t.
    """
    E, H, D = emb_dim, enc_hid_dim, dec_hid_dim
    A = D if attn_dim is None else attn_dim
    O = E if out_dim is None else out_dim
    encoder = src_vocab_size * E + 2 * _gru_parameters(E, H) + 2 * H * D + D
    attention = D * A + 2 * H * A + A + A
    decoder = trg_vocab_size * E + _gru_parameters(E + 2 * H, D)
    output = (D + 2 * H + E) * 2 * O + 2 * O + O * trg_vocab_size + trg_vocab_size
    return encoder + attention + decoder + output


def matched_rnn_config(
    target_parameters: int,
    src_vocab_size: int,
    trg_vocab_size: int,
    *,
    src_pad_idx: int,
    trg_pad_idx: int,
    emb_dim: int = 256,
    dropout: float = 0.25,
    max_positions: int = 128,
    multiple_of: int = 8,
) -> dict:
    """The :class:`RNNAttentionSeq2Seq` config closest in parameters to ``target_parameters``.

    Embedding size is fixed (use the ConvS2S model's ``emb_dim``), and so is the maxout
    output size (``out_dim = emb_dim``, as ConvS2S projects to ``emb_dim`` before its output
    layer); the encoder's GRU size per direction H, the decoder's D and the attention size A
    are set to one hidden size ``hid = H = D = A`` (a multiple of ``multiple_of``), the one
    whose count is closest. The result equals ``RNNAttentionSeq2Seq(**config).config``.
    """
    if target_parameters < 1:
        raise ValueError(f"target_parameters={target_parameters} must be positive.")

    def config(hid: int) -> dict:
        return dict(src_vocab_size=src_vocab_size, trg_vocab_size=trg_vocab_size,
                    emb_dim=emb_dim, enc_hid_dim=hid, dec_hid_dim=hid, attn_dim=hid,
                    out_dim=emb_dim, dropout=dropout, max_positions=max_positions,
                    src_pad_idx=src_pad_idx, trg_pad_idx=trg_pad_idx)

    best = min(range(multiple_of, 8192 + 1, multiple_of),
               key=lambda h: abs(rnn_parameter_count(**config(h)) - target_parameters))
    return config(best)


# --------------------------------------------------------------------------------------------
# Training several models under equal conditions
# --------------------------------------------------------------------------------------------


Batches = Sequence[tuple[Tensor, Tensor]] | Callable[[int], Sequence[tuple[Tensor, Tensor]]]
"""A list of ``(src, trg)`` batches (cycled), or a function ``epoch -> list of batches``."""


@dataclass
class RunLog:
    """What :func:`train_side_by_side` measured for one model."""

    name: str
    parameters: int
    steps: int = 0
    seconds: float = 0.0  # time spent in training steps only (evaluation excluded)
    tokens: int = 0  # real (non-pad) target tokens trained on
    history: list[dict] = field(default_factory=list)  # {"seconds","steps","valid_loss",...}

    @property
    def tokens_per_s(self) -> float:
        return self.tokens / self.seconds if self.seconds > 0 else float("nan")

    @property
    def final_valid_loss(self) -> float:
        return self.history[-1]["valid_loss"] if self.history else float("nan")


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def train_side_by_side(
    models: dict[str, nn.Module],
    batches: Batches | dict[str, Batches],
    *,
    pad_idx: int,
    seconds: float | None = None,
    steps: int | None = None,
    valid_batches: Sequence[tuple[Tensor, Tensor]] | None = None,
    eval_every: float | None = None,
    lr: float = 2e-3,
    warmup_steps: int = 100,
    weight_decay: float = 1e-4,
    clip_norm: float = 0.1,
    label_smoothing: float = 0.1,
    device: torch.device | str = "cpu",
    amp: bool = False,
    seed: int = 0,
    log: Callable[[str], None] | None = None,
) -> dict[str, RunLog]:
    """Train every model in ``models`` under identical conditions, interleaved in one process.

    Every model sees the same sequence of ``(src, trg)`` batches (``batches``: a list that is
    cycled, or ``epoch -> list``; a dict ``{name: batches}`` gives each model its own stream,
    e.g. to compare data augmentations), with the same optimizer and settings as
    :mod:`convs2s.train` (AdamW, betas (0.9, 0.98), linear warm-up then constant ``lr``, gradient
    clipping at ``clip_norm``, label smoothing). Each step is timed on its own; the next step
    always goes to the model that has used the *least* training time so far, so the models'
    clocks advance together and a slow-down of the machine hits all of them alike.

    Give ``steps`` (each model does exactly that many steps on batches 0..steps-1: a speed
    measurement) and/or ``seconds`` (each model trains until it has used that much training
    time: quality at equal wall time). With ``valid_batches``, the validation loss
    (per-token cross-entropy, no smoothing) is measured every ``eval_every`` seconds of each
    model's training time and at the end; evaluation time is not counted.

    ``amp=True`` trains in bfloat16 autocast on CUDA (as :mod:`convs2s.train`).
    Returns ``{name: RunLog}``.
    """
    from convs2s.train import evaluate_loss, sequence_loss

    if seconds is None and steps is None:
        raise ValueError("Give steps (a speed measurement) and/or seconds (equal time budget).")
    if not models:
        raise ValueError("models is empty.")
    device = torch.device(device)
    use_amp = amp and device.type == "cuda"
    streams = batches if isinstance(batches, dict) else {name: batches for name in models}
    if set(streams) != set(models):
        raise ValueError(f"batches has streams for {sorted(streams)}, models are "
                         f"{sorted(models)}.")
    epochs: dict[tuple[int, int], Sequence] = {}  # (id of the stream, epoch) -> its batches

    def batch_at(name: str, i: int):
        # the i-th batch of the model's stream (cycling through epochs); shared streams are
        # computed once, so every model gets the very same tensors
        stream = streams[name]
        get_epoch = stream if callable(stream) else (lambda _epoch: stream)
        epoch, n = 0, 0
        while True:
            key = (id(stream), epoch)
            if key not in epochs:
                epochs[key] = get_epoch(epoch)
            size = len(epochs[key])
            if size == 0:
                raise ValueError(f"the batches for {name} are empty.")
            if i < n + size:
                return epochs[key][i - n]
            n += size
            epoch += 1

    torch.manual_seed(seed)
    logs, optims = {}, {}
    for name, model in models.items():
        model.to(device).train()
        logs[name] = RunLog(name, sum(p.numel() for p in model.parameters() if p.requires_grad))
        optims[name] = torch.optim.AdamW(model.parameters(), lr=lr, betas=(0.9, 0.98),
                                         weight_decay=weight_decay)
    next_eval = {name: eval_every for name in models}

    def evaluate(name: str) -> None:
        if valid_batches is None:
            return
        model, run = models[name], logs[name]
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            loss = evaluate_loss(model, valid_batches, pad_idx, device)
        run.history.append({"seconds": run.seconds, "steps": run.steps, "valid_loss": loss,
                            "valid_ppl": math.exp(min(loss, 50.0))})
        if log is not None:
            log(f"{name:>12}: {run.steps:5d} steps  {run.seconds:7.1f} s  valid loss "
                f"{loss:.3f}  ppl {math.exp(min(loss, 50.0)):8.2f}")

    def done(run: RunLog) -> bool:
        return (steps is not None and run.steps >= steps) or (
            seconds is not None and run.seconds >= seconds)

    if valid_batches is not None and eval_every is not None:
        for name in models:
            evaluate(name)
    while True:
        live = [name for name in models if not done(logs[name])]
        if not live:
            break
        name = min(live, key=lambda n: (logs[n].seconds, list(models).index(n)))
        model, run, optimizer = models[name], logs[name], optims[name]
        src, trg = batch_at(name, run.steps)
        _sync(device)
        t0 = time.perf_counter()
        src, trg = src.to(device), trg.to(device)
        trg_in, trg_out = trg[:, :-1], trg[:, 1:]
        for group in optimizer.param_groups:
            group["lr"] = lr * min(1.0, (run.steps + 1) / max(warmup_steps, 1))
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=use_amp):
            logits, _ = model(src, trg_in)
        loss = sequence_loss(logits, trg_out, pad_idx, label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), clip_norm)
        optimizer.step()
        loss_value = loss.item()  # also waits for the GPU
        _sync(device)
        run.seconds += time.perf_counter() - t0
        run.steps += 1
        run.tokens += int((trg_out != pad_idx).sum())
        if not math.isfinite(loss_value):
            raise FloatingPointError(f"{name}: the training loss became {loss_value} at step "
                                     f"{run.steps}; lower lr.")
        if next_eval[name] is not None and run.seconds >= next_eval[name] and not done(run):
            evaluate(name)
            next_eval[name] += eval_every
    for name in models:
        evaluate(name)
        models[name].eval()
    return logs


def training_flops(
    model: nn.Module, src: Tensor, trg: Tensor, *, pad_idx: int, label_smoothing: float = 0.1
) -> dict[str, float]:
    """Floating-point operations of one training step (forward + backward) on one batch.

    Counted with :class:`torch.utils.flop_counter.FlopCounterMode`, which adds up the matrix
    products and convolutions (including those inside ``nn.GRU``/``nn.GRUCell``), i.e. nearly
    all of the arithmetic; element-wise work (GLU, softmax, dropout) is not counted. The step
    runs on a CPU copy of ``model``, so the model's weights and gradients are untouched. The
    count does not depend on the device, and on the CPU the GRU runs as matrix products the
    counter sees (on a GPU, cuDNN's fused GRU kernel would be invisible to it).

    Returns ``{"flops": total, "tokens": real target tokens, "flops_per_token": ...}``. Padding
    positions are computed too, so ``flops_per_token`` is per *real* token, the same unit as the
    tokens/s of :func:`train_side_by_side`: tokens/s x flops/token = arithmetic rate achieved.
    """
    import copy

    from torch.utils.flop_counter import FlopCounterMode

    from convs2s.train import sequence_loss

    twin = copy.deepcopy(model).cpu().train()
    src, trg = src.cpu(), trg.cpu()
    trg_in, trg_out = trg[:, :-1], trg[:, 1:]
    tokens = int((trg_out != pad_idx).sum())
    if tokens == 0:
        raise ValueError("the batch has no real target tokens (all padding).")
    with FlopCounterMode(display=False) as counter:
        logits, _ = twin(src, trg_in)
        sequence_loss(logits, trg_out, pad_idx, label_smoothing).backward()
    flops = float(counter.get_total_flops())
    return {"flops": flops, "tokens": tokens, "flops_per_token": flops / tokens}


def decoding_speed(
    model: nn.Module,
    src_batches: Sequence[Tensor],
    *,
    bos_idx: int,
    eos_idx: int | None,
    max_len: int,
    beam_size: int = 1,
    device: torch.device | str = "cpu",
) -> dict:
    """Translate every batch of ``src_batches`` and measure sentences per second.

    ``beam_size=1`` uses :func:`convs2s.decode.greedy_decode`, otherwise
    :func:`convs2s.decode.beam_search` (both incremental). ``eos_idx=None`` switches <eos> off
    (no token can end a sentence), so every sentence gets exactly ``max_len`` output tokens:
    two models then do the same number of decoding steps, whatever they have learned (an
    undertrained model may stop much earlier or later than another one).

    Returns ``{"sentences", "seconds", "sentences_per_s", "output_tokens", "outputs"}``
    (``outputs``: token-id lists in batch order).
    """
    from convs2s.decode import beam_search, greedy_decode

    if eos_idx is None:
        eos_idx = -1  # no token id is -1: decoding never stops early
    device = torch.device(device)
    model.to(device)
    outputs: list[list[int]] = []
    seconds, sentences = 0.0, 0
    for src in src_batches:
        src = src.to(device)
        _sync(device)
        t0 = time.perf_counter()
        if beam_size == 1:
            ids = greedy_decode(model, src, max_len=max_len, bos_idx=bos_idx, eos_idx=eos_idx)
        else:
            ids = beam_search(model, src, beam_size=beam_size, max_len=max_len,
                              bos_idx=bos_idx, eos_idx=eos_idx)
        _sync(device)
        seconds += time.perf_counter() - t0
        sentences += src.size(0)
        outputs.extend(ids)
    return {"sentences": sentences, "seconds": seconds,
            "sentences_per_s": sentences / seconds if seconds > 0 else float("nan"),
            "output_tokens": sum(len(o) for o in outputs), "outputs": outputs}


# --------------------------------------------------------------------------------------------
# Checkpoints for any of the course's model classes
# --------------------------------------------------------------------------------------------

#: ``model_class`` entry of a checkpoint -> "module:ClassName" (imported when needed).
MODEL_CLASSES = {
    "ConvS2S": "convs2s.model:ConvS2S",
    "RNNAttentionSeq2Seq": "convs2s.baselines:RNNAttentionSeq2Seq",
    "VariantConvS2S": "convs2s.variants:VariantConvS2S",
}


def _model_class(name: str) -> type:
    if name not in MODEL_CLASSES:
        raise ValueError(f"Unknown model_class {name!r}; known: {sorted(MODEL_CLASSES)}.")
    module, cls = MODEL_CLASSES[name].split(":")
    return getattr(importlib.import_module(module), cls)


def checkpoint_payload(model: nn.Module, src_vocab, trg_vocab, **extra) -> dict:
    """A payload for :func:`convs2s.checkpoint.save_checkpoint`: the checkpoint format of
    :mod:`convs2s.train` (``model_config``, ``model``, both vocabularies, tokenizers) plus
    ``model_class`` naming the class to rebuild."""
    from convs2s.checkpoint import vocab_to_dict

    name = type(model).__name__
    if name not in MODEL_CLASSES:
        raise ValueError(
            f"{name} is not one of the course's model classes {sorted(MODEL_CLASSES)}."
        )
    payload = {"model_class": name, "model_config": dict(model.config),
               "model": model.state_dict(), "src_vocab": vocab_to_dict(src_vocab),
               "trg_vocab": vocab_to_dict(trg_vocab),
               "tokenizers": {"src_lang": "de", "trg_lang": "en", "lower": True}}
    payload.update(extra)
    return payload


def model_from_checkpoint(checkpoint: dict | str | os.PathLike, map_location="cpu") -> nn.Module:
    """Rebuild the model of a checkpoint (a path or a loaded dict), weights loaded, eval mode.

    Checkpoints without ``model_class`` (those :mod:`convs2s.train` writes) are ConvS2S.
    """
    from convs2s.checkpoint import load_checkpoint

    data = checkpoint if isinstance(checkpoint, dict) else load_checkpoint(checkpoint,
                                                                          map_location)
    model = _model_class(data.get("model_class", "ConvS2S"))(**data["model_config"])
    model.load_state_dict(data["model"])
    return model.eval()


def translator_from_checkpoint(path: str | os.PathLike, device=None):
    """A :class:`convs2s.translate.Translator` for a checkpoint of any course model class."""
    from convs2s.checkpoint import load_checkpoint, vocab_from_dict
    from convs2s.translate import Translator

    data = load_checkpoint(path)
    tok = data.get("tokenizers", {})
    return Translator(model_from_checkpoint(data), vocab_from_dict(data["src_vocab"]),
                      vocab_from_dict(data["trg_vocab"]), src_lang=tok.get("src_lang", "de"),
                      trg_lang=tok.get("trg_lang", "en"), lower=tok.get("lower", True),
                      device=device if device is not None else "cpu")
