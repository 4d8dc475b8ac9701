"""The nbgrader coursework: convs2s.checks, convs2s.coursework and nbgrader's view of them.

What the issue asks, tested here:
- every graded exercise has a check that passes a correct function and fails a wrong one with
  a hint (the self-learner's ``convs2s.checks.<exercise>(fn)``);
- the student versions (``nbgrader generate_assignment``) contain no solution code, no hidden
  tests and no outputs;
- the instructor versions pass all their autograded cells; the student versions, run as
  released, fail exactly the autograded cells, with NotImplementedError, and nothing else;
- ``nbgrader autograde`` gives full marks to a submission made from the instructor versions,
  zero to an unmodified student version (and counts the hidden tests).

The notebook executions without nbgrader run in this process (fast); ``nbgrader autograde``
starts a kernel per notebook, so it grades only AUTOGRADE_ASSIGNMENTS unless
CONVS2S_AUTOGRADE_ALL=1.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from convs2s import checks, coursework

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CONFIG = ROOT / "coursework" / "nbgrader_config.py"
ASSIGNMENTS = {a.name: a for a in coursework.ASSIGNMENTS}
EXERCISES = {ex.id: (a, ex) for a in coursework.ASSIGNMENTS for ex in a.exercises}
AUTOGRADE_ASSIGNMENTS = ("01_glu_and_padding",)

# A plausible mistake per exercise; the check must catch it (and say why, with a hint).
WRONG = {
    "my_glu": "def my_glu(h, dim=-1):\n    a, b = h.chunk(2, dim=dim)\n"
              "    return torch.sigmoid(a) * b",
    "causal_left_padding": "def causal_left_padding(k):\n    return k // 2",
    "my_receptive_field": "def my_receptive_field(k, n_layers):\n    return n_layers * k",
    "embed": "def embed(src, tok, pos):\n"
             "    return tok(src) + pos(torch.arange(1, src.size(1) + 1))",
    "mask_padding": "def mask_padding(x, src_mask):\n"
                    "    x[~src_mask.unsqueeze(1).expand_as(x)] = 0.0\n    return x",
    "measured_receptive_field": "def measured_receptive_field(stack, e):\n"
                                "    dep = viz.measure_dependency(stack, e, channels_last=True)\n"
                                "    return int(dep[0].sum())",
    "causal_padding": "def causal_padding(k):\n    return (k - 1) // 2, (k - 1) // 2",
    "causal_conv1d": "def causal_conv1d(x, weight, bias):\n"
                     "    return F.conv1d(x, weight, bias, padding=weight.size(-1) // 2)",
    "moved_positions": "def moved_positions(t, k, n_layers, length, padding):\n"
                       "    reach = n_layers * (k - 1)\n"
                       "    return [i for i in range(length) if t - reach <= i <= t]",
    "masked_softmax": "def masked_softmax(energy, src_mask):\n"
                      "    return torch.softmax(energy, dim=-1) * src_mask[:, None, :]",
    "length_scale": "def length_scale(src_mask):\n"
                    "    return src_mask.sum(dim=1).float().view(-1, 1, 1)",
    "row_entropy": "def row_entropy(a):\n    return -(a * torch.log(a)).sum(dim=-1).mean()",
    "shift_for_teacher_forcing": "def shift_for_teacher_forcing(trg):\n"
                                 "    return trg[:, 1:], trg[:, :-1]",
    "perplexity_from_loss": "def perplexity_from_loss(loss):\n    return 2 ** loss",
    "build_itos": "def build_itos(token_lists, min_freq, specials=('<unk>', '<pad>', '<bos>', "
                  "'<eos>')):\n"
                  "    counts = Counter(t for tokens in token_lists for t in tokens)\n"
                  "    kept = [t for t, n in counts.items() if n >= min_freq and t not in "
                  "specials]\n"
                  "    kept.sort(key=lambda t: -counts[t])\n    return list(specials) + kept",
    "rerank": "def rerank(hypotheses, alpha):\n    return [t for t, _ in hypotheses]",
    "brevity_penalty": "def brevity_penalty(hyp_len, ref_len):\n"
                       "    return min(1.0, hyp_len / ref_len)",
    "repeats": "def repeats(tokens, n=1):\n"
               "    return any(a == b for a, b in zip(tokens, tokens[1:]))",
    "augment_tokens": "def augment_tokens(ids, p_delete, n_swaps, generator):\n"
                      "    return [t for t in ids if float(torch.rand(1, generator=generator)) "
                      ">= p_delete]",
    "augment_batch": "def augment_batch(src, pad_idx, p_delete, n_swaps, generator):\n"
                     "    rows = [augment_tokens(r[r != pad_idx].tolist(), p_delete, n_swaps, "
                     "generator) for r in src]\n"
                     "    return torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows],"
                     " batch_first=True)",
    "baseline_parameters": "def gru_parameters(i, h):\n    return 3 * h * (i + h) + 3 * h",
    "separable_params": "def separable_params(c_in, c_out, k, bias=True):\n"
                        "    return c_in * c_out + (c_out if bias else 0)",
    "causal_separable_conv": "def causal_separable_conv(x, dw, pw, pb):\n"
                             "    k = dw.size(-1)\n"
                             "    x = F.pad(x, ((k - 1) // 2, (k - 1) // 2))\n"
                             "    return F.conv1d(F.conv1d(x, dw, groups=x.size(1)), pw, pb)",
    "lightweight_conv": "def lightweight_conv(x, weight):\n"
                        "    heads, k = weight.shape\n"
                        "    kernel = weight.repeat_interleave(x.size(1) // heads, dim=0)\n"
                        "    x = F.pad(x, (k - 1, 0))\n"
                        "    return F.conv1d(x, kernel.unsqueeze(1), groups=x.size(1))",
}


def _namespace(assignment: coursework.Assignment, upto: coursework.Exercise | None = None,
               ) -> dict:
    """The setup cell plus the fallback solutions of the assignment's exercises."""
    ns: dict = {}
    exec(assignment.setup, ns)
    for ex in assignment.exercises:
        exec(ex.solution, ns)
        if ex is upto:
            break
    return ns


def _call_check(ex: coursework.Exercise, ns: dict) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        checks.EXERCISES[ex.id](*(ns[name] for name in ex.functions))
    return out.getvalue()


# --------------------------------------------------------------------------------------------
# The exercise set and convs2s.checks
# --------------------------------------------------------------------------------------------


def test_every_graded_exercise_has_a_check_and_enough_per_notebook():
    ids = [ex.id for a in coursework.ASSIGNMENTS for ex in a.exercises]
    assert len(ids) == len(set(ids))
    assert set(ids) == set(checks.EXERCISES)
    assert set(WRONG) == set(ids)
    numbers = [a.number for a in coursework.ASSIGNMENTS]
    assert numbers == sorted(coursework.MIN_EXERCISES)
    for a in coursework.ASSIGNMENTS:
        assert len(a.exercises) >= coursework.MIN_EXERCISES[a.number], a.name
        assert all(1 <= ex.points <= 3 for ex in a.exercises)


def test_assignments_are_named_after_the_course_notebooks():
    for a in coursework.ASSIGNMENTS:
        path = coursework.find_notebook(NOTEBOOKS, a.number)
        if path is not None:  # a missing notebook is fine: the assignment is built from here
            assert path.stem == a.name, "renamed notebook: update convs2s.coursework.ASSIGNMENTS"


def test_every_course_notebook_exercise_is_graded():
    """A new exercise in a course notebook needs a check and an entry in ASSIGNMENTS."""
    for a in coursework.ASSIGNMENTS:
        built = coursework.build_assignment(a, NOTEBOOKS)
        assert built.ungraded == [], (a.name, built.ungraded)
        if coursework.find_notebook(NOTEBOOKS, a.number) is not None:
            assert built.from_module == [], (a.name, "exercise missing from the notebook")


def test_readme_table_matches_the_assignments():
    text = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    for a in coursework.ASSIGNMENTS:
        row = next((line for line in text.splitlines() if line.startswith(f"| `{a.name}` |")),
                   None)
        assert row is not None and row.endswith(f"| {a.points} |"), a.name
        for ex in a.exercises:
            assert re.search(rf"`{ex.id}`(?: \([^)]*\))?: {ex.points}\b", row), (a.name, ex.id)


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_check_passes_a_correct_solution(exercise_id):
    assignment, ex = EXERCISES[exercise_id]
    out = _call_check(ex, _namespace(assignment))
    assert re.fullmatch(rf"✓ {exercise_id}: all \d+ checks passed\n", out), out


@pytest.mark.parametrize("exercise_id", sorted(EXERCISES))
def test_check_fails_a_wrong_solution_with_a_hint(exercise_id):
    assignment, ex = EXERCISES[exercise_id]
    ns = _namespace(assignment)
    exec(WRONG[exercise_id], ns)
    with pytest.raises(AssertionError, match="hint: "):
        _call_check(ex, ns)


def test_check_output_says_what_failed(capsys):
    ns = _namespace(ASSIGNMENTS["01_glu_and_padding"])
    exec(WRONG["causal_left_padding"], ns)
    with pytest.raises(AssertionError):
        checks.causal_left_padding(ns["causal_left_padding"])
    out = capsys.readouterr().out
    assert out.startswith("✗ causal_left_padding: causal_left_padding(3): "), out
    assert "the length changes from 10 to 9" in out and " — hint: " in out


def test_a_stub_propagates_not_implemented(capsys):
    def stub(*_args):
        raise NotImplementedError()

    with pytest.raises(NotImplementedError):
        checks.my_glu(stub)
    assert "not implemented yet" in capsys.readouterr().out
    with pytest.raises(NotImplementedError):
        checks.baseline_parameters(stub, stub)


def test_checks_leave_the_global_random_state_alone():
    ns = _namespace(ASSIGNMENTS["03_causal_decoder"])
    state = torch.random.get_rng_state()
    with contextlib.redirect_stdout(io.StringIO()):
        checks.moved_positions(ns["moved_positions"])
    assert torch.equal(torch.random.get_rng_state(), state)


# --------------------------------------------------------------------------------------------
# The converter
# --------------------------------------------------------------------------------------------


def test_solution_cell_keeps_signature_and_docstring_outside_the_markers():
    source = (
        "# Solution\nimport math\n\n\ndef f(a,\n      b: dict[str, int] = {'x': 1}) -> int:\n"
        "    # first, a comment\n    return a + math.floor(b['x'])\n\n\n"
        "def g(x):\n    \"\"\"Already documented.\"\"\"\n    return x\n\n\nprint(f(1))\n"
    )
    cell = coursework.solution_cell_source(source, ("g", "f"), {"f": "Add.", "g": "unused"})
    assert cell == (
        "import math\n\n\n"
        "def f(a,\n      b: dict[str, int] = {'x': 1}) -> int:\n    \"\"\"Add.\"\"\"\n"
        "    ### BEGIN SOLUTION\n    # first, a comment\n    return a + math.floor(b['x'])\n"
        "    ### END SOLUTION\n\n\n"
        "def g(x):\n    \"\"\"Already documented.\"\"\"\n    ### BEGIN SOLUTION\n    return x\n"
        "    ### END SOLUTION"
    )


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _source(cell: dict) -> str:
    return "".join(cell["source"])


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


def _meta(cell: dict) -> dict:
    return cell["metadata"].get("nbgrader", {})


def _nbgrader(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    # nbgrader runs `alembic` (its gradebook migrations) from PATH: the venv's bin must be on it.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """A course directory as `make student` makes it: source/ from the notebooks, release/."""
    root = tmp_path_factory.mktemp("coursework")
    shutil.copy(CONFIG, root / "nbgrader_config.py")
    coursework.write_assignments(root / "source", NOTEBOOKS)
    _nbgrader("generate_assignment", "*", "--force", cwd=root)
    return root


def test_generated_source_notebooks_have_nbgrader_cells(course):
    import nbformat

    for a in coursework.ASSIGNMENTS:
        for folder in ("source", "release"):
            path = course / folder / a.name / f"{a.name}.ipynb"
            nbformat.validate(nbformat.read(path, as_version=4))
        cells = _cells(course / "source" / a.name / f"{a.name}.ipynb")
        graded = [c for c in cells if _meta(c).get("grade")]
        solutions = [c for c in cells if _meta(c).get("solution")]
        assert len(graded) == len(solutions) == len(a.exercises)
        assert sum(_meta(c)["points"] for c in graded) == a.points
        assert all(_meta(c)["locked"] and _meta(c)["schema_version"] == 3 for c in graded)
        assert not any(_meta(c)["locked"] for c in solutions)
        for ex, cell in zip(a.exercises, graded, strict=True):
            src = _source(cell)
            assert ex.check_call() in src
            assert src.index(coursework.BEGIN_HIDDEN) < src.index(coursework.END_HIDDEN)
        for cell in solutions:
            assert coursework.BEGIN_SOLUTION in _source(cell)


def _region_lines(text: str, begin: str, end: str) -> list[str]:
    """The meaningful lines between the markers (not blank, not comments, not `return x`)."""
    out, inside = [], False
    for line in text.splitlines():
        if begin in line:
            inside = True
        elif end in line:
            inside = False
        elif inside and line.strip() and not line.strip().startswith("#"):
            out.append(line.strip())
    return out


def test_student_versions_have_no_solutions_hidden_tests_or_outputs(course):
    released = sorted((course / "release").glob("*/*.ipynb"))
    assert [p.stem for p in released] == sorted(ASSIGNMENTS)
    for path in released:
        text = path.read_text(encoding="utf-8")
        for marker in ("BEGIN SOLUTION", "END SOLUTION", "HIDDEN TESTS"):
            assert marker not in text, (path.name, marker)
        source_cells = _cells(course / "source" / path.parent.name / path.name)
        secret = []
        for cell in source_cells:
            secret += _region_lines(_source(cell), "BEGIN SOLUTION", "END SOLUTION")
            secret += _region_lines(_source(cell), "BEGIN HIDDEN TESTS", "END HIDDEN TESTS")
        trivial = {"return x", "pass", "else:", "try:", "except ValueError:", ")"}
        secret = [s for s in secret if s not in trivial]
        assert secret
        code = "\n".join(_source(c) for c in _cells(path) if c["cell_type"] == "code")
        code_lines = {line.strip() for line in code.splitlines()}
        leaked = [s for s in secret if s in code_lines]
        assert leaked == [], (path.name, leaked)
        for cell in _cells(path):
            if cell["cell_type"] == "code":
                assert cell["outputs"] == [] and cell["execution_count"] is None
            if _meta(cell).get("solution"):
                assert "raise NotImplementedError()" in _source(cell)


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_instructor_version_passes_its_autograded_cells(course, name):
    results = _run_cells(course / "source" / name / f"{name}.ipynb")
    errors = [(_meta(c).get("grade_id"), repr(e)) for c, e in results if e is not None]
    assert errors == []
    assert sum(bool(_meta(c).get("grade")) for c, _ in results) == len(ASSIGNMENTS[name].exercises)


@pytest.mark.parametrize("name", sorted(ASSIGNMENTS))
def test_student_version_fails_only_its_exercise_cells_with_not_implemented(course, name):
    results = _run_cells(course / "release" / name / f"{name}.ipynb")
    for cell, error in results:
        if _meta(cell).get("grade"):
            assert isinstance(error, NotImplementedError), (_meta(cell)["grade_id"], error)
        else:
            assert error is None, (_meta(cell).get("grade_id"), error)


def test_assignments_build_from_this_module_without_the_course_notebooks(tmp_path):
    """07/08 (or any notebook) missing: every assignment still exists and passes."""
    (tmp_path / "notebooks").mkdir()
    built = coursework.write_assignments(tmp_path / "source", tmp_path / "notebooks")
    assert [b.name for b in built] == [a.name for a in coursework.ASSIGNMENTS]
    for b in built:
        assert b.from_notebook == [] and len(b.from_module) == len(ASSIGNMENTS[b.name].exercises)
        results = _run_cells(tmp_path / "source" / b.name / f"{b.name}.ipynb")
        assert [e for _, e in results if e is not None] == [], b.name


def test_cli_writes_the_source_folder(tmp_path, capsys):
    assert coursework.main(["--out", str(tmp_path / "src"), "--notebooks", str(NOTEBOOKS),
                            "--only", "01", "--clean"]) == 0
    assert (tmp_path / "src" / "01_glu_and_padding" / "01_glu_and_padding.ipynb").exists()
    assert len(list((tmp_path / "src").iterdir())) == 1
    assert "01_glu_and_padding: 3 exercises" in capsys.readouterr().out


# --------------------------------------------------------------------------------------------
# nbgrader autograde
# --------------------------------------------------------------------------------------------


@pytest.mark.slow
def test_autograde_full_marks_for_solutions_zero_for_the_student_version(course):
    from nbgrader.api import Gradebook

    names = sorted(ASSIGNMENTS) if os.environ.get("CONVS2S_AUTOGRADE_ALL") else list(
        AUTOGRADE_ASSIGNMENTS)
    for name in names:
        for student, folder in (("solver", "source"), ("blank", "release")):
            dest = course / "submitted" / student / name
            dest.mkdir(parents=True, exist_ok=True)
            shutil.copy(course / folder / name / f"{name}.ipynb", dest)
    # A submission that passes the visible checks of one exercise but not its hidden tests.
    cheat = course / "submitted" / "cheater" / "01_glu_and_padding"
    cheat.mkdir(parents=True, exist_ok=True)
    nb = json.loads((course / "source" / "01_glu_and_padding" /
                     "01_glu_and_padding.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if _meta(cell).get("grade_id") == "causal_left_padding":
            cell["source"] = ["def causal_left_padding(k):\n",
                              "    return k - 1 if k <= 6 else 0  # just the visible cases\n"]
    (cheat / "01_glu_and_padding.ipynb").write_text(json.dumps(nb), encoding="utf-8")

    _nbgrader("autograde", "*", "--force", cwd=course)

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="convs2s") as gb:
        for name in names:
            max_points = ASSIGNMENTS[name].points
            solver = gb.find_submission(name, "solver")
            assert (solver.score, solver.max_score) == (max_points, max_points), name
            blank = gb.find_submission(name, "blank")
            assert blank.code_score == 0 and blank.score == 0, name
        cheater = gb.find_submission("01_glu_and_padding", "cheater")
        lost = coursework.exercise_by_id("causal_left_padding").points
        assert cheater.score == ASSIGNMENTS["01_glu_and_padding"].points - lost
