"""Hidden tests of notebook 06's exercises (nbgrader grading; never shown to learners).

One function per exercise id; its parameters are the names the learner's answer defines, and
the course builder copies its body (plain asserts) into the exercise's grade cell, after the
visible ``checks.<id>(...)`` call. Explain exercises are graded by hand: no function here.
"""


def rerank(rerank):
    # Σ log p: -2.0 (1 token + <eos>), -3.3 (2 + <eos>), -5.4 (5 + <eos>); scores with α = 1
    _hyps = [([5], -2.0 / 2), ([5, 6], -3.3 / 3), ([5, 6, 7, 8, 9], -5.4 / 6)]
    assert [list(t) for t in rerank(_hyps, 1.0)] == [[5, 6, 7, 8, 9], [5], [5, 6]]
    assert [list(t) for t in rerank(_hyps, 0.0)] == [[5], [5, 6], [5, 6, 7, 8, 9]]
    assert [list(t) for t in rerank(_hyps, 2.0)] == [[5, 6, 7, 8, 9], [5, 6], [5]]
    assert [list(t) for t in rerank([], 1.0)] == []
    assert _hyps[0] == ([5], -1.0), "the hypotheses passed in must not be changed"


def brevity_prediction(prediction):
    import math as _math

    assert abs(float(prediction) - 100 * _math.exp(1 - 2)) <= 1.0


def repeats(repeats):
    assert repeats(["play", "play"], 1)
    assert repeats("two men play play".split(), 1)
    assert repeats("on the grass on the grass".split(), 3)
    assert repeats("a b c d a b c d".split(), 4)
    assert not repeats("a b c d a b c".split(), 4)
    assert not repeats("a b a b".split(), 3)
    assert not repeats([], 2)
    assert repeats("the the".split())  # n defaults to 1
