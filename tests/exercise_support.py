"""What the tests of ``convs2s.course.checks`` (tests/test_checks_nb*.py) share.

Imported as ``from exercise_support import ...`` (pytest puts tests/ on sys.path, as it does for
conftest). Not a fixture file: plain functions, so that a test reads what it calls.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"


def stub(*_args, **_kwargs):
    """A learner's untouched answer cell: ``raise NotImplementedError()``."""
    raise NotImplementedError()


def hidden(notebook: str, variant: str | None = None) -> SimpleNamespace:
    """The hidden grading tests of notebook ``notebook`` ("01" ... "08"), coursework/hidden/, as
    functions of the learner's answers: ``hidden("01").my_glu(fn)`` raises AssertionError (with
    the verdict line) when the answer does not pass. Each runs its cases in this process
    (:func:`grader.in_this_process`: the same data coding and judgement as the sandbox's
    grading), with this copy's values: the public version's, or those of the class
    ``variant`` (drawn from the file's VERSIONS: :mod:`convs2s.course.checks.class_variants`)."""
    from convs2s.course.checks import class_variants, grader
    from tools import coursework

    tests = coursework.read_hidden(ROOT / "coursework" / "hidden" / f"{notebook}.py")
    versions = tests.versions  # the file's VERSIONS
    exercises = coursework.read_notebook(notebook_path(notebook)).exercises
    names = {ex.id: ex.answer_names for ex in exercises}

    def grading(exercise, test):
        @functools.cache  # drawn (and a predict version measured) once, at the first run
        def params() -> dict:
            version = class_variants.variant(exercise, variant, versions)
            return dict(version.params) if version else {}

        def run(*answers):
            cases = test(dict(params()))
            verdict = grader.in_this_process(exercise, cases,
                                             dict(zip(names[exercise], answers, strict=True)))
            if not verdict.passed:
                raise AssertionError(verdict.line)
        return run

    return SimpleNamespace(**{name: grading(name, test) for name, test in tests.items()})


def notebook_path(notebook: str) -> Path:
    """notebooks/<notebook>_*.ipynb, e.g. ``notebook_path("05")``."""
    (path,) = NOTEBOOKS.glob(f"{notebook}_*.ipynb")
    return path


def exercise_cells(path: Path) -> tuple[str | None, dict[str, dict[str, tuple[dict, str]]]]:
    """The exercise-setup cell's source, and {exercise: {role: (cell, source)}}.

    The roles come from each cell's ``metadata.convs2s`` (task, answer, check, solution).
    """
    nb = json.loads(path.read_text(encoding="utf-8"))
    setup, exercises = None, {}
    for cell in nb["cells"]:
        meta = cell.get("metadata", {}).get("convs2s", {})
        source = "".join(cell["source"])
        if meta.get("role") == "exercise-setup":
            setup = source
        elif "exercise" in meta:
            exercises.setdefault(meta["exercise"], {})[meta["role"]] = (cell, source)
    return setup, exercises


def assert_exercises_run_from_the_setup_cell(path: Path, kinds: dict[str, str]) -> None:
    """Every exercise of the notebook at ``path``, run from its setup cell alone: the answer
    cell as shipped does not pass its check, the solution does; explain solutions are markdown
    in a <details>; code solutions are hidden (Colab form, JupyterLab source_hidden)."""
    setup, exercises = exercise_cells(path)
    assert setup is not None and "from convs2s.course import checks" in setup
    assert {ex: cells["task"][0]["metadata"]["convs2s"]["kind"]
            for ex, cells in exercises.items()} == kinds
    for ex, cells in exercises.items():
        solution_cell, solution = cells["solution"]
        if kinds[ex] == "explain":
            assert cells["answer"][0]["cell_type"] == "markdown"
            assert solution.startswith("<details><summary>Solution</summary>")
            continue
        assert solution.startswith("#@title Solution")
        assert solution_cell["metadata"]["jupyter"]["source_hidden"] is True
        assert solution_cell["metadata"]["cellView"] == "form"
        check_call = cells["check"][1].strip()
        assert check_call.startswith(f"checks.{ex}(")
        learner: dict = {}
        exec(setup, learner)  # noqa: S102 - the notebook's own cells
        exec(cells["answer"][1], learner)  # noqa: S102
        assert eval(check_call, learner) is False, f"{ex}: the answer cell should not pass"
        exec(solution, learner)  # noqa: S102 - runs the check once itself
        assert eval(check_call, learner) is True, f"{ex}: the solution should pass"


def assert_check_and_grading_agree(check, graded, answer, holds: bool) -> None:
    """The visible ``check`` and ``graded`` (a hidden test, :func:`hidden`) both accept
    ``answer`` (``holds``) or both refuse it: one definition of right, at its margin too."""
    import pytest

    if holds:
        assert check(answer) is True
        graded(answer)
        return
    with pytest.raises(AssertionError):
        check(answer)
    with pytest.raises(AssertionError):
        graded(answer)
