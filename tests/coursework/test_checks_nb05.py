"""convs2s.course.checks for notebook 05: right answers pass, wrong ones raise with a hint,
stubs are 0.

Also: the notebook's own exercise cells (the planted bugs and stubs are "not answered", the
solutions pass) and the hidden grading tests (coursework/hidden/05.py) accept the solutions
only.
"""

from __future__ import annotations

import math
import re
from collections import Counter

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
from convs2s.course.checks import nb05

# --- perplexity_from_loss (derive) -----------------------------------------------------------


def right_perplexity(loss, unit="nats"):
    if unit == "nats":
        return math.exp(loss)
    if unit == "bits":
        return 2.0 ** loss
    raise ValueError(unit)


def test_perplexity_accepts_the_formula(capsys):
    assert checks.perplexity_from_loss(right_perplexity) is True
    assert "✓ perplexity_from_loss" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [
    lambda loss, unit="nats": 2.0 ** loss,  # bits for nats
    lambda loss, unit="nats": math.exp(loss),  # ignores the unit
    lambda loss, unit="nats": math.exp(-loss) if unit == "nats" else 2.0 ** -loss,
    lambda loss, unit="nats": loss,
])
def test_perplexity_rejects_wrong_formulas_with_a_two_step_hint(wrong, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb05.PERPLEXITY.nudge}") + "$"):
        checks.perplexity_from_loss(wrong)
    assert "✗ perplexity_from_loss" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=re.escape(f"closer hint: {nb05.PERPLEXITY.closer}")):
        checks.perplexity_from_loss(wrong)


def test_perplexity_in_float32_is_right_for_the_check_and_for_grading_alike(capsys):
    """One definition of right (nb05.PERPLEXITY_REL_TOL, stated in the task): float32
    arithmetic (torch.exp of a float32 tensor, about 1e-7 off) passes the check and grading; an
    answer 1e-5 off fails both, and the check's line never gives the right value."""
    def float32(loss, unit="nats"):
        base = torch.tensor(math.e if unit == "nats" else 2.0, dtype=torch.float32)
        return base ** torch.tensor(loss, dtype=torch.float32)

    def off(loss, unit="nats"):
        return right_perplexity(loss, unit) * (1 + 1e-5)

    grading = hidden("05")
    assert checks.perplexity_from_loss(float32) is True
    grading.perplexity_from_loss(float32)
    capsys.readouterr()
    with pytest.raises(AssertionError):
        checks.perplexity_from_loss(off)
    said = capsys.readouterr().out
    assert "✗ perplexity_from_loss" in said and "got 1.00001" in said
    assert "expected" not in said and "1.0\n" not in said
    with pytest.raises(AssertionError):
        grading.perplexity_from_loss(off)


def test_perplexity_stub_is_not_answered():
    assert checks.perplexity_from_loss(stub) is False


# --- token_loss (debug) ----------------------------------------------------------------------


def right_loss(logits, trg_out, pad_idx):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1),
                           ignore_index=pad_idx)


def masked_by_hand(logits, trg_out, pad_idx):
    nll = F.cross_entropy(logits.transpose(1, 2), trg_out, reduction="none")  # [batch, len]
    real = trg_out != pad_idx
    return (nll * real).sum() / real.sum()


def planted_loss(logits, trg_out, pad_idx):  # the notebook's planted bug, unchanged
    criterion = torch.nn.CrossEntropyLoss()
    return criterion(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1))


def smoothed_loss(logits, trg_out, pad_idx):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1),
                           ignore_index=pad_idx, label_smoothing=0.1)


def fixed_pad_one(logits, trg_out, pad_idx):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1),
                           ignore_index=1)


def summed_loss(logits, trg_out, pad_idx):
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1),
                           ignore_index=pad_idx, reduction="sum")


@pytest.mark.parametrize("right", [right_loss, masked_by_hand])
def test_token_loss_accepts_fixes(right, capsys):
    assert checks.token_loss(right) is True
    assert "✓ token_loss" in capsys.readouterr().out


def test_token_loss_untouched_bug_is_not_answered_and_shows_the_padding_effect(capsys):
    assert checks.token_loss(planted_loss) is False
    out = capsys.readouterr().out
    assert "planted bug is still there" in out and "✗" not in out
    values = [float(v) for v in out.split("this loss reads ")[1].split(". ")[0].split(", ")]
    assert len(values) == 3 and values[0] > values[1] > values[2]  # more padding, lower loss
    # the measurement is shown; the diagnosis is the learner's to make
    assert "ignore" not in out and "runs over the <pad>" not in out


@pytest.mark.parametrize("wrong", [smoothed_loss, fixed_pad_one, summed_loss])
def test_token_loss_rejects_other_mistakes_with_a_two_step_hint(wrong, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb05.TOKEN_LOSS.nudge}") + "$"):
        checks.token_loss(wrong)
    assert "✗ token_loss" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=re.escape(f"closer hint: {nb05.TOKEN_LOSS.closer}")):
        checks.token_loss(wrong)


def test_token_loss_stub_is_not_answered():
    assert checks.token_loss(stub) is False


def test_the_planted_loss_really_depends_on_padding():
    # The check's story, measured directly: the buggy mean falls as pad columns are added.
    buggy = [float(planted_loss(*nb05._padded_logits(n, 1, sure_of_pad=True), 1))
             for n in (0, 10, 40)]
    right = [float(right_loss(*nb05._padded_logits(n, 1, sure_of_pad=True), 1))
             for n in (0, 10, 40)]
    assert buggy[0] > buggy[1] > buggy[2]
    assert right[0] == pytest.approx(right[1]) == pytest.approx(right[2])


# --- build_itos (implement) ------------------------------------------------------------------


def right_itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = [t for t, n in counts.items() if n >= min_freq and t not in specials]
    kept.sort(key=lambda t: (-counts[t], t))
    return list(specials) + kept


def ties_unsorted(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = [t for t, n in counts.items() if n >= min_freq and t not in specials]
    kept.sort(key=lambda t: -counts[t])
    return list(specials) + kept


def strict_min_freq(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
    counts = Counter(t for tokens in token_lists for t in tokens)
    kept = [t for t, n in counts.items() if n > min_freq and t not in specials]
    kept.sort(key=lambda t: (-counts[t], t))
    return list(specials) + kept


def test_build_itos_accepts_the_solution(capsys):
    assert checks.build_itos(right_itos) is True
    assert "✓ build_itos" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [ties_unsorted, strict_min_freq])
def test_build_itos_rejects_wrong_answers_with_a_two_step_hint(wrong, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb05.BUILD_ITOS.nudge}") + "$"):
        checks.build_itos(wrong)
    assert "✗ build_itos" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=re.escape(f"closer hint: {nb05.BUILD_ITOS.closer}")):
        checks.build_itos(wrong)


def test_build_itos_that_ignores_the_specials_gets_their_hint():
    def fixed_specials(token_lists, min_freq, specials=None):
        return right_itos(token_lists, min_freq)

    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb05.SPECIALS.nudge}")):
        checks.build_itos(fixed_specials)


def test_hint_prints_both_steps_on_request(capsys):
    checks.hint("token_loss")
    out = capsys.readouterr().out
    assert nb05.TOKEN_LOSS.nudge in out and nb05.TOKEN_LOSS.closer in out


def test_build_itos_stub_is_not_answered():
    assert checks.build_itos(stub) is False


# --- the module, the notebook's exercise cells and the hidden tests --------------------------


def test_notebook_05_checks_are_exactly_these():
    assert nb05.__all__ == ["build_itos", "token_loss", "perplexity_from_loss"]
    for name in nb05.__all__:
        assert checks.EXERCISES[name].check is getattr(nb05, name)


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    assert_exercises_run_from_the_setup_cell(notebook_path("05"), {
        "perplexity_from_loss": "derive", "token_loss": "debug", "optimizer_choice": "explain",
        "build_itos": "implement"})
    capsys.readouterr()


def test_hidden_tests_accept_the_solutions_and_reject_the_planted_bugs():
    grading = hidden("05")
    grading.perplexity_from_loss(right_perplexity)
    grading.token_loss(right_loss)
    grading.token_loss(masked_by_hand)
    grading.build_itos(right_itos)
    for fn, wrong in ((grading.perplexity_from_loss, lambda loss, unit="nats": math.exp(loss)),
                      (grading.token_loss, planted_loss),
                      (grading.build_itos, ties_unsorted)):
        with pytest.raises(AssertionError):
            fn(wrong)


def test_a_wrong_vocabulary_is_told_what_it_returned_never_the_right_list(capsys):
    """The check's line names the learner's own list, not the list it compares with (a check
    prints what passed or a hint, never the value it grades)."""
    with pytest.raises(AssertionError):
        checks.build_itos(ties_unsorted)
    said = capsys.readouterr().out
    assert "✗ build_itos" in said and "expected" not in said and "not the right one" in said


def test_token_loss_is_right_for_the_check_and_for_grading_alike(capsys):
    """One definition of right (nb05.loss_holds): a loss 1e-4 off, inside the tolerance, passes
    the check and grading (the check once refused it: grading took it), one 1e-2 off fails
    both."""
    grading = hidden("05")
    for off, holds in ((1e-4, True), (1e-2, False)):
        def answer(logits, trg_out, pad_idx, off=off):
            return right_loss(logits, trg_out, pad_idx) + off

        assert_check_and_grading_agree(checks.token_loss, grading.token_loss, answer, holds)
    capsys.readouterr()
