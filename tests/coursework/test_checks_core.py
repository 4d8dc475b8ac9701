"""The two-step hints of convs2s.course.checks: a nudge on the first wrong try, a closer hint from
the second wrong try of the same check on, both on request with checks.hint(...)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from convs2s.course import checks
from convs2s.course.checks import _core
from convs2s.course.checks._core import Hint, _Run, exercise
from tools import coursework

NUDGE = "which half is the gate?"
CLOSER = "the second half goes through the sigmoid"


@pytest.fixture
def made_up():
    """An exercise ``made_up(answer)`` that passes for 42, declared with a two-step hint."""

    @exercise(hint=Hint(nudge=NUDGE, closer=CLOSER))
    def made_up(answer) -> None:
        run = _Run("made_up")
        with run.case("made_up(answer)"):  # the declared hint
            if answer != 42:
                raise AssertionError(f"got {answer}")
        run.done()

    yield made_up
    del _core.EXERCISES["made_up"]


def test_the_first_wrong_try_prints_the_nudge_only(made_up, capsys):
    with pytest.raises(AssertionError, match=re.escape(f"got 1 — hint: {NUDGE}") + "$"):
        made_up(1)
    out = capsys.readouterr().out
    assert out.startswith("✗ made_up: made_up(answer): got 1\n")
    assert NUDGE in out and CLOSER not in out
    assert 'checks.hint("made_up")' in out  # says how to get the closer hint


def test_the_second_and_later_wrong_tries_print_the_closer_hint_too(made_up, capsys):
    with pytest.raises(AssertionError):
        made_up(1)
    capsys.readouterr()
    for wrong in (2, 3):
        closer = re.escape(f"hint: {NUDGE} — closer hint: {CLOSER}") + "$"
        with pytest.raises(AssertionError, match=closer):
            made_up(wrong)
        out = capsys.readouterr().out
        assert f"  hint: {NUDGE}\n  closer hint: {CLOSER}\n" in out


def test_a_right_answer_and_an_unanswered_one_count_no_wrong_try(made_up, capsys):
    assert made_up(None) is False
    assert made_up(42) is True
    with pytest.raises(AssertionError):
        made_up(1)
    assert CLOSER not in capsys.readouterr().out


def test_wrong_tries_are_counted_per_check(made_up, capsys):
    other = Hint(nudge="n2", closer="c2")
    try:
        run = _Run("other")
        with pytest.raises(AssertionError), run.case("other", other):
            raise AssertionError("wrong")
        with pytest.raises(AssertionError):
            made_up(1)
        assert CLOSER not in capsys.readouterr().out  # made_up's first wrong try
    finally:
        _core._wrong_tries.pop("other", None)


def test_hint_prints_both_steps_before_any_try(made_up, capsys):
    checks.hint("made_up")
    assert capsys.readouterr().out == f"hint for made_up: {NUDGE}\ncloser hint: {CLOSER}\n"
    checks.hint(made_up)  # the check itself works too
    assert CLOSER in capsys.readouterr().out


def test_hint_of_an_unknown_exercise_is_one_line_naming_the_known_ones(capsys):
    checks.hint("my_gul")
    out = capsys.readouterr().out
    assert out.count("\n") == 1
    assert "no exercise with hints is called 'my_gul'" in out
    assert next(iter(checks.EXERCISES)) in out  # the known ones are listed


def test_every_course_check_has_its_hint_declared_at_import(capsys):
    # (the registry is filled when the check modules are imported: no wrong try needed)
    notebooks = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("0[1-8]_*.ipynb"))
    checked = [ex.id for path in notebooks for ex in coursework.read_notebook(path).exercises
               if ex.kind != "explain"]
    assert list(checks.EXERCISES) == checked  # every exercise with a check, in course order
    for name in checks.EXERCISES:
        checks.hint(name)
        out = capsys.readouterr().out
        assert out.startswith(f"hint for {name}: ") and "\ncloser hint: " in out


def test_a_plain_string_is_a_one_step_hint(capsys):
    run = _Run("plain")
    for _ in range(2):
        with pytest.raises(AssertionError, match="wrong — hint: look again$"), \
                run.case("plain", "look again"):
            raise AssertionError("wrong")
    assert "closer" not in capsys.readouterr().out


def test_an_error_inside_the_answer_is_reported_with_the_hint(made_up, capsys):
    run = _Run("made_up")
    with pytest.raises(AssertionError, match=f"raised ZeroDivisionError: .* — hint: {NUDGE}"), \
            run.case("made_up(answer)", _core.EXERCISES["made_up"].hint):
        1 / 0  # noqa: B018
    assert "✗ made_up: made_up(answer): raised ZeroDivisionError" in capsys.readouterr().out


@pytest.mark.parametrize("nudge, closer", [("", "x"), ("x", "  ")])
def test_a_hint_needs_both_steps(nudge, closer):
    with pytest.raises(ValueError, match="both a nudge and a closer"):
        Hint(nudge=nudge, closer=closer)


def test_hint_and_Hint_are_exported():
    assert checks.Hint is Hint and callable(checks.hint)
    assert "hint" not in checks.EXERCISES and "Hint" not in checks.EXERCISES


def test_an_exercise_is_declared_once(made_up):
    def made_up(answer):  # the same name again
        return None

    with pytest.raises(ValueError, match="'made_up' is declared twice"):
        exercise(hint=Hint(nudge="n", closer="c"))(made_up)


def test_every_check_is_the_declared_one_and_found_by_name():
    for name, declared in checks.EXERCISES.items():
        assert declared.id == name
        assert getattr(checks, name) is declared.check  # checks.<exercise>
        assert name in dir(checks)  # what an editor's completion lists
    with pytest.raises(AttributeError, match="no attribute 'my_gul'"):
        checks.my_gul  # noqa: B018


def test_a_failing_check_in_jupyter_shows_one_line_not_a_traceback_through_the_checks(made_up):
    """IPython shows an exception's ``_render_traceback_`` instead of its traceback: a wrong
    answer's cell fails with the printed ✗ line and hint, then one line."""
    from IPython.core.interactiveshell import InteractiveShell
    from IPython.utils.capture import capture_output

    shell = InteractiveShell.instance()
    shell.user_ns["made_up"] = made_up
    with capture_output() as captured:
        result = shell.run_cell("made_up(1)")
    assert not result.success and isinstance(result.error_in_exec, AssertionError)
    shown = captured.stdout + captured.stderr
    assert "✗ made_up: made_up(answer): got 1" in shown and NUDGE in shown
    assert "Traceback" not in shown and "_core.py" not in shown, shown
    assert "the check did not pass" in shown


def test_every_function_a_check_refuses_is_stated_in_its_task_as_not_to_be_called():
    """Every rule the grader applies is stated in the task: each refused shortcut (the
    declaration's ``Shortcut.stated``) stands in a sentence of the task cell that says it may
    not be used ("without", "not called", "refuse", ...), the same sentence for the check and
    for grading, which refuse the same declaration."""
    saying_no = ("without", "not called", "not call", "refuse", "not allowed", "must not")
    missing = []
    for path in sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("0[1-8]_*.ipynb")):
        for ex in coursework.read_notebook(path).exercises:
            declared = checks.EXERCISES.get(ex.id)
            sentences = re.split(r"(?<=[.:;!?])\s+", " ".join(ex.task.split()))
            for shortcut in declared.shortcuts if declared else ():
                name = f"`{shortcut.stated}`"
                if not any(name in s and any(w in s for w in saying_no) for s in sentences):
                    missing.append(f"{path.name[:2]} {ex.id}: {shortcut.stated}")
    assert not missing, "refused but not stated as refused in the task: " + ", ".join(missing)
