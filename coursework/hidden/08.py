"""Hidden tests of notebook 08's exercises.

The conventions are those of ``01.py``. The ``explain`` exercise (``flops_not_speed``) is graded
by hand and has none.
"""

import torch
import torch.nn.functional as F

from convs2s.course.checks import nb08
from convs2s.course.checks.testing import (
    Case,
    as_int,
    assert_close,
    assert_equal,
    assert_number_close,
    call,
    predicted,
)


def separable_params(variant):
    m = variant.get("multiplier", 1)  # the depth multiplier (1 in the notebook)
    cases = []
    for c_in, c_out, k in [(1, 1, 1), (512, 1024, 5), (2, 3, 4), (64, 16, 7)]:
        weights = m * c_in * k + m * c_in * c_out
        cases.append(Case(f"separable_params({c_in}, {c_out}, {k})",
                          call("separable_params", c_in, c_out, k),
                          lambda got, e=weights + c_out: assert_equal(as_int(got), e)))
        cases.append(Case(f"separable_params({c_in}, {c_out}, {k}, bias=False)",
                          call("separable_params", c_in, c_out, k, bias=False),
                          lambda got, e=weights: assert_equal(as_int(got), e)))
        expected = (c_in * c_out * k + c_out) / (weights + c_out)
        cases.append(Case(f"saving({c_in}, {c_out}, {k})", call("saving", c_in, c_out, k),
                          lambda got, e=expected: assert_number_close(got, e, rel=1e-6,
                                                                      abs_tol=0.0)))
    return cases


def attention_vs_conv(variant):
    return predicted("prediction", nb08.accept_attention_vs_conv, variant)


def lightweight_conv(variant):
    g = torch.Generator().manual_seed(809)
    x = torch.randn(3, 8, 6, generator=g)
    cases = [Case("lightweight_conv(x of shape [3, 8, 6], weight of shape [2, 1]) (k = 1)",
                  call("lightweight_conv", x, torch.zeros(2, 1)),
                  lambda got: assert_close(got, x))]
    for heads, k in [(1, 3), (8, 2), (4, 4)]:
        w = torch.randn(heads, k, generator=g)
        taps = torch.softmax(w, -1).repeat_interleave(8 // heads, dim=0)  # [8, k]
        windows = F.pad(x, (k - 1, 0)).unfold(2, k, 1)  # [3, 8, 6, k]
        expected = (windows * taps[None, :, None, :]).sum(-1)
        cases.append(Case(f"lightweight_conv(x of shape [3, 8, 6], weight of shape [{heads}, {k}])",
                          call("lightweight_conv", x, w),
                          lambda got, e=expected: assert_close(got, e)))
    return cases
