"""convs2s.course.checks for notebook 04: right answers pass, wrong ones raise with a hint,
stubs are 0."""

from __future__ import annotations

import math

import pytest
import torch
from exercise_support import assert_exercises_run_from_the_setup_cell, notebook_path, stub

from convs2s.course import attention_maps, checks
from convs2s.course.checks import nb04

# --- masked_softmax (implement) -------------------------------------------------------------


def right_masked_softmax(energy, src_mask):
    return torch.softmax(energy.masked_fill(~src_mask[:, None, :], float("-inf")), dim=-1)


def tiny_number_masked_softmax(energy, src_mask):  # -10 instead of -inf: not exactly 0
    return torch.softmax(energy.masked_fill(~src_mask[:, None, :], -10.0), dim=-1)


def unmasked_softmax(energy, src_mask):
    return torch.softmax(energy, dim=-1)


def test_masked_softmax_accepts_the_solution(capsys):
    assert checks.masked_softmax(right_masked_softmax) is True
    assert "✓ masked_softmax" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [tiny_number_masked_softmax, unmasked_softmax])
def test_masked_softmax_rejects_weight_on_padding(wrong):
    with pytest.raises(AssertionError, match="padding gets weight .* hint: a softmax gives"):
        checks.masked_softmax(wrong)


def test_masked_softmax_stub_is_not_answered():
    assert checks.masked_softmax(stub) is False


# --- scaled_context_variance (predict, then measure) ----------------------------------------


def test_scaled_context_variance_accepts_the_right_prediction(capsys):
    weights = nb04.PREDICT_WEIGHTS.double()
    exact = nb04.PREDICT_M * (weights ** 2).sum().item()  # m · Σ a²
    assert checks.scaled_context_variance(exact) is True
    out = capsys.readouterr().out
    measured = f"{nb04._measured_scaled_variance(nb04.PREDICT_WEIGHTS):.3f}"
    assert "your prediction held" in out and measured in out and "✓ scaled_context_variance" in out


def test_the_measurement_uses_the_package_and_agrees_with_m_sum_a_squared():
    for weights in (torch.full((5,), 0.2), torch.tensor([0.7, 0.2, 0.1]), nb04.PREDICT_WEIGHTS):
        measured = nb04._measured_scaled_variance(weights, samples=100_000)
        expected = len(weights) * (weights.double() ** 2).sum().item()
        assert abs(measured - expected) < 0.03 * expected


@pytest.mark.parametrize("wrong", [1.0, 8.0, 0.2857, torch.tensor(4.0)])
def test_scaled_context_variance_rejects_wrong_predictions_with_a_hint(wrong, capsys):
    with pytest.raises(AssertionError, match=r"did not hold .* hint: what is the variance") as e:
        checks.scaled_context_variance(wrong)
    measured = nb04._measured_scaled_variance(nb04.PREDICT_WEIGHTS)
    said = str(e.value) + capsys.readouterr().out
    assert f"{measured:.3f}" not in said and f"{measured:.2f}" not in said


def test_scaled_context_variance_none_is_not_answered_and_text_is_wrong():
    assert checks.scaled_context_variance(None) is False
    with pytest.raises(AssertionError, match="should be a number"):
        checks.scaled_context_variance("about two")


# --- attention_macs (derive) ----------------------------------------------------------------


def test_attention_macs_accepts_the_formula():
    assert checks.attention_macs(lambda n_layers, n, m, d: 2 * n_layers * n * m * d) is True


@pytest.mark.parametrize("wrong", [
    lambda n_layers, n, m, d: n_layers * n * m * d,  # only the energies
    lambda n_layers, n, m, d: 2 * n * m * d,  # one layer
    lambda n_layers, n, m, d: 4 * n_layers * n * m * d,  # FLOPs, not multiply-adds
])
def test_attention_macs_rejects_wrong_counts_without_giving_the_measurement(wrong, capsys):
    with pytest.raises(AssertionError, match=r"matrix products did — hint: a product of an "
                                             r"\[n, p\]"):
        checks.attention_macs(wrong)
    said = capsys.readouterr().out
    right = 2 * 2 * 7 * 5 * 6  # the first case the check tries (2, 7, 5, 6), by the solution
    assert "✗ attention_macs" in said and f"{right:,}" not in said


def test_attention_macs_stub_is_not_answered():
    assert checks.attention_macs(stub) is False


# --- row_entropy (implement) ----------------------------------------------------------------


def right_row_entropy(a):
    plogp = torch.where(a > 0, a * torch.log(a), torch.zeros_like(a))
    return -plogp.sum(dim=-1).mean()


def nan_row_entropy(a):  # 0·log 0 = NaN
    return -(a * torch.log(a)).sum(dim=-1).mean()


def test_row_entropy_accepts_the_solution_and_agrees_with_attention_maps():
    assert checks.row_entropy(right_row_entropy) is True
    a = torch.softmax(torch.randn(4, 6, dtype=torch.float64), dim=-1)
    assert math.isclose(right_row_entropy(a).item(), attention_maps.attention_entropy(a).item())


def test_row_entropy_rejects_nan_on_zeros():
    with pytest.raises(AssertionError, match="0·log 0"):
        checks.row_entropy(nan_row_entropy)


def test_row_entropy_stub_is_not_answered():
    assert checks.row_entropy(stub) is False


def test_notebook_04_checks_are_exactly_these():
    assert nb04.__all__ == ["masked_softmax", "scaled_context_variance", "attention_macs",
                            "row_entropy"]


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    """Each exercise as shipped is not answered; its solution passes its check."""
    kinds = {
        "masked_softmax": "implement", "scaled_context_variance": "predict",
        "attention_macs": "derive", "attention_in_every_layer": "explain",
        "row_entropy": "implement"}
    assert_exercises_run_from_the_setup_cell(notebook_path("04"), kinds)
    capsys.readouterr()


def test_masked_softmax_hints_follow_from_what_the_answer_got_wrong(capsys):
    """Softmax, then the padding zeroed: the hint says where the mask must act (not "which
    dimension"); a softmax over the target dimension: the hint asks which dimension sums to 1."""
    def softmax_then_zero(energy, mask):
        return torch.softmax(energy, dim=-1) * mask[:, None, :]

    def over_the_targets(energy, mask):
        return torch.softmax(energy.masked_fill(~mask[:, None, :], -1e9), dim=1) \
            * mask[:, None, :]

    for answer, hint in ((softmax_then_zero, nb04.ZEROED_AFTER),
                         (over_the_targets, nb04.ROW_SUMS)):
        with pytest.raises(AssertionError):
            checks.masked_softmax(answer)
        out = capsys.readouterr().out
        assert hint.nudge in out, out
        assert out.count("the row sums") == 1, out  # said once, not "row sums: the row sums"


def test_row_entropy_is_right_for_the_check_and_for_grading_alike(capsys):
    """One definition of right (nb04.entropy_holds, stated in the task): an answer 5e-6 off
    (float32 arithmetic's order) passes both, one 1e-3 off fails both."""
    from exercise_support import assert_check_and_grading_agree, hidden

    def right(a):
        return float(-(a * a.clamp_min(1e-300).log()).sum(-1).mean())

    grading = hidden("04")
    for off, holds in ((5e-6, True), (1e-3, False)):
        def answer(a, off=off):
            return right(a.double()) + off

        assert_check_and_grading_agree(checks.row_entropy, grading.row_entropy, answer, holds)
    capsys.readouterr()
