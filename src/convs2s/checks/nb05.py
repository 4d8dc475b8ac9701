"""Checks for notebook 05 · Training on Multi30k."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from convs2s.checks._core import (
    _assert_equal,
    _assert_tensor,
    _float,
    _made_up_sentences,
    _Run,
    _shape,
    check,
)

__all__ = ["shift_for_teacher_forcing", "perplexity_from_loss", "build_itos"]






@check
def shift_for_teacher_forcing(fn: Callable) -> None:
    """Exercise "the teacher-forcing shift": decoder input and target, shifted by one."""
    from convs2s.data import TranslationDataset, Vocab, make_loader

    run = _Run("shift_for_teacher_forcing")
    hint = ("the decoder reads every token but the last (trg[:, :-1]) and must predict every "
            "token but the first (trg[:, 1:])")
    sentences = _made_up_sentences(24, seed=11)
    vocab = Vocab.build([s.split() for s in sentences], min_freq=1)
    ds = TranslationDataset(list(zip(sentences, sentences, strict=True)), str.split, str.split,
                            vocab, vocab)
    _, trg = next(iter(make_loader(ds, batch_size=8, shuffle=False, bucket=False)))
    before = trg.clone()
    what = f"shift_for_teacher_forcing(trg of shape {_shape(trg)})"
    with run.case(what, hint):
        result = fn(trg)
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise AssertionError(f"the result should be a pair (trg_in, trg_out), got "
                                 f"{type(result).__name__}")
        trg_in, trg_out = result
        _assert_tensor(trg_in, "trg_in")
        _assert_tensor(trg_out, "trg_out")
        expected = [trg.size(0), trg.size(1) - 1]
        if _shape(trg_in) != expected or _shape(trg_out) != expected:
            raise AssertionError(f"trg_in {_shape(trg_in)} and trg_out {_shape(trg_out)} should "
                                 f"both be {expected}")
    with run.case(f"{what}: the first decoder input of every row", hint):
        if not bool((trg_in[:, 0] == vocab.bos_idx).all()):
            raise AssertionError("not every row of trg_in starts with <bos>")
    with run.case(f"{what}: <eos> in the targets", hint):
        if not bool(((trg_out == vocab.eos_idx).sum(dim=1) == 1).all()):
            raise AssertionError("each row of trg_out should contain exactly one <eos>")
    with run.case(f"{what}: trg_out vs trg_in", hint):
        if not torch.equal(trg_out[:, :-1], trg_in[:, 1:]):
            raise AssertionError("trg_out is not trg_in shifted by one position")
        if not torch.equal(trg, before):
            raise AssertionError("trg was changed in place")
    run.done()


@check
def perplexity_from_loss(fn: Callable) -> None:
    """Exercise "perplexity from the loss": ``exp`` of the mean cross-entropy in nats."""
    run = _Run("perplexity_from_loss")
    hint = ("the loss is the mean negative log-probability per token in nats (natural log); "
            "undo the log: math.exp(loss)")
    with run.case("perplexity_from_loss(0.0) (a perfectly sure, correct model)", hint):
        _assert_equal(round(_float(fn(0.0)), 12), 1.0)
    with run.case("perplexity_from_loss(log(8000)) (uniform over 8000 words)", hint):
        value = _float(fn(math.log(8000)))
        if not math.isclose(value, 8000, rel_tol=1e-9):
            raise AssertionError(f"got {value:.6g}, expected 8000")
    for loss in (0.5, 2.3, 3.47, 7.0):
        with run.case(f"perplexity_from_loss({loss})", hint):
            value = _float(fn(loss))
            if not math.isclose(value, math.exp(loss), rel_tol=1e-9):
                raise AssertionError(f"got {value:.6g}, expected {math.exp(loss):.6g}")
    run.done()


@check
def build_itos(fn: Callable) -> None:
    """Exercise "a vocabulary by hand": equals ``Vocab.build(...).itos``."""
    from convs2s.data import Vocab

    run = _Run("build_itos")
    hint = ("count with collections.Counter; keep tokens seen >= min_freq times that are not "
            "specials; sort by (-count, token) so ties go alphabetically; specials come first")
    token_lists = [s.split() for s in _made_up_sentences(200, seed=12)]
    for min_freq in (1, 2, 5, 40):
        with run.case(f"build_itos(200 sentences, min_freq={min_freq})", hint):
            _assert_equal(list(fn(token_lists, min_freq)),
                          Vocab.build(token_lists, min_freq=min_freq).itos,
                          name="the token list")
    specials = ("<u>", "<p>", "<s>", "</s>", "w3")
    with run.case(f"build_itos(..., min_freq=2, specials={specials})",
                  "use the specials you are given, and do not list a special a second time"):
        _assert_equal(list(fn(token_lists, 2, specials)),
                      Vocab.build(token_lists, min_freq=2, specials=specials).itos,
                      name="the token list")
    run.done()
