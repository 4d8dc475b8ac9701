"""Hidden tests of notebook 06's exercises (autograding runs them after the visible checks).

The conventions are those of ``01.py``. The ``explain`` exercise (``beam_vs_greedy``) is graded
by hand and has none.
"""


def rerank(rerank):
    import copy

    from convs2s.course.checks import _core, nb06

    # Σ log p: -2.0 (1 token + <eos>), -3.3 (2 + <eos>), -5.4 (5 + <eos>); scores with α = 1
    hyps = [([5], -2.0 / 2), ([5, 6], -3.3 / 3), ([5, 6, 7, 8, 9], -5.4 / 6)]
    for alpha, order in [(1.0, [[5, 6, 7, 8, 9], [5], [5, 6]]),
                         (0.0, [[5], [5, 6], [5, 6, 7, 8, 9]]),
                         (2.0, [[5, 6, 7, 8, 9], [5, 6], [5]])]:
        given = copy.deepcopy(hyps)
        result = [[_core._assert_int(t, "each token") for t in _core._answer(tokens, "items")]
                  for tokens in _core._answer(rerank(given, alpha), "items")]
        _core._assert_equal(result, order, name=f"the order at alpha={alpha}")
        nb06.assert_unchanged(given, hyps)
    _core._assert_equal(list(_core._answer(rerank([], 1.0), "items")), [], name="rerank([], 1.0)")


def brevity_prediction(prediction):
    from convs2s.course.checks import nb06

    nb06.accept_brevity_prediction(prediction, _variant["expected"])  # noqa: F821


def repeats(repeats):
    from convs2s.course.checks import _core

    for tokens, n, expected in [(["play", "play"], 1, True),
                                ("two men play play".split(), 1, True),
                                ("on the grass on the grass".split(), 3, True),
                                ("a b c d a b c d".split(), 4, True),
                                ("a b c d a b c".split(), 4, False),
                                ("a b a b".split(), 3, False),
                                ([], 2, False)]:
        _core._assert_equal(_core._answer(repeats(tokens, n), "bool"), expected,
                            name=f"repeats({' '.join(tokens)!r}, {n})")
    _core._assert_equal(_core._answer(repeats("the the".split()), "bool"), True,
                        name="repeats('the the') (n defaults to 1)")
