"""The nbgrader course builder (tools/coursework.py) and nbgrader's view of what it builds.

A small made-up course notebook with one exercise of each kind (implement, predict, derive,
debug, explain), written in the format of tools/README.md, and its hidden-test file, are built
here; the builder must turn them into an nbgrader source notebook whose instructor version
passes, whose student version (``nbgrader generate_assignment``) holds no solution and no
hidden test, and which ``nbgrader autograde`` grades: full marks for the solutions, 0 for the
release, hidden tests that catch an answer fitted to the visible check, and the explain answer
left for manual grading. The same is then checked on the real course notebooks 01-08.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
HIDDEN = ROOT / "coursework" / "hidden"
CONFIG = ROOT / "coursework" / "nbgrader_config.py"

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


checks = types.SimpleNamespace(my_double=_double, guess_count=_guess, field_size=_field,
                               fix_mean=_mean, graded_copy=lambda: print("graded copy"))
'''

FIXTURE_HIDDEN = '''\
"""Hidden tests of the made-up notebook 01."""

import math as _math


def my_double(my_double):
    """Cases the visible check does not try."""
    for _x in (0.5, 100, -7):
        assert my_double(_x) == 2 * _x, _x


def guess_count(prediction):
    assert prediction == 12


def field_size(field):
    for _k, _n in [(2, 10), (9, 6)]:
        assert field(_k, _n) == 1 + _n * (_k - 1)
    assert _math.isfinite(field(3, 3))


def fix_mean(mean):
    assert mean([4]) == 4
    assert mean([1.0, 2.0]) == 1.5
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


def _run_cells(path: Path) -> list[tuple[dict, BaseException | None]]:
    """Run a notebook's code cells in this process, as a kernel would; each cell's exception."""
    ns: dict = {"__name__": "__main__"}
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


def _course(root: Path, notebooks: Path, hidden: Path) -> Path:
    """A course directory as `make student` makes it: source/ from the notebooks, release/."""
    shutil.copy(CONFIG, root / "nbgrader_config.py")
    shutil.copy(CONFIG.parent / "fresh_process_grading.py", root / "fresh_process_grading.py")
    coursework.write_assignments(root / "source", notebooks, hidden)
    _nbgrader("generate_assignment", "*", "--force", cwd=root)
    return root


@pytest.fixture(scope="module")
def made_up(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("made_up")
    notebooks, hidden = write_fixture(root)
    (root / "course").mkdir()
    return _course(root / "course", notebooks, hidden)


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


def test_hidden_tests_are_read_as_text_with_their_imports(tmp_path):
    _, hidden = write_fixture(tmp_path)
    tests = coursework.read_hidden(hidden / "01.py")
    assert set(tests) == {"my_double", "guess_count", "field_size", "fix_mean"}
    assert tests["my_double"].params == ("my_double",)
    assert tests["my_double"].imports == "import math as _math"
    assert tests["my_double"].body == (
        "for _x in (0.5, 100, -7):\n    assert my_double(_x) == 2 * _x, _x")


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


def test_grade_cell_asserts_the_check_then_the_hidden_body(tmp_path):
    notebooks, hidden = write_fixture(tmp_path)
    nb = coursework.read_notebook(notebooks / "01_made_up.ipynb")
    tests = coursework.read_hidden(hidden / "01.py")
    cell = coursework.grade_cell_source(nb.exercises[2], tests["field_size"])
    lines = cell.splitlines()
    assert "assert checks.field_size(field)" in lines
    begin, end = lines.index(coursework.BEGIN_HIDDEN), lines.index(coursework.END_HIDDEN)
    assert lines.index("assert checks.field_size(field)") < begin < end == len(lines) - 1
    # the hidden test as a function of the answers (a namespace of its own when graded), with
    # the module's imports it uses, and this copy's values as _variant
    assert lines[begin + 1:end] == [
        "_variant = {}",
        "def _hidden_test(field):",
        "    import math as _math",
        "    for _k, _n in [(2, 10), (9, 6)]:",
        "        assert field(_k, _n) == 1 + _n * (_k - 1)",
        "    assert _math.isfinite(field(3, 3))",
        "_hidden_test(field)"]


def test_built_assignment_has_the_nbgrader_cells(tmp_path):
    import nbformat

    notebooks, hidden = write_fixture(tmp_path)
    [built] = coursework.write_assignments(tmp_path / "source", notebooks, hidden)
    assert built.path == tmp_path / "source" / "01_made_up" / "01_made_up.ipynb"
    nbformat.validate(nbformat.read(built.path, as_version=4))
    cells = _cells(built.path)
    text = json.dumps(cells)
    assert "lesson_state" not in text and "between exercises" not in text
    graded = [c for c in cells if _meta(c).get("grade")]
    assert [(_meta(c)["grade_id"], _meta(c)["points"], c["cell_type"]) for c in graded] == [
        ("my_double_tests", 2, "code"), ("guess_count_tests", 1, "code"),
        ("field_size_tests", 2, "code"), ("fix_mean_tests", 2, "code"),
        ("why_gate", 3, "markdown")]
    assert all(_meta(c)["locked"] for c in graded if c["cell_type"] == "code")
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


def test_instructor_version_passes_and_unanswered_cells_score_nothing(tmp_path):
    notebooks, hidden = write_fixture(tmp_path)
    [built] = coursework.write_assignments(tmp_path / "source", notebooks, hidden)
    assert [e for _, e in _run_cells(built.path) if e is not None] == []
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
    for cell, error in _run_cells(stubbed):
        if _meta(cell).get("grade"):
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


def test_hidden_tests_must_match_the_exercises(tmp_path):
    def keep(cells):
        pass

    unknown = FIXTURE_HIDDEN + "\n\ndef fix_men(mean):\n    assert mean\n"
    assert "fix_men is not an exercise of 01_made_up.ipynb (its exercises: field_size, " \
        "fix_mean, guess_count, my_double, why_gate)" in _broken(tmp_path / "a", keep, unknown)
    renamed = FIXTURE_HIDDEN.replace("def field_size(field):", "def field_size(f):")
    assert "field_size takes (f) but the check is called with (field): use the answer names" in \
        _broken(tmp_path / "c", keep, renamed)
    trailing = FIXTURE_HIDDEN + "\n\ndef why_gate(x):\n    assert x\n"
    assert "why_gate is an explain exercise" in _broken(tmp_path / "e", keep, trailing)
    idle = FIXTURE_HIDDEN.replace("assert prediction == 12", "prediction == 12")
    assert "guess_count, line 1 of its body: an expression that tests nothing (a comparison " \
        "without assert?); write `assert ...`" in _broken(tmp_path / "f", keep, idle)
    value = FIXTURE_HIDDEN.replace("assert prediction == 12", "assert prediction\n    [1][0]")
    assert "ends with an expression, whose value nbgrader would read as a partial score" in \
        _broken(tmp_path / "i", keep, value)
    stray = FIXTURE_HIDDEN + "\nCASES = [1, 2]\n"
    assert "holds only imports and one function per exercise id" in _broken(
        tmp_path / "g", keep, stray)


def test_missing_hidden_test_is_an_error(tmp_path):
    without = FIXTURE_HIDDEN[:FIXTURE_HIDDEN.index("def fix_mean")]
    assert "no hidden test for fix_mean (write `def fix_mean(mean):` with asserts)" in _broken(
        tmp_path, lambda cells: None, without)


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
    """The solution and hidden-test lines of an instructor version (not blank, not comments)
    that are not also in its visible part (a debug exercise's fix repeats its `def` line)."""
    secret, shown, inside = [], set(), False
    for cell in _cells(source):
        manual = _meta(cell).get("solution") and cell["cell_type"] == "markdown"
        for line in _source(cell).splitlines():
            if "BEGIN SOLUTION" in line or "BEGIN HIDDEN TESTS" in line:
                inside = True
            elif "END SOLUTION" in line or "END HIDDEN TESTS" in line:
                inside = False
            elif (inside or manual) and line.strip() and not line.strip().startswith("#"):
                secret.append(line.strip())
            else:
                shown.add(line.strip())
    return [line for line in secret if line not in shown]


def _check_release(course: Path, name: str, trivial: set[str] = frozenset()) -> None:
    source = course / "source" / name / f"{name}.ipynb"
    release = course / "release" / name / f"{name}.ipynb"
    text = release.read_text(encoding="utf-8")
    for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
        assert marker not in text, (name, marker)
    visible = {line.strip() for c in _cells(release) for line in _source(c).splitlines()}
    secrets = [s for s in _released_secrets(source) if s not in trivial]
    assert secrets
    assert [s for s in secrets if s in visible] == [], name
    for cell in _cells(release):
        if cell["cell_type"] == "code":
            assert cell["outputs"] == [] and cell["execution_count"] is None


def test_student_version_holds_no_solution_or_hidden_test(made_up):
    _check_release(made_up, "01_made_up")
    release = _cells(made_up / "release" / "01_made_up" / "01_made_up.ipynb")
    answers = {_meta(c)["grade_id"]: _source(c) for c in release if _meta(c).get("solution")}
    assert answers["my_double"] == ('def my_double(x):\n    """Twice x."""\n'
                                    "    # YOUR CODE HERE\n    raise NotImplementedError()")
    assert answers["guess_count"].startswith("prediction = None  # your number\n")
    assert answers["fix_mean"].startswith("def mean(xs):\n    return sum(xs) / (len(xs) - 1)")
    assert answers["why_gate"] == "YOUR ANSWER HERE"


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


def _errors_autograde_stored(course: Path, name: str, student: str) -> list[tuple]:
    """The errors in the notebook autograde ran for ``student`` (it runs every cell, errors or
    not), as (grade id, exception name); it must have run to the last code cell."""
    ran = _cells(course / "autograded" / student / name / f"{name}.ipynb")
    assert [c["execution_count"] for c in ran if c["cell_type"] == "code"][-1], (name, student)
    return [(_meta(c).get("grade_id"), o.get("ename")) for c in ran
            for o in c.get("outputs", []) if o.get("output_type") == "error"]


@pytest.mark.slow
def test_autograde_the_made_up_assignment(made_up):
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
    assert ("my_double_tests", "NotGraded") in _errors_autograde_stored(made_up, name, "blank")
    assert _give_manual_points(made_up, name, "solver") == 10


# --------------------------------------------------------------------------------------------
# The real course: notebooks 01-08 and coursework/hidden
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """The course built from notebooks/ and coursework/hidden/ as `make student` builds it."""
    return _course(tmp_path_factory.mktemp("coursework"), NOTEBOOKS, HIDDEN)


def _assignments() -> list[coursework.NotebookExercises]:
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
    """(That each instructor version runs with no error is shown by its autograde below.)"""
    for nb in _assignments():
        cells = _cells(course / "source" / nb.name / f"{nb.name}.ipynb")
        graded = [c for c in cells if c["cell_type"] == "code" and _meta(c).get("grade")]
        assert len(graded) == sum(not ex.manual for ex in nb.exercises), nb.name


def test_the_course_releases_hold_no_solution_or_hidden_test(course):
    for nb in _assignments():
        _check_release(course, nb.name, trivial={"pass", "else:", "try:", ")", "]", "return x"})


@pytest.mark.slow
def test_autograde_every_assignment(course):
    """nbgrader autograde of all eight: the instructor versions (the solutions) run with no
    error in any cell and score full marks (the hand-graded answers left for the instructor,
    then scored); the student versions score 0."""
    names = [nb.name for nb in _assignments()]
    for name in names:
        _submit(course, name, "solver")
        _submit(course, name, "blank", "release")
    _nbgrader("autograde", "*", "--force", cwd=course)
    for nb in _assignments():
        assert _errors_autograde_stored(course, nb.name, "solver") == [], nb.name
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


# --------------------------------------------------------------------------------------------
# Grading trusts nothing the student's kernel holds: each test cell is graded again, in a fresh
# process, from the answer cell's text (coursework/fresh_process_grading.py)
# --------------------------------------------------------------------------------------------

#: A cell a student adds after the setup cell: from then on the kernel runs every test cell as
#: `pass` (an input transformer), the checks are switched off and torch's comparison with them.
KERNEL_TAMPERING = """\
ip = get_ipython()
ip.input_transformers_cleanup.append(
    lambda lines: ["pass\\n"] if any("_hidden_test" in line for line in lines) else lines)
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


@pytest.mark.slow
def test_tampering_scores_nothing_and_right_answers_of_any_name_score_full(course):
    """Through a real `nbgrader autograde`: kernel tampering (every test cell run as `pass`,
    checks and torch's comparison switched off), the package's or PyTorch's own answer reached
    by a back door, a value that lies about equality: 0 autograded points each; right answers
    whose helpers take the hidden tests' names: full marks."""
    name = "01_glu_and_padding"
    wrong = dict(my_glu="def my_glu(h, dim=-1):\n    return h[..., :1]\n",
                 same_padding_moves="moved_outputs = [0]\n",
                 my_receptive_field="def my_receptive_field(k, n_layers):\n    return 0\n")
    _submit_answers(course, name, "t_kernel", wrong, own_cell=KERNEL_TAMPERING)
    _submit_answers(course, name, "t_backdoor", dict(
        my_glu="def my_glu(h, dim=-1):\n    return torch._C._nn.glu(h, dim)\n",
        same_padding_moves="moved_outputs = checks.nb01._measured_moves()\n",
        my_receptive_field=(
            "import importlib.util\n"
            "spec = importlib.util.find_spec('convs2s.course.receptive_field')\n"
            "rf = importlib.util.module_from_spec(spec)\nspec.loader.exec_module(rf)\n"
            "my_receptive_field = rf.receptive_field\n")))
    _submit_answers(course, name, "t_liar", dict(
        my_glu="import torch.nn as nn\nmy_glu = nn.GLU().forward\n",
        same_padding_moves=("class Liar(list):\n    def __eq__(self, other):\n        return True\n"
                            "moved_outputs = Liar([1])\n"),
        my_receptive_field=("class Liar(int):\n    __eq__ = lambda s, o: True\n\n"
                            "def my_receptive_field(k, n_layers):\n    return Liar(0)\n")))
    _submit_answers(course, name, "t_helpers", dict(
        my_glu="def _hidden_test(h, dim):\n    return h\n\n" + GLU_RIGHT,
        same_padding_moves="_variant = None\nfn = [9, 8, 7, 6, 5]\nmoved_outputs = fn\n",
        my_receptive_field=("def _core(k):\n    return k - 1\n\n"
                            "def my_receptive_field(k, n_layers):\n"
                            "    return 1 + n_layers * _core(k)\n")))
    _nbgrader("autograde", name, "--force", "--student=t_*", cwd=course)
    g = _grades(course, name, ["t_kernel", "t_backdoor", "t_liar", "t_helpers"])
    for student in ("t_kernel", "t_backdoor", "t_liar"):
        assert g[student]["code"] == 0, (student, g[student])
    assert g["t_helpers"]["code"] == g["t_helpers"]["max_code"] == 5, g["t_helpers"]
    # the student sees why, one line per test cell, in what autograde stored
    graded = (course / "autograded" / "t_backdoor" / name / f"{name}.ipynb").read_text()
    assert "refused: the answer cell line 2: uses" in graded  # torch._C._nn.glu
    assert "imports importlib.util" in graded and "uses checks" in graded


@pytest.mark.slow
def test_a_helper_named_as_the_hidden_tests_once_were_scores_full_marks(course):
    """Notebook 07's baseline count with its own helper `_gru_parameters` (the name the hidden
    test used for the learner's function when hidden tests ran in the learner's namespace)."""
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


def test_cli_builds_the_course(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "tools.coursework", "--out",
                           str(tmp_path / "source")], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    built = sorted(p.name for p in (tmp_path / "source").iterdir() if p.is_dir())
    assert built == [nb.name for nb in _assignments()]
    assert len(built) == 8
