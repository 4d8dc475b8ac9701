"""The nbgrader course builder (tools/coursework.py) and nbgrader's view of what it builds.

A small made-up course notebook with one exercise of each kind (implement, predict, derive,
debug, explain), written in the format of tools/README.md, and its hidden-test file, in the form
of coursework/hidden/ (one function per exercise, given the copy's variant, returning its cases),
are built here. The builder must turn them into an nbgrader source notebook whose instructor
version passes, whose test cells hold only the visible check (the hidden tests stay in hidden/,
the class's values in grading.json beside the source, never in a cell), whose student version
(``nbgrader generate_assignment``) holds no solution, and which ``nbgrader autograde`` grades
in the sandbox (coursework/sandbox_grading.py, in place of nbgrader's Execute): full marks for
the solutions, 0 for the release, hidden tests that catch an answer fitted to the visible check,
and the explain answer left for manual grading. A broken hidden-test file is refused in one
line. The same is then checked on the real course notebooks 01-08.

The autograde tests run the real sandbox (bubblewrap): skipped only where none starts, never in
CI.
"""

from __future__ import annotations

import ast
import contextlib
import io
import json
import math
import os
import shutil
import stat
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sandbox_support import needs_sandbox  # autograde grades in the sandbox

from convs2s.course.checks import class_variants, grader, testing
from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
HIDDEN = ROOT / "coursework" / "hidden"
COURSEWORK = ROOT / "coursework"


# --------------------------------------------------------------------------------------------
# A made-up course notebook with one exercise of each kind
# --------------------------------------------------------------------------------------------

# The fixture's own checks, with the semantics of convs2s.course.checks: True when right, an
# AssertionError with a hint when wrong, False (no exception) when not answered yet.
FIXTURE_SETUP = '''\
import math
import types


def _run(name, cases, hint):
    try:
        ok = all(cases())
    except NotImplementedError:
        print(f"… {name}: not implemented yet")
        return False
    if not ok:
        print(f"✗ {name}: wrong — hint: {hint}")
        raise AssertionError(f"{name}: hint: {hint}")
    print(f"✓ {name}: all checks passed")
    return True


def _double(f):
    return _run("my_double", lambda: [f(3) == 6, f(-1) == -2], "multiply by 2")


def _guess(prediction):
    if prediction is None:
        print("… guess_count: not answered yet")
        return False
    return _run("guess_count", lambda: [prediction == 12], "count them")


def _field(f):
    return _run("field_size", lambda: [f(3, 2) == 5, f(5, 1) == 5], "1 + n (k - 1)")


def _mean(mean):
    if mean([1, 2, 3]) == 3.0:
        print("… fix_mean: the planted bug is still there")
        return False
    return _run("fix_mean", lambda: [mean([1, 2, 3]) == 2.0], "divide by len(xs)")


def _graded_copy(class_version=False, records=()):
    print("graded copy")


checks = types.SimpleNamespace(my_double=_double, guess_count=_guess, field_size=_field,
                               fix_mean=_mean, graded_copy=_graded_copy)
'''

# The fixture's hidden tests, in the form of coursework/hidden/NN.py: the cases the visible
# check does not try. Each judgement is the old hidden test's `assert <answer> == <expected>`
# (the same cases, as strict): it runs outside the sandbox, on the data the call returned.
FIXTURE_HIDDEN = '''\
"""Hidden tests of the made-up notebook 01."""

import math

from convs2s.course.checks.testing import Case, call, value


def _equal(expected):
    def accept(got):
        if not got == expected:
            raise AssertionError("does not hold")

    return accept


def _finite(got):
    if not math.isfinite(got):
        raise AssertionError("not finite")


def my_double(variant):
    """Cases the visible check does not try."""
    return [Case(f"my_double({x})", call("my_double", x), _equal(2 * x)) for x in (0.5, 100, -7)]


def guess_count(variant):
    return [Case("your prediction", value("prediction"), _equal(12))]


def field_size(variant):
    cases = [Case(f"field({k}, {n})", call("field", k, n), _equal(1 + n * (k - 1)))
             for k, n in [(2, 10), (9, 6)]]
    return cases + [Case("field(3, 3) is finite", call("field", 3, 3), _finite)]


def fix_mean(variant):
    return [Case("mean([4])", call("mean", [4]), _equal(4)),
            Case("mean([1.0, 2.0])", call("mean", [1.0, 2.0]), _equal(1.5))]
'''


SOLUTION_TITLE = "#@title Solution"
HIDDEN_META = {"cellView": "form", "jupyter": {"source_hidden": True}}


def _cell(kind: str, source: str, cell_id: str, convs2s: dict | None = None,
          extra: dict | None = None) -> dict:
    meta = dict(extra or {})
    if convs2s is not None:
        meta["convs2s"] = convs2s
    cell = {"cell_type": kind, "id": cell_id, "metadata": meta,
            "source": source.splitlines(keepends=True)}
    if kind == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def _exercise(n: int, ex_id: str, kind: str, points: int, title: str, answer: str,
              check: str | None, solution: str) -> list[dict]:
    def role(r: str) -> dict:
        return {"exercise": ex_id, "role": r}

    label = {"predict": "predict, then measure"}.get(kind, kind)  # the kind comes first
    cells = [_cell("markdown", f"### Exercise {n} ({label}): {title}\n\nDo it.", f"e{n}t",
                   {**role("task"), "kind": kind, "points": points})]
    if kind == "explain":
        cells.append(_cell("markdown", answer, f"e{n}a", role("answer")))
        cells.append(_cell("markdown", solution, f"e{n}s", role("solution")))
        return cells
    cells.append(_cell("code", answer, f"e{n}a", role("answer")))
    cells.append(_cell("code", check, f"e{n}c", role("check")))
    cells.append(_cell("code", f"{SOLUTION_TITLE}\n{solution}\n\n{check}", f"e{n}s",
                       role("solution"), HIDDEN_META))
    return cells


def fixture_notebook() -> dict:
    """A course notebook in the exercise format: some lesson cells, then five exercises."""
    cells = [
        _cell("markdown", "# 01 · A made-up lesson\n\nText.", "c0"),
        _cell("code", "lesson_state = 41  # notebook state the exercises must not need", "c1"),
        _cell("code", FIXTURE_SETUP, "setup", {"role": "exercise-setup"}),
    ]
    cells += _exercise(1, "my_double", "implement", 2, "twice", textwrap.dedent('''\
        def my_double(x):
            """Twice x."""
            raise NotImplementedError()'''), "checks.my_double(my_double)", textwrap.dedent('''\
        import operator


        def my_double(x):
            """Twice x (the solution's own docstring is dropped)."""
            y = operator.mul(x, 2)  # x + x works too
            return y'''))
    cells.append(_cell("code", "print(lesson_state + 1)  # between exercises", "between"))
    cells += _exercise(2, "guess_count", "predict", 1, "how many?",
                       "prediction = None  # your number", "checks.guess_count(prediction)",
                       "prediction = 12")
    cells += _exercise(3, "field_size", "derive", 2, "the receptive field", textwrap.dedent('''\
        def field(k,
                  n):
            """Inputs one output of n width-k layers sees."""
            raise NotImplementedError'''), "checks.field_size(field)", textwrap.dedent('''\
        def field(k, n):
            # each layer adds k - 1 positions
            return 1 + n * (k - 1)


        # a demonstration, not part of the answer (inside the function it would recurse)
        print(f"9 layers of width 3 see {field(3, 9)} inputs")
        for n in range(3):
            print(field(3, n))'''))
    cells += _exercise(4, "fix_mean", "debug", 2, "the mean", textwrap.dedent('''\
        def mean(xs):
            return sum(xs) / (len(xs) - 1)'''), "checks.fix_mean(mean)", textwrap.dedent('''\
        def mean(xs):
            return sum(xs) / len(xs)'''))
    cells += _exercise(5, "why_gate", "explain", 3, "why a gate?", "*Your answer here.*",
                       None, "<details><summary>Solution</summary>\n\nThe gate lets gradients "
                             "through the linear path.\n\n</details>")
    cells.append(_cell("markdown", "## Summary", "end"))
    return {"cells": cells, "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def write_fixture(root: Path, notebook: dict | None = None, hidden: str = FIXTURE_HIDDEN,
                  ) -> tuple[Path, Path]:
    """notebooks/01_made_up.ipynb and hidden/01.py under ``root``."""
    notebooks, hidden_dir = root / "notebooks", root / "hidden"
    notebooks.mkdir(parents=True, exist_ok=True)
    hidden_dir.mkdir(parents=True, exist_ok=True)
    (notebooks / "01_made_up.ipynb").write_text(json.dumps(notebook or fixture_notebook()))
    (hidden_dir / "01.py").write_text(hidden)
    return notebooks, hidden_dir


def _source(cell: dict) -> str:
    return "".join(cell["source"])


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _meta(cell: dict) -> dict:
    return cell["metadata"].get("nbgrader", {})


def _run_cells(path: Path, ns: dict | None = None) -> list[tuple[dict, BaseException | None]]:
    """Run a notebook's code cells in this process, as a kernel would (in ``ns``, when given);
    each cell's exception."""
    ns = {"__name__": "__main__"} if ns is None else ns
    results = []
    for cell in _cells(path):
        if cell["cell_type"] != "code":
            continue
        error = None
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                exec(compile(_source(cell), str(path), "exec"), ns)
        except Exception as e:
            error = e
        results.append((cell, error))
    return results


def _nbgrader(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # nbgrader runs `alembic` (its gradebook migrations) from PATH: the venv's bin must be on it.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _build(*argv: str) -> str:
    """``python -m tools.coursework *argv``, run in this process (its main); what it printed."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = coursework.main(list(argv))
    assert code == 0, err.getvalue()
    return out.getvalue()


def _course(root: Path, notebooks: Path, hidden: Path, *flags: str) -> Path:
    """A course folder as `make student` makes it: nbgrader_config.py and sandbox_grading.py
    (which takes the place of nbgrader's Execute in autograde), the hidden tests in hidden/
    (where sandbox_grading.py reads them), source/ built by ``python -m tools.coursework``
    with ``flags``, grading.json beside it, and release/ (``nbgrader generate_assignment``)."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("nbgrader_config.py", "sandbox_grading.py"):
        shutil.copy(COURSEWORK / name, root / name)
    shutil.copytree(hidden, root / "hidden", ignore=shutil.ignore_patterns("__pycache__"))
    _build("--out", str(root / "source"), "--notebooks", str(notebooks), "--hidden",
           str(root / "hidden"), *flags)
    _nbgrader("generate_assignment", "*", "--force", cwd=root)
    return root


@pytest.fixture(scope="module")
def made_up(tmp_path_factory) -> Path:
    """The made-up course built with ``--public --grade-practice``: every exercise is graded as
    before (without it the implement and debug exercises are practice, worth nothing), which the
    autograde test below needs."""
    root = tmp_path_factory.mktemp("made_up")
    notebooks, hidden = write_fixture(root)
    return _course(root / "course", notebooks, hidden, "--public", "--grade-practice")


# --------------------------------------------------------------------------------------------
# Reading the format
# --------------------------------------------------------------------------------------------


def test_reads_every_exercise_from_the_notebook(tmp_path):
    notebooks, _ = write_fixture(tmp_path)
    nb = coursework.read_notebook(notebooks / "01_made_up.ipynb")
    assert nb.title == "A made-up lesson" and nb.number == "01"
    assert [(e.id, e.kind, e.points, e.number) for e in nb.exercises] == [
        ("my_double", "implement", 2, 1), ("guess_count", "predict", 1, 2),
        ("field_size", "derive", 2, 3), ("fix_mean", "debug", 2, 4),
        ("why_gate", "explain", 3, 5)]
    assert nb.exercises[1].answer_names == ("prediction",)
    assert nb.exercises[1].check == "checks.guess_count(prediction)"
    assert "lesson_state" not in nb.setup
    # the solution without its #@title line and its check call
    assert nb.exercises[3].solution == "def mean(xs):\n    return sum(xs) / len(xs)"
    assert nb.exercises[4].solution == "The gate lets gradients through the linear path."


def test_hidden_tests_are_functions_of_the_variant_returning_cases(tmp_path):
    """A hidden-test file is imported, as the instructor's code: one function per exercise id
    (helpers starting with _ and imported names are not tests), given this copy's variant and
    returning its cases. Only a case's call (a call of the answer with data, or the value a
    predict answer binds) would cross into the sandbox; its judgement stays outside. Judged here
    on answers we trust (``grader.in_this_process``), the solutions hold and an answer fitted
    to the visible check does not."""
    _, hidden = write_fixture(tmp_path)
    tests = coursework.read_hidden(hidden / "01.py")
    assert set(tests) == {"my_double", "guess_count", "field_size", "fix_mean"}
    double = tests["my_double"]({})
    assert [c.what for c in double] == ["my_double(0.5)", "my_double(100)", "my_double(-7)"]
    assert [c.call for c in double] == [testing.call("my_double", x) for x in (0.5, 100, -7)]
    assert [c.call for c in tests["guess_count"]({})] == [testing.value("prediction")]
    assert [c.call for c in tests["field_size"]({})] == [
        testing.call("field", 2, 10), testing.call("field", 9, 6), testing.call("field", 3, 3)]
    assert [c.call for c in tests["fix_mean"]({})] == [testing.call("mean", [4]),
                                                       testing.call("mean", [1.0, 2.0])]

    def judged(exercise: str, **answers) -> grader.Verdict:
        return grader.in_this_process(exercise, tests[exercise]({}), answers)

    assert judged("my_double", my_double=lambda x: 2 * x).passed
    assert judged("my_double", my_double=lambda x: {3: 6, -1: -2}[x]).line == (
        "✗ my_double: hidden case 1 of 3 (my_double(0.5)): raised KeyError: 0.5")
    assert judged("guess_count", prediction=12).passed
    assert not judged("guess_count", prediction=12.5).passed
    assert judged("field_size", field=lambda k, n: 1 + n * (k - 1)).passed
    assert not judged("field_size", field=lambda k, n: n * k).passed
    infinite = judged("field_size", field=lambda k, n: 1 + n * (k - 1) if k != 3 else math.inf)
    assert infinite.line == ("✗ field_size: hidden case 3 of 3 (field(3, 3) is finite): does "
                             "not hold")
    assert judged("fix_mean", mean=lambda xs: sum(xs) / len(xs)).passed
    assert not judged("fix_mean", mean=lambda xs: sum(xs) / (len(xs) - 1)).passed


def test_function_stub_keeps_signature_and_docstring_outside_the_solution(tmp_path):
    notebooks, _ = write_fixture(tmp_path)
    ex = {e.id: e for e in coursework.read_notebook(notebooks / "01_made_up.ipynb").exercises}
    assert coursework.solution_cell_source(ex["my_double"]) == textwrap.dedent('''\
        def my_double(x):
            """Twice x."""
            ### BEGIN SOLUTION
            import operator
            y = operator.mul(x, 2)  # x + x works too
            return y
            ### END SOLUTION''')
    # a signature over two lines, no docstring in the solution, a comment kept in the region
    assert coursework.solution_cell_source(ex["field_size"]) == textwrap.dedent('''\
        def field(k,
                  n):
            """Inputs one output of n width-k layers sees."""
            ### BEGIN SOLUTION
            # each layer adds k - 1 positions
            return 1 + n * (k - 1)
            ### END SOLUTION''')


def test_other_stubs_stay_visible_and_the_solution_follows(tmp_path):
    notebooks, _ = write_fixture(tmp_path)
    ex = {e.id: e for e in coursework.read_notebook(notebooks / "01_made_up.ipynb").exercises}
    assert coursework.solution_cell_source(ex["guess_count"]) == (
        "prediction = None  # your number\n### BEGIN SOLUTION\nprediction = 12\n### END SOLUTION")
    debug = coursework.solution_cell_source(ex["fix_mean"])
    assert debug.startswith("def mean(xs):\n    return sum(xs) / (len(xs) - 1)\n"
                            "### BEGIN SOLUTION\ndef mean(xs):\n    return sum(xs) / len(xs)\n")


def _code_lines(source: str) -> list[str]:
    return [line for line in source.splitlines() if line.strip() and not line.startswith("#")]


def test_test_cell_holds_only_the_visible_check(tmp_path):
    """A test cell asserts the notebook's visible check and nothing else: no hidden test, no
    class value (grading takes those from hidden/NN.py and grading.json, never from the cell).
    A practice exercise's test cell says it is worth nothing."""
    notebooks, _ = write_fixture(tmp_path)
    nb = coursework.read_notebook(notebooks / "01_made_up.ipynb")
    graded = coursework.grade_cell_source(nb.exercises[2])
    assert graded.startswith("# Autograded (2 points): the visible check "
                             "convs2s.course.checks.field_size runs here")
    assert _code_lines(graded) == ["assert checks.field_size(field)"]
    practice = coursework.grade_cell_source(nb.exercises[0], graded=False)
    assert practice.startswith("# Practice (0 points): the visible check "
                               "convs2s.course.checks.my_double runs here")
    assert _code_lines(practice) == ["assert checks.my_double(my_double)"]
    for cell in (graded, practice):
        for old in ("_hidden_test", "_variant", "HIDDEN TESTS", "testing", "Case("):
            assert old not in cell, old


#: grading.json's entry of the made-up notebook built with --public --grade-practice.
FIXTURE_GRADING = {"notebook": "01", "exercises": {
    "my_double": {"variant": {}, "answer_names": ["my_double"], "points": 2, "kind": "implement"},
    "guess_count": {"variant": {}, "answer_names": ["prediction"], "points": 1, "kind": "predict"},
    "field_size": {"variant": {}, "answer_names": ["field"], "points": 2, "kind": "derive"},
    "fix_mean": {"variant": {}, "answer_names": ["mean"], "points": 2, "kind": "debug"}}}


def _grading_file(path: Path) -> dict:
    """grading.json, which only its owner may read (it holds the class's values)."""
    assert stat.S_IMODE(path.stat().st_mode) == 0o600, oct(path.stat().st_mode)
    return json.loads(path.read_text(encoding="utf-8"))


def test_built_assignment_has_the_nbgrader_cells(tmp_path):
    """Built as --public --grade-practice does (write_assignments' public default, with
    grade_practice): every exercise graded, as before; grading.json beside the source holds
    each autograded exercise's variant, answer names and points, and no cell holds any of it."""
    import nbformat

    notebooks, hidden = write_fixture(tmp_path)
    [built] = coursework.write_assignments(tmp_path / "source", notebooks, hidden,
                                           grade_practice=True)
    assert built.path == tmp_path / "source" / "01_made_up" / "01_made_up.ipynb"
    nbformat.validate(nbformat.read(built.path, as_version=4))
    cells = _cells(built.path)
    text = json.dumps(cells)
    assert "lesson_state" not in text and "between exercises" not in text
    sources = "\n".join(_source(c) for c in cells)
    for old in ("_hidden_test", "_variant", "HIDDEN TESTS", "testing", 'call("', "Case("):
        assert old not in sources, old
    graded = [c for c in cells if _meta(c).get("grade")]
    assert [(_meta(c)["grade_id"], _meta(c)["points"], c["cell_type"]) for c in graded] == [
        ("my_double_tests", 2, "code"), ("guess_count_tests", 1, "code"),
        ("field_size_tests", 2, "code"), ("fix_mean_tests", 2, "code"),
        ("why_gate", 3, "markdown")]
    assert all(_meta(c)["locked"] for c in graded if c["cell_type"] == "code")
    assert [_code_lines(_source(c)) for c in graded if c["cell_type"] == "code"] == [
        ["assert checks.my_double(my_double)"], ["assert checks.guess_count(prediction)"],
        ["assert checks.field_size(field)"], ["assert checks.fix_mean(mean)"]]
    answers = [c for c in cells if _meta(c).get("solution")]
    assert [_meta(c)["grade_id"] for c in answers] == [
        "my_double", "guess_count", "field_size", "fix_mean", "why_gate"]
    assert not any(_meta(c)["locked"] for c in answers)
    explain = answers[-1]
    assert _meta(explain)["grade"] and _source(explain) == (
        "The gate lets gradients through the linear path.")
    tasks = [_source(c).splitlines()[0] for c in cells if _meta(c)["grade_id"].endswith("_task")]
    assert tasks[0] == "### Exercise 1 (implement): twice (2 points, autograded)"
    assert tasks[1] == "### Exercise 2 (predict, then measure): how many? (1 point, autograded)"
    assert tasks[-1] == "### Exercise 5 (explain): why a gate? (3 points, graded by hand)"
    header = _source(cells[0])
    assert "5 exercises (predict, derive, debug, implement, explain) worth 10 points " \
           "(7 autograded, 3 graded by hand)" in header
    assert "Practice, 0 points" not in header
    assert _grading_file(tmp_path / "grading.json") == {
        "assignments": {"01_made_up": FIXTURE_GRADING}}
    assert built.grading == FIXTURE_GRADING and built.points == 10


def test_practice_exercises_are_not_graded_by_default(tmp_path):
    """Without --grade-practice the implement and debug exercises (the public notebook shows
    their solutions) are practice: a locked test cell that runs the visible check but is not a
    grade cell, worth nothing, and not in grading.json. --grade-practice grades them."""
    notebooks, hidden = write_fixture(tmp_path)
    [built] = coursework.write_assignments(tmp_path / "default" / "source", notebooks, hidden)
    cells = _cells(built.path)
    assert [(_meta(c)["grade_id"], _meta(c)["points"]) for c in cells if _meta(c).get("grade")
            ] == [("guess_count_tests", 1), ("field_size_tests", 2), ("why_gate", 3)]
    practice = {_meta(c)["grade_id"]: c for c in cells
                if _meta(c)["grade_id"] in ("my_double_tests", "fix_mean_tests")}
    assert len(practice) == 2
    for cell in practice.values():
        assert cell["cell_type"] == "code" and _meta(cell)["locked"]
        assert not _meta(cell)["grade"] and "points" not in _meta(cell)
        assert _source(cell).startswith("# Practice (0 points)")
    tasks = [_source(c).splitlines()[0] for c in cells if _meta(c)["grade_id"].endswith("_task")]
    assert tasks[0] == ("### Exercise 1 (implement): twice (practice, 0 points: the course "
                        "notebook shows its solution)")
    header = _source(cells[0])
    assert "Practice, 0 points: `my_double`, `fix_mean`" in header
    assert "worth 6 points (3 autograded, 3 graded by hand)" in header
    assert sorted(_grading_file(tmp_path / "default" / "grading.json")["assignments"][
        "01_made_up"]["exercises"]) == ["field_size", "guess_count"]
    assert built.points == 6
    # the command line: practice by default, graded with --grade-practice
    for flags, graded in [((), ["field_size", "guess_count"]),
                          (("--grade-practice",), sorted(FIXTURE_GRADING["exercises"]))]:
        out = tmp_path / f"cli{len(flags)}" / "source"
        assert _cli(tmp_path, "--out", str(out), "--public", *flags).returncode == 0
        assert sorted(_grading_file(out.parent / "grading.json")["assignments"]["01_made_up"][
            "exercises"]) == graded


def test_instructor_version_passes_and_unanswered_cells_score_nothing(tmp_path):
    """(Built with grade_practice, as --public --grade-practice: every exercise has a grade
    cell.) The instructor version runs with no error and its solutions pass the hidden tests
    (judged in this process: they are trusted); the stubs fail every grade cell."""
    notebooks, hidden = write_fixture(tmp_path)
    [built] = coursework.write_assignments(tmp_path / "source", notebooks, hidden,
                                           grade_practice=True)
    ns: dict = {"__name__": "__main__"}
    assert [e for _, e in _run_cells(built.path, ns) if e is not None] == []
    tests = coursework.read_hidden(hidden / "01.py")
    for ex_id, ex in built.grading["exercises"].items():
        verdict = grader.in_this_process(ex_id, tests[ex_id](ex["variant"]),
                                         {n: ns[n] for n in ex["answer_names"]})
        assert verdict.passed, verdict.line
    # The stubs as a learner gets them (solutions dropped): every grade cell fails.
    nb = json.loads(built.path.read_text())
    for cell in nb["cells"]:
        src = _source(cell)
        if coursework.BEGIN_SOLUTION in src:
            head = src[:src.index(coursework.BEGIN_SOLUTION)]
            tail = src[src.index(coursework.END_SOLUTION) + len(coursework.END_SOLUTION):]
            indent = head.splitlines()[-1] if not head.endswith("\n") else ""
            cell["source"] = head + "raise NotImplementedError()" + tail
            assert not indent.strip()
    stubbed = tmp_path / "stubbed.ipynb"
    stubbed.write_text(json.dumps(nb))
    graded = [(cell, error) for cell, error in _run_cells(stubbed) if _meta(cell).get("grade")]
    assert len(graded) == 4
    for cell, error in graded:
        assert isinstance(error, AssertionError), (_meta(cell)["grade_id"], error)


# --------------------------------------------------------------------------------------------
# Mistakes in a notebook or a hidden-test file: one clear line
# --------------------------------------------------------------------------------------------


def _broken(tmp_path: Path, edit, hidden: str = FIXTURE_HIDDEN) -> str:
    nb = fixture_notebook()
    edit({c["id"]: c for c in nb["cells"]})
    notebooks, hidden_dir = write_fixture(tmp_path, nb, hidden)
    with pytest.raises(coursework.CourseworkError) as info:
        coursework.write_assignments(tmp_path / "out", notebooks, hidden_dir)
    assert not (tmp_path / "out").exists(), "nothing is written when a notebook is wrong"
    message = str(info.value)
    assert "\n" not in message
    return message


def test_errors_name_the_notebook_the_cell_and_the_fix(tmp_path):
    def bad_check(cells):
        cells["e1c"]["source"] = ["print(checks.my_double(my_double))"]

    assert "01_made_up.ipynb, cell 5 (id e1c): the check cell must hold one call, " \
           "checks.my_double(<answer names>)" in _broken(tmp_path / "a", bad_check)

    def no_title(cells):
        cells["e2s"]["source"] = ["prediction = 12\n"]

    assert "(id e2s): a solution cell starts with `#@title Solution`" in _broken(
        tmp_path / "b", no_title)

    def bad_kind(cells):
        cells["e3t"]["metadata"]["convs2s"]["kind"] = "guess"

    assert "kind must be one of predict, derive, debug, implement, explain, got 'guess'" in \
        _broken(tmp_path / "c", bad_kind)

    def no_details(cells):
        cells["e5s"]["source"] = ["The model answer, not collapsed."]

    assert "<details><summary>Solution</summary>" in _broken(tmp_path / "d", no_details)

    def no_setup(cells):
        del cells["setup"]["metadata"]["convs2s"]

    assert "no exercise-setup cell" in _broken(tmp_path / "e", no_setup)


#: The made-up hidden tests in the form grading had before the sandbox: functions of the
#: answers, asserting. The builder refuses it (its functions are called with the variant).
OLD_FORM_HIDDEN = '''\
def my_double(my_double):
    for _x in (0.5, 100, -7):
        assert my_double(_x) == 2 * _x, _x


def guess_count(prediction):
    assert prediction == 12


def field_size(field):
    for _k, _n in [(2, 10), (9, 6)]:
        assert field(_k, _n) == 1 + _n * (_k - 1)


def fix_mean(mean):
    assert mean([4]) == 4
'''

_GUESS_RETURNS = '    return [Case("your prediction", value("prediction"), _equal(12))]'


def _guess_returns(expression: str) -> str:
    """The made-up hidden tests with guess_count returning ``expression`` instead."""
    assert FIXTURE_HIDDEN.count(_GUESS_RETURNS) == 1
    return FIXTURE_HIDDEN.replace(_GUESS_RETURNS, f"    return {expression}")


#: Broken hidden-test files, and what the builder's one line says of each.
BROKEN_HIDDEN = {
    "not valid Python": (FIXTURE_HIDDEN + "\n\ndef oops(variant):\n    return [\n",
                         "not valid Python ("),
    "an import that fails": ("import convs2s.no_such_module\n" + FIXTURE_HIDDEN,
                             "01.py: importing it raised ModuleNotFoundError: No module named "
                             "'convs2s.no_such_module'"),
    "raises when imported": (FIXTURE_HIDDEN + "\nTABLE = {}['missing']\n",
                             "01.py: importing it raised KeyError: 'missing'"),
    "the old form (the answers as parameters)": (
        OLD_FORM_HIDDEN, "01.py: my_double(variant) raised TypeError: 'dict' object is not "
                         "callable"),
    "two parameters": (FIXTURE_HIDDEN.replace("def field_size(variant):",
                                              "def field_size(variant, field):"),
                       "01.py: field_size takes (variant, field); a hidden test takes one "
                       "argument, the variant (a dict)"),
    "no parameter": (FIXTURE_HIDDEN.replace("def field_size(variant):", "def field_size():"),
                     "01.py: field_size takes (); a hidden test takes one argument"),
    "returns a Case, not a list": (
        _guess_returns('Case("your prediction", value("prediction"), _equal(12))'),
        "01.py: guess_count(variant) must return a non-empty list of "
        "convs2s.course.checks.testing.Case"),
    "returns a list of calls": (_guess_returns('[value("prediction")]'),
                                "guess_count(variant) must return a non-empty list of "
                                "convs2s.course.checks.testing.Case"),
    "returns no case": (_guess_returns("[]"), "guess_count(variant) must return a non-empty "
                                              "list of convs2s.course.checks.testing.Case"),
    "returns nothing": (_guess_returns("None"), "guess_count(variant) must return a non-empty "
                                                "list of convs2s.course.checks.testing.Case"),
    "raises when called": (_guess_returns('[Case("p", value("prediction"), '
                                          '_equal(variant["expected"]))]'),
                           "01.py: guess_count(variant) raised KeyError: 'expected'"),
    "a missing one": (FIXTURE_HIDDEN[:FIXTURE_HIDDEN.index("def fix_mean")],
                      "01.py: no hidden test for fix_mean (write `def fix_mean(variant):` "
                      "returning its cases)"),
    "one for an explain exercise": (
        FIXTURE_HIDDEN + "\n\ndef why_gate(variant):\n    return [Case('x', value('x'), "
                         "_equal(1))]\n",
        "01.py: why_gate is an explain exercise (graded by hand): it has no hidden test"),
    "one naming no exercise": (
        FIXTURE_HIDDEN + "\n\ndef fix_men(variant):\n    return fix_mean(variant)\n",
        "01.py: fix_men is not an exercise of 01_made_up.ipynb (its exercises: field_size, "
        "fix_mean, guess_count, my_double, why_gate)"),
}


@pytest.mark.parametrize("broken", sorted(BROKEN_HIDDEN))
def test_a_broken_hidden_test_file_is_refused_in_one_line(broken, tmp_path):
    """By the builder (nothing written) and by the command line (exit 2, one line on stderr,
    no traceback, no folder, no grading.json)."""
    text, expected = BROKEN_HIDDEN[broken]
    assert expected in _broken(tmp_path / "api", lambda cells: None, text)
    write_fixture(tmp_path / "cli", hidden=text)
    proc = _cli(tmp_path / "cli", "--out", str(tmp_path / "cli" / "course" / "source"),
                "--public")
    assert proc.returncode == 2, proc.stdout
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stderr.startswith("error: ") and expected in proc.stderr, proc.stderr
    assert not (tmp_path / "cli" / "course").exists()


def test_cli_reports_a_broken_notebook_in_one_line(tmp_path):
    nb = fixture_notebook()
    nb["cells"][3]["metadata"]["convs2s"]["points"] = 0
    notebooks, hidden = write_fixture(tmp_path, nb)
    proc = subprocess.run(
        [sys.executable, "-m", "tools.coursework", "--out", str(tmp_path / "out"),
         "--notebooks", str(notebooks), "--hidden", str(hidden)],
        cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 2
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "points must be a whole number >= 1, got 0" in proc.stderr


# --------------------------------------------------------------------------------------------
# --clean deletes only what the tool wrote
# --------------------------------------------------------------------------------------------


def _cli(tmp_path: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess:
    """``python -m tools.coursework`` on the made-up course, run in this process (its main)."""
    argv = ["--notebooks", str(tmp_path / "notebooks"), "--hidden", str(tmp_path / "hidden"),
            *args]
    out, err = io.StringIO(), io.StringIO()
    old = Path.cwd()
    os.chdir(cwd or tmp_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = coursework.main(argv)
    finally:
        os.chdir(old)
    return subprocess.CompletedProcess(argv, code, out.getvalue(), err.getvalue())


def test_clean_refuses_a_folder_the_tool_did_not_make(tmp_path):
    write_fixture(tmp_path)
    mine = tmp_path / "my_notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    proc = _cli(tmp_path, "--out", str(mine), "--clean")
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr
    assert "has no .convs2s-coursework marker" in proc.stderr
    assert (mine / "notes.txt").read_text() == "my notes"
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]


def test_clean_never_touches_the_notebooks_or_the_current_folder(tmp_path):
    write_fixture(tmp_path)
    before = sorted(p.name for p in (tmp_path / "notebooks").iterdir())
    (tmp_path / "notebooks" / coursework.MARKER).write_text('{"files": ["01_made_up.ipynb"]}')
    for out, expected in [("notebooks", "course notebooks"), (".", "course notebooks"),
                          (str(tmp_path.parent), "course notebooks")]:
        proc = _cli(tmp_path, "--out", out, "--clean")
        assert proc.returncode == 2 and expected in proc.stderr, (out, proc.stderr)
    assert sorted(p.name for p in (tmp_path / "notebooks").iterdir()) == sorted(
        before + [coursework.MARKER])
    (tmp_path / "work").mkdir()
    proc = _cli(tmp_path, "--out", ".", "--clean", cwd=tmp_path / "work")
    assert proc.returncode == 2 and "current folder" in proc.stderr


def test_clean_empties_its_own_folder_and_keeps_a_users_file(tmp_path):
    write_fixture(tmp_path)
    out = tmp_path / "course" / "source"
    assert _cli(tmp_path, "--out", str(out)).returncode == 0
    assert json.loads((out / coursework.MARKER).read_text())["files"] == [
        "01_made_up/01_made_up.ipynb"]
    stale = out / "00_old" / "00_old.ipynb"  # an assignment an earlier version wrote
    stale.parent.mkdir()
    stale.write_text("{}")
    marker = json.loads((out / coursework.MARKER).read_text())
    marker["files"].append("00_old/00_old.ipynb")
    marker["files"].append("../../outside.txt")  # never followed out of the folder
    (tmp_path / "outside.txt").write_text("keep")
    (out / coursework.MARKER).write_text(json.dumps(marker))
    (out / "01_made_up" / "grading-notes.md").write_text("a user's file")
    proc = _cli(tmp_path, "--out", str(out), "--clean")
    assert proc.returncode == 0, proc.stderr
    assert not stale.parent.exists()
    assert (out / "01_made_up" / "grading-notes.md").read_text() == "a user's file"
    assert (out / "01_made_up" / "01_made_up.ipynb").exists()
    assert (tmp_path / "outside.txt").read_text() == "keep"
    assert json.loads((out / coursework.MARKER).read_text())["files"] == [
        "01_made_up/01_made_up.ipynb"]
    # cleaning alone removes the tool's files and the folders it left empty; the folder a
    # user's file keeps alive keeps its marker, listing nothing: it is still the tool's
    assert coursework.clean(out, tmp_path / "notebooks")
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*")) == [
        coursework.MARKER, "01_made_up", "01_made_up/grading-notes.md"]
    assert json.loads((out / coursework.MARKER).read_text())["files"] == []
    (out / "01_made_up" / "grading-notes.md").unlink()
    assert _cli(tmp_path, "--out", str(out)).returncode == 0
    assert json.loads((out / coursework.MARKER).read_text())["files"] == [
        "01_made_up/01_made_up.ipynb"]
    assert coursework.clean(out, tmp_path / "notebooks") and not out.exists()


def test_clean_removes_a_folder_it_made_entirely(tmp_path):
    write_fixture(tmp_path)
    out = tmp_path / "source"
    assert _cli(tmp_path, "--out", str(out)).returncode == 0
    removed = coursework.clean(out, tmp_path / "notebooks")
    assert out in removed and not out.exists()


# --------------------------------------------------------------------------------------------
# nbgrader: the student version and autograde
# --------------------------------------------------------------------------------------------


def _released_secrets(source: Path) -> list[str]:
    """The solution lines of an instructor version (not blank, not comments) that are not also
    in its visible part (a debug exercise's fix repeats its `def` line)."""
    secret, shown, inside = [], set(), False
    for cell in _cells(source):
        manual = _meta(cell).get("solution") and cell["cell_type"] == "markdown"
        for line in _source(cell).splitlines():
            if "BEGIN SOLUTION" in line:
                inside = True
            elif "END SOLUTION" in line:
                inside = False
            elif (inside or manual) and line.strip() and not line.strip().startswith("#"):
                secret.append(line.strip())
            else:
                shown.add(line.strip())
    return [line for line in secret if line not in shown]


def _hidden_lines(hidden: Path, notebook: Path) -> list[str]:
    """The code lines of a hidden-test file (not blank, comments, imports or docstrings) that
    its course notebook does not show: what would give a hidden test away."""
    text = hidden.read_text(encoding="utf-8")
    skip = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import | ast.ImportFrom) or (
                isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
                and isinstance(node.value.value, str)):
            skip.update(range(node.lineno, node.end_lineno + 1))
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    shown = {line.strip() for c in nb["cells"] for line in _source(c).splitlines()}
    return [line.strip() for n, line in enumerate(text.splitlines(), start=1)
            if n not in skip and line.strip() and not line.strip().startswith("#")
            and line.strip() not in shown]


def _check_release(course: Path, name: str, notebook: Path,
                   trivial: set[str] = frozenset()) -> None:
    """The student version holds no solution; neither it nor the instructor version holds a
    hidden test (hidden/NN.py's code) or the class's values (grading.json's variants), and no
    code cell of the student version has run."""
    source = course / "source" / name / f"{name}.ipynb"
    release = course / "release" / name / f"{name}.ipynb"
    text = release.read_text(encoding="utf-8")
    for marker in ("BEGIN SOLUTION", "END SOLUTION"):
        assert marker not in text, (name, marker)
    visible = {line.strip() for c in _cells(release) for line in _source(c).splitlines()}
    secrets = [s for s in _released_secrets(source) if s not in trivial]
    assert secrets
    assert [s for s in secrets if s in visible] == [], name
    hidden = [s for s in _hidden_lines(course / "hidden" / f"{name[:2]}.py", notebook)
              if s not in trivial]
    assert hidden
    grading = _grading_file(course / "grading.json")["assignments"][name]["exercises"]
    values = [json.dumps(ex["variant"]) for ex in grading.values() if ex["variant"]] + [
        repr(ex["variant"]) for ex in grading.values() if ex["variant"]]
    for path in (source, release):
        sources = "\n".join(_source(c) for c in _cells(path))
        for marker in ("HIDDEN TESTS", "_hidden_test", "_variant", "checks.testing", "Case("):
            assert marker not in sources, (path, marker)
        lines = {line.strip() for c in _cells(path) for line in _source(c).splitlines()}
        assert [s for s in hidden if s in lines] == [], path
        assert [v for v in values if v in sources] == [], path
    for cell in _cells(release):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


def test_student_version_holds_no_solution_or_hidden_test(made_up):
    _check_release(made_up, "01_made_up", made_up.parent / "notebooks" / "01_made_up.ipynb")
    release = _cells(made_up / "release" / "01_made_up" / "01_made_up.ipynb")
    answers = {_meta(c)["grade_id"]: _source(c) for c in release if _meta(c).get("solution")}
    assert answers["my_double"] == ('def my_double(x):\n    """Twice x."""\n'
                                    "    # YOUR CODE HERE\n    raise NotImplementedError()")
    assert answers["guess_count"].startswith("prediction = None  # your number\n")
    assert answers["fix_mean"].startswith("def mean(xs):\n    return sum(xs) / (len(xs) - 1)")
    assert answers["why_gate"] == "YOUR ANSWER HERE"
    tests = {_meta(c)["grade_id"]: _source(c) for c in release
             if _meta(c).get("grade_id", "").endswith("_tests")}
    assert {k: _code_lines(v) for k, v in tests.items()} == {
        "my_double_tests": ["assert checks.my_double(my_double)"],
        "guess_count_tests": ["assert checks.guess_count(prediction)"],
        "field_size_tests": ["assert checks.field_size(field)"],
        "fix_mean_tests": ["assert checks.fix_mean(mean)"]}
    assert _grading_file(made_up / "grading.json") == {
        "assignments": {"01_made_up": FIXTURE_GRADING}}
    assert not list(made_up.glob("release/**/grading.json")) and not list(
        made_up.glob("release/**/*.py"))


def _submit(course: Path, name: str, student: str, folder: str = "source",
            edit=None) -> None:
    nb = json.loads((course / folder / name / f"{name}.ipynb").read_text(encoding="utf-8"))
    if edit is not None:
        edit({_meta(c).get("grade_id"): c for c in nb["cells"]})
    dest = course / "submitted" / student / name
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


def _grades(course: Path, name: str, students: list[str]) -> dict:
    from nbgrader.api import Gradebook

    out = {}
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="convs2s") as gb:
        for student in students:
            sub = gb.find_submission(name, student)
            nb = sub.notebooks[0]
            out[student] = {
                "score": sub.score, "max": sub.max_score, "code": sub.code_score,
                "max_code": sub.max_code_score, "manual": sub.needs_manual_grade,
                "cells": {g.cell.name: (g.auto_score, g.needs_manual_grade) for g in nb.grades},
            }
    return out


def _give_manual_points(course: Path, name: str, student: str) -> float:
    """What an instructor does in the formgrader: score the hand-graded answers."""
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="convs2s") as gb:
        sub = gb.find_submission(name, student)
        for grade in sub.notebooks[0].grades:
            if grade.needs_manual_grade:
                grade.manual_score = grade.max_score
        gb.db.commit()
        return gb.find_submission(name, student).score


def _autograded(course: Path, name: str, student: str) -> list[dict]:
    return _cells(course / "autograded" / student / name / f"{name}.ipynb")


def _verdicts(course: Path, name: str, student: str) -> dict[str, str]:
    """The verdict autograde stored in each autograded test cell of ``student``'s notebook, by
    grade id. Autograde runs no cell of a submission: each autograded test cell holds one output,
    the sandbox's verdict ("graded in a sandbox: ✓ ..." as a stream, "graded in a sandbox: ✗
    ..." as an error, which nbgrader scores 0), and every other code cell none."""
    verdicts = {}
    for cell in _autograded(course, name, student):
        meta = _meta(cell)
        if cell["cell_type"] != "code":
            continue
        if not (meta.get("grade") and not meta.get("solution")):
            assert cell["outputs"] == [] and cell["execution_count"] is None, (
                student, meta.get("grade_id"), cell["outputs"])
            continue
        [output] = cell["outputs"]
        if output["output_type"] == "stream":
            assert output["name"] == "stdout", output
            text = "".join(output["text"]).rstrip("\n")  # stored as a str or a list of lines
            assert text.startswith("graded in a sandbox: ✓ "), text
        else:
            assert output["output_type"] == "error" and output["ename"] == "NotGraded", output
            [text] = output["traceback"]
            assert text == f"graded in a sandbox: {output['evalue']}", output
            assert text.startswith("graded in a sandbox: ✗ "), text
        verdicts[meta["grade_id"]] = text
    return verdicts


def _errors_autograde_stored(course: Path, name: str, student: str) -> list[tuple]:
    """The error outputs in the notebook autograde stored for ``student``, as (grade id,
    exception name). Autograde no longer runs the notebook: the only outputs are the test
    cells' sandbox verdicts (:func:`_verdicts` checks them)."""
    _verdicts(course, name, student)
    return [(_meta(c).get("grade_id"), o.get("ename")) for c in _autograded(course, name, student)
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


def _flags(course: Path) -> list[dict]:
    """What the static read flagged, for the instructor (grading-flags.jsonl)."""
    path = course / "grading-flags.jsonl"
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


SANDBOX = "graded in a sandbox: "
NOT_ANSWERED = "not answered yet (the answer cell still raises NotImplementedError)"


@needs_sandbox
@pytest.mark.slow
def test_autograde_the_made_up_assignment(made_up):
    """(The made-up course is built with --public --grade-practice: my_double and fix_mean are
    graded.) Full marks for the solutions, 0 for the release, the hidden tests take the points
    of an answer fitted to the visible check; each test cell holds its verdict line."""
    name = "01_made_up"
    _submit(made_up, name, "solver")
    _submit(made_up, name, "blank", "release")

    def fit_the_visible_check(cells):
        cells["my_double"]["source"] = ["def my_double(x):\n",
                                        "    return {3: 6, -1: -2}[x]  # just the visible cases\n"]

    _submit(made_up, name, "cheater", edit=fit_the_visible_check)
    _nbgrader("autograde", name, "--force", cwd=made_up)
    g = _grades(made_up, name, ["solver", "blank", "cheater"])
    assert g["solver"]["max"] == 10 and g["solver"]["max_code"] == 7
    assert g["solver"]["code"] == 7, g["solver"]
    assert g["solver"]["manual"] and g["solver"]["cells"]["why_gate"] == (None, True)
    assert (g["blank"]["score"], g["blank"]["manual"]) == (0, False), g["blank"]
    assert g["cheater"]["code"] == 5, g["cheater"]  # the hidden tests took my_double's 2 points
    assert _errors_autograde_stored(made_up, name, "solver") == []
    assert _verdicts(made_up, name, "solver") == {
        "my_double_tests": f"{SANDBOX}✓ my_double: all 3 hidden cases held",
        "guess_count_tests": f"{SANDBOX}✓ guess_count: all 1 hidden cases held",
        "field_size_tests": f"{SANDBOX}✓ field_size: all 3 hidden cases held",
        "fix_mean_tests": f"{SANDBOX}✓ fix_mean: all 2 hidden cases held"}
    blank = _verdicts(made_up, name, "blank")
    assert sorted(blank) == sorted(f"{e}_tests" for e in FIXTURE_GRADING["exercises"])
    for grade_id, line in blank.items():
        assert line.startswith(f"{SANDBOX}✗ {grade_id[:-6]}: ") and NOT_ANSWERED in line, line
    assert ("my_double_tests", "NotGraded") in _errors_autograde_stored(made_up, name, "blank")
    cheater = _verdicts(made_up, name, "cheater")
    assert cheater["my_double_tests"] == (
        f"{SANDBOX}✗ my_double: hidden case 1 of 3 (my_double(0.5)): raised KeyError: 0.5")
    assert _give_manual_points(made_up, name, "solver") == 10


# --------------------------------------------------------------------------------------------
# The real course: notebooks 01-08 and coursework/hidden
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The course built from notebooks/ and coursework/hidden/ as `make student VARIANT=...`
    builds it, with ``--public --grade-practice``: the notebooks' own numbers and every exercise
    graded, so that the instructor versions (the public solutions) score full marks on every
    autograded exercise, as before."""
    return _course(tmp_path_factory.mktemp("coursework"), NOTEBOOKS, HIDDEN, "--public",
                   "--grade-practice")


#: The class of :func:`class_course` (a name: its numbers are drawn from it).
CLASS = "nbgrader-release-test-class"


@pytest.fixture(scope="module")
def class_course(tmp_path_factory) -> Path:
    """Notebook 01 as `make student VARIANT=<class> GRADE_PRACTICE=1` builds it: the class's own
    numbers, which the public answers (what checks.nb01._measured_moves or a fresh copy of
    convs2s.course.receptive_field gives) do not match, and my_glu graded, so that a back door
    to PyTorch's GLU is worth something."""
    return _course(tmp_path_factory.mktemp("class") / "coursework", NOTEBOOKS, HIDDEN,
                   "--only", "01", "--variant", CLASS, "--grade-practice")


def _assignments() -> list[coursework.NotebookExercises]:
    """The exercise assignments (notebook 09's project, graded on the file it hands in, is
    tested in test_project_grading.py)."""
    return [nb for nb in _every_assignment() if not any(ex.project for ex in nb.exercises)]


def _every_assignment() -> list[coursework.NotebookExercises]:
    return [nb for nb in map(coursework.read_notebook, coursework.course_notebooks(NOTEBOOKS))
            if nb.exercises]


def test_the_course_has_eight_assignments_of_three_to_five_exercises():
    from convs2s.course import checks

    assignments = _assignments()
    assert [nb.number for nb in assignments] == [f"{n:02d}" for n in range(1, 9)]
    ids = [ex.id for nb in assignments for ex in nb.exercises]
    assert len(ids) == len(set(ids))
    for nb in assignments:
        assert 3 <= len(nb.exercises) <= 5, nb.name
        for ex in nb.exercises:
            if not ex.manual:
                assert ex.id in checks.EXERCISES, f"{nb.name}: no convs2s.course.checks.{ex.id}"
    assert len({ex.kind for nb in assignments for ex in nb.exercises}) >= 3


def test_the_course_builds_with_a_test_cell_for_each_autograded_exercise(course):
    """(Built with --public --grade-practice.) Each autograded exercise has a grade cell holding
    only its visible check, and its entry in grading.json: the public variant, its answer names
    and points. (That each instructor version passes is shown by its autograde below.)"""
    grading = _grading_file(course / "grading.json")["assignments"]
    assert sorted(grading) == [nb.name for nb in _every_assignment()]
    for nb in _assignments():
        cells = _cells(course / "source" / nb.name / f"{nb.name}.ipynb")
        graded = {_meta(c)["grade_id"]: _source(c) for c in cells
                  if c["cell_type"] == "code" and _meta(c).get("grade")}
        autograded = [ex for ex in nb.exercises if not ex.manual]
        assert {k: _code_lines(v) for k, v in graded.items()} == {
            f"{ex.id}_tests": [f"assert {ex.check}"] for ex in autograded}, nb.name
        entry = grading[nb.name]
        assert entry["notebook"] == nb.number
        versions = coursework.read_hidden(HIDDEN / f"{nb.number}.py").versions
        public = {ex.id: class_variants.variant(ex.id, None, versions) for ex in autograded}
        assert entry["exercises"] == {ex.id: {
            "variant": json.loads(json.dumps(public[ex.id].params)) if public[ex.id] else {},
            "answer_names": list(ex.answer_names), "points": ex.points, "kind": ex.kind}
            for ex in autograded}, nb.name


def test_the_course_releases_hold_no_solution_or_hidden_test(course):
    for nb in _assignments():
        _check_release(course, nb.name, nb.path,
                       trivial={"pass", "else:", "try:", ")", "]", "return x", "return cases",
                                "cases = []"})


@needs_sandbox
@pytest.mark.slow
def test_autograde_every_assignment(course):
    """nbgrader autograde of all eight (built with --public --grade-practice): the instructor
    versions (the solutions) pass every hidden test in the sandbox and score full marks (the
    hand-graded answers left for the instructor, then scored); the student versions score 0,
    each test cell saying the answer is not written yet."""
    names = [nb.name for nb in _assignments()]
    for name in names:
        _submit(course, name, "solver")
        _submit(course, name, "blank", "release")
    _nbgrader("autograde", "*", "--force", cwd=course)
    for nb in _assignments():
        assert _errors_autograde_stored(course, nb.name, "solver") == [], nb.name
        autograded = [ex.id for ex in nb.exercises if not ex.manual]
        solver, blank = (_verdicts(course, nb.name, s) for s in ("solver", "blank"))
        assert sorted(solver) == sorted(blank) == sorted(f"{e}_tests" for e in autograded)
        for ex_id in autograded:
            assert solver[f"{ex_id}_tests"].startswith(f"{SANDBOX}✓ {ex_id}: all "), solver
            assert blank[f"{ex_id}_tests"].startswith(f"{SANDBOX}✗ {ex_id}: "), blank
            assert NOT_ANSWERED in blank[f"{ex_id}_tests"], blank
        g = _grades(course, nb.name, ["solver", "blank"])
        auto = sum(ex.points for ex in nb.exercises if not ex.manual)
        manual = [ex.id for ex in nb.exercises if ex.manual]
        assert (g["solver"]["code"], g["solver"]["max_code"]) == (auto, auto), (nb.name, g)
        assert g["solver"]["max"] == nb.points
        assert g["solver"]["manual"] == bool(manual), nb.name
        for ex_id in manual:
            assert g["solver"]["cells"][ex_id] == (None, True), (nb.name, ex_id)
        assert g["blank"]["score"] == 0 and not g["blank"]["manual"], (nb.name, g["blank"])
        assert _give_manual_points(course, nb.name, "solver") == nb.points
    assert [f for f in _flags(course) if f["student"] == "solver"] == []


# --------------------------------------------------------------------------------------------
# Grading trusts nothing the student's kernel holds: autograde runs no cell of a submission;
# each answer cell is graded alone, in the sandbox, and judged outside it
# (coursework/sandbox_grading.py)
# --------------------------------------------------------------------------------------------

#: A cell a student adds after the setup cell: were it run, the kernel would from then on run
#: every test cell as `pass` (an input transformer), with the checks and torch's comparison
#: switched off. Autograde never runs it.
KERNEL_TAMPERING = """\
ip = get_ipython()
ip.input_transformers_cleanup.append(
    lambda lines: ["pass\\n"] if any("checks." in line for line in lines) else lines)
checks.SHORTCUTS.clear()
checks._core._graded = False
torch.testing.assert_close = lambda *a, **k: None
"""


def _submit_answers(course: Path, name: str, student: str, answers: dict[str, str],
                    own_cell: str | None = None) -> None:
    """A submission: the student version with ``answers`` (source by exercise id) in its answer
    cells, and ``own_cell``, a cell of the student's own, added after the setup cell."""
    nb = json.loads((course / "release" / name / f"{name}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if _meta(cell).get("grade_id") in answers:
            cell["source"] = answers[_meta(cell)["grade_id"]].splitlines(keepends=True)
    if own_cell is not None:
        at = next(i for i, c in enumerate(nb["cells"]) if _meta(c).get("grade_id") == "setup")
        nb["cells"].insert(at + 1, {"cell_type": "code", "execution_count": None, "id": "mine",
                                    "metadata": {}, "outputs": [],
                                    "source": own_cell.splitlines(keepends=True)})
    dest = course / "submitted" / student / name
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"{name}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


GLU_RIGHT = ("def my_glu(h, dim=-1):\n    if h.size(dim) % 2:\n        raise ValueError('odd')\n"
             "    a, b = h.chunk(2, dim)\n    return a * torch.sigmoid(b)\n")


@needs_sandbox
@pytest.mark.slow
def test_tampering_scores_nothing_and_right_answers_of_any_name_score_full(class_course):
    """Through a real `nbgrader autograde` of notebook 01 built for a class (--variant, with
    --grade-practice so that my_glu is worth its 2 points):

    - kernel tampering (a cell of the student's own that would run every test cell as `pass`,
      with the checks and torch's comparison switched off) with wrong answers: autograde never
      runs that cell, the answers are graded alone: 0;
    - back doors to the package's or PyTorch's own answer (torch._C._nn.glu,
      checks.nb01._measured_moves, a fresh copy of convs2s.course.receptive_field): 0. The
      static read only flags them, for the instructor (grading-flags.jsonl; the student's
      feedback does not show it); torch._C._nn.glu is removed in the sandbox, and the other two
      give the public numbers, which the class's are not (in a --public build they would hold:
      hence this build);
    - values that lie about equality, and nn.GLU (whose F.glu is removed): 0;
    - right answers for the class's numbers (grading.json) whose helpers take the names the
      hidden tests once used in the student's namespace (_hidden_test, _variant, _core): full
      marks.

    Each test cell holds its verdict line."""
    name = "01_glu_and_padding"
    values = _grading_file(class_course / "grading.json")["assignments"][name]["exercises"]
    assert sorted(values) == ["my_glu", "my_receptive_field", "same_padding_moves"]
    moved = values["same_padding_moves"]["variant"]["expected"]
    convs = values["my_receptive_field"]["variant"]["convs_per_layer"]
    public_moved = class_variants.variant("same_padding_moves", None, coursework.read_hidden(
        HIDDEN / "01.py").versions).params["expected"]
    assert sorted(moved) != sorted(public_moved) and convs != 1  # the public answers fail
    source = (class_course / "source" / name / f"{name}.ipynb").read_text(encoding="utf-8")
    assert CLASS not in source and CLASS not in (class_course / "release" / name /
                                                 f"{name}.ipynb").read_text(encoding="utf-8")
    _check_release(class_course, name, NOTEBOOKS / f"{name}.ipynb")
    wrong = dict(my_glu="def my_glu(h, dim=-1):\n    return h[..., :1]\n",
                 same_padding_moves="moved_outputs = [0]\n",
                 my_receptive_field="def my_receptive_field(k, n_layers):\n    return 0\n")
    _submit_answers(class_course, name, "t_kernel", wrong, own_cell=KERNEL_TAMPERING)
    _submit_answers(class_course, name, "t_backdoor", dict(
        my_glu="def my_glu(h, dim=-1):\n    return torch._C._nn.glu(h, dim)\n",
        same_padding_moves="moved_outputs = checks.nb01._measured_moves()\n",
        my_receptive_field=(
            "import importlib.util\n"
            "spec = importlib.util.find_spec('convs2s.course.receptive_field')\n"
            "rf = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(rf)\n"
            "my_receptive_field = rf.receptive_field\n")))
    _submit_answers(class_course, name, "t_liar", dict(
        my_glu="import torch.nn as nn\n\ndef my_glu(h, dim=-1):\n    return nn.GLU(dim)(h)\n",
        same_padding_moves=("class Liar(list):\n    def __eq__(self, other):\n        return True\n"
                            "moved_outputs = Liar([1])\n"),
        my_receptive_field=("class Liar(int):\n    __eq__ = lambda s, o: True\n\n"
                            "def my_receptive_field(k, n_layers):\n    return Liar(0)\n")))
    _submit_answers(class_course, name, "t_helpers", dict(
        my_glu="def _hidden_test(h, dim):\n    return h\n\n" + GLU_RIGHT,
        same_padding_moves=f"_variant = None\nfn = {list(reversed(moved))}\nmoved_outputs = fn\n",
        my_receptive_field=(f"def _core(k):\n    return {convs} * (k - 1)\n\n"
                            "def my_receptive_field(k, n_layers):\n"
                            "    return 1 + n_layers * _core(k)\n")))
    _nbgrader("autograde", name, "--force", "--student=t_*", cwd=class_course)
    students = ["t_kernel", "t_backdoor", "t_liar", "t_helpers"]
    g = _grades(class_course, name, students)
    for student in ("t_kernel", "t_backdoor", "t_liar"):
        assert (g[student]["code"], g[student]["max_code"]) == (0, 5), (student, g[student])
    assert g["t_helpers"]["code"] == g["t_helpers"]["max_code"] == 5, g["t_helpers"]
    # the student sees why, one line per test cell, in what autograde stored (and the kernel
    # student's own cell was never run: _verdicts checks that no other cell has an output)
    verdicts = {s: _verdicts(class_course, name, s) for s in students}
    for student in ("t_kernel", "t_backdoor", "t_liar"):
        assert all(line.startswith(f"{SANDBOX}✗ ") for line in verdicts[student].values()), \
            verdicts[student]
    assert all(line.startswith(f"{SANDBOX}✓ ") for line in verdicts["t_helpers"].values())
    assert len(verdicts["t_helpers"]) == 3
    assert "raised ShortcutRefused: it called torch._C._nn.glu" in \
        verdicts["t_backdoor"]["my_glu_tests"]
    assert verdicts["t_backdoor"]["same_padding_moves_tests"] == (
        f"{SANDBOX}✗ same_padding_moves: hidden case 1 of 1 (your prediction): does not hold")
    assert "raised ShortcutRefused: it called torch.nn.functional.glu" in \
        verdicts["t_liar"]["my_glu_tests"]
    # what the static read flags is listed for the instructor, not shown to the student
    flagged: dict[str, list[str]] = {}
    for flag in _flags(class_course):
        assert flag["assignment"] == name
        if flag["student"] == "t_backdoor":
            assert flag["passed"] is False
            flagged.setdefault(flag["exercise"], []).append(flag["flag"])
    assert sorted(flagged) == ["my_glu", "my_receptive_field", "same_padding_moves"], flagged
    assert any("uses torch._C" in f for f in flagged["my_glu"]), flagged
    assert any("uses checks" in f for f in flagged["same_padding_moves"]), flagged
    assert any("imports importlib.util" in f for f in flagged["my_receptive_field"]), flagged
    shown = json.dumps(_autograded(class_course, name, "t_backdoor"))
    assert "imports importlib.util" not in shown and "a private part" not in shown


@needs_sandbox
@pytest.mark.slow
def test_a_helper_named_as_the_hidden_tests_once_were_scores_full_marks(course):
    """Notebook 07's baseline count with its own helper `_gru_parameters` (the name the hidden
    test used for the learner's function when hidden tests ran in the learner's namespace), in
    the --public --grade-practice build (its public formula holds there)."""
    name = "07_convs2s_vs_rnn_attention"
    _submit_answers(course, name, "t_helper07", dict(baseline_parameters=(
        "def _gru_parameters(i, h):\n    return 3 * (h * i + h * h + 2 * h)\n\n"
        "def gru_parameters(input_size, hidden_size):\n"
        "    return _gru_parameters(input_size, hidden_size)\n\n"
        "def baseline_parameters(config):\n"
        "    E, H, D = config['emb_dim'], config['enc_hid_dim'], config['dec_hid_dim']\n"
        "    A, O = config['attn_dim'], config['out_dim']\n"
        "    Vs, Vt = config['src_vocab_size'], config['trg_vocab_size']\n"
        "    return (Vs * E + 2 * _gru_parameters(E, H) + 2 * H * D + D + D * A + 2 * H * A\n"
        "            + 2 * A + Vt * E + _gru_parameters(E + 2 * H, D)\n"
        "            + (D + 2 * H + E) * 2 * O + 2 * O + O * Vt + Vt)\n")))
    _nbgrader("autograde", name, "--force", "--student=t_helper07", cwd=course)
    g = _grades(course, name, ["t_helper07"])["t_helper07"]
    assert g["cells"]["baseline_parameters_tests"] == (3.0, False), g
    assert _verdicts(course, name, "t_helper07")["baseline_parameters_tests"] == (
        f"{SANDBOX}✓ baseline_parameters: all 5 hidden cases held")


def test_cli_builds_the_course(tmp_path):
    """`python -m tools.coursework` as `make student` runs it: the class's numbers drawn from a
    random secret it keeps in variant-secret beside --out (the copies never name it), grading.json
    beside it (both readable by their owner only), the practice exercises (implement, debug,
    speed_crossover) not graded."""
    proc = subprocess.run([sys.executable, "-m", "tools.coursework", "--out",
                           str(tmp_path / "source")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    built = sorted(p.name for p in (tmp_path / "source").iterdir() if p.is_dir())
    assert built == [nb.name for nb in _every_assignment()]
    assert len(built) == 9
    secret_file = tmp_path / "variant-secret"
    assert stat.S_IMODE(secret_file.stat().st_mode) == 0o600
    secret = secret_file.read_text().strip()
    assert len(secret) >= 16
    grading = _grading_file(tmp_path / "grading.json")["assignments"]
    for nb in _assignments():
        text = (tmp_path / "source" / nb.name / f"{nb.name}.ipynb").read_text(encoding="utf-8")
        assert secret not in text and "_variant" not in text, nb.name
        assert sorted(grading[nb.name]["exercises"]) == sorted(
            ex.id for ex in nb.exercises if not ex.manual and not coursework.is_practice(ex))
    assert "my_glu" not in grading["01_glu_and_padding"]["exercises"]
    assert "speed_crossover" not in grading["07_convs2s_vs_rnn_attention"]["exercises"]
