"""convs2s.course.checks for notebook 02: right answers pass, wrong ones raise with a hint,
stubs are 0.

Also: the hidden grading tests (coursework/hidden/02.py) accept the solutions only.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from exercise_support import assert_exercises_run_from_the_setup_cell, hidden, notebook_path, stub

from convs2s.course import checks
from convs2s.course.checks import nb02

# --- residual_variance (predict) ------------------------------------------------------------


@pytest.fixture(scope="module")
def measured_variance():
    return nb02.measured_variance()


def test_the_measured_variance_grows_at_least_like_2_to_the_10(measured_variance):
    assert 1024 / 2 < measured_variance < 1024 * 20


def test_residual_variance_accepts_predictions_near_the_measurement(measured_variance, capsys):
    assert checks.residual_variance(2**10) is True  # the doubling argument
    assert checks.residual_variance(measured_variance) is True
    out = capsys.readouterr().out
    assert "your prediction held" in out and f"{measured_variance:.3g}" in out


@pytest.mark.parametrize("wrong", [1.0, 11, 20.0, 1e7])
def test_residual_variance_rejects_far_predictions_with_a_hint(wrong, measured_variance, capsys):
    with pytest.raises(AssertionError, match=r"did not hold .* hint: a block without") as e:
        checks.residual_variance(wrong)
    assert f"{measured_variance:.3g}" not in str(e.value) + capsys.readouterr().out


@pytest.mark.parametrize("bad", [0, -3.0, "a lot"])
def test_residual_variance_rejects_non_positive_or_non_numbers(bad):
    with pytest.raises(AssertionError, match="hint"):
        checks.residual_variance(bad)


def test_residual_variance_none_is_not_answered(capsys):
    assert checks.residual_variance(None) is False
    assert "not answered yet" in capsys.readouterr().out


# --- mask_source_padding (debug) ------------------------------------------------------------


def fixed_conv_stack(e, src_mask, emb2hid, convs, hid2emb):
    x = emb2hid(e).transpose(1, 2)  # x = [batch, hid_dim, src_len]
    for conv in convs:
        x = x.masked_fill(~src_mask.unsqueeze(1), 0.0)  # pads -> 0 before every convolution
        k = conv.kernel_size[0]
        h = conv(F.pad(x, ((k - 1) // 2, (k - 1) // 2)))  # h = [batch, 2·hid_dim, src_len]
        x = (F.glu(h, dim=1) + x) * math.sqrt(0.5)  # x = [batch, hid_dim, src_len]
    z = hid2emb(x.transpose(1, 2))  # z = [batch, src_len, emb_dim]
    return z.masked_fill(~src_mask.unsqueeze(-1), 0.0)


def masked_conv_input_only(e, src_mask, emb2hid, convs, hid2emb):
    """Masks what the convolution reads but not the residual: the same z at real tokens."""
    x = emb2hid(e).transpose(1, 2)
    for conv in convs:
        k = conv.kernel_size[0]
        h = conv(F.pad(x.masked_fill(~src_mask.unsqueeze(1), 0.0), ((k - 1) // 2, (k - 1) // 2)))
        x = (F.glu(h, dim=1) + x) * math.sqrt(0.5)
    z = hid2emb(x.transpose(1, 2))
    return z.masked_fill(~src_mask.unsqueeze(-1), 0.0)


def masked_once(e, src_mask, emb2hid, convs, hid2emb):
    """Masks before the first convolution only: later blocks write into the pads again."""
    x = emb2hid(e).transpose(1, 2).masked_fill(~src_mask.unsqueeze(1), 0.0)
    for conv in convs:
        k = conv.kernel_size[0]
        h = conv(F.pad(x, ((k - 1) // 2, (k - 1) // 2)))
        x = (F.glu(h, dim=1) + x) * math.sqrt(0.5)
    z = hid2emb(x.transpose(1, 2))
    return z.masked_fill(~src_mask.unsqueeze(-1), 0.0)


def inverted_mask(e, src_mask, emb2hid, convs, hid2emb):
    """Zeroes the real tokens instead of the pads."""
    return fixed_conv_stack(e, ~src_mask, emb2hid, convs, hid2emb)


@pytest.mark.parametrize("right", [fixed_conv_stack, masked_conv_input_only])
def test_mask_source_padding_accepts_fixes(right, capsys):
    assert checks.mask_source_padding(right) is True
    assert "✓ mask_source_padding: all 4 checks passed" in capsys.readouterr().out


def test_mask_source_padding_untouched_bug_is_not_answered(capsys):
    assert checks.mask_source_padding(nb02.planted_conv_stack) is False
    assert "planted bug is still there" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [masked_once, inverted_mask])
def test_mask_source_padding_rejects_other_mistakes_with_a_hint(wrong):
    with pytest.raises(AssertionError, match="not close to convs2s.Encoder's conved .* hint: "
                                             "encode one sentence alone"):
        checks.mask_source_padding(wrong)


def test_mask_source_padding_stub_is_not_answered():
    assert checks.mask_source_padding(stub) is False


def test_the_planted_bug_really_leaks_padding():
    """The premise of the exercise: the planted stack changes z at real tokens next to pads."""
    enc = nb02._tiny_encoder(n_layers=3, seed=0)
    src = nb02._padded_batch([7, 4, 2], seed=10)
    args = (enc.emb2hid, [block.conv for block in enc.blocks], enc.hid2emb)
    with torch.no_grad():
        e = enc.tok_embedding(src) + enc.pos_embedding(torch.arange(src.size(1)))
        leaky = nb02.planted_conv_stack(e, src != 1, *args)
        torch.testing.assert_close(fixed_conv_stack(e, src != 1, *args), enc(src).conved)
    assert (leaky - enc(src).conved).abs().max() > 1e-3
    torch.testing.assert_close(leaky[0], enc(src).conved[0])  # the unpadded sentence is fine


# --- block_parameters (derive) --------------------------------------------------------------


def test_block_parameters_accepts_the_count(capsys):
    assert checks.block_parameters(lambda d, k: 2 * d * d * k + 2 * d + 2 * d) is True
    assert "✓ block_parameters" in capsys.readouterr().out


def test_block_parameters_names_a_count_without_weight_norm():
    with pytest.raises(AssertionError, match=r"WITHOUT weight norm\) — hint"):
        checks.block_parameters(lambda d, k: 2 * d * d * k + 2 * d)


@pytest.mark.parametrize("wrong", [
    lambda d, k: d * d * k + 2 * d,  # forgot the GLU's doubling
    lambda d, k: 2 * d * d * k + 4 * d * k,  # a gain per weight, not per output channel
    lambda d, k: float(2 * d * d * k + 4 * d),  # not a whole number
])
def test_block_parameters_rejects_wrong_counts_with_a_hint(wrong):
    with pytest.raises(AssertionError, match="hint"):
        checks.block_parameters(wrong)


def test_block_parameters_stub_is_not_answered():
    assert checks.block_parameters(stub) is False


# --- the module and the hidden tests --------------------------------------------------------


def test_notebook_02_checks_are_exactly_these():
    assert nb02.__all__ == ["residual_variance", "mask_source_padding", "block_parameters"]
    for gone in ("embed", "mask_padding", "measured_receptive_field"):
        assert not hasattr(checks, gone)


def test_hidden_tests_accept_the_solutions_and_reject_wrong_answers():
    grading = hidden("02")
    grading.residual_variance(1024)
    grading.mask_source_padding(fixed_conv_stack)
    grading.block_parameters(lambda d, k: 2 * d * d * k + 4 * d)
    with pytest.raises(AssertionError):
        grading.residual_variance(20)
    with pytest.raises(AssertionError):
        grading.mask_source_padding(nb02.planted_conv_stack)
    with pytest.raises(AssertionError):
        grading.block_parameters(lambda d, k: 2 * d * d * k + 2 * d)


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    """Each exercise as shipped is not answered; its solution passes its check."""
    kinds = {
        "residual_variance": "predict", "keys_and_values": "explain",
        "mask_source_padding": "debug", "block_parameters": "derive"}
    assert_exercises_run_from_the_setup_cell(notebook_path("02"), kinds)
    capsys.readouterr()
