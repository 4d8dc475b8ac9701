"""Checks for notebook 05 · Training on Multi30k."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
import torch.nn.functional as F

from convs2s.course.checks._core import (
    _PAD,
    Hint,
    Shortcut,
    _answer,
    _assert_equal,
    _assert_tensor,
    _float,
    _gen,
    _made_up_sentences,
    _Run,
    _shape,
    exercise,
    form_calls,
)

__all__ = ["build_itos", "token_loss", "perplexity_from_loss"]

PERPLEXITY = Hint(
    nudge="the perplexity is a geometric mean of 1/p, the loss an arithmetic mean of -log p: "
          "which operation turns a mean of logarithms back into a geometric mean?",
    closer="which function undoes the natural logarithm, and which undoes log base 2? Test your "
           "function on two cases you can work out: a loss of 0, and a uniform guess over V words "
           "(a loss of log V)")
TOKEN_LOSS = Hint(
    nudge="which positions of trg_out are real target words, and over which positions does "
          "this mean run?",
    closer="compute the loss of one sentence alone and of the same sentence followed by five pads:"
           " the two differ. Which positions of trg_out make the difference, and how could the "
           "mean leave them out? (Read the loss function's documented arguments.)")
BUILD_ITOS = Hint(
    nudge="compare your list with what Vocab.build gives on a tiny input of your own: which "
          "tokens are missing or extra, and which stand in a different order?",
    closer="on a tiny input of your own, count by hand each token's occurrences: which reach "
           "min_freq? In what order does the expected list give tokens of equal count, and where "
           "are the specials?")
SPECIALS = Hint(
    nudge="the specials are an argument: are yours the ones you were given?",
    closer="print the first entries of your list and the specials you were given: are they the "
           "same, in the same order, and does any of them appear a second time later?")


@exercise(hint=BUILD_ITOS,
          shortcuts=(Shortcut("convs2s.data.vocab:Vocab.build", "Vocab.build",
                              "the exercise is to build the list yourself"),))
def build_itos(fn: Callable) -> None:
    """Exercise "a vocabulary by hand" (implement): equals ``Vocab.build(...).itos``."""
    from convs2s.data import Vocab

    run = _Run("build_itos")
    token_lists = [s.split() for s in _made_up_sentences(200, seed=12)]
    for min_freq in (1, 2, 5, 40):
        with run.case(f"build_itos(200 sentences, min_freq={min_freq})"):
            _assert_equal(_answer(fn(token_lists, min_freq), "items", "the token list"),
                          Vocab.build(token_lists, min_freq=min_freq).itos,
                          name="the token list")
    specials = ("<u>", "<p>", "<s>", "</s>", "w3")
    with run.case(f"build_itos(..., min_freq=2, specials={specials})", SPECIALS):
        _assert_equal(_answer(fn(token_lists, 2, specials), "items", "the token list"),
                      Vocab.build(token_lists, min_freq=2, specials=specials).itos,
                      name="the token list")
    run.done()


def _padded_logits(n_pad: int, pad_idx: int, *, sure_of_pad: bool):
    """Made-up logits ``[4, 6 + n_pad, 20]`` and targets whose last ``n_pad`` columns are pads.

    ``sure_of_pad``: at the pad positions the logits put almost all mass on ``<pad>``, as a
    model trained on the padded loss learns to (a pad always follows <eos> or a pad).
    """
    g = _gen(21)
    vocab, batch, real = 20, 4, 6
    trg = torch.randint(4, vocab, (batch, real), generator=g)  # real tokens, no pad
    trg[1, 4:] = pad_idx  # one shorter sentence: some padding even with n_pad = 0
    logits = torch.randn(batch, real, vocab, generator=g)  # [4, 6, 20], the same for any n_pad
    trg = torch.cat([trg, torch.full((batch, n_pad), pad_idx)], dim=1)  # [4, 6 + n_pad]
    extra = torch.randn(batch, n_pad, vocab, generator=_gen(22))  # [4, n_pad, 20]
    logits = torch.cat([logits, extra], dim=1)  # [4, 6 + n_pad, 20]
    if sure_of_pad:
        logits[trg == pad_idx] = -10.0
        logits[..., pad_idx][trg == pad_idx] = 10.0
    return logits, trg


#: What counts as the right loss, for this check and for grading (hidden/05.py) alike:
#: ``assert_close``'s float32 tolerances, absolute 1e-5 plus relative 1e-4.
LOSS_ATOL, LOSS_RTOL = 1e-5, 1e-4


def loss_holds(value: float, expected: float) -> bool:
    """``value`` is the loss ``expected`` to :data:`LOSS_ATOL` + :data:`LOSS_RTOL`."""
    return abs(value - expected) <= LOSS_ATOL + LOSS_RTOL * abs(expected)


@exercise(hint=TOKEN_LOSS)
def token_loss(fn: Callable) -> None:
    """Exercise "a loss that counts padding" (debug): the mean over real target tokens only."""
    run = _Run("token_loss")
    pad = _PAD
    results = {}
    for n_pad in (0, 10, 40):
        logits, trg = _padded_logits(n_pad, pad, sure_of_pad=True)
        with run.case(f"token_loss(logits {_shape(logits)}, trg_out with {n_pad} extra pad "
                      "columns)"):
            value = fn(logits, trg, pad)
            _assert_tensor(value, "the loss")
            if value.dim() != 0:
                raise AssertionError(f"the loss should be a scalar (0-dim tensor), got shape "
                                     f"{_shape(value)}")
            results[n_pad] = float(value)
    planted = [float(F.cross_entropy(lg.reshape(-1, lg.size(-1)), t.reshape(-1)))
               for lg, t in (_padded_logits(n, pad, sure_of_pad=True) for n in (0, 10, 40))]
    if all(math.isclose(results[n], p, rel_tol=1e-5, abs_tol=1e-7)
           for n, p in zip((0, 10, 40), planted, strict=True)):
        run.not_answered(
            "the planted bug is still there. Measured on the same sentences and the same "
            "predictions (a model that has learned that <pad> follows <eos>), with 0, 10 and 40 "
            "extra pad columns, this loss reads "
            + ", ".join(f"{p:.2f}" for p in planted)
            + ". A loss that moves when only padding is added measures the batches, not the "
            "translations: find why, fix it, then run this check again")
    logits, trg = _padded_logits(0, pad, sure_of_pad=False)
    expected = float(F.cross_entropy(logits.reshape(-1, 20), trg.reshape(-1), ignore_index=pad))
    with run.case("token_loss on a batch with one padded sentence"):
        if not loss_holds(results[0], expected):
            raise AssertionError(f"got {results[0]:.5f}, not the plain cross-entropy per real "
                                 "token (no label smoothing)")
    with run.case("the loss does not change when padding is added"):
        for n_pad in (10, 40):
            if not loss_holds(results[n_pad], results[0]):
                raise AssertionError(f"{results[0]:.4f} without extra padding, "
                                     f"{results[n_pad]:.4f} with {n_pad} extra pad columns")
    with run.case("token_loss with pad_idx=0"):
        logits, trg = _padded_logits(5, 0, sure_of_pad=False)
        value = _float(fn(logits, trg, 0), "the loss")
        expected = float(F.cross_entropy(logits.reshape(-1, 20), trg.reshape(-1),
                                         ignore_index=0))
        if not loss_holds(value, expected):
            raise AssertionError(f"got {value:.5f}, not the loss over the real tokens: use "
                                 "the pad_idx you are given")
    with run.case("gradients reach the logits of real tokens only"):
        logits, trg = _padded_logits(3, pad, sure_of_pad=False)
        logits.requires_grad_(True)
        _assert_tensor(fn(logits, trg, pad), "the loss").backward()
        if logits.grad is None:
            raise AssertionError("no gradient reached the logits")
        if bool(logits.grad[trg == pad].abs().sum() > 0):
            raise AssertionError("the logits at <pad> positions receive gradient")
    run.done()


#: What counts as the right perplexity, for this check and for grading (hidden/05.py) alike:
#: within this relative difference (float32 arithmetic, about 1e-7, is right). The task says so.
PERPLEXITY_REL_TOL = 1e-6


def _perplexity_holds(value: float, right: float) -> None:
    """``value`` is the perplexity ``right`` to :data:`PERPLEXITY_REL_TOL`; the message gives
    what was returned, never the value it is graded against."""
    if not math.isclose(value, right, rel_tol=PERPLEXITY_REL_TOL):
        raise AssertionError(f"got {value:.6g}, which is not this loss's perplexity (to a "
                             f"relative {PERPLEXITY_REL_TOL:g})")


@exercise(hint=PERPLEXITY, form=form_calls("number", (1.0,)))
def perplexity_from_loss(fn: Callable) -> None:
    """Exercise "perplexity from the loss" (derive): vs the perplexity of made-up losses."""
    run = _Run("perplexity_from_loss")
    with run.case("perplexity_from_loss(0.0) (a perfectly sure, correct model)"):
        _perplexity_holds(_float(fn(0.0)), 1.0)
    with run.case("perplexity_from_loss(log(8000)) (uniform over 8000 words)"):
        _perplexity_holds(_float(fn(math.log(8000))), 8000.0)
    for loss in (0.5, 2.3, 3.47, 7.0):
        with run.case(f"perplexity_from_loss({loss})"):
            _perplexity_holds(_float(fn(loss)), math.exp(loss))
    for loss in (0.0, 1.0, 2.5, math.log2(8000)):
        with run.case(f'perplexity_from_loss({loss:.4g}, unit="bits")'):
            _perplexity_holds(_float(fn(loss, "bits")), 2.0 ** loss)
    with run.case("the same model measured in nats and in bits"):
        nats = 3.47
        a, b = _float(fn(nats, "nats")), _float(fn(nats / math.log(2), "bits"))
        if not math.isclose(a, b, rel_tol=PERPLEXITY_REL_TOL):
            raise AssertionError(f"a loss of {nats} nats = {nats / math.log(2):.4g} bits gave "
                                 f"perplexities {a:.6g} and {b:.6g}; the perplexity does not "
                                 "depend on the unit")
    run.done()


# --------------------------------------------------------------------------------------------
# Probes of the hidden tests (``coursework/hidden/05.py``): run in the grading sandbox
# --------------------------------------------------------------------------------------------


def probe_token_loss_gradient(answers: dict, *, logits: torch.Tensor, trg: torch.Tensor,
                              pad: int):
    """The gradient of ``token_loss(logits, trg, pad)`` with respect to ``logits`` (a tensor of
    their shape), or None when no gradient reaches them."""
    fn = answers.get("token_loss")
    if fn is None:
        raise NameError("the answer cell does not define token_loss")
    logits = logits.detach().clone().requires_grad_(True)
    fn(logits, trg, pad).backward()
    return None if logits.grad is None else logits.grad.detach()
