"""The checks of notebook 07: a right answer passes, a wrong one raises with a hint, a stub or an
unfilled prediction returns False; the hidden grading tests accept the solutions only."""

from __future__ import annotations

import importlib.util
import math
from pathlib import Path

import pytest

from convs2s import checks
from convs2s.baselines import rnn_parameter_count

ROOT = Path(__file__).resolve().parents[1]

RIGHT_STEPS = {"GRU + attention": [20, 40, 80], "ConvS2S": [6, 6, 6]}


def _hidden():
    spec = importlib.util.spec_from_file_location("hidden07", ROOT / "coursework/hidden/07.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def stub(*_args):
    raise NotImplementedError()


def gru_parameters(input_size, hidden_size):
    return 3 * hidden_size * (input_size + hidden_size) + 6 * hidden_size


def baseline_parameters(config):
    return rnn_parameter_count(**config)


def conv_path_length(n, k):
    return -(-n // (k - 1))


def rnn_path_length(n):
    return n


def test_exercises_are_registered():
    for name in ("training_steps", "path_length", "baseline_parameters"):
        assert name in checks.EXERCISES
    for gone in ("augment_tokens", "augment_batch"):
        assert gone not in checks.EXERCISES


def test_training_steps_right_prediction_passes(capsys):
    assert checks.training_steps(RIGHT_STEPS) is True
    out = capsys.readouterr().out
    assert "measured [20, 40, 80]" in out and "✓ training_steps" in out


@pytest.mark.parametrize(
    ("prediction", "hint"),
    [
        ({"GRU + attention": [10, 20, 40], "ConvS2S": [6, 6, 6]}, "back-propagation"),
        ({"GRU + attention": [20, 40, 80], "ConvS2S": [3, 3, 3]}, "forward and then backward"),
        ({"GRU + attention": [20, 40, 80], "ConvS2S": [60, 120, 240]}, "all positions at once"),
        ({"GRU": [20, 40, 80], "ConvS2S": [6, 6, 6]}, "a dict"),
        ({"GRU + attention": [20, 40], "ConvS2S": [6, 6, 6]}, "a dict"),
        ({"GRU + attention": [20, 40, "80"], "ConvS2S": [6, 6, 6]}, "back-propagation"),
    ],
)
def test_training_steps_wrong_prediction_raises_with_a_hint(prediction, hint, capsys):
    with pytest.raises(AssertionError, match="hint: .*" + hint):
        checks.training_steps(prediction)
    assert "✗ training_steps" in capsys.readouterr().out


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
        (lambda n, k: n // (k - 1), rnn_path_length, "ceil"),  # rounds down
        (lambda n, k: math.ceil(n / k), rnn_path_length, "ceil"),  # window k, not k - 1
        (lambda n, k: math.ceil(n / (k - 1)) * 1.0, rnn_path_length, "ceil"),  # a float
        (conv_path_length, lambda n: n - 1, "state update"),
    ],
)
def test_path_length_wrong_answer_raises_with_a_hint(conv_fn, rnn_fn, hint):
    with pytest.raises(AssertionError, match="hint: .*" + hint):
        checks.path_length(conv_fn, rnn_fn)


def test_path_length_stub_returns_false(capsys):
    assert checks.path_length(stub, stub) is False
    assert checks.path_length(conv_path_length, stub) is False
    assert "not implemented yet" in capsys.readouterr().out


def test_baseline_parameters_right_wrong_and_stub():
    assert checks.baseline_parameters(gru_parameters, baseline_parameters) is True

    def gru_one_bias(i, h):
        return 3 * h * (i + h) + 3 * h

    with pytest.raises(AssertionError, match="hint: each of the 3 gates"):
        checks.baseline_parameters(gru_one_bias, baseline_parameters)

    def no_readout(config):
        return rnn_parameter_count(**config) - 2 * config["out_dim"]

    with pytest.raises(AssertionError, match="hint: add up"):
        checks.baseline_parameters(gru_parameters, no_readout)
    assert checks.baseline_parameters(stub, stub) is False
    assert checks.baseline_parameters(None, baseline_parameters) is False


def test_hidden_tests_accept_the_solutions_and_reject_wrong_answers():
    hidden = _hidden()
    hidden.training_steps(RIGHT_STEPS)
    hidden.path_length(conv_path_length, rnn_path_length)
    hidden.baseline_parameters(gru_parameters, baseline_parameters)
    with pytest.raises(AssertionError):
        hidden.training_steps({"GRU + attention": [10, 20, 40], "ConvS2S": [3, 3, 3]})
    with pytest.raises(AssertionError):
        hidden.path_length(lambda n, k: n // (k - 1), rnn_path_length)
    with pytest.raises(AssertionError):
        hidden.baseline_parameters(gru_parameters, lambda config: 0)
