"""convs2s.course.checks for notebook 01: right answers pass, wrong ones raise with a hint,
stubs are 0.

Also: the hidden grading tests (coursework/hidden/01.py) accept the solutions only.
"""

from __future__ import annotations

import re

import pytest
import torch
from exercise_support import assert_exercises_run_from_the_setup_cell, hidden, notebook_path, stub

from convs2s.course import checks, stacks
from convs2s.course.checks import nb01

# --- my_glu (implement) ---------------------------------------------------------------------


def right_glu(h, dim=-1):
    if h.size(dim) % 2:
        raise ValueError(f"dimension {dim} has odd size {h.size(dim)}")
    a, b = h.chunk(2, dim=dim)  # a, b = h's shape with size(dim) halved
    return a * torch.sigmoid(b)


def gtu(h, dim=-1):  # the gated tanh unit, not the GLU
    if h.size(dim) % 2:
        raise ValueError("odd")
    a, b = h.chunk(2, dim=dim)
    return torch.tanh(a) * torch.sigmoid(b)


def swapped_halves(h, dim=-1):  # gate on the first half
    if h.size(dim) % 2:
        raise ValueError("odd")
    a, b = h.chunk(2, dim=dim)
    return b * torch.sigmoid(a)


def no_odd_check(h, dim=-1):
    a, b = h.chunk(2, dim=dim)
    return a * torch.sigmoid(b)


def calls_f_glu(h, dim=-1):
    if h.size(dim) % 2:
        raise ValueError("odd")
    return torch.nn.functional.glu(h, dim=dim)


def test_my_glu_accepts_the_solution(capsys):
    assert checks.my_glu(right_glu) is True
    assert "✓ my_glu" in capsys.readouterr().out


@pytest.mark.parametrize("wrong, hint", [
    (gtu, nb01.MY_GLU),
    (swapped_halves, nb01.MY_GLU),
    (no_odd_check, nb01.ODD_SIZE),
    (calls_f_glu, nb01.WITHOUT_F_GLU),
])
def test_my_glu_rejects_wrong_answers_with_a_hint(wrong, hint, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"hint: {hint.nudge}") + "$"):
        checks.my_glu(wrong)
    assert "✗ my_glu" in capsys.readouterr().out
    # the second wrong try adds the closer hint
    with pytest.raises(AssertionError, match=re.escape(f"closer hint: {hint.closer}") + "$"):
        checks.my_glu(wrong)


def test_my_glu_stub_and_none_are_not_answered(capsys):
    assert checks.my_glu(stub) is False
    assert "not implemented yet" in capsys.readouterr().out
    assert checks.my_glu(None) is False


# --- same_padding_moves (predict) -----------------------------------------------------------


def test_same_padding_moves_accepts_the_measured_outputs(capsys):
    assert checks.same_padding_moves([5, 6, 7, 8, 9]) is True
    assert checks.same_padding_moves((9, 8, 7, 6, 5)) is True  # any order, any iterable
    out = capsys.readouterr().out
    assert "your prediction held" in out and "moves the outputs [5, 6, 7, 8, 9]" in out


def test_the_prediction_is_really_measured():
    """The answer is what a stack of the package's blocks does when input 8 changes."""
    blocks = stacks.conv_glu_stack(nb01.SAME_K, nb01.SAME_LAYERS, "same", seed=3)
    x = torch.randn(1, 4, nb01.SAME_LENGTH, dtype=torch.float64)
    changed = x.clone()
    changed[0, :, nb01.SAME_CHANGED] += 1.0
    with torch.no_grad():
        moved = (stacks.run_stack(blocks, changed, "same") - stacks.run_stack(blocks, x, "same"))
    moved_positions = moved.abs().amax(dim=1)[0].nonzero().flatten().tolist()
    assert moved_positions == nb01._measured_moves() == [5, 6, 7, 8, 9]


@pytest.mark.parametrize("wrong", [
    [7, 8, 9],  # one block's reach
    [5, 6, 7, 8, 9, 10, 11],  # forgot the end of the sentence
    [8, 9],  # causal thinking, the wrong way round
    [8],
])
def test_same_padding_moves_rejects_wrong_predictions_without_the_measurement(wrong, capsys):
    with pytest.raises(AssertionError, match=r"did not hold — hint: start with one block") as e:
        checks.same_padding_moves(wrong)
    assert "[5, 6, 7, 8, 9]" not in str(e.value) + capsys.readouterr().out


@pytest.mark.parametrize("bad", [5, "5, 6, 7", [5.5, 6]])
def test_same_padding_moves_rejects_answers_that_are_not_lists_of_positions(bad):
    with pytest.raises(AssertionError, match="hint"):
        checks.same_padding_moves(bad)


def test_same_padding_moves_none_is_not_answered(capsys):
    assert checks.same_padding_moves(None) is False
    assert "not answered yet" in capsys.readouterr().out


# --- my_receptive_field (derive) ------------------------------------------------------------


def test_my_receptive_field_accepts_the_formula(capsys):
    assert checks.my_receptive_field(lambda k, n_layers: 1 + n_layers * (k - 1)) is True
    assert "✓ my_receptive_field" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [
    lambda k, n_layers: n_layers * k,  # windows do not simply add up
    lambda k, n_layers: n_layers * (k - 1),  # forgot the centre
    lambda k, n_layers: k ** n_layers,
])
def test_my_receptive_field_rejects_wrong_formulas_with_a_hint(wrong):
    with pytest.raises(AssertionError, match="hint: one layer sees k inputs; draw two layers"):
        checks.my_receptive_field(wrong)


def test_my_receptive_field_stub_is_not_answered():
    assert checks.my_receptive_field(stub) is False


# --- the module and the hidden tests --------------------------------------------------------


def test_notebook_01_checks_are_exactly_these():
    assert nb01.__all__ == ["my_glu", "same_padding_moves", "my_receptive_field"]
    assert not hasattr(checks, "causal_left_padding")  # notebook 03 owns causal padding


def test_hidden_tests_accept_the_solutions_and_reject_wrong_answers():
    grading = hidden("01")
    grading.my_glu(right_glu)
    grading.same_padding_moves([5, 6, 7, 8, 9])
    grading.my_receptive_field(lambda k, n_layers: 1 + n_layers * (k - 1))
    with pytest.raises(Exception):  # noqa: B017 (any failure fails the grade cell)
        grading.my_glu(no_odd_check)
    with pytest.raises(AssertionError):
        grading.same_padding_moves([7, 8, 9])
    with pytest.raises(AssertionError):
        grading.my_receptive_field(lambda k, n_layers: n_layers * k)


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    """Each exercise as shipped is not answered; its solution passes its check."""
    kinds = {
        "my_glu": "implement", "glu_vs_gtu": "explain", "same_padding_moves": "predict",
        "my_receptive_field": "derive"}
    assert_exercises_run_from_the_setup_cell(notebook_path("01"), kinds)
    capsys.readouterr()
