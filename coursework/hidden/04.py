"""Hidden tests of notebook 04's exercises.

The conventions are those of ``01.py``. ``row_entropy`` is read as a number, as its check reads
it (a Python float, a 0-dim or one-element tensor). The ``explain`` exercise
(``attention_in_every_layer``) is graded by hand and has none.
"""

import math

import torch

from convs2s.course.checks import nb04
from convs2s.course.checks.testing import (
    Case,
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
    return predicted("predicted_variance", nb04.accept_scaled_context_variance, variant)


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


def _close(got, expected, atol=1e-5, rtol=1e-4):
    """A number (as the check reads it: a float, an int, a one-element tensor) within the
    tolerances of ``assert_close``."""
    if not abs(as_number(got) - expected) <= atol + rtol * abs(expected):
        raise AssertionError("not the mean entropy")
