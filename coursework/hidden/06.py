"""Hidden tests of notebook 06's exercises.

The conventions are those of ``01.py``. ``rerank`` must leave the list it is given as it was:
its probe (``nb06.probe_rerank``) returns the result and the argument after the call, and both
are judged here. The ``explain`` exercise (``beam_vs_greedy``) is graded by hand and has none.
"""

from convs2s.course.checks import nb06
from convs2s.course.checks.testing import (
    Case,
    as_bool,
    as_int,
    as_items,
    assert_equal,
    call,
    predicted,
    probe,
)

# Σ log p: -2.0 (1 token + <eos>), -3.3 (2 + <eos>), -5.4 (5 + <eos>); scores with α = 1
_HYPOTHESES = [([5], -2.0 / 2), ([5, 6], -3.3 / 3), ([5, 6, 7, 8, 9], -5.4 / 6)]


def rerank(variant):
    cases = []
    for alpha, order in [(1.0, [[5, 6, 7, 8, 9], [5], [5, 6]]),
                         (0.0, [[5], [5, 6], [5, 6, 7, 8, 9]]),
                         (2.0, [[5, 6, 7, 8, 9], [5, 6], [5]])]:
        cases.append(Case(f"rerank(3 hypotheses of 1, 2 and 5 tokens, alpha={alpha})",
                          probe("convs2s.course.checks.nb06:probe_rerank",
                                hypotheses=_HYPOTHESES, alpha=alpha),
                          lambda got, alpha=alpha, order=order: _ranked(got, alpha, order)))
    cases.append(Case("rerank([], 1.0)", call("rerank", [], 1.0),
                      lambda got: assert_equal(as_items(got), [], name="rerank([], 1.0)")))
    return cases


def _ranked(got, alpha, order):
    result, given = got  # the probe's pair: what rerank returned, its argument after the call
    tokens = [[as_int(t, "each token") for t in as_items(hyp, "each hypothesis")]
              for hyp in as_items(result, "the order")]
    assert_equal(tokens, order, name=f"the order at alpha={alpha}")
    nb06.assert_unchanged(given, _HYPOTHESES)


def brevity_prediction(variant):
    return predicted("prediction", nb06.accept_brevity_prediction, variant)


def repeats(variant):
    cases = []
    for tokens, n, expected in [(["play", "play"], 1, True),
                                ("two men play play".split(), 1, True),
                                ("on the grass on the grass".split(), 3, True),
                                ("a b c d a b c d".split(), 4, True),
                                ("a b c d a b c".split(), 4, False),
                                ("a b a b".split(), 3, False),
                                ([], 2, False)]:
        cases.append(Case(f"repeats({tokens}, {n})", call("repeats", tokens, n),
                          lambda got, e=expected: assert_equal(as_bool(got), e)))
    cases.append(Case("repeats(['the', 'the']) (n defaults to 1)",
                      call("repeats", ["the", "the"]),
                      lambda got: assert_equal(as_bool(got), True)))
    return cases
