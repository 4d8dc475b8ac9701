"""Checks for notebook 06 · Inference: beam search and BLEU."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from convs2s.checks._core import (
    _assert_equal,
    _float,
    _gen,
    _made_up_sentences,
    _Run,
    check,
)

__all__ = ["rerank", "brevity_penalty", "repeats"]


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


@check
def rerank(fn: Callable) -> None:
    """Exercise "re-rank the finished hypotheses": order by Σ log p / (len + 1) ** α."""
    run = _Run("rerank")
    hint = ("each score is Σ log p / (len(tokens) + 1) (the +1 counts <eos>): multiply it back "
            "to Σ log p, divide by (len(tokens) + 1) ** alpha, sort best (highest) first and "
            "return the token lists")
    for seed in (0, 1, 2):
        hyps = _made_up_hypotheses(6, seed=13 + seed)
        for alpha in (1.0, 0.0, 0.5, 2.0):
            expected = sorted(hyps, key=lambda h: h[1] * (len(h[0]) + 1) / (len(h[0]) + 1)
                              ** alpha, reverse=True)
            with run.case(f"rerank(6 hypotheses, alpha={alpha}) (set {seed})", hint):
                result = [list(t) for t in fn(hyps, alpha)]
                _assert_equal(result, [t for t, _ in expected], name="the order")
    run.done()


@check
def brevity_penalty(fn: Callable) -> None:
    """Exercise "the brevity penalty": as sacreBLEU computes it."""
    import sacrebleu

    run = _Run("brevity_penalty")
    hint = ("c = hyp_len, r = ref_len: return 1.0 when c > r, 0.0 when c == 0, else "
            "math.exp(1 - r / c)")
    for hyp_len, ref_len, expected in [(12, 10, 1.0), (10, 10, 1.0), (5, 10, math.exp(-1)),
                                       (0, 10, 0.0), (9, 10, math.exp(1 - 10 / 9))]:
        with run.case(f"brevity_penalty({hyp_len}, {ref_len})", hint):
            value = _float(fn(hyp_len, ref_len))
            if not math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-12):
                raise AssertionError(f"got {value:.6g}, expected {expected:.6g}")
    metric = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True)
    refs = _made_up_sentences(20, seed=14)
    for name, cut in (("shorter", 0.5), ("slightly shorter", 0.9), ("longer", 1.3)):
        hyps = []
        for s in refs:
            words = s.split()
            n = max(1, round(len(words) * cut))
            hyps.append(" ".join((words * 2)[:n]))
        score = metric.corpus_score(hyps, [refs])
        with run.case(f"brevity_penalty({score.sys_len}, {score.ref_len}) ({name} outputs) vs "
                      "sacreBLEU", hint):
            value = _float(fn(score.sys_len, score.ref_len))
            if not math.isclose(value, score.bp, rel_tol=1e-9):
                raise AssertionError(f"got {value:.6g}, sacreBLEU says {score.bp:.6g}")
    run.done()


@check
def repeats(fn: Callable) -> None:
    """Exercise "stuttering outputs": the same n-gram twice in a row."""
    run = _Run("repeats")
    hint = ("for every start i with i + 2n <= len(tokens), compare tokens[i:i + n] with "
            "tokens[i + n:i + 2n]; True as soon as one pair is equal")
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
    ]
    for (tokens, n), expected in cases:
        with run.case(f"repeats({tokens}, n={n})", hint):
            _assert_equal(bool(fn(tokens, n)), expected)
    run.done()
