"""Hidden tests of notebook 06's exercises.

The conventions are those of ``01.py``. ``rerank`` must leave the list it is given as it was:
its probe (``nb06.probe_rerank``) returns the result and the argument after the call, and both
are judged here. The ``explain`` exercise (``beam_vs_greedy``) is graded by hand and has none.
"""

import math
from textwrap import dedent

from convs2s.course.checks import EXERCISES, nb06
from convs2s.course.checks.class_variants import Variant, Versions, fraction_words
from convs2s.course.checks.testing import (
    Case,
    Samples,
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
    return predicted("prediction", "brevity_prediction", variant)


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


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _brevity_bleu(kept: int, parts: int) -> float:
    """BLEU of outputs that are the first ``kept/parts`` of their references: every n-gram of a
    prefix is in its reference, so 100 × the brevity penalty exp(1 - parts/kept)."""
    return 100 * math.exp(1 - parts / kept)


def _brevity_prediction_version(choice: tuple | None) -> Variant:
    """predict: new numbers; the expected value measured with the package, as the check does."""
    kept, parts = (1, 2) if choice is None else choice
    measured = EXERCISES["brevity_prediction"].measure(kept, parts)
    params = {"kept": kept, "parts": parts, "expected": measured}
    if choice is None:
        return Variant(params, public=True)
    words = fraction_words(kept, parts)
    multiple = "an even number of" if parts == 2 else f"a multiple of {parts}"
    return Variant(params, replace=(
        ("outputs half as long", f"outputs {words} as long"),
        ("each with an even number of tokens", f"each with {multiple} tokens"),
        ("the first half of each reference", f"the first {words} of each reference"),
    ), answer_replace=(("half-length outputs", f"outputs {words} as long"),), solution=(
        "# Every n-gram of a prefix occurs in its reference, so all four clipped precisions are\n"
        f"# 100%: BLEU is 100 × the brevity penalty, with c = r · {kept}/{parts}: "
        f"exp(1 - r / c) = exp(1 - {parts}/{kept}).\n"
        f"prediction = 100 * math.exp(1 - {parts} / {kept})  # {_brevity_bleu(kept, parts):.1f}"))


VERSIONS = {
    # (kept, parts): outputs kept/parts as long; BLEU 1.8 ... 90.5, each > 1.5 points from the
    # others and from the public 36.8
    "brevity_prediction": Versions((
        (1, 5), (1, 4), (3, 11), (3, 10), (1, 3), (4, 11), (3, 8), (2, 5), (5, 12), (3, 7),
        (4, 9), (6, 11), (4, 7), (7, 12), (3, 5), (5, 8), (7, 11), (2, 3), (7, 10), (5, 7),
        (8, 11), (3, 4), (7, 9), (4, 5), (9, 11), (5, 6), (6, 7), (7, 8), (8, 9), (10, 11)),
        _brevity_prediction_version,
        public_answers=(100 * math.exp(1 - 2),)),  # the public solution: 100 · exp(1 - 2)
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "rerank": Samples(right=[
        dedent("""\
        def rerank(hypotheses, alpha):
            def key(h):
                tokens, score = h
                n = len(tokens) + 1
                return score * n / n ** alpha
            return [tokens for tokens, _ in sorted(hypotheses, key=key, reverse=True)]
        """),
        dedent("""\
        def rerank(hypotheses, alpha):
            rescored = []
            for i, (tokens, score) in enumerate(hypotheses):
                length = len(tokens) + 1
                rescored.append((-(score * length) / length ** alpha, i, tokens))
            rescored.sort()
            return [list(t) for _, _, t in rescored]
        """),
    ], wrong=[
        dedent("""\
        def rerank(hypotheses, alpha):
            hypotheses.sort(key=lambda h: h[1] * (len(h[0]) + 1) / (len(h[0]) + 1) ** alpha,
                            reverse=True)
            return [tokens for tokens, _ in hypotheses]
        """),
        dedent("""\
        def rerank(hypotheses, alpha):
            return [t for t, s in sorted(hypotheses, key=lambda h: h[1] / len(h[0] + [0]) ** alpha,
                                         reverse=True)]
        """),
    ]),
    "brevity_prediction": Samples(right=[
        "prediction = 100 * math.exp(-1)",
        "prediction = 36.8",
        "prediction = 37",
        "import numpy as np\nprediction = np.float64(36.8)",
        "import torch\nprediction = torch.tensor([100 * math.exp(-1)])",
    ], wrong=[
        "prediction = 50",
        "prediction = 0.368",
        "prediction = 100",
    ]),
    "repeats": Samples(right=[
        dedent("""\
        def repeats(tokens, n=1):
            for i in range(len(tokens) - 2 * n + 1):
                if tokens[i: i + n] == tokens[i + n: i + 2 * n]:
                    return True
            return False
        """),
        dedent("""\
        def repeats(tokens, n=1):
            return any(tokens[i:i + n] == tokens[i + n:i + 2 * n]
                       for i in range(0, len(tokens) - 2 * n + 1))
        """),
    ], wrong=[
        dedent("""\
        def repeats(tokens, n=1):
            for i in range(len(tokens) - 2 * n):
                if tokens[i: i + n] == tokens[i + n: i + 2 * n]:
                    return True
            return False
        """),
    ]),
}
