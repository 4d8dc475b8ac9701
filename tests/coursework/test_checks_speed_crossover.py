"""Notebook 07's practice exercise "where does ConvS2S pull ahead?" (``speed_crossover``): a
predict exercise graded on its form only, because its answer depends on the machine. Its check
and its hidden test accept the same answers (any of the sweep's six lengths, as an int) and say
the same thing of every one of them, in the course notebook and in a graded copy; show_me gives
the course's measurement, read from the shipped records."""

from __future__ import annotations

import re

import numpy as np
import pytest
import torch
from exercise_support import hidden

from convs2s.course import checks, length_sweep
from convs2s.course.checks import _core, nb07

WRONG_FORM = [50, 0, 64.0, "64", [64], True, torch.tensor(64.0), 2 ** 10]


@pytest.fixture(autouse=True)
def fresh_state():
    _core._graded, _core._class_version, _core._recorded = False, False, frozenset()
    _core._wrong_tries.clear()
    yield
    _core._graded, _core._class_version, _core._recorded = False, False, frozenset()
    _core._wrong_tries.clear()


def test_the_lengths_are_the_shipped_sweeps():
    for record in length_sweep.records():
        lengths = [row["length"] for row in length_sweep.training_rows(record)]
        assert tuple(lengths) == nb07.CROSSOVER_LENGTHS


def test_every_length_is_recorded_with_the_same_words_and_accepted_by_grading(capsys):
    said = set()
    for length in nb07.CROSSOVER_LENGTHS:
        assert checks.speed_crossover(length) is True
        out = capsys.readouterr().out
        assert out.startswith(f"✓ speed_crossover: prediction recorded ({length} tokens). "
                              "Practice, not graded for correctness")
        said.add(out.replace(f"({length} tokens)", "(n tokens)"))
        assert nb07.accept_speed_crossover(length) == length
        hidden("07").speed_crossover(length)  # grading accepts it too
    assert len(said) == 1  # no length is told anything the others are not


def test_a_numpy_or_tensor_integer_is_a_whole_number():
    assert checks.speed_crossover(np.int64(32)) is True
    assert checks.speed_crossover(torch.tensor(32)) is True


@pytest.mark.parametrize("answer", WRONG_FORM, ids=repr)
def test_an_answer_of_the_wrong_form_fails_the_check_and_grading(answer, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb07.CROSSOVER_FORM.nudge}")):
        checks.speed_crossover(answer)
    assert "✗ speed_crossover: the prediction's form: the prediction should be" in \
        capsys.readouterr().out
    with pytest.raises(AssertionError, match="should be"):
        hidden("07").speed_crossover(answer)


def test_a_second_wrong_try_adds_the_closer_hint():
    with pytest.raises(AssertionError, match=re.escape(f"hint: {nb07.CROSSOVER_FORM.nudge}") + "$"):
        checks.speed_crossover(50)
    with pytest.raises(AssertionError, match=re.escape(
            f"closer hint: {nb07.CROSSOVER_FORM.closer}") + "$"):
        checks.speed_crossover(50)


def test_an_unfilled_prediction_returns_false(capsys):
    assert checks.speed_crossover(None) is False
    assert "not answered yet" in capsys.readouterr().out


def test_a_graded_copy_records_every_length_alike_and_refuses_a_wrong_form(capsys):
    checks.graded_copy(records=["speed_crossover"])
    capsys.readouterr()
    told = []
    for length in nb07.CROSSOVER_LENGTHS:
        assert checks.speed_crossover(length) is True
        told.append(capsys.readouterr().out)
    assert len(set(told)) == 1 and "answer recorded" in told[0]
    with pytest.raises(AssertionError, match="should be"):
        checks.speed_crossover(64.0)


def test_show_me_gives_the_course_measurement_of_every_record(capsys):
    checks.show_me("speed_crossover")
    out = capsys.readouterr().out
    assert out.startswith("the measurement behind speed_crossover")
    found = length_sweep.records()
    for record in found:
        first = length_sweep.first_length_at(record, nb07.CROSSOVER_FACTOR)
        assert f"{length_sweep.label(record)}: ConvS2S first trains at least 1.5x" in out
        assert (f"at {first} tokens" if first is not None else "at no length measured") in out
    for line in length_sweep.not_measured_lines(found):
        assert line in out


def test_the_hint_is_registered_and_is_about_the_idea_not_the_form(capsys):
    checks.hint("speed_crossover")
    out = capsys.readouterr().out
    assert nb07.CROSSOVER.nudge in out and nb07.CROSSOVER.closer in out
    assert "sequential steps" in nb07.CROSSOVER.nudge
