"""convs2s.course.checks for notebook 06: right answers pass, wrong ones raise with a hint,
stubs are 0.

Also: the notebook's own exercise cells (the planted bug and the stubs are "not answered", the
solutions pass), the hidden grading tests (coursework/hidden/06.py), and the claim behind the
rerank exercise: re-ranking beam_search's α = 1 hypotheses equals searching with another α.
"""

from __future__ import annotations

import math
import re

import pytest
import torch
from exercise_support import assert_exercises_run_from_the_setup_cell, hidden, notebook_path, stub

from convs2s.course import checks
from convs2s.course.checks import nb06
from convs2s.model import ConvS2S
from convs2s.model.search import beam_search

# --- rerank (implement) ----------------------------------------------------------------------


def right_rerank(hypotheses, alpha):
    rescored = [(score * (len(t) + 1) / (len(t) + 1) ** alpha, t) for t, score in hypotheses]
    return [t for _, t in sorted(rescored, key=lambda r: r[0], reverse=True)]


def as_given(hypotheses, alpha):  # keeps the α = 1 order
    return [t for t, _ in hypotheses]


def no_eos_in_length(hypotheses, alpha):
    rescored = [(score * (len(t) + 1) / max(len(t), 1) ** alpha, t) for t, score in hypotheses]
    return [t for _, t in sorted(rescored, key=lambda r: r[0], reverse=True)]


def worst_first(hypotheses, alpha):
    return right_rerank(hypotheses, alpha)[::-1]


def test_rerank_accepts_the_solution(capsys):
    assert checks.rerank(right_rerank) is True
    assert "✓ rerank" in capsys.readouterr().out


@pytest.mark.parametrize("wrong", [as_given, no_eos_in_length, worst_first])
def test_rerank_rejects_wrong_answers_with_a_two_step_hint(wrong, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb06.RERANK.nudge}") + "$"):
        checks.rerank(wrong)
    assert "✗ rerank" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=re.escape(f"closer hint: {nb06.RERANK.closer}")):
        checks.rerank(wrong)


def test_rerank_stub_is_not_answered():
    assert checks.rerank(stub) is False


def test_reranking_alpha_1_hypotheses_equals_searching_with_another_alpha():
    # The exercise's premise: α changes only how the finished hypotheses are compared.
    torch.manual_seed(4)
    model = ConvS2S(30, 30, emb_dim=16, hid_dim=16, enc_layers=2, dec_layers=2, kernel_size=3,
                    dropout=0.0, max_positions=32, src_pad_idx=1, trg_pad_idx=1)
    with torch.no_grad():
        model.decoder.fc_out.bias[3] += 0.2  # <eos> a little likelier: outputs of many lengths
    src = torch.randint(4, 30, (6, 7))
    kw = dict(beam_size=4, max_len=30, bos_idx=2, eos_idx=3, return_all=True)
    base = beam_search(model, src, length_penalty=1.0, **kw)
    # every hypothesis ended with <eos> (none cut at max_len), so its length is len(tokens) + 1
    assert all(len(t) < 30 for hyps in base for t, _ in hyps)
    changed = 0
    for alpha in (0.0, 0.5, 2.0):
        searched = beam_search(model, src, length_penalty=alpha, **kw)
        for hyps, other in zip(base, searched, strict=True):
            assert right_rerank(hyps, alpha) == [t for t, _ in other]
            changed += right_rerank(hyps, alpha)[0] != hyps[0][0]
    assert changed > 0  # α really changed some choices: the comparison is not vacuous


# --- brevity_prediction (predict, then measure) ----------------------------------------------


def test_brevity_prediction_accepts_the_derived_value_and_shows_the_measurement(capsys):
    assert checks.brevity_prediction(100 * math.exp(-1)) is True
    assert checks.brevity_prediction(37) is True
    out = capsys.readouterr().out
    assert "measured with sacreBLEU" in out and "precisions 100 / 100 / 100 / 100" in out
    assert "✓ brevity_prediction" in out


def test_the_measurement_is_the_brevity_penalty_alone():
    score = nb06._halved_outputs_bleu()
    assert 2 * score.sys_len == score.ref_len
    assert score.score == pytest.approx(100 * math.exp(-1), abs=1e-6)


@pytest.mark.parametrize("wrong, message", [
    (50, "it did not hold .* — hint: " + re.escape(nb06.BREVITY.nudge)),
    (100, "it did not hold"),
    (0.368, "0-100 scale, not as a fraction"),
    ("a lot", "should be a number"),
])
def test_brevity_prediction_rejects_wrong_predictions_with_a_hint(wrong, message, capsys):
    with pytest.raises(AssertionError, match=message) as e:
        checks.brevity_prediction(wrong)
    out = capsys.readouterr().out
    assert "✗ brevity_prediction" in out
    score = nb06._halved_outputs_bleu().score  # the graded value is never shown on a wrong try
    said = str(e.value) + out
    assert f"{score:.2f}" not in said and f"{score:.1f}" not in said and "13.2" not in said


def test_a_prediction_below_1_within_1_point_holds_where_a_version_measures_below_2():
    """A class's version with outputs a fifth as long measures BLEU 1.83: a prediction within 1
    point holds there even below 1 (it was refused as "a fraction"), for its check and its
    hidden test alike (both call this accept); further off, below 1, it is told the scale."""
    measured = nb06._halved_outputs_score(1, 5)
    assert measured == pytest.approx(100 * math.exp(1 - 5), abs=1e-6)
    for prediction in (0.9, 1.0, measured - 0.99):
        nb06.accept_brevity_prediction(prediction, measured)
    for prediction, message in ((0.5, "0-100 scale"), (0.0183, "0-100 scale"),
                                (-0.5, "did not hold"), (3.0, "did not hold")):
        with pytest.raises(AssertionError, match=message):
            nb06.accept_brevity_prediction(prediction, measured)


def test_brevity_prediction_none_is_not_answered():
    assert checks.brevity_prediction(None) is False


# --- repeats (debug) -------------------------------------------------------------------------


def right_repeats(tokens, n=1):
    return any(tokens[i: i + n] == tokens[i + n: i + 2 * n]
               for i in range(len(tokens) - 2 * n + 1))


def planted_repeats(tokens, n=1):  # the notebook's planted bug, unchanged
    for i in range(len(tokens) - 2 * n):
        if tokens[i: i + n] == tokens[i + n: i + 2 * n]:
            return True
    return False


def neighbours_only(tokens, n=1):  # ignores n
    return any(a == b for a, b in zip(tokens, tokens[1:], strict=False))


def overlapping_windows(tokens, n=1):  # compares windows one token apart
    return any(tokens[i: i + n] == tokens[i + 1: i + 1 + n]
               for i in range(len(tokens) - n))


def test_repeats_accepts_the_fix(capsys):
    assert checks.repeats(right_repeats) is True
    assert "✓ repeats" in capsys.readouterr().out


def test_repeats_untouched_bug_is_not_answered(capsys):
    assert checks.repeats(planted_repeats) is False
    out = capsys.readouterr().out
    assert "planted bug is still there" in out and "✗" not in out


@pytest.mark.parametrize("wrong", [neighbours_only, overlapping_windows])
def test_repeats_rejects_other_mistakes_with_a_two_step_hint(wrong, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb06.REPEATS.nudge}") + "$"):
        checks.repeats(wrong)
    assert "✗ repeats" in capsys.readouterr().out
    with pytest.raises(AssertionError, match=re.escape(f"closer hint: {nb06.REPEATS.closer}")):
        checks.repeats(wrong)


def test_repeats_stub_is_not_answered():
    assert checks.repeats(stub) is False


# --- the module, the notebook's exercise cells and the hidden tests --------------------------


def test_notebook_06_checks_are_exactly_these():
    assert nb06.__all__ == ["rerank", "brevity_prediction", "repeats"]
    for name in nb06.__all__:
        assert checks.EXERCISES[name].check is getattr(nb06, name)
    assert "brevity_penalty" not in checks.EXERCISES  # replaced by the prediction


def test_the_notebook_exercises_run_from_the_setup_cell_alone(capsys):
    assert_exercises_run_from_the_setup_cell(notebook_path("06"), {
        "rerank": "implement", "brevity_prediction": "predict", "repeats": "debug",
        "beam_vs_greedy": "explain"})
    capsys.readouterr()


def test_hidden_tests_accept_the_solutions_and_reject_wrong_answers():
    grading = hidden("06")
    grading.rerank(right_rerank)
    grading.brevity_prediction(100 * math.exp(-1))
    grading.repeats(right_repeats)
    for fn, wrong in ((grading.rerank, as_given), (grading.brevity_prediction, 50),
                      (grading.repeats, planted_repeats), (grading.repeats, neighbours_only)):
        with pytest.raises(AssertionError):
            fn(wrong)
