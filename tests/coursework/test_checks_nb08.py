"""The checks of notebook 08: a right answer passes, a wrong one raises with a two-step hint, a
stub or an unfilled prediction returns False; the notebook's exercise cells run from its setup
cell alone; the hidden grading tests accept the solutions only."""

from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from exercise_support import assert_exercises_run_from_the_setup_cell, hidden, notebook_path, stub

from convs2s.course import checks
from convs2s.course.checks import nb08


def _nudge(hint):
    return re.escape(f"hint: {hint.nudge}")


def _closer(hint):
    return re.escape(f"closer hint: {hint.closer}")


def separable_params(c_in, c_out, k, bias=True):
    return c_in * k + c_in * c_out + (c_out if bias else 0)


def saving(c_in, c_out, k):
    return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)


def lightweight_conv(x, weight):
    heads, k = weight.shape
    kernel = torch.softmax(weight, dim=-1).repeat_interleave(x.size(1) // heads, dim=0)
    return F.conv1d(F.pad(x, (k - 1, 0)), kernel.unsqueeze(1), groups=x.size(1))


def test_exercises_are_registered():
    for name in ("separable_params", "attention_vs_conv", "lightweight_conv"):
        assert name in checks.EXERCISES
    assert "causal_separable_conv" not in checks.EXERCISES


def test_separable_params_right_wrong_and_stub():
    assert checks.separable_params(separable_params, saving) is True

    def with_depthwise_bias(c_in, c_out, k, bias=True):
        return separable_params(c_in, c_out, k, bias) + c_in

    with pytest.raises(AssertionError, match=_nudge(nb08.SEPARABLE) + "$"):
        checks.separable_params(with_depthwise_bias, saving)
    with pytest.raises(AssertionError, match=_closer(nb08.SEPARABLE)):
        checks.separable_params(with_depthwise_bias, saving)

    def inverted(c_in, c_out, k):
        return 1 / saving(c_in, c_out, k)

    with pytest.raises(AssertionError, match=_nudge(nb08.SAVING)):
        checks.separable_params(separable_params, inverted)
    assert checks.separable_params(stub, stub) is False
    assert checks.separable_params(separable_params, stub) is False


def test_the_check_and_grading_agree_on_a_float32_ratio_and_on_a_float_count(capsys):
    """One definition of right: a ratio in float32 (about 1e-7 off) passes the check and
    grading (nb08.SAVING_REL_TOL, stated in the task); a count returned as a float is refused by
    the check, by grading, and by the form a class's own version records (which once took any
    number for both answers); no line gives the right value."""
    def saving32(c_in, c_out, k):
        return torch.tensor(saving(c_in, c_out, k), dtype=torch.float32)

    def float_count(c_in, c_out, k, bias=True):
        return float(separable_params(c_in, c_out, k, bias))

    grading = hidden("08")
    assert checks.separable_params(separable_params, saving32) is True
    grading.separable_params(separable_params, saving32)
    capsys.readouterr()
    with pytest.raises(AssertionError):
        checks.separable_params(float_count, saving)
    with pytest.raises(AssertionError):
        grading.separable_params(float_count, saving)
    with pytest.raises(AssertionError, match="whole number"):
        checks.EXERCISES["separable_params"].form(float_count, saving)
    checks.EXERCISES["separable_params"].form(separable_params, saving32)

    def wrong_ratio(c_in, c_out, k):
        return saving(c_in, c_out, k) * 1.001

    with pytest.raises(AssertionError):
        checks.separable_params(separable_params, wrong_ratio)
    said = capsys.readouterr().out
    right = saving(8, 16, 3)
    assert "✗ separable_params" in said and f"{right:.6g}" not in said and "expected" not in said


def test_attention_vs_conv_right_prediction_passes(capsys):
    assert checks.attention_vs_conv(768) is True
    assert checks.attention_vs_conv(770.0) is True  # within 2 %
    out = capsys.readouterr().out
    assert "at n = 768: convolution 603,979,776 FLOPs, attention 603,979,776 FLOPs" in out


@pytest.mark.parametrize(("prediction", "hint"), [
    (384, nb08.ATTENTION_COST.nudge),  # forgot one of the two n x n products
    (1536, nb08.ATTENTION_COST.nudge),  # forgot the GLU's doubled output channels
    (256, nb08.ATTENTION_COST.nudge),
    ([768], "one number"),
])
def test_attention_vs_conv_wrong_prediction_raises_with_a_hint(prediction, hint, capsys):
    with pytest.raises(AssertionError, match="hint: " + re.escape(hint)):
        checks.attention_vs_conv(prediction)
    assert "✗ attention_vs_conv" in capsys.readouterr().out


def test_attention_vs_conv_second_wrong_try_adds_the_closer_hint(capsys):
    with pytest.raises(AssertionError):
        checks.attention_vs_conv(384)
    with pytest.raises(AssertionError, match=_closer(nb08.ATTENTION_COST)):
        checks.attention_vs_conv(384)


def test_attention_vs_conv_unanswered_returns_false():
    assert checks.attention_vs_conv(None) is False


def test_lightweight_conv_right_wrong_and_stub():
    assert checks.lightweight_conv(lightweight_conv) is True

    def no_softmax(x, weight):
        heads, k = weight.shape
        kernel = weight.repeat_interleave(x.size(1) // heads, dim=0)
        return F.conv1d(F.pad(x, (k - 1, 0)), kernel.unsqueeze(1), groups=x.size(1))

    with pytest.raises(AssertionError, match=_nudge(nb08.LIGHTWEIGHT) + "$"):
        checks.lightweight_conv(no_softmax)

    def heads_interleaved(x, weight):  # channel c uses head c % H instead of c // (C / H)
        heads, k = weight.shape
        kernel = torch.softmax(weight, dim=-1).repeat(x.size(1) // heads, 1)
        return F.conv1d(F.pad(x, (k - 1, 0)), kernel.unsqueeze(1), groups=x.size(1))

    with pytest.raises(AssertionError, match=_nudge(nb08.HEADS)):
        checks.lightweight_conv(heads_interleaved)

    def padded_both_sides(x, weight):  # sees the future
        heads, k = weight.shape
        kernel = torch.softmax(weight, dim=-1).repeat_interleave(x.size(1) // heads, dim=0)
        y = F.conv1d(F.pad(x, (k // 2, k // 2)), kernel.unsqueeze(1), groups=x.size(1))
        return y[..., : x.size(-1)]

    with pytest.raises(AssertionError):
        checks.lightweight_conv(padded_both_sides)
    assert checks.lightweight_conv(stub) is False


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    assert_exercises_run_from_the_setup_cell(notebook_path("08"), {
        "separable_params": "derive", "flops_not_speed": "explain",
        "attention_vs_conv": "predict", "lightweight_conv": "implement"})
    capsys.readouterr()


def test_hidden_tests_accept_the_solutions_and_reject_wrong_answers():
    grading = hidden("08")
    grading.separable_params(separable_params, saving)
    grading.attention_vs_conv(768)
    grading.lightweight_conv(lightweight_conv)
    with pytest.raises(AssertionError):
        grading.separable_params(lambda c_in, c_out, k, bias=True: c_in * c_out * k, saving)
    with pytest.raises(AssertionError):
        grading.attention_vs_conv(384)
    with pytest.raises(AssertionError):
        grading.lightweight_conv(lambda x, weight: x)
