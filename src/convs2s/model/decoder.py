"""The convolutional decoder of ConvS2S (Gehring et al., 2017, §3.2-3.3).

token + position embeddings g -> emb->hid -> n x [conv -> GLU -> attention -> residual]
-> hid->emb -> dropout -> emb->vocab.

Training sees the whole target at once: with causal padding every position only sees itself
and the k-1 tokens before it in each layer, so all positions are computed in parallel without
peeking at the future. At inference the decoder can run *incrementally*: one new token at a
time, caching the last k-1 inputs of every convolution instead of recomputing the prefix.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from convs2s.model.attention import Attention
from convs2s.model.encoder import EncoderOut
from convs2s.model.layers import (
    RESIDUAL_SCALE,
    ConvGLUBlock,
    check_padding,
    check_positions,
    check_tokens,
    make_embedding,
    make_linear,
    select_outputs,
)

IncrementalState = dict
"""The cache of incremental decoding: a plain dict the caller creates empty (``{}``).

The decoder fills it with ``"steps"`` (how many target positions it has processed) and
``"conv_inputs"`` (per layer, the last k-1 inputs of that layer's convolution,
``[batch, hid_dim, k-1]``). Reorder it with :meth:`Decoder.reorder_incremental_state`.
"""


class Decoder(nn.Module):
    """Convolutional decoder with one attention per layer.

    Args:
        vocab_size: target vocabulary size.
        emb_dim, hid_dim, n_layers, kernel_size, dropout, max_positions, pad_idx,
            weight_norm, init: as for :class:`convs2s.model.encoder.Encoder`.
        padding: ``"causal"`` (default): k-1 zeros on the left, position t sees tokens <= t.
            ``"same"``: (k-1)/2 zeros on each side, so position t also sees tokens t+1, ...,
            the very tokens it must predict. This decoder *cheats*: it is here only to show
            what goes wrong (near-zero training loss, useless translations). It cannot decode
            incrementally.
        share_input_output_embed: tie the output layer to the token embedding (fairseq's
            option of the same name; not in the paper). The logit of token i is then the
            dot product of the output vector with token i's own input embedding (plus a bias):
            one ``[vocab, emb_dim]`` matrix instead of two, which matters on a small corpus.
            As in fairseq, the tied layer is a plain linear layer: no weight norm, PyTorch's
            default bias initialisation. Default ``False``: two separate matrices.

    ``forward(trg_in, encoder_out, incremental_state=None, output_mask=None)``:

    - ``trg_in``: ``[batch, trg_len]`` target tokens shifted right (starting with <bos>).
    - ``encoder_out``: :class:`convs2s.model.encoder.EncoderOut`.
    - ``incremental_state``: None for a full pass. A dict (start with ``{}``) switches to
      incremental decoding: ``trg_in`` then holds only the **new** tokens (usually one column),
      their positions continue from the number of tokens already processed, and the dict is
      updated. Feeding a sentence in pieces gives the same outputs as one full pass. Meant for
      inference (eval mode).
    - ``output_mask``: optional ``[batch, trg_len]`` bool tensor. Given, the output layer runs
      only where it is True and ``logits`` is ``[n_true, vocab_size]`` (row order): training
      passes ``trg_out != pad`` so no vocabulary-sized work is spent on padding
      (:func:`convs2s.model.layers.select_outputs`; this course's optimisation, not the paper's).

    Returns ``(logits, attention)``: ``logits = [batch, trg_len, vocab_size]`` and
    ``attention = [batch, n_layers, trg_len, src_len]`` (for the new tokens only when
    incremental).
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
        padding: str = "causal",
        weight_norm: bool = True,
        init: str = "paper",
        share_input_output_embed: bool = False,
    ) -> None:
        super().__init__()
        check_padding(padding, kernel_size)
        self.vocab_size = vocab_size
        self.max_positions = max_positions
        self.pad_idx = pad_idx
        self.padding = padding
        self.tok_embedding = make_embedding(vocab_size, emb_dim, padding_idx=pad_idx, init=init)
        self.pos_embedding = make_embedding(max_positions, emb_dim, init=init)
        self.dropout = nn.Dropout(dropout)
        self.emb2hid = make_linear(
            emb_dim, hid_dim, dropout=dropout, weight_norm=weight_norm, init=init
        )
        self.blocks = nn.ModuleList(
            ConvGLUBlock(
                hid_dim,
                kernel_size,
                padding=padding,
                dropout=dropout,
                residual=False,
                weight_norm=weight_norm,
                init=init,
            )
            for _ in range(n_layers)
        )
        self.attentions = nn.ModuleList(
            Attention(hid_dim, emb_dim, weight_norm=weight_norm, init=init) for _ in range(n_layers)
        )
        self.hid2emb = make_linear(hid_dim, emb_dim, weight_norm=weight_norm, init=init)
        if share_input_output_embed:
            # nn.Linear(emb_dim, vocab) keeps its weight as [vocab, emb_dim]: the embedding's
            # shape, so the very same Parameter serves both (as in fairseq).
            self.fc_out = nn.Linear(emb_dim, vocab_size)
            self.fc_out.weight = self.tok_embedding.weight
        else:
            # fc_out's input has had dropout, hence dropout= in its initialisation.
            self.fc_out = make_linear(
                emb_dim, vocab_size, dropout=dropout, weight_norm=weight_norm, init=init
            )

    def forward(
        self,
        trg_in: Tensor,
        encoder_out: EncoderOut,
        incremental_state: IncrementalState | None = None,
        output_mask: Tensor | None = None,
    ) -> tuple[Tensor, Tensor]:
        self._check_inputs(trg_in, encoder_out, incremental_state)
        incremental = incremental_state is not None
        start = incremental_state.get("steps", 0) if incremental else 0
        n_new = trg_in.size(1)
        positions = torch.arange(start, start + n_new, device=trg_in.device)  # [n_new]
        g = self.tok_embedding(trg_in) + self.pos_embedding(positions)  # [batch, n_new, emb]
        g = self.dropout(g)

        x = self.emb2hid(g).transpose(1, 2)  # x = [batch, hid_dim, n_new]
        histories = None
        if incremental:  # at the start: k-1 zeros per layer, exactly the causal padding
            histories = (incremental_state.get("conv_inputs")
                         or [block.empty_history(x) for block in self.blocks])
        x, attention, new_histories = self.layers(x, g, encoder_out, histories)

        out = self.hid2emb(x.transpose(1, 2))  # out = [batch, n_new, emb_dim]
        out = self.dropout(out)
        out = select_outputs(out, output_mask, trg_in)  # [n_true, emb_dim] if a mask is given
        logits = self.fc_out(out)  # logits = [batch, n_new, vocab_size] (or [n_true, vocab])

        if incremental:
            incremental_state["steps"] = start + n_new
            incremental_state["conv_inputs"] = new_histories
        return logits, attention  # attention = [batch, n_layers, n_new, src_len]

    def layers(self, x: Tensor, g: Tensor, encoder_out: EncoderOut,
               histories: Sequence[Tensor] | None) -> tuple[Tensor, Tensor, list[Tensor] | None]:
        """The blocks and their attentions: ``x = [batch, hid_dim, n]`` -> the same shape, and
        the attention ``[batch, n_layers, n, src_len]``. ``histories``: None for a full pass
        (causal padding), else per layer the last k-1 inputs of its convolution
        (``[batch, hid_dim, k-1]``), whose successors (after ``x``) come back third. Public
        for the compiled decoding step (:mod:`convs2s.run.compiled_decoding`), which runs the
        same layers with its own cache."""
        new_histories = None if histories is None else []
        attentions = []
        for i, (block, attention) in enumerate(zip(self.blocks, self.attentions, strict=True)):
            residual = x
            if histories is not None:
                h = block(x, history=histories[i])  # h = [batch, hid_dim, n_new]
                new_histories.append(block.next_history(histories[i], x))
            else:
                h = block(x)  # h = [batch, hid_dim, trg_len]
            attended, a = attention(h.transpose(1, 2), g, encoder_out)
            # a = [batch, n_new, src_len]; attended = [batch, n_new, hid_dim]
            h = (h + attended.transpose(1, 2)) * RESIDUAL_SCALE  # attention's residual
            x = (h + residual) * RESIDUAL_SCALE  # the block's residual
            attentions.append(a)
        return x, torch.stack(attentions, dim=1), new_histories

    def _check_inputs(self, trg_in: Tensor, encoder_out: EncoderOut,
                      incremental_state: IncrementalState | None) -> None:
        """One clear error for a decoder input the decoder cannot use: not token ids, not 2-D,
        ids outside the vocabulary, another batch size than the encoder output's, incremental
        decoding with ``padding="same"``, or more positions than ``max_positions``."""
        check_tokens(trg_in, "trg_in", self.vocab_size)
        if not isinstance(encoder_out, EncoderOut):
            raise TypeError(f"the decoder takes the encoder's output, model.encode(src) (an "
                            f"EncoderOut), not {type(encoder_out).__name__}: decode(trg_in, "
                            "model.encode(src)).")
        if trg_in.size(0) != encoder_out.src_mask.size(0):
            raise ValueError(
                f"trg_in has batch size {trg_in.size(0)} but the encoder output has "
                f"{encoder_out.src_mask.size(0)}."
            )
        incremental = incremental_state is not None
        if incremental and self.padding != "causal":
            raise ValueError(
                "Incremental decoding needs padding='causal': with padding='same' every "
                "position depends on future tokens, which do not exist yet when decoding."
            )
        start = incremental_state.get("steps", 0) if incremental else 0
        check_positions(start + trg_in.size(1), self.max_positions, "target sequence")

    def reorder_incremental_state(self, incremental_state: IncrementalState, new_order: Tensor):
        """Make row ``b`` of the cache that of row ``new_order[b]``, in place.

        Beam search keeps batch·beam rows; after each step the surviving hypotheses are
        extensions of *some* previous rows, so their convolution histories must follow them.
        """
        if "conv_inputs" in incremental_state:
            incremental_state["conv_inputs"] = [
                h.index_select(0, new_order) for h in incremental_state["conv_inputs"]
            ]
        return incremental_state
