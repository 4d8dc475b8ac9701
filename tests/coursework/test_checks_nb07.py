"""The checks of notebook 07: a right answer passes, a wrong one raises with a two-step hint, a
stub or an unfilled prediction returns False; the notebook's exercise cells run from its setup
cell alone; the hidden grading tests accept the solutions only."""

from __future__ import annotations

import math
import re

import pytest
from exercise_support import assert_exercises_run_from_the_setup_cell, hidden, notebook_path, stub

from convs2s.course import checks
from convs2s.course.baselines import rnn_parameter_count
from convs2s.course.checks import nb07

RIGHT_STEPS = {"GRU + attention": [20, 40, 80], "ConvS2S": [6, 6, 6]}


def _nudge(hint):
    return re.escape(f"hint: {hint.nudge}")


def _closer(hint):
    return re.escape(f"closer hint: {hint.closer}")


def gru_parameters(input_size, hidden_size):
    return 3 * hidden_size * (input_size + hidden_size) + 6 * hidden_size


def baseline_parameters(config):  # the solution's count, from the shapes
    E, H, D = config["emb_dim"], config["enc_hid_dim"], config["dec_hid_dim"]
    A, O = config["attn_dim"], config["out_dim"]
    Vs, Vt = config["src_vocab_size"], config["trg_vocab_size"]
    encoder = Vs * E + 2 * gru_parameters(E, H) + (2 * H * D + D)
    attention = D * A + (2 * H * A + A) + A
    decoder = Vt * E + gru_parameters(E + 2 * H, D)
    output = (D + 2 * H + E) * 2 * O + 2 * O + O * Vt + Vt
    return encoder + attention + decoder + output


def test_the_counts_by_hand_equal_the_package_and_a_real_model():
    config = dict(src_vocab_size=50, trg_vocab_size=60, emb_dim=8, enc_hid_dim=12,
                  dec_hid_dim=16, attn_dim=10, out_dim=8)
    assert baseline_parameters(config) == rnn_parameter_count(**config)


def conv_path_length(n, k):
    return -(-n // (k - 1))


def rnn_path_length(n):
    return n


def test_exercises_are_registered():
    for name in ("training_steps", "path_length", "baseline_parameters", "speed_crossover"):
        assert name in checks.EXERCISES
    for gone in ("augment_tokens", "augment_batch"):
        assert gone not in checks.EXERCISES


def test_training_steps_right_prediction_passes(capsys):
    assert checks.training_steps(RIGHT_STEPS) is True
    out = capsys.readouterr().out
    assert "your prediction held" in out and "✓ training_steps" in out
    assert "GRU + attention  [20, 40, 80] calls" in out


@pytest.mark.parametrize(
    ("prediction", "hint"),
    [
        ({"GRU + attention": [10, 20, 40], "ConvS2S": [6, 6, 6]}, nb07.STEPS_GRU),
        ({"GRU + attention": [20, 40, 80], "ConvS2S": [3, 3, 3]}, nb07.STEPS_CONV),
        ({"GRU + attention": [20, 40, 80], "ConvS2S": [60, 120, 240]}, nb07.STEPS_CONV),
        ({"GRU": [20, 40, 80], "ConvS2S": [6, 6, 6]}, nb07.STEPS_FORM),
        ({"GRU + attention": [20, 40], "ConvS2S": [6, 6, 6]}, nb07.STEPS_FORM),
        ({"GRU + attention": [20, 40, "80"], "ConvS2S": [6, 6, 6]}, nb07.STEPS_GRU),
    ],
)
def test_training_steps_wrong_prediction_raises_with_a_two_step_hint(prediction, hint, capsys):
    with pytest.raises(AssertionError, match=_nudge(hint) + "$"):
        checks.training_steps(prediction)
    assert "✗ training_steps" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=_closer(hint)):
        checks.training_steps(prediction)


def test_training_steps_unfilled_prediction_returns_false(capsys):
    assert checks.training_steps(None) is False
    unfilled = {"GRU + attention": [None, None, None], "ConvS2S": [None, None, None]}
    assert checks.training_steps(unfilled) is False
    assert "replace every None" in capsys.readouterr().out


def test_path_length_right_answer_passes(capsys):
    assert checks.path_length(conv_path_length, rnn_path_length) is True
    out = capsys.readouterr().out
    assert "conv k=3 25 layers, k=5 13 layers; RNN 50 steps" in out


@pytest.mark.parametrize(
    ("conv_fn", "rnn_fn", "hint"),
    [
        (lambda n, k: n // (k - 1), rnn_path_length, nb07.PATH_CONV),  # rounds down
        (lambda n, k: math.ceil(n / k), rnn_path_length, nb07.PATH_CONV),  # window k, not k - 1
        (lambda n, k: math.ceil(n / (k - 1)) * 1.0, rnn_path_length, nb07.PATH_CONV),  # a float
        (conv_path_length, lambda n: n - 1, nb07.PATH_RNN),
    ],
)
def test_path_length_wrong_answer_raises_with_a_two_step_hint(conv_fn, rnn_fn, hint):
    with pytest.raises(AssertionError, match=_nudge(hint) + "$"):
        checks.path_length(conv_fn, rnn_fn)
    with pytest.raises(AssertionError, match=_closer(hint)):
        checks.path_length(conv_fn, rnn_fn)


def test_path_length_stub_returns_false(capsys):
    assert checks.path_length(stub, stub) is False
    assert checks.path_length(conv_path_length, stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_baseline_parameters_right_wrong_and_stub():
    assert checks.baseline_parameters(gru_parameters, baseline_parameters) is True

    def gru_one_bias(i, h):
        return 3 * h * (i + h) + 3 * h

    with pytest.raises(AssertionError, match=_nudge(nb07.GRU_PARAMS) + "$"):
        checks.baseline_parameters(gru_one_bias, baseline_parameters)

    def no_readout(config):
        return baseline_parameters(config) - 2 * config["out_dim"]

    with pytest.raises(AssertionError, match=_nudge(nb07.BASELINE)):
        checks.baseline_parameters(gru_parameters, no_readout)
    with pytest.raises(AssertionError, match=_closer(nb07.BASELINE)):
        checks.baseline_parameters(gru_parameters, no_readout)
    assert checks.baseline_parameters(stub, stub) is False
    assert checks.baseline_parameters(None, baseline_parameters) is False


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    assert_exercises_run_from_the_setup_cell(notebook_path("07"), {
        "training_steps": "predict", "path_length": "derive", "baseline_parameters": "derive",
        "cpu_speed": "explain", "speed_crossover": "predict"})
    capsys.readouterr()


def test_hidden_tests_accept_the_solutions_and_reject_wrong_answers():
    grading = hidden("07")
    grading.training_steps(RIGHT_STEPS)
    grading.path_length(conv_path_length, rnn_path_length)
    grading.baseline_parameters(gru_parameters, baseline_parameters)
    with pytest.raises(AssertionError):
        grading.training_steps({"GRU + attention": [10, 20, 40], "ConvS2S": [3, 3, 3]})
    with pytest.raises(AssertionError):
        grading.path_length(lambda n, k: n // (k - 1), rnn_path_length)
    with pytest.raises(AssertionError):
        grading.baseline_parameters(gru_parameters, lambda config: 0)
