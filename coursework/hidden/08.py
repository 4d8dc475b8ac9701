"""Hidden tests of notebook 08's exercises (autograding runs them after the visible checks).

The conventions are those of ``01.py``. The ``explain`` exercise (``flops_not_speed``) is graded
by hand and has none.
"""


def separable_params(separable_params, saving):
    import math

    from convs2s.course.checks import _core, guarded

    count = guarded("separable_params", separable_params)
    ratio = guarded("separable_params", saving)
    m = _variant["multiplier"]  # noqa: F821 - the depth multiplier (1 in the notebook)
    for c_in, c_out, k in [(1, 1, 1), (512, 1024, 5), (2, 3, 4), (64, 16, 7)]:
        weights = m * c_in * k + m * c_in * c_out
        _core._assert_equal(_core._assert_int(count(c_in, c_out, k)), weights + c_out,
                            name=f"separable_params({c_in}, {c_out}, {k})")
        _core._assert_equal(_core._assert_int(count(c_in, c_out, k, bias=False)), weights,
                            name=f"separable_params({c_in}, {c_out}, {k}, bias=False)")
        expected = (c_in * c_out * k + c_out) / (weights + c_out)
        got = _core._float(ratio(c_in, c_out, k), f"saving({c_in}, {c_out}, {k})")
        assert math.isclose(got, expected, rel_tol=1e-6), f"saving({c_in}, {c_out}, {k})"


def attention_vs_conv(prediction):
    from convs2s.course.checks import nb08

    nb08.accept_attention_vs_conv(prediction, _variant["expected"])  # noqa: F821


def lightweight_conv(lightweight_conv):
    import torch
    import torch.nn.functional as F

    from convs2s.course.checks import _core

    g = torch.Generator().manual_seed(809)
    x = torch.randn(3, 8, 6, generator=g)
    _core._assert_close(lightweight_conv(x, torch.zeros(2, 1)), x,
                        ref="the input (k = 1: every output is its input)")
    for heads, k in [(1, 3), (8, 2), (4, 4)]:
        w = torch.randn(heads, k, generator=g)
        taps = torch.softmax(w, -1).repeat_interleave(8 // heads, dim=0)  # [8, k]
        windows = F.pad(x, (k - 1, 0)).unfold(2, k, 1)  # [3, 8, 6, k]
        _core._assert_close(lightweight_conv(x, w), (windows * taps[None, :, None, :]).sum(-1),
                            ref="a causal lightweight convolution")
