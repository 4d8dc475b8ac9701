"""Hidden tests of notebook 04's exercises.

The conventions are those of ``01.py``. ``row_entropy`` is read as a number, as its check reads
it (a Python float, a 0-dim or one-element tensor). The ``explain`` exercise
(``attention_in_every_layer``) is graded by hand and has none.
"""

import math
from fractions import Fraction
from textwrap import dedent

import torch

from convs2s.course.checks import EXERCISES, nb04
from convs2s.course.checks.class_variants import NOTE, Variant, Versions, ordinal, tex
from convs2s.course.checks.testing import (
    Case,
    Samples,
    as_int,
    as_number,
    as_tensor,
    assert_close,
    assert_equal,
    call,
    predicted,
)


def masked_softmax(variant):
    g = torch.Generator().manual_seed(404)
    energy = torch.randn(2, 3, 5, generator=g) * 1e4  # large energies: no NaN, no overflow
    mask = torch.tensor([[True, True, False, False, False], [True] * 5])
    expected = torch.softmax(energy.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    what = ("masked_softmax(energy of shape [2, 3, 5] with values of size 10,000, src_mask with "
            "2 and 5 real tokens)")
    one = torch.randn(1, 1, 4, generator=g)
    cases = [Case(what, call("masked_softmax", energy, mask),
                  lambda got: assert_close(got, expected)),
             Case(f"{what}: the weights on padding are exactly 0",
                  call("masked_softmax", energy, mask), _zero_after(2)),
             Case("masked_softmax(energy of shape [1, 1, 4], src_mask with one real token, at "
                  "position 1)", call("masked_softmax", one, torch.tensor([[False, True, False,
                                                                              False]])),
                  lambda got: assert_close(got, torch.tensor([[[0.0, 1.0, 0.0, 0.0]]])))]
    # as the visible check's large case: every real energy below -10,000 and the padding's
    # energies larger than the real ones (a large negative fill is not -inf)
    low = -2e4 - 1e4 * torch.rand(3, 4, 7, generator=g)
    lengths = torch.arange(7)[None, :] < torch.tensor([7, 3, 1])[:, None]  # src_mask = [3, 7]
    low[~lengths[:, None, :].expand_as(low)] = 3e4
    expected_low = torch.softmax(low.masked_fill(~lengths[:, None, :], float("-inf")), dim=-1)
    cases.append(Case("masked_softmax(energy of shape [3, 4, 7], every real energy below "
                      "-20,000, the padding's 30,000; src_mask with 7, 3 and 1 real tokens)",
                      call("masked_softmax", low, lengths),
                      lambda got: assert_close(got, expected_low)))
    return cases


def _zero_after(n_real):
    def accept(got):
        out = as_tensor(got)
        if list(out.shape) != [2, 3, 5] or not bool((out[0, :, n_real:] == 0).all()):
            raise AssertionError("the weights on padding must be exactly 0")

    return accept


def scaled_context_variance(variant):
    return predicted("predicted_variance", "scaled_context_variance", variant)


def attention_macs(variant):
    every = variant.get("every", 1)  # every layer attends in the notebook (1)
    cases = []
    for layers, n, m, d in [(20, 30, 25, 256), (1, 1, 1, 1), (4, 50, 3, 128), (9, 7, 11, 16),
                            (420, 2, 3, 5), (97, 3, 2, 7)]:
        expected = (layers // every) * 2 * n * m * d
        cases.append(Case(f"attention_macs({layers}, {n}, {m}, {d})",
                          call("attention_macs", layers, n, m, d),
                          lambda got, e=expected: assert_equal(as_int(got), e)))
    return cases


def row_entropy(variant):
    a = torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25] * 4])
    b = torch.softmax(torch.randn(6, 9, generator=torch.Generator().manual_seed(405)), -1)
    return [Case("row_entropy(a) for the rows [0.5, 0.5, 0, 0], [1, 0, 0, 0], [0.25] * 4",
                 call("row_entropy", a),
                 lambda got: _close(got, (math.log(2) + 0.0 + math.log(4)) / 3)),
            Case("row_entropy(a softmax of shape [6, 9])", call("row_entropy", b),
                 lambda got: _close(got, (-(b * b.log()).sum(-1).mean()).item()))]


def _close(got, expected):
    """A number (as the check reads it: a float, an int, a one-element tensor) within the
    check's tolerances (nb04.entropy_holds: those of ``assert_close``), stated in the task."""
    if not nb04.entropy_holds(as_number(got), expected):
        raise AssertionError("not the mean entropy")


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _scaled_variance(m: int, first: Fraction) -> Fraction:
    """m · Σ a² for the weights (first, rest, ..., rest) over m tokens."""
    rest = (1 - first) / (m - 1)
    return m * (first**2 + (m - 1) * rest**2)


def _scaled_context_variance_version(choice: tuple | None) -> Variant:
    """predict: new numbers; the expected value measured with the package, as the check does."""
    m, first = (nb04.PREDICT_M, Fraction(1, 2)) if choice is None else choice
    rest = (1 - first) / (m - 1)
    weights = [float(first)] + [float(rest)] * (m - 1)
    measured = EXERCISES["scaled_context_variance"].measure(
        torch.tensor(weights, dtype=torch.float64))
    params = {"m": m, "weights": weights, "expected": measured}
    if choice is None:
        return Variant(params, public=True)
    exact = _scaled_variance(m, first)
    return Variant(params, replace=(
        ("$m = 8$ real source tokens", f"$m = {m}$ real source tokens"),
        ("$a = (\\tfrac12, \\tfrac1{14}, \\dots, \\tfrac1{14})$",
         f"$a = ({tex(first)}, {tex(rest)}, \\dots, {tex(rest)})$"),
        ("(half the weight on one token, the other half\nspread evenly over the other 7)",
         f"({first} of the weight on one token, the other {1 - first}\nspread evenly over the "
         f"other {m - 1})"),
    ), solution=(
        "# For independent values of variance 1, Var(Σ_j a_j v_j) = Σ_j a_j²; multiplying by √m\n"
        f"# multiplies a variance by m: m · Σ_j a_j² = {m} · (({first})² + {m - 1} · ({rest})²)"
        f" = {exact}.\n"
        f"m = {m}\n"
        f"weights = [{first.numerator} / {first.denominator}] + [{rest.numerator} / "
        f"{rest.denominator}] * {m - 1}\n"
        "predicted_variance = m * sum(w**2 for w in weights)"))


def _attention_macs_version(choice: int | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``every``."""
    if choice is None:
        return Variant({"every": 1}, public=True)
    every = choice
    return Variant({"every": every}, note=(
        f"{NOTE}only **every {ordinal(every)} layer** attends (layers {every}, {2 * every}, "
        f"{3 * every}, …; the other layers have no attention, and a decoder of fewer than "
        f"{every} layers has none)."), answer_replace=(
        ("of all layers' attention", f"of the attending layers' attention (every "
                                     f"{ordinal(every)} layer)"),),
        solution=(
        "def attention_macs(n_layers, trg_len, src_len, emb_dim):\n"
        f"    return (n_layers // {every}) * 2 * trg_len * src_len * emb_dim"))


VERSIONS = {
    # (m, the first token's weight): m·Σa² from 1.02 to 12.97, each > 8 % from the others and
    # from the public 16/7
    "scaled_context_variance": Versions(tuple((m, Fraction(a, b)) for m, (a, b) in (
        (5, (1, 4)), (5, (1, 3)), (5, (2, 5)), (12, (1, 4)), (14, (1, 4)), (10, (1, 3)),
        (6, (1, 2)), (5, (3, 5)), (9, (1, 2)), (10, (1, 2)), (11, (1, 2)), (9, (3, 5)),
        (14, (1, 2)), (9, (2, 3)), (12, (3, 5)), (6, (9, 10)), (12, (2, 3)), (16, (3, 5)),
        (10, (4, 5)), (11, (4, 5)), (12, (4, 5)), (15, (3, 4)), (15, (4, 5)), (15, (5, 6)),
        (14, (9, 10)), (16, (9, 10)))), _scaled_context_variance_version,
        public_answers=(16 / 7,)),  # the public solution: 8 · (1/4 + 7/196)
    # every n-th layer attends
    "attention_macs": Versions(tuple(range(2, 22)), _attention_macs_version),
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "masked_softmax": Samples(right=[
        dedent("""\
        def masked_softmax(energy, src_mask):
            e = energy.masked_fill(~src_mask.unsqueeze(1), float("-inf"))
            return torch.softmax(e, dim=-1)
        """),
        dedent("""\
        def masked_softmax(energy, src_mask):
            e = energy.masked_fill(~src_mask[:, None, :], float("-inf"))
            e = (e - e.amax(dim=-1, keepdim=True)).exp()  # [batch, trg_len, src_len]
            return e / e.sum(dim=-1, keepdim=True)
        """),
    ], wrong=[
        dedent("""\
        def masked_softmax(energy, src_mask):
            m = src_mask[:, None, :]
            e = torch.exp(energy - energy.masked_fill(~m, -1e30).amax(-1, keepdim=True))
            e = e * m
            return e / e.sum(-1, keepdim=True)
        """),
        dedent("""\
        def masked_softmax(energy, src_mask):
            return torch.softmax(energy.masked_fill(~src_mask[:, None, :], -1e4), -1)
        """),
        "def masked_softmax(energy, src_mask):\n    return torch.softmax(energy, -1)",
    ]),
    "scaled_context_variance": Samples(right=[
        "predicted_variance = 16 / 7",
        "predicted_variance = 2.25",
        "m = 8\nw = [0.5] + [1 / 14] * 7\npredicted_variance = m * sum(x * x for x in w)",
        "import numpy as np\npredicted_variance = np.float64(16 / 7)",
        "predicted_variance = torch.tensor([16 / 7])",
    ], wrong=[
        "predicted_variance = 8",
        "predicted_variance = 1",
        "predicted_variance = 2.5",
    ]),
    "attention_macs": Samples(right=[
        dedent("""\
        def attention_macs(n_layers, trg_len, src_len, emb_dim):
            return 2 * n_layers * trg_len * src_len * emb_dim
        """),
        dedent("""\
        def attention_macs(n_layers, trg_len, src_len, emb_dim):
            per_layer = trg_len * src_len * emb_dim
            return per_layer * 2 * n_layers
        """),
    ], wrong=[
        dedent("""\
        def attention_macs(n_layers, trg_len, src_len, emb_dim):
            return n_layers * trg_len * src_len * emb_dim
        """),
    ]),
    "row_entropy": Samples(right=[
        dedent("""\
        def row_entropy(a):
            logs = torch.where(a > 0, a.log(), torch.zeros_like(a))
            return -(a * logs).sum(-1).mean()
        """),
        "def row_entropy(a):\n    return -(a * torch.log(a + 1e-30)).sum(dim=-1).mean()",
        "def row_entropy(a):\n    return -torch.xlogy(a, a).sum(-1).mean()",
        dedent("""\
        def row_entropy(a):
            total = 0.0
            for row in a.tolist():
                total -= sum(p * math.log(p) for p in row if p > 0)
            return total / len(a)  # a Python float
        """),
        "def row_entropy(a):\n    return (-torch.xlogy(a, a).sum(-1).mean()).item()",
        dedent("""\
        def row_entropy(a):
            return torch.tensor(float(-torch.xlogy(a, a).sum(-1).mean()))  # 0-dim
        """),
        dedent("""\
        def row_entropy(a):
            return -torch.xlogy(a, a).sum(-1).mean().reshape(1)  # one element
        """),
    ], wrong=[
        "def row_entropy(a):\n    return -(a * a.log()).sum(-1).mean()",
        "def row_entropy(a):\n    return -(a * torch.log2(a + 1e-30)).sum(-1).mean()",
    ], shortcut=[
        dedent("""\
        from convs2s.course.attention_maps import attention_entropy

        def row_entropy(a):
            return attention_entropy(a)
        """),
    ]),
}
