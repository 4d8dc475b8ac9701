"""convs2s.course.checks for notebook 03: right answers pass, wrong ones raise with a hint,
stubs are 0."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from exercise_support import (
    assert_check_and_grading_agree,
    assert_exercises_run_from_the_setup_cell,
    hidden,
    notebook_path,
    stub,
)

from convs2s.course import checks
from convs2s.course.checks import nb03

# --- causal_conv1d (implement) --------------------------------------------------------------


def right_causal_conv1d(x, weight, bias):  # the paper's recipe: both sides, then a slice
    k = weight.size(-1)
    return F.conv1d(x, weight, bias, padding=k - 1)[:, :, : x.size(-1)]  # [batch, out, length]


def left_padded_conv1d(x, weight, bias):  # right numbers, but section 2's way (F.pad)
    k = weight.size(-1)
    return F.conv1d(F.pad(x, (k - 1, 0)), weight, bias)


def same_padded_conv1d(x, weight, bias):  # sees the future
    k = weight.size(-1)
    return F.conv1d(x, weight, bias, padding=(k - 1) // 2)


def shrinking_conv1d(x, weight, bias):  # no padding: the output is k - 1 shorter
    return F.conv1d(x, weight, bias)


def negative_slice_conv1d(x, weight, bias):  # [:-(k-1)]: empty for k = 1
    k = weight.size(-1)
    return F.conv1d(x, weight, bias, padding=k - 1)[:, :, : -(k - 1)]


def last_outputs_conv1d(x, weight, bias):  # keeps the wrong end: the outputs that see ahead
    k = weight.size(-1)
    return F.conv1d(x, weight, bias, padding=k - 1)[:, :, k - 1:]


def test_causal_conv1d_accepts_the_solution(capsys):
    assert checks.causal_conv1d(right_causal_conv1d) is True
    assert "✓ causal_conv1d" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [same_padded_conv1d, shrinking_conv1d, negative_slice_conv1d,
                                   last_outputs_conv1d])
def test_causal_conv1d_rejects_wrong_padding_with_a_hint(wrong, capsys):
    with pytest.raises(AssertionError, match="hint: with k - 1 zeros on both sides"):
        checks.causal_conv1d(wrong)
    assert "✗ causal_conv1d" in capsys.readouterr().out


def test_causal_conv1d_refuses_f_pad_with_its_own_hint():
    with pytest.raises(AssertionError, match="it called F.pad.* hint: the exercise is "
                                             "the paper's recipe"):
        checks.causal_conv1d(left_padded_conv1d)


def test_causal_conv1d_hidden_tests_accept_the_papers_recipe_and_refuse_f_pad():
    grading = hidden("03")
    grading.causal_conv1d(right_causal_conv1d)
    with pytest.raises(AssertionError, match="it called F.pad"):  # as the check does
        grading.causal_conv1d(left_padded_conv1d)
    with pytest.raises(AssertionError):
        grading.causal_conv1d(last_outputs_conv1d)


def test_causal_conv1d_stub_is_not_answered(capsys):
    assert checks.causal_conv1d(stub) is False
    assert "not implemented yet" in capsys.readouterr().out


# --- teacher_forcing_loss (debug) -----------------------------------------------------------


def _ce(logits, targets, pad_idx):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), targets.reshape(-1),
                           ignore_index=pad_idx)


def fixed_loss(model, src, trg, pad_idx):
    logits, _ = model(src, trg[:, :-1])  # logits = [batch, trg_len, vocab]
    return _ce(logits, trg[:, 1:], pad_idx)


def planted_loss(model, src, trg, pad_idx):  # the notebook's planted bug, unchanged
    logits, _ = model(src, trg[:, 1:])
    return _ce(logits, trg[:, 1:], pad_idx)


def other_cheat_loss(model, src, trg, pad_idx):  # input i is target i again, another way
    logits, _ = model(src, trg[:, :-1])
    return _ce(logits, trg[:, :-1], pad_idx)


def padding_counted_loss(model, src, trg, pad_idx):  # padding scored as a word
    logits, _ = model(src, trg[:, :-1])
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg[:, 1:].reshape(-1))


def test_teacher_forcing_loss_accepts_the_fix(capsys):
    assert checks.teacher_forcing_loss(fixed_loss) is True
    assert "✓ teacher_forcing_loss: all 3 checks passed" in capsys.readouterr().out


def test_teacher_forcing_loss_untouched_bug_is_not_answered(capsys):
    assert checks.teacher_forcing_loss(planted_loss) is False
    assert "planted bug is still there" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [other_cheat_loss, padding_counted_loss])
def test_teacher_forcing_loss_rejects_other_mistakes_with_a_hint(wrong):
    with pytest.raises(AssertionError, match=r"honest teacher-forced loss .* hint: write out"):
        checks.teacher_forcing_loss(wrong)


def test_teacher_forcing_loss_stub_and_none_are_not_answered():
    assert checks.teacher_forcing_loss(stub) is False
    assert checks.teacher_forcing_loss(None) is False


def test_the_planted_bug_really_lets_a_position_see_its_own_target():
    """The premise of the exercise: the planted loss differs from the honest one."""
    src, trg = nb03._batch(0, [5, 3, 7])
    model = nb03._tiny_convs2s("causal", layers=2, kernel_size=3, seed=0)
    with torch.no_grad():
        honest = fixed_loss(model, src, trg, nb03._PAD)
        cheat = planted_loss(model, src, trg, nb03._PAD)
    assert abs(honest.item() - cheat.item()) > 1e-3


# --- cache_floats (derive) ------------------------------------------------------------------


def test_cache_floats_accepts_the_formula_and_it_matches_the_measurement(capsys):
    assert checks.cache_floats(lambda n_layers, k, hid_dim, steps: n_layers * (k - 1) * hid_dim)
    assert "✓ cache_floats" in capsys.readouterr().out
    assert nb03._measured_cache_floats(3, 4, 5, 9) == 3 * 3 * 5


@pytest.mark.parametrize("wrong", [
    lambda n_layers, k, hid_dim, steps: n_layers * k * hid_dim,  # the whole window
    lambda n_layers, k, hid_dim, steps: n_layers * steps * hid_dim,  # the whole prefix
    lambda n_layers, k, hid_dim, steps: 2 * n_layers * (k - 1) * hid_dim,  # 2·hid (conv output)
])
def test_cache_floats_rejects_wrong_counts_without_giving_the_measurement(wrong, capsys):
    with pytest.raises(AssertionError, match=r"holds per sentence — hint: to compute the"):
        checks.cache_floats(wrong)
    said = capsys.readouterr().out
    measured = nb03._measured_cache_floats(2, 3, 8, 1)  # the first case the check tries
    assert "✗ cache_floats" in said and f"holds {measured:,}" not in said
    assert str(measured) not in said.replace("floats, not", "")


def test_cache_floats_rejects_non_integers_and_stub():
    with pytest.raises(AssertionError, match="whole number"):
        checks.cache_floats(lambda n_layers, k, hid_dim, steps: n_layers * (k - 1) * hid_dim / 1)
    assert checks.cache_floats(stub) is False


def test_notebook_03_checks_are_exactly_these():
    assert nb03.__all__ == ["causal_conv1d", "teacher_forcing_loss", "cache_floats"]


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    """Each exercise as shipped is not answered; its solution passes its check."""
    kinds = {
        "causal_conv1d": "implement", "teacher_forcing_loss": "debug", "cache_floats": "derive",
        "incremental_same_as_full": "explain"}
    assert_exercises_run_from_the_setup_cell(notebook_path("03"), kinds)
    capsys.readouterr()


def test_teacher_forcing_loss_is_right_for_the_check_and_for_grading_alike(capsys):
    """One definition of right (nb03.loss_holds): a loss 2e-5 off (inside 1e-5 relative for a
    loss near 3.4) passes the check and grading (grading once refused it: the check took it),
    one 1e-3 off fails both."""
    grading = hidden("03")
    for off, holds in ((2e-5, True), (1e-3, False)):
        def answer(model, src, trg, pad_idx, off=off):
            return fixed_loss(model, src, trg, pad_idx) + off

        assert_check_and_grading_agree(checks.teacher_forcing_loss, grading.teacher_forcing_loss,
                                       answer, holds)
    capsys.readouterr()
