"""Hidden tests of notebook 08's exercises.

The conventions are those of ``01.py``. The ``explain`` exercise (``flops_not_speed``) is graded
by hand and has none.
"""

from textwrap import dedent

import torch
import torch.nn.functional as F

from convs2s.course.checks import EXERCISES, nb08
from convs2s.course.checks.class_variants import NOTE, Variant, Versions
from convs2s.course.checks.testing import (
    Case,
    Samples,
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
                          lambda got, e=expected: assert_number_close(
                              got, e, rel=nb08.SAVING_REL_TOL, abs_tol=0.0)))
    return cases


def attention_vs_conv(variant):
    return predicted("prediction", "attention_vs_conv", variant)


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


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _separable_params_version(choice: int | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``multiplier``."""
    if choice is None:
        return Variant({"multiplier": 1}, public=True)
    m = choice
    return Variant({"multiplier": m}, note=(
        f"{NOTE}the depthwise convolution has a **depth multiplier of {m}**: {m} filters of "
        f"width `k` per input channel ({m}·`c_in` channels out, still without bias), and the 1x1 "
        f"convolution maps those {m}·`c_in` channels to `c_out`."), answer_replace=(
        ("Parameters of depthwise (no bias)",
         f"Parameters of depthwise with depth multiplier {m} (no bias)"),),
        solution=(
        "def separable_params(c_in, c_out, k, bias=True):\n"
        f"    return {m} * c_in * k + {m} * c_in * c_out + (c_out if bias else 0)\n"
        "\n\n"
        "def saving(c_in, c_out, k):\n"
        "    return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)"))


def _attention_vs_conv_version(choice: tuple | None) -> Variant:
    """predict: new numbers; the expected value measured with the package, as the check does."""
    d, k = (nb08.ATTENTION_CHANNELS, nb08.ATTENTION_KERNEL) if choice is None else choice
    params = {"d": d, "k": k, "expected": EXERCISES["attention_vs_conv"].measure(d, k)}
    if choice is None:
        return Variant(params, public=True)
    return Variant(params, replace=(("For $d = 256$ and $k = 3$", f"For $d = {d}$ and $k = {k}$"),),
                   solution=(
        "# per position the convolution does d·2d·k multiply-adds, attention n·d + n·d: equal\n"
        "# when 2·d²·k = 2·n·d, i.e. n = k·d.\n"
        f"prediction = {k} * {d}"))


VERSIONS = {
    # the depth multiplier
    "separable_params": Versions(tuple(range(2, 22)), _separable_params_version),
    # (d, k): crossovers d·k from 128 to 4,608, each > 5 % from the others and from 768
    "attention_vs_conv": Versions((
        (64, 2), (64, 3), (64, 4), (96, 3), (64, 5), (64, 6), (64, 7), (96, 5), (128, 4),
        (64, 9), (128, 5), (96, 9), (160, 6), (256, 4), (160, 7), (256, 5), (160, 9), (256, 6),
        (192, 9), (320, 6), (512, 4), (320, 7), (512, 5), (320, 9), (512, 6), (384, 9),
        (448, 9), (512, 9)), _attention_vs_conv_version,
        public_answers=(3 * 256,)),  # the public solution: k · d
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "separable_params": Samples(right=[
        dedent("""\
        def separable_params(c_in, c_out, k, bias=True):
            return c_in * k + c_in * c_out + (c_out if bias else 0)

        def saving(c_in, c_out, k):
            return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)
        """),
        dedent("""\
        def separable_params(c_in, c_out, k, bias=True):
            depthwise = c_in * k
            pointwise = c_in * c_out
            if bias:
                pointwise += c_out
            return depthwise + pointwise

        def saving(c_in, c_out, k):
            standard = c_out * (c_in * k + 1)
            return standard / separable_params(c_in, c_out, k, True)
        """),
    ], wrong=[
        dedent("""\
        def separable_params(c_in, c_out, k, bias=True):
            return c_in * k + c_in * c_out + c_out

        def saving(c_in, c_out, k):
            return (c_in * c_out * k) / separable_params(c_in, c_out, k)
        """),
    ], shortcut=[
        dedent("""\
        from convs2s.model.variants import separable_conv1d_parameters

        def separable_params(c_in, c_out, k, bias=True):
            return separable_conv1d_parameters(c_in, c_out, k, bias=bias)

        def saving(c_in, c_out, k):
            return (c_in * c_out * k + c_out) / (c_in * k + c_in * c_out + c_out)
        """),
        dedent("""\
        from convs2s.model.variants import conv1d_parameters

        def separable_params(c_in, c_out, k, bias=True):
            return c_in * k + c_in * c_out + (c_out if bias else 0)

        def saving(c_in, c_out, k):
            return conv1d_parameters(c_in, c_out, k) / separable_params(c_in, c_out, k)
        """),
        dedent("""\
        from convs2s.model.variants import conv_costs

        def separable_params(c_in, c_out, k, bias=True):
            return c_in * k + c_in * c_out + (c_out if bias else 0)

        def saving(c_in, c_out, k):
            return conv_costs(c_in, c_out, k)["parameter_ratio"]
        """),
        dedent("""\
        def separable_params(c_in, c_out, k, bias=True):
            depthwise = torch.nn.Conv1d(c_in, c_in, k, groups=c_in, bias=False)
            pointwise = torch.nn.Conv1d(c_in, c_out, 1, bias=bias)
            return sum(p.numel() for m in (depthwise, pointwise) for p in m.parameters())

        def saving(c_in, c_out, k):
            return (c_in * c_out * k + c_out) / (c_in * k + c_in * c_out + c_out)
        """),
    ]),
    "attention_vs_conv": Samples(right=[
        "prediction = 3 * 256",
        "prediction = 768.0",
        "prediction = 760",
        "import numpy as np\nprediction = np.float64(768)",
        "import torch\nprediction = torch.tensor([768.0])",
    ], wrong=[
        "prediction = 256",
        "prediction = 3 * 256 * 2",
        "prediction = 800",
    ]),
    "lightweight_conv": Samples(right=[
        dedent("""\
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            channels = x.size(1)
            kernel = torch.softmax(weight, dim=-1)
            kernel = kernel.repeat_interleave(channels // heads, dim=0).unsqueeze(1)
            return F.conv1d(F.pad(x, (k - 1, 0)), kernel, groups=channels)
        """),
        dedent("""\
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            b, c, n = x.shape
            taps = torch.softmax(weight, -1).repeat_interleave(c // heads, 0)  # [c, k]
            padded = torch.cat([x.new_zeros(b, c, k - 1), x], dim=-1)
            out = torch.zeros_like(x)
            for j in range(k):
                out = out + padded[:, :, j:j + n] * taps[:, j].view(1, c, 1)
            return out
        """),
    ], wrong=[
        dedent("""\
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            channels = x.size(1)
            kernel = weight.repeat_interleave(channels // heads, dim=0).unsqueeze(1)
            return F.conv1d(F.pad(x, (k - 1, 0)), kernel, groups=channels)
        """),
        dedent("""\
        def lightweight_conv(x, weight):
            heads, k = weight.shape
            channels = x.size(1)
            kernel = torch.softmax(weight, -1).repeat_interleave(channels // heads, 0)
            return F.conv1d(F.pad(x, ((k - 1) // 2, k // 2)), kernel.unsqueeze(1),
                            groups=channels)
        """),
    ]),
}
