"""Checks for notebook 07 · ConvS2S vs an RNN with attention."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from convs2s.checks._core import (
    _assert_equal,
    _assert_int,
    _assert_tensor,
    _gen,
    _Run,
    _shape,
    check,
)

__all__ = ["augment_tokens", "augment_batch", "baseline_parameters"]


@check
def augment_tokens(fn: Callable) -> None:
    """Exercise "source-side augmentation": deletion and swaps, seeded, input untouched."""
    run = _Run("augment_tokens")
    hint = ("keep each token when torch.rand(1, generator=generator) >= p_delete (keep ids[0] "
            "if none survive), then n_swaps times swap two positions drawn with torch.randint; "
            "work on a new list")
    sent = [11, 12, 13, 14, 15, 16, 17]
    g = _gen(0)
    with run.case("augment_tokens(sentence, p_delete=0.0, n_swaps=0, g)", hint):
        _assert_equal(list(fn(list(sent), 0.0, 0, g)), sent)
    with run.case("augment_tokens(sentence, p_delete=1.0, n_swaps=0, g)",
                  "when every token is deleted, return [ids[0]]"):
        _assert_equal(list(fn(list(sent), 1.0, 0, g)), [11])
    with run.case("augment_tokens(sentence, p_delete=0.0, n_swaps=3, g)",
                  "swaps only reorder the tokens: no token lost or added"):
        swapped = list(fn(list(sent), 0.0, 3, g))
        _assert_equal(sorted(swapped), sent, name="the sorted result")
    with run.case("augment_tokens(sentence, p_delete=0.5, n_swaps=0, g)",
                  "deleting keeps the order of the remaining tokens"):
        deleted = list(fn(list(sent), 0.5, 0, g))
        if not 1 <= len(deleted) <= 7 or deleted != [t for t in sent if t in deleted]:
            raise AssertionError(f"got {deleted}: not an in-order subsequence of {sent}")
    with run.case("two calls with generators seeded alike", "draw every random number from "
                  "`generator` (never from the global generator)"):
        ids = list(sent)
        a = list(fn(ids, 0.3, 2, _gen(5)))
        b = list(fn(ids, 0.3, 2, _gen(5)))
        _assert_equal(a, b, name="the second result")
        _assert_equal(ids, sent, name="ids after the calls")
    with run.case("the share of tokens deleted with p_delete=0.2 (20 sentences of 100)", hint):
        lengths = [len(fn(list(range(100)), 0.2, 0, g)) for _ in range(20)]
        mean = sum(lengths) / 20
        if not 70 < mean < 90:
            raise AssertionError(f"{mean:.1f} of 100 tokens kept on average, expected about 80")
    run.done()


@check
def augment_batch(fn: Callable) -> None:
    """Exercise "augment a batch": augment each row's real tokens, re-pad on the right."""
    run = _Run("augment_batch")
    hint = ("for each row take row[row != pad_idx].tolist(), augment it with augment_tokens, "
            "then re-pad all rows with torch.nn.utils.rnn.pad_sequence(..., batch_first=True, "
            "padding_value=pad_idx)")
    batch = torch.tensor([[5, 6, 7, 8], [9, 10, 1, 1]])  # pad id 1
    g = _gen(0)
    with run.case("augment_batch(batch, pad_idx=1, p_delete=0.0, n_swaps=0, g)", hint):
        out = fn(batch, 1, 0.0, 0, g)
        _assert_tensor(out)
        if not torch.equal(out, batch):
            raise AssertionError(f"got {out.tolist()}, expected the batch unchanged")
    with run.case("augment_batch(batch, pad_idx=1, p_delete=0.0, n_swaps=2, g)", hint):
        out = fn(batch, 1, 0.0, 2, g)
        if _shape(out) != [2, 4] or sorted(out[1][out[1] != 1].tolist()) != [9, 10]:
            raise AssertionError(f"got {out.tolist()}: row 1 should hold 9 and 10, then pads")
    with run.case("augment_batch(batch, pad_idx=1, p_delete=1.0, n_swaps=0, g)",
                  "the batch gets as long as its longest augmented row, no longer"):
        out = fn(batch, 1, 1.0, 0, g)
        _assert_equal(out.tolist(), [[5], [9]])
    with run.case("augment_batch(batch, pad_idx=0, ...): rows of different lengths",
                  "pad with pad_idx on the right"):
        src = torch.tensor([[3, 4, 5, 0, 0], [6, 0, 0, 0, 0], [7, 8, 9, 10, 11]])
        out = fn(src, 0, 0.0, 0, g)
        if not torch.equal(out, src):
            raise AssertionError(f"got {out.tolist()}, expected {src.tolist()}")
    run.done()


def _rnn_configs() -> list[dict]:
    from convs2s.baselines import RNNAttentionSeq2Seq

    kwargs = [
        dict(emb_dim=8, enc_hid_dim=12, dec_hid_dim=16, attn_dim=10),
        dict(emb_dim=7, enc_hid_dim=9, dec_hid_dim=16, attn_dim=4, out_dim=3),
        dict(emb_dim=16, enc_hid_dim=16, dec_hid_dim=24),
    ]
    configs = []
    for i, kw in enumerate(kwargs):
        model = RNNAttentionSeq2Seq(30 + 7 * i, 40 - 3 * i, dropout=0.0, src_pad_idx=1,
                                    trg_pad_idx=1, **kw)
        configs.append((model.config, sum(p.numel() for p in model.parameters())))
    return configs


@check
def baseline_parameters(gru_fn: Callable, baseline_fn: Callable) -> None:
    """Exercise "count the baseline's parameters": ``gru_parameters``, ``baseline_parameters``."""
    run = _Run("baseline_parameters")
    gru_hint = ("each of the 3 gates has an input matrix [hidden, input], a hidden matrix "
                "[hidden, hidden] and two bias vectors [hidden]")
    for inp, hid in ((3, 4), (16, 32), (128, 5)):
        expected = sum(p.numel() for p in nn.GRU(inp, hid).parameters())
        with run.case(f"gru_parameters({inp}, {hid})", gru_hint):
            _assert_equal(_assert_int(gru_fn(inp, hid)), expected)
    hint = ("add up: both embeddings, 2 GRU directions gru_parameters(E, H), the s_0 layer "
            "(2H -> D with bias), attention (D·A + 2H·A + A + A), the GRUCell on "
            "[embedding; context] (E + 2H inputs), the maxout readout from [s; c; embedding] "
            "to 2·out_dim units with bias, and the output layer out_dim -> V_t with bias")
    for config, expected in _rnn_configs():
        short = {k: config[k] for k in ("emb_dim", "enc_hid_dim", "dec_hid_dim", "attn_dim",
                                        "out_dim")}
        with run.case(f"baseline_parameters(config with {short})", hint):
            _assert_equal(_assert_int(baseline_fn(dict(config))), expected, name="the count")
    run.done()
