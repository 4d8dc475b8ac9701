"""Checks for notebook 06 · Inference: beam search and BLEU."""

from __future__ import annotations

import copy
from collections.abc import Callable

import torch

from convs2s.course.checks._core import (
    Hint,
    _answer,
    _assert_equal,
    _assert_int,
    _float,
    _gen,
    _made_up_sentences,
    _Run,
    exercise,
    form_value,
)

__all__ = ["rerank", "brevity_prediction", "repeats"]

RERANK = Hint(
    nudge="each score has already been divided by its length once (α = 1); a different α asks "
          "for a different power of the same length. What must you undo first?",
    closer="take one hypothesis of 4 tokens plus <eos> and score s at α = 1: what was its sum of "
           "log-probabilities? What would its score be at α = 0, and at α = 2? In which order "
           "should the list come back?")
BREVITY = Hint(
    nudge="each output is a prefix of its reference: what are its clipped 1- to 4-gram "
          "precisions?",
    closer="with every precision at 100%, only the brevity penalty is left: how does sacreBLEU "
           "compute it from the output length c and the reference length r, and what is r/c here?")
REPEATS = Hint(
    nudge="which pairs of neighbouring n-grams does the loop compare? Try the smallest case by "
          "hand: ['a', 'a'] with n = 1",
    closer="for a list of exactly 2n tokens, how many pairs of neighbouring n-grams are there, and"
           " how many starts does your loop's range give? Print the starts")


def _made_up_hypotheses(n: int, seed: int) -> list[tuple[list[int], float]]:
    """Finished hypotheses as beam_search(..., length_penalty=1, return_all=True) gives them."""
    g = _gen(seed)
    hyps = []
    for _ in range(n):
        length = int(torch.randint(0, 12, (1,), generator=g))
        tokens = torch.randint(4, 100, (length,), generator=g).tolist()
        log_probs = torch.rand(length + 1, generator=g, dtype=torch.float64) * -3.0
        hyps.append((tokens, float(log_probs.sum()) / (length + 1)))  # score with α = 1
    return sorted(hyps, key=lambda h: h[1], reverse=True)


def assert_unchanged(given, original: list[tuple[list[int], float]]) -> None:
    """The rule the task states: ``rerank`` leaves the list it is given as it was (exact types,
    the original's values); AssertionError otherwise."""
    same = (type(given) is list and len(given) == len(original) and all(
        type(pair) is tuple and len(pair) == 2 and type(pair[0]) is list
        and type(pair[1]) is float and pair[1] == score and len(pair[0]) == len(tokens)
        and all(type(t) is int and t == u for t, u in zip(pair[0], tokens, strict=True))
        for pair, (tokens, score) in zip(given, original, strict=True)))
    if not same:
        raise AssertionError("rerank changed the list of hypotheses it was given: return a new "
                             "list and leave the argument as it was")


@exercise(hint=RERANK)
def rerank(fn: Callable) -> None:
    """Exercise "re-rank the finished hypotheses": order by Σ log p / (len + 1) ** α."""
    run = _Run("rerank")
    for seed in (0, 1, 2):
        hyps = _made_up_hypotheses(6, seed=13 + seed)
        for alpha in (1.0, 0.0, 0.5, 2.0):
            expected = sorted(hyps, key=lambda h: h[1] * (len(h[0]) + 1) / (len(h[0]) + 1)
                              ** alpha, reverse=True)
            with run.case(f"rerank(6 hypotheses, alpha={alpha}) (set {seed})"):
                given = copy.deepcopy(hyps)
                result = [[_assert_int(token, "each token") for token in
                           _answer(tokens, "items", "each hypothesis", limit=1_000)]
                          for tokens in _answer(fn(given, alpha), "items", "the order",
                                                limit=1_000)]
                _assert_equal(result, [t for t, _ in expected], name="the order")
                assert_unchanged(given, hyps)
    run.done()


def _halved_outputs_bleu(kept: int = 1, parts: int = 2):
    """sacreBLEU of outputs that are the first ``kept/parts`` of their references (whose
    lengths are multiples of ``parts``): the first half by default."""
    import sacrebleu

    metric = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True)
    refs = [s for s in _made_up_sentences(90, seed=14, min_len=8, max_len=24)
            if len(s.split()) % parts == 0]
    hyps = [" ".join(s.split()[: len(s.split()) * kept // parts]) for s in refs]
    return metric.corpus_score(hyps, [refs])


def _halved_outputs_score(kept: int = 1, parts: int = 2) -> float:
    """The BLEU score of :func:`_halved_outputs_bleu` (what the prediction is compared with)."""
    return _halved_outputs_bleu(kept, parts).score


def accept_brevity_prediction(prediction, measured: float) -> None:
    """What this exercise accepts (its check and its hidden test alike): BLEU on the 0-100
    scale within 1 point of the measurement; AssertionError otherwise."""
    predicted = _float(prediction, "prediction")
    if abs(predicted - measured) <= 1.0:  # holds, even below 1: a class's version may measure
        return  # under 2 (outputs a fifth as long: 1.83)
    if 0 < predicted <= 1 < measured:
        raise AssertionError("BLEU is reported on the 0-100 scale, not as a fraction")
    raise AssertionError("it did not hold (it must be within 1 BLEU point of the measurement)")


def _brevity_lines() -> list[str]:
    score = _halved_outputs_bleu()
    return [f"measured with sacreBLEU: {score.sys_len} output tokens vs {score.ref_len} "
            f"reference tokens; precisions {' / '.join(f'{p:.0f}' for p in score.precisions)}; "
            f"brevity penalty {score.bp:.3f}; BLEU {score.score:.2f}"]


@exercise(hint=BREVITY, form=form_value("number"), accept=accept_brevity_prediction,
          measure=_halved_outputs_score, show=_brevity_lines)
def brevity_prediction(prediction) -> None:
    """Exercise "outputs half as long" (predict, then measure): vs sacreBLEU's measurement."""
    run = _Run("brevity_prediction")
    with run.case("your prediction", Hint(nudge="write one number: BLEU on the 0-100 scale",
                                          closer="a float or an int, not a string or a list")):
        predicted = _float(prediction, "prediction")
    score = _halved_outputs_bleu()
    with run.case(f"your prediction {predicted:g}"):
        accept_brevity_prediction(predicted, score.score)
    run.held()


def _planted_repeats(tokens, n=1):
    """The notebook's planted bug: the loop stops one start too early."""
    for i in range(len(tokens) - 2 * n):
        if tokens[i: i + n] == tokens[i + n: i + 2 * n]:
            return True
    return False


@exercise(hint=REPEATS)
def repeats(fn: Callable) -> None:
    """Exercise "stuttering outputs" (debug): the same n-gram twice in a row."""
    run = _Run("repeats")
    cases = [
        ((["a", "a"], 1), True),
        ((["a", "b", "a"], 1), False),
        ((["in", "a", "in", "a"], 2), True),
        ((["in", "a", "in", "a"], 1), False),
        (([], 1), False),
        ((["a"], 1), False),
        ((["a", "b", "c"], 2), False),
        (("a man in a red shirt shirt .".split(), 1), True),
        (("a man in a red shirt shirt .".split(), 2), False),
        (("a dog runs on the grass on the grass".split(), 3), True),
        (("a dog runs on the grass on the grass".split(), 2), False),
        (("x y z x y z".split(), 3), True),
        (("two men play play".split(), 1), True),
        (("a a".split(), 2), False),
    ]
    answers = []
    with run.case(f"repeats(...) on {len(cases)} token lists"):
        for (tokens, n), _ in cases:
            answers.append(_answer(fn(list(tokens), n), "bool"))
    if answers == [_planted_repeats(list(t), n) for (t, n), _ in cases]:
        run.not_answered("the planted bug is still there: repeats(['two', 'men', 'play', "
                         "'play'], 1) is still False. Find why, fix it, then run this check "
                         "again")
    for ((tokens, n), expected), answer in zip(cases, answers, strict=True):
        with run.case(f"repeats({tokens}, n={n})"):
            _assert_equal(answer, expected)
    run.done()


# --------------------------------------------------------------------------------------------
# Probes of the hidden tests (``coursework/hidden/06.py``): run in the grading sandbox
# --------------------------------------------------------------------------------------------


def probe_rerank(answers: dict, *, hypotheses: list, alpha: float) -> tuple:
    """(what ``rerank(hypotheses, alpha)`` returns, the list ``hypotheses`` after the call): the
    hidden test judges the order and that the argument was left as it was."""
    fn = answers.get("rerank")
    if fn is None:
        raise NameError("the answer cell does not define rerank")
    result = fn(hypotheses, alpha)
    return result, hypotheses
