"""Build the nbgrader course from the exercises written in the course notebooks.

``python -m tools.coursework`` (run from the repository root; ``make student`` does) reads every
course notebook ``notebooks/NN_<name>.ipynb`` that has exercises and writes its assignment in
nbgrader's *source* format (instructor version: solutions in) to
``coursework/source/NN_<name>/NN_<name>.ipynb``, and ``coursework/grading.json``: what
autograde judges each exercise against (this class's values, answer names, points).

Every exercise is written once, in its notebook (the format is in ``tools/README.md``): cells
with ``metadata["convs2s"] = {"exercise": <id>, "role": <role>, ...}``. Nothing here restates
them. Hidden tests live in ``coursework/hidden/NN.py``, one function ``<id>(variant)`` per
autograded exercise returning its cases (:mod:`convs2s.course.checks.testing`); this module
imports the file, checks that each test fits its exercise and runs, and writes nothing of it
into any cell: autograde (``coursework/sandbox_grading.py``) reads it there. A class's own
version of every predict and derive exercise is drawn from the versions its hidden-test file
declares (``VERSIONS``: :mod:`convs2s.course.checks.class_variants`), with a secret
(``variant-secret`` beside ``--out``, made at random the first time) or ``--variant NAME``;
``--public`` keeps the notebooks' numbers. ``--check-hidden`` writes nothing: it holds the hidden
tests against the course's solutions and handed-out cells, then runs the sample answers each
hidden-test file declares (``SAMPLES``: :class:`convs2s.course.checks.testing.Samples`) through
the visible check and sandboxed grading, and stops at the first on which they disagree with the
sample (:func:`run_samples`, which the course's tests run too).

An assignment holds a read-only header and setup cell (the notebook's ``exercise-setup`` cell),
then per exercise:

- the task (read-only markdown, with its points);
- the answer cell (nbgrader "solution" cell). For a function stub, the stub's signature and
  docstring stay visible and the solution's body sits between ``### BEGIN SOLUTION`` /
  ``### END SOLUTION``; for any other stub (``prediction = None``, a planted bug) the stub's
  lines stay visible and the solution follows between the markers. nbgrader's student version
  has ``raise NotImplementedError()`` in place of each region;
- for ``predict``, ``derive``, ``debug`` and ``implement``: a locked test cell,
  ``assert checks.<id>(<answer names>)`` (the notebook's visible check), an autograded grade
  cell unless the exercise is practice (:func:`is_practice`: 0 points unless
  ``--grade-practice``);
- for ``explain``: the answer cell is a markdown cell graded by hand (nbgrader's "manually
  graded answer"), whose instructor version holds the model answer from the notebook's
  ``<details>`` solution;
- for a ``project`` (notebook 09's, :mod:`convs2s.course.project`): the learner's working cell
  as the notebook writes it, the direction this class trains written into it and its
  ``CHANGES = ...`` line the solution region (not graded itself),
  then a locked test cell, ``assert project.check_submission(...)`` (the notebook's visible
  check), whose points grading gives by the test BLEU of the ``final.pt`` handed in beside the
  notebook (``coursework/sandbox_grading.py``). The class's direction is drawn from its secret
  (or ``--variant``) among :data:`convs2s.course.project.DIRECTIONS`, or given with
  ``--project-direction``; ``--public`` keeps the notebook's.

``--clean`` removes what an earlier run wrote, and only that: the tool writes a marker file,
``.convs2s-coursework``, listing its files in every folder it creates, and refuses (exit 2) a
folder without it. It never touches the course notebooks' folder or a folder holding it.

It writes only into a new folder or one it made (the marker), and only files that marker lists:
an existing folder without the marker is refused, as ``--clean`` refuses it, and so is any of
nbgrader's own folders of a course (``release/``, ``submitted/``, ...) or a folder holding a
notebook nbgrader generated, so an instructor version never lands where a student version is.
A symlink is judged by the folder it points to. What is wrong with ``--out`` is said in one line
(exit 2) before a notebook is read, and so is an ``--only`` that names no notebook; Ctrl-C or
SIGTERM stop it with one line (exit 130 / 143), and every file it writes is replaced whole
(``convs2s.system.atomic_files``). A run that fails (a broken notebook, a full disk, Ctrl-C)
removes what it made (the class's secret, folders, marker, ``grading.json``: :class:`MadeHere`),
and only that.
"""

from __future__ import annotations

import ast
import contextlib
import hashlib
import inspect
import io
import json
import os
import re
import secrets
import sys
import textwrap
import tokenize
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path

from convs2s.system import sandbox
from convs2s.system.arguments import OneLineParser, cut, dangling_link_problem
from convs2s.system.atomic_files import cannot_write_in, write_json_atomic, write_text_atomic
from convs2s.system.signals import import_command, run_command
from tools.notebook_format import NotebookFormatError, check_notebook

if __name__ == "__main__":
    # `python -m tools.coursework`: this module, torch and all (the course's checks), is
    # imported again as the command's first step (the import below never runs here), so that
    # Ctrl-C or SIGTERM while torch loads stops it in one line, exit 130 or 143, as later
    sys.exit(import_command("tools.coursework", "cli")())

from convs2s.course.checks import (  # noqa: E402 (torch: see above)
    answer_rules,
    class_variants,
    grader,
    testing,
)

SCHEMA_VERSION = 3
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
DEFAULT_REPOSITORY = "https://github.com/convs2s-course/convs2s"
#: The kinds of exercise (tools/README.md); only ``explain`` is graded by hand.
KINDS = ("predict", "derive", "debug", "implement", "explain", "project")
#: The kind of notebook 09's project: graded on the file it hands in, not on an answer cell.
PROJECT = "project"
ROLES = ("task", "answer", "check", "solution")
#: The role of a cell whose stored output answers a predict or explain-before exercise above it
#: (the measurement): folded on the website and in JupyterLab, never part of an assignment.
REVEAL = "reveal"
#: The file that marks a folder this tool created; it lists the files the tool wrote there.
MARKER = ".convs2s-coursework"
#: nbgrader's folders of a course (its defaults) other than source/: what nbgrader writes
#: (student versions, submissions, grading), never a place for instructor versions.
NBGRADER_FOLDERS = ("release", "submitted", "autograded", "feedback", "downloaded")
#: Files that make a folder an nbgrader course (nbgrader runs there).
NBGRADER_COURSE_FILES = ("nbgrader_config.py", "gradebook.db")

# "### Exercise 2 (predict, then measure): title": the parenthesis starts with the kind.
_HEADING = re.compile(r"^###\s+Exercise\s+(\d+)\s*(?:\(\s*([\w-]+)[^)]*\))?\s*:\s*(.+?)\s*$")
# "### Project: title": a project's task (its kind is the metadata's; no number).
_PROJECT_HEADING = re.compile(r"^###\s+Project\s*:\s*(.+?)\s*$")
_TITLE_LINE = re.compile(r"^\s*#@title\b")
_DETAILS = re.compile(r"<details>\s*<summary>.*?</summary>(.*)</details>", re.DOTALL)


class CourseworkError(ValueError):
    """A notebook or hidden-test file that does not follow the exercise format (one line)."""


class OutRefused(CourseworkError):
    """``--out`` names a place this tool must not write into (one line)."""


class CleanRefused(OutRefused):
    """``--clean`` on a folder this tool did not make."""


# --------------------------------------------------------------------------------------------
# Reading the exercises from a course notebook
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ExerciseCells:
    """One exercise, as its notebook writes it (its cells; what the learner's package declares
    of it is ``convs2s.course.checks.EXERCISES[id]``, a ``convs2s.course.checks.Exercise``).

    Attributes:
        id: the name of its check, ``convs2s.course.checks.<id>``.
        kind: one of :data:`KINDS`.
        points: what the grade cell (or, for ``explain``, the manually graded answer) is worth.
        number, title: from the task's ``### Exercise N (kind): title`` heading.
        task: the task cell's markdown (heading included).
        answer: the answer cell: what the learner starts from.
        check: the check cell's call, ``checks.<id>(<names>)`` ("" for ``explain``).
        solution: the solution cell (its ``#@title`` line and check call removed); for
            ``explain`` the model answer inside ``<details>``.
        answer_names: the names the check is called with.
    """

    id: str
    kind: str
    points: int
    number: int
    title: str
    task: str
    answer: str
    check: str
    solution: str
    answer_names: tuple[str, ...] = ()

    @property
    def manual(self) -> bool:
        return self.kind == "explain"

    @property
    def project(self) -> bool:
        """Graded on the file the learner hands in (notebook 09's project), not on a cell."""
        return self.kind == PROJECT


@dataclass(frozen=True)
class NotebookExercises:
    """The exercise-setup cell and the exercises of one course notebook."""

    path: Path
    title: str
    setup: str
    exercises: tuple[ExerciseCells, ...]

    @property
    def name(self) -> str:
        return self.path.stem

    @property
    def number(self) -> str:
        return self.path.stem[:2]

    @property
    def points(self) -> int:
        return sum(ex.points for ex in self.exercises)


def cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _meta(cell: dict) -> dict:
    meta = cell.get("metadata", {}).get("convs2s")
    return meta if isinstance(meta, dict) else {}


def _where(path: Path, cell: dict, index: int) -> str:
    return f"{path.name}, cell {index} (id {cell.get('id', '?')})"


def _parse(source: str, where: str) -> ast.Module:
    try:
        return ast.parse(source)
    except SyntaxError as e:
        raise CourseworkError(f"{where}: not valid Python (line {e.lineno}: {e.msg})") from None


def _check_call(source: str, exercise_id: str, where: str) -> tuple[str, tuple[str, ...]]:
    """``checks.<id>(a, b)`` -> (that call's text, ("a", "b")); a clear error otherwise."""
    tree = _parse(source, where)
    body = [node for node in tree.body]
    wanted = f"checks.{exercise_id}(<answer names>)"
    if len(body) != 1 or not isinstance(body[0], ast.Expr) or not _is_check_call(
            body[0].value, exercise_id):
        raise CourseworkError(f"{where}: the check cell must hold one call, {wanted}")
    call = body[0].value
    if call.keywords or not all(isinstance(a, ast.Name) for a in call.args) or not call.args:
        raise CourseworkError(f"{where}: call the check with the answer names only: {wanted}")
    names = tuple(a.id for a in call.args)
    return f"checks.{exercise_id}({', '.join(names)})", names


def _is_check_call(node: ast.AST, exercise_id: str) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr == exercise_id and isinstance(node.func.value, ast.Name)
            and node.func.value.id == "checks")


def _strip_solution(source: str, exercise_id: str, where: str) -> str:
    """A solution cell without its ``#@title`` line and its check call(s)."""
    lines = source.splitlines()
    if not lines or not _TITLE_LINE.match(lines[0]):
        raise CourseworkError(f"{where}: a solution cell starts with `#@title Solution`")
    lines = lines[1:]
    tree = _parse("\n".join(lines), where)
    drop = set()
    for node in tree.body:
        value = node.value if isinstance(node, ast.Expr) else (
            node.test if isinstance(node, ast.Assert) else None)
        if value is not None and _is_check_call(value, exercise_id):
            drop.update(range(node.lineno - 1, node.end_lineno))
    kept = [line for i, line in enumerate(lines) if i not in drop]
    return "\n".join(kept).strip("\n")


def _model_answer(source: str, where: str) -> str:
    m = _DETAILS.search(source)
    if not m or not m.group(1).strip():
        raise CourseworkError(f"{where}: an explain solution is a markdown cell "
                              "`<details><summary>Solution</summary> ... </details>`")
    return textwrap.dedent(m.group(1)).strip("\n")


def notebook_title(cells: list[dict]) -> str | None:
    """The course notebook's title: its first heading, without "NN ·"."""
    for cell in cells:
        if cell.get("cell_type") == "markdown":
            m = re.match(r"^#\s+(?:\d+\s*·\s*)?(.+?)\s*$", cell_source(cell), re.MULTILINE)
            return m.group(1) if m else None
    return None


def read_notebook(path: str | Path) -> NotebookExercises:
    """The exercises of a course notebook, read from its cells' ``metadata["convs2s"]``.

    Raises :class:`CourseworkError` (one line naming the notebook and the cell) when the cells
    do not follow the format of ``tools/README.md``.
    """
    path = Path(path)
    try:
        nb = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise CourseworkError(f"{path}: cannot read the notebook ({e})") from None
    try:
        cells = check_notebook(nb, path)["cells"]
    except NotebookFormatError as e:
        raise CourseworkError(str(e)) from None
    setup, setup_index = None, None
    roles: dict[str, dict[str, tuple[int, dict]]] = {}
    order: list[str] = []
    for i, cell in enumerate(cells):
        meta = _meta(cell)
        if not meta:
            continue
        where = _where(path, cell, i)
        if meta.get("role") == "exercise-setup":
            if setup is not None:
                raise CourseworkError(f"{where}: a second exercise-setup cell (one per notebook)")
            if cell.get("cell_type") != "code":
                raise CourseworkError(f"{where}: the exercise-setup cell must be a code cell")
            setup, setup_index = cell_source(cell), i
            continue
        if meta.get("role") == REVEAL:  # evidence for the reader, never in an assignment
            continue
        ex_id, role = meta.get("exercise"), meta.get("role")
        if not isinstance(ex_id, str) or not ex_id.isidentifier():
            raise CourseworkError(f"{where}: metadata convs2s.exercise must be the check's name "
                                  f"(a Python identifier), got {ex_id!r}")
        if role not in ROLES:
            raise CourseworkError(f"{where}: unknown role {role!r} (one of exercise-setup, "
                                  f"{', '.join(ROLES)}, {REVEAL})")
        if ex_id not in roles:
            roles[ex_id] = {}
            order.append(ex_id)
        if role in roles[ex_id]:
            raise CourseworkError(f"{where}: exercise {ex_id} has a second {role} cell")
        roles[ex_id][role] = (i, cell)
    if not order:
        return NotebookExercises(path, notebook_title(cells) or path.stem, setup or "", ())
    if setup is None:
        raise CourseworkError(f"{path.name}: no exercise-setup cell before the exercises "
                              "(a code cell with metadata convs2s.role = \"exercise-setup\")")
    exercises = [_read_exercise(path, ex_id, roles[ex_id]) for ex_id in order]
    first = min(i for parts in roles.values() for i, _ in parts.values())
    if setup_index > first:
        raise CourseworkError(f"{path.name}: the exercise-setup cell must come before the "
                              "first exercise")
    return NotebookExercises(path, notebook_title(cells) or path.stem, setup, tuple(exercises))


def _read_exercise(path: Path, ex_id: str,
                   parts: dict[str, tuple[int, dict]]) -> ExerciseCells:
    if "task" not in parts:
        raise CourseworkError(f"{path.name}: exercise {ex_id} has no task cell")
    task_index, task_cell = parts["task"]
    where = _where(path, task_cell, task_index)
    meta = _meta(task_cell)
    kind, points = meta.get("kind"), meta.get("points")
    if kind not in KINDS:
        raise CourseworkError(f"{where}: exercise {ex_id}: kind must be one of "
                              f"{', '.join(KINDS[:-1])}, got {kind!r} (or {PROJECT}, a "
                              "notebook's project)")
    if isinstance(points, bool) or not isinstance(points, int) or points < 1:
        raise CourseworkError(f"{where}: exercise {ex_id}: points must be a whole number >= 1, "
                              f"got {points!r}")
    if task_cell.get("cell_type") != "markdown":
        raise CourseworkError(f"{where}: the task cell of {ex_id} must be markdown")
    task = cell_source(task_cell).strip("\n")
    if kind == PROJECT:
        return _read_project(path, ex_id, parts, points, task, where)
    m = _HEADING.match(task.splitlines()[0] if task else "")
    if not m:
        raise CourseworkError(f"{where}: a task starts with `### Exercise N ({kind}): title`")
    if m.group(2) and m.group(2) != kind:
        raise CourseworkError(f"{where}: the heading says ({m.group(2)}), the metadata says "
                              f"kind {kind!r}")
    wanted = ("task", "answer", "solution") if kind == "explain" else ROLES
    for role in wanted:
        if role not in parts:
            raise CourseworkError(f"{path.name}: exercise {ex_id} has no {role} cell")
    if kind == "explain" and "check" in parts:
        raise CourseworkError(f"{_where(path, parts['check'][1], parts['check'][0])}: an explain "
                              "exercise is graded by hand and has no check cell")
    indices = [parts[role][0] for role in wanted]
    if indices != sorted(indices):
        raise CourseworkError(f"{path.name}: exercise {ex_id}: cells out of order (want "
                              f"{', '.join(wanted)})")
    want_type = "markdown" if kind == "explain" else "code"
    for role in ("answer", "solution"):
        i, cell = parts[role]
        if cell.get("cell_type") != want_type:
            raise CourseworkError(f"{_where(path, cell, i)}: the {role} cell of a {kind} "
                                  f"exercise must be a {want_type} cell")
    sol_index, sol_cell = parts["solution"]
    sol_where = _where(path, sol_cell, sol_index)
    answer = cell_source(parts["answer"][1]).strip("\n")
    if kind == "explain":
        return ExerciseCells(ex_id, kind, points, int(m.group(1)), m.group(3), task, answer,
                             "", _model_answer(cell_source(sol_cell), sol_where))
    check_index, check_cell = parts["check"]
    check, names = _check_call(cell_source(check_cell), ex_id,
                               _where(path, check_cell, check_index))
    _parse(answer, _where(path, parts["answer"][1], parts["answer"][0]))
    solution = _strip_solution(cell_source(sol_cell), ex_id, sol_where)
    return ExerciseCells(ex_id, kind, points, int(m.group(1)), m.group(3), task, answer, check,
                         solution, names)

def _read_project(path: Path, ex_id: str, parts: dict[str, tuple[int, dict]], points: int,
                  task: str, where: str) -> ExerciseCells:
    """A project: a task (``### Project: title``), the learner's working cell (code) and the
    visible check (one call, ``project.check_submission(...)``); no solution cell (the run is
    the learner's)."""
    m = _PROJECT_HEADING.match(task.splitlines()[0] if task else "")
    if not m:
        raise CourseworkError(f"{where}: a project's task starts with `### Project: title`")
    for role in ("answer", "check"):
        if role not in parts:
            raise CourseworkError(f"{path.name}: project {ex_id} has no {role} cell")
        i, cell = parts[role]
        if cell.get("cell_type") != "code":
            raise CourseworkError(f"{_where(path, cell, i)}: the {role} cell of a project must "
                                  "be a code cell")
    if "solution" in parts:
        i, cell = parts["solution"]
        raise CourseworkError(f"{_where(path, cell, i)}: a project has no solution cell (its "
                              "run is the learner's)")
    indices = [parts[role][0] for role in ("task", "answer", "check")]
    if indices != sorted(indices):
        raise CourseworkError(f"{path.name}: project {ex_id}: cells out of order (want task, "
                              "answer, check)")
    answer = cell_source(parts["answer"][1]).strip("\n")
    _parse(answer, _where(path, parts["answer"][1], parts["answer"][0]))
    check_index, check_cell = parts["check"]
    check_where = _where(path, check_cell, check_index)
    tree = _parse(cell_source(check_cell), check_where)
    call = tree.body[0].value if len(tree.body) == 1 and isinstance(tree.body[0], ast.Expr) \
        else None
    if not (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
            and call.func.attr == "check_submission" and isinstance(call.func.value, ast.Name)
            and call.func.value.id == "project"):
        raise CourseworkError(f"{check_where}: a project's check cell holds one call, "
                              "project.check_submission(...)")
    return ExerciseCells(ex_id, PROJECT, points, 0, m.group(1), task, answer,
                         ast.unparse(call), "")


#: The line of a project's working cell that names its direction (a class's copy rewrites it).
_DIRECTION_LINE = re.compile(r'^(DIRECTION\s*=\s*)"([a-z]{2}-[a-z]{2})"(.*)$', re.MULTILINE)


def project_direction(variant: str | None, chosen: str | None = None) -> str:
    """The direction a class's project trains: ``chosen`` (``--project-direction``), else one
    drawn from the class's secret (or ``--variant`` name) among the project's directions, else
    (the public copy) the notebook's own."""
    from convs2s.course import project

    if chosen is not None:
        try:
            return project.check_direction(chosen)
        except ValueError as e:
            raise CourseworkError(f"--project-direction: {e}") from None
    if variant is None:
        return project.DEFAULT_DIRECTION
    digest = hashlib.sha256(f"convs2s-project-direction:{variant}".encode()).digest()
    return project.DIRECTIONS[int.from_bytes(digest[:8], "big") % len(project.DIRECTIONS)]


#: The line of a project's working cell that holds the learner's own choices: the nbgrader
#: solution region of the graded copy (the student writes it in place of the stub).
_CHOICES_LINE = re.compile(r"^CHANGES\s*=.*$", re.MULTILINE)


def _project_answer(ex: ExerciseCells, direction: str, where: str) -> str:
    """The project's working cell (instructor version) with ``DIRECTION = "<direction>"`` and
    its ``CHANGES = ...`` line as the solution region."""
    if len(_DIRECTION_LINE.findall(ex.answer)) != 1 or len(
            _CHOICES_LINE.findall(ex.answer)) != 1:
        raise CourseworkError(f"{where}: the working cell of project {ex.id} must set "
                              'DIRECTION = "<src>-<trg>" and CHANGES = ... on a line each, once')
    text = _DIRECTION_LINE.sub(lambda m: f'{m.group(1)}"{direction}"{m.group(3)}', ex.answer)
    return _CHOICES_LINE.sub(lambda m: f"{BEGIN_SOLUTION}\n{m.group(0)}\n{END_SOLUTION}", text)


# --------------------------------------------------------------------------------------------
# Hidden tests: coursework/hidden/NN.py, the instructor's code, run outside any sandbox
# --------------------------------------------------------------------------------------------


class HiddenTests(dict):
    """One notebook's hidden tests by exercise id (:func:`read_hidden`); ``versions``: the
    class's own versions its file declares (``VERSIONS``: :class:`class_variants.Versions` by
    exercise id, for its predict and derive exercises; empty when it declares none); and
    ``samples``: its sample answers (``SAMPLES``: :class:`testing.Samples` by exercise id, run
    through the visible check and grading by ``--check-hidden``; empty when it declares none)."""

    def __init__(self, tests: dict[str, Callable] | None = None,
                 versions: dict[str, class_variants.Versions] | None = None,
                 samples: dict[str, testing.Samples] | None = None) -> None:
        super().__init__(tests or {})
        self.versions: dict[str, class_variants.Versions] = dict(versions or {})
        self.samples: dict[str, testing.Samples] = dict(samples or {})


def versions_of(hidden: dict[str, Callable]) -> dict[str, class_variants.Versions]:
    """The versions ``hidden`` (:func:`read_hidden`) declares; none for a plain dict of tests."""
    return hidden.versions if isinstance(hidden, HiddenTests) else {}


def samples_of(hidden: dict[str, Callable]) -> dict[str, testing.Samples]:
    """The sample answers ``hidden`` (:func:`read_hidden`) declares; none for a plain dict."""
    return hidden.samples if isinstance(hidden, HiddenTests) else {}


def read_hidden(path: str | Path) -> HiddenTests:
    """The hidden tests of one notebook's exercises, by exercise id (none when the file is
    absent): each ``f(variant) -> list[Case]`` (:mod:`convs2s.course.checks.testing`), read as
    grading reads them (``grader.load_hidden``); and what the file declares besides: its
    ``VERSIONS`` (``.versions``) and its ``SAMPLES`` (``.samples``), each refused in one line
    when it is not a dict of what it holds."""
    path = Path(path)
    if not path.exists():
        return HiddenTests()
    if path.is_dir():
        raise CourseworkError(f"{path}: a folder, not a hidden-test file")
    try:
        tests = grader.load_hidden(path)
        declared = _hidden_module(path).__dict__
    except SyntaxError as e:
        raise CourseworkError(f"{path}: line {e.lineno}: not valid Python ({e.msg})") from None
    except Exception as e:  # noqa: BLE001 - the instructor's file: say what failed, in one line
        raise CourseworkError(f"{path}: importing it raised {type(e).__name__}: {e}") from None
    versions, samples = (_declared(declared, name, kind, path) for name, kind in (
        ("VERSIONS", class_variants.Versions), ("SAMPLES", testing.Samples)))
    return HiddenTests(tests, versions, samples)


def _declared(declared: dict, name: str, kind: type, path: Path) -> dict:
    """The dict ``name`` of a hidden-test file (empty when it has none): exercise ids to
    ``kind``s, or one line saying it is not."""
    found = declared.get(name, {})
    if not isinstance(found, dict) or not all(
            isinstance(k, str) and isinstance(v, kind) for k, v in found.items()):
        raise CourseworkError(f"{path}: {name} must be a dict from exercise id to "
                              f"{kind.__module__}.{kind.__qualname__}")
    return found


def _hidden_module(path: Path):
    """The hidden-test file ``path``, imported (the instructor's code, trusted), for what it
    declares besides its tests (``VERSIONS``, ``SAMPLES``)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"convs2s_hidden_versions_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def hidden_cases(test: Callable, ex_id: str, variant: dict, hidden_path: Path) -> list:
    """``test(variant)``, checked: a non-empty list of :class:`testing.Case` (or one line)."""
    try:
        cases = test(dict(variant))
    except Exception as e:  # noqa: BLE001
        raise CourseworkError(f"{hidden_path}: {ex_id}(variant) raised {type(e).__name__}: "
                              f"{e}") from None
    if not isinstance(cases, list) or not cases or \
            not all(isinstance(c, testing.Case) for c in cases):
        raise CourseworkError(f"{hidden_path}: {ex_id}(variant) must return a non-empty list of "
                              "convs2s.course.checks.testing.Case")
    return cases


def project_test(test: Callable, ex_id: str, variant: dict, hidden_path: Path):
    """A project's hidden test ``test(variant)``, checked: a
    :class:`convs2s.course.project.ProjectTest` for the variant's direction (or one line)."""
    from convs2s.course import project

    try:
        found = test(dict(variant))
    except Exception as e:  # noqa: BLE001
        raise CourseworkError(f"{hidden_path}: {ex_id}(variant) raised {type(e).__name__}: "
                              f"{e}") from None
    if not isinstance(found, project.ProjectTest) or \
            found.direction != variant.get("direction", found.direction):
        raise CourseworkError(f"{hidden_path}: {ex_id}(variant) must return a "
                              "convs2s.course.project.ProjectTest for the variant's direction")
    return found


def _check_hidden(nb: NotebookExercises, hidden: dict[str, Callable], hidden_path: Path) -> None:
    """Every autograded exercise has its hidden test, taking one argument (the variant), no
    hidden test names something that is not an autograded exercise, the file's ``VERSIONS``
    name only its predict and derive exercises, and its ``SAMPLES`` only its autograded ones."""
    ids = {ex.id for ex in nb.exercises}
    kinds = {ex.id: ex.kind for ex in nb.exercises}
    for name in versions_of(hidden):
        if kinds.get(name) not in ("predict", "derive"):
            what = f"of kind {kinds[name]}" if name in kinds else \
                f"not an exercise of {nb.path.name}"
            raise CourseworkError(f"{hidden_path}: VERSIONS names {name}, {what}: a class's own "
                                  "version is for a predict or derive exercise")
    for name in samples_of(hidden):
        if kinds.get(name) == PROJECT:
            raise CourseworkError(f"{hidden_path}: SAMPLES names {name}, a project: it is "
                                  "graded on the file handed in, not on answer cells")
        if name not in kinds or kinds[name] == "explain":
            what = "an explain exercise (graded by hand)" if name in kinds else \
                f"not an exercise of {nb.path.name} (its exercises: {', '.join(sorted(ids))})"
            raise CourseworkError(f"{hidden_path}: SAMPLES names {name}, {what}: samples are "
                                  "answers to an autograded exercise")
    for name in hidden:
        if name not in ids:
            raise CourseworkError(f"{hidden_path}: {name} is not an exercise of {nb.path.name} "
                                  f"(its exercises: {', '.join(sorted(ids))})")
    for ex in nb.exercises:
        if ex.manual:
            if ex.id in hidden:
                raise CourseworkError(f"{hidden_path}: {ex.id} is an explain exercise (graded "
                                      "by hand): it has no hidden test")
            continue
        test = hidden.get(ex.id)
        if test is None:
            raise CourseworkError(f"{hidden_path}: no hidden test for {ex.id} (write `def "
                                  f"{ex.id}(variant):` returning its cases)")
        try:
            params = list(inspect.signature(test).parameters)
        except (TypeError, ValueError):
            params = []
        if len(params) != 1:
            raise CourseworkError(f"{hidden_path}: {ex.id} takes ({', '.join(params)}); a hidden "
                                  "test takes one argument, the variant (a dict)")


def _bound_names(statements: list[ast.stmt], *, imports: bool) -> set[str]:
    """Names a block binds at its own level (not inside functions or classes it defines)."""
    names: set[str] = set()

    def targets(node: ast.AST) -> None:
        for sub in ast.walk(node):
            if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Store):
                names.add(sub.id)

    for node in statements:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            if imports:
                names.update((a.asname or a.name).split(".")[0] for a in node.names)
        elif isinstance(node, ast.Assign):
            for t in node.targets:
                targets(t)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets(node.target)
        elif isinstance(node, ast.For | ast.AsyncFor):
            targets(node.target)
            names |= _bound_names(node.body + node.orelse, imports=imports)
        elif isinstance(node, ast.With | ast.AsyncWith):
            for item in node.items:
                if item.optional_vars is not None:
                    targets(item.optional_vars)
            names |= _bound_names(node.body, imports=imports)
        elif isinstance(node, ast.If | ast.While):
            names |= _bound_names(node.body + node.orelse, imports=imports)
        elif isinstance(node, ast.Try):
            for handler in node.handlers:
                if handler.name:
                    names.add(handler.name)
                names |= _bound_names(handler.body, imports=imports)
            names |= _bound_names(node.body + node.orelse + node.finalbody, imports=imports)
        for sub in ast.walk(node) if not isinstance(
                node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) else ():
            if isinstance(sub, ast.NamedExpr):
                names.add(sub.target.id)
    return names


def _function_body(lines: list[str], node: ast.FunctionDef | ast.AsyncFunctionDef) -> str:
    """The lines of ``node``'s body after its signature (and docstring), dedented."""
    body = node.body
    first = body[0]
    if (isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant)
            and isinstance(first.value.value, str)):
        start = first.end_lineno  # the line after the docstring (0-based index)
        if len(body) == 1:
            return ""
    else:
        start = _signature_end(lines, node.lineno - 1) + 1
        if first.lineno - 1 < start:
            raise CourseworkError(f"line {node.lineno}: write the body of {node.name} on its "
                                  "own lines, under the `def` line")
    text = "\n".join(lines[start:node.end_lineno])
    return textwrap.dedent(text).strip("\n")

# --------------------------------------------------------------------------------------------
# Rendering the nbgrader cells
# --------------------------------------------------------------------------------------------


def _signature_end(lines: list[str], def_line: int) -> int:
    """Index of the line holding the ':' that ends the ``def`` starting at ``lines[def_line]``."""
    text = "\n".join(lines[def_line:]) + "\n"
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.OP:
            if tok.string in "([{":
                depth += 1
            elif tok.string in ")]}":
                depth -= 1
            elif tok.string == ":" and depth == 0:
                return def_line + tok.start[0] - 1
    raise ValueError("could not find the end of the function signature")


def _is_function_stub(node: ast.stmt) -> bool:
    """``def f(...): ["docstring"] raise NotImplementedError(...)``."""
    if not isinstance(node, ast.FunctionDef):
        return False
    body = node.body
    if (len(body) > 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise) or body[0].exc is None:
        return False
    exc = body[0].exc
    exc = exc.func if isinstance(exc, ast.Call) else exc
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def _reindent(text: str, indent: str) -> list[str]:
    return [indent + line if line.strip() else "" for line in
            textwrap.dedent(text).splitlines()]


def solution_cell_source(ex: ExerciseCells) -> str:
    """The nbgrader answer cell of a code exercise (instructor version).

    A stub made only of function stubs (and imports) keeps each function's signature and
    docstring, with the solution's body between the markers. The solution's support code
    (imports, helper functions and classes, assignments that do not use the answer) goes into
    the (single) function's region, or, with several functions, into a region of its own at the
    end; what only demonstrates the answer (a print, a loop, a call of it) is left out. Any
    other stub (``prediction = None``, the planted bug of a ``debug`` exercise) stays as it is,
    and the solution follows between the markers.
    """
    stub_lines = ex.answer.splitlines()
    stub = ast.parse(ex.answer)
    stubs = [n for n in stub.body if _is_function_stub(n)]
    function_mode = stubs and all(
        _is_function_stub(n) or isinstance(n, ast.Import | ast.ImportFrom) for n in stub.body)
    if not function_mode:
        return "\n".join([ex.answer.rstrip(), BEGIN_SOLUTION, ex.solution, END_SOLUTION])
    sol_lines = ex.solution.splitlines()
    sol = _parse(ex.solution, f"the solution of {ex.id}")
    sol_defs = {n.name: n for n in sol.body if isinstance(n, ast.FunctionDef)}
    missing = [n.name for n in stubs if n.name not in sol_defs]
    if missing:
        raise CourseworkError(f"exercise {ex.id}: the solution cell does not define "
                              f"{', '.join(missing)}")
    stub_names = {n.name for n in stubs}
    stub_imports = {ast.dump(n) for n in stub.body if isinstance(n, ast.Import | ast.ImportFrom)}
    extras = []
    for node in sol.body:
        if isinstance(node, ast.FunctionDef) and node.name in stub_names:
            continue
        if ast.dump(node) in stub_imports:
            continue
        uses = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
        support = isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef
                             | ast.AsyncFunctionDef | ast.ClassDef) or (
            isinstance(node, ast.Assign | ast.AnnAssign) and not uses & stub_names)
        if not support:
            continue  # a demonstration (a print, a loop, a use of the answer): not the answer
        start = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        extras.append("\n".join(sol_lines[start - 1:node.end_lineno]))
    out: list[str] = []
    cursor = 0
    for n, node in enumerate(stubs):
        body = node.body
        has_doc = len(body) > 1
        head_end = body[0].end_lineno - 1 if has_doc else _signature_end(stub_lines,
                                                                         node.lineno - 1)
        indent = _indent_of(stub_lines[body[-1].lineno - 1])
        out += stub_lines[cursor:head_end + 1]
        region = []
        if extras and len(stubs) == 1:
            for extra in extras:
                region += _reindent(extra, indent)
        try:
            body_text = _function_body(sol_lines, sol_defs[node.name])
        except CourseworkError as e:
            raise CourseworkError(f"the solution of {ex.id}: {e}") from None
        region += _reindent(body_text, indent)
        out += [indent + BEGIN_SOLUTION, *region, indent + END_SOLUTION]
        cursor = node.end_lineno
        if n == len(stubs) - 1:
            out += stub_lines[cursor:]
    if extras and len(stubs) > 1:
        out += ["", BEGIN_SOLUTION, *("\n\n".join(extras).splitlines()), END_SOLUTION]
    return "\n".join(out).rstrip()


def is_practice(ex: ExerciseCells) -> bool:
    """Whether ``ex`` is practice in a class copy (0 points unless the instructor grades it):
    an implement or debug exercise, whose solution the public course notebook shows, or a
    predict exercise graded on its form only (its declaration names no ``accept``: its answer
    depends on the machine)."""
    from convs2s.course.checks import EXERCISES

    if ex.project:
        return False
    declared = EXERCISES.get(ex.id)
    return ex.kind in ("implement", "debug") or (
        ex.kind == "predict" and declared is not None and declared.accept is None)


def grade_cell_source(ex: ExerciseCells, graded: bool = True) -> str:
    """The exercise's test cell: the notebook's visible check, asserted. Nothing hidden is in
    it: grading takes the hidden test from the instructor's folder (``hidden/NN.py``) and this
    class's values from ``grading.json``."""
    if ex.project:
        from convs2s.course import project

        return (f"# Autograded ({ex.points} points, by test BLEU): grading translates test "
                "sentences you never see\n# with the "
                f"{project.SUBMISSION} you hand in beside this notebook, in a sandbox. Do not "
                f"edit this cell.\nassert {ex.check}")
    points = f"{ex.points} point{'s' if ex.points != 1 else ''}"
    what = (f"# Autograded ({points}): the visible check convs2s.course.checks.{ex.id} runs "
            "here; grading runs\n# your answer cell alone, with hidden tests, in a sandbox. "
            if graded else
            f"# Practice (0 points): the visible check convs2s.course.checks.{ex.id} runs here. ")
    return f"{what}Do not edit this cell.\nassert {ex.check}"


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False,
              locked: bool = False, points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked,
            "schema_version": SCHEMA_VERSION, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def _cell(cell_type: str, source: str, cell_id: str, nbgrader: dict) -> dict:
    cell = {"cell_type": cell_type, "id": cell_id, "metadata": {"nbgrader": nbgrader},
            "source": source.splitlines(keepends=True)}
    if cell_type == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def _with_checks_import(setup: str) -> str:
    """The setup cell, with ``from convs2s.course import checks`` added if it does not bind
    checks."""
    if "checks" in _bound_names(_parse(setup, "the exercise-setup cell").body, imports=True):
        return setup.strip("\n")
    return setup.strip("\n") + "\n\nfrom convs2s.course import checks"


def _graded_setup(nb: NotebookExercises, class_version: bool) -> str:
    """The assignment's setup cell: the notebook's, with ``checks`` imported, then
    ``checks.graded_copy(...)`` naming the exercises whose check only records the answer (the
    predict ones, and in a class's version the derive ones too: their kinds are the notebook's);
    no check shows the value it grades, and ``checks.hint`` and ``checks.show_me`` are off
    (:mod:`convs2s.course.checks`). The copy never names the class's variant."""
    recorded = [ex.id for ex in nb.exercises
                if ex.kind == "predict" or (ex.kind == "derive" and class_version)]
    args = ", ".join([*(["class_version=True"] if class_version else []),
                      *([f"records={recorded!r}"] if recorded else [])])
    return (_with_checks_import(nb.setup) + "\n\n# a graded copy: checks record or say held / "
            f"did not hold, one hint per wrong try\nchecks.graded_copy({args})")


def _task_markdown(ex: ExerciseCells, class_version: bool, practice: bool) -> str:
    lines = ex.task.splitlines()
    if practice:
        how = "practice, 0 points: the course notebook shows its solution"
    else:
        points = f"{ex.points} point{'s' if ex.points != 1 else ''}"
        how = f"{points}, {'graded by hand' if ex.manual else 'autograded'}"
    text = "\n".join([f"{lines[0].rstrip()} ({how})", *lines[1:]])
    if ex.kind == "predict" or (ex.kind == "derive" and class_version):
        text += ("\n\n*In this graded copy the check only records your answer and says "
                 "nothing of its value: grading decides.*")
    return text


def repository_url(root: str | Path | None = None) -> str:
    """The course's GitHub URL from ``[project.urls] Repository`` (as ``make badges`` uses)."""
    if root is not None:
        try:
            from tools.badges import read_repository_url

            return read_repository_url(Path(root) / "pyproject.toml").rstrip("/")
        except (OSError, ValueError):
            pass
    return DEFAULT_REPOSITORY


def _project_header(nb: NotebookExercises, link: str, direction: str) -> str:
    """The header of a project's assignment (notebook 09)."""
    from convs2s.course import project

    auto = [ex for ex in nb.exercises if ex.project]
    manual = [ex for ex in nb.exercises if ex.manual]
    total = sum(ex.points for ex in auto + manual)
    return "\n".join([
        f"# Coursework {nb.number} · {nb.title}",
        "",
        f"The project of the course notebook [`{nb.name}.ipynb`]({link}) (Convolutional "
        "Sequence to Sequence Learning, Gehring et al., 2017): train a translator for "
        f"**{project.arrow(direction)}** within the budget, hand in its `{project.SUBMISSION}` "
        "and a short report. Read the course notebook first: it explains the budget, the rules "
        "and the evidence your report should cite.",
        "",
        "How to work:",
        "",
        "1. Run the setup cell below once.",
        f"2. The working cell trains `{project.PRESET}` for {project.BUDGET_EPOCHS} epochs (the "
        "budget: about an hour on a 2-core CPU) with the changes you chose, and saves "
        f"`{project.SUBMISSION}` (float16 weights, at most "
        f"{project.MAX_SUBMISSION_BYTES / 1e6:.0f} MB) beside this notebook. Make every choice "
        "on the validation split: the test sentences grading uses are not in Multi30k's public "
        "splits you have, and you never see them.",
        "3. The test cell under it checks the file (it loads, its size, its direction). Do not "
        "edit it.",
        "4. Write the report in the cells marked \"YOUR ANSWER HERE\" (graded by hand).",
        f"5. Hand in this notebook **and** `{project.SUBMISSION}`, in the same folder.",
        "",
        f"Grading: the test cell's {sum(ex.points for ex in auto)} points come from the BLEU "
        f"score of your `{project.SUBMISSION}` on the instructor's test sentences (beam "
        f"{project.GRADING_BEAM}, in a sandbox), by bands the instructor sets; a missing file, "
        "one that is not a checkpoint, the wrong direction, a file over the limit or a decoder "
        "that does not stop scores 0. "
        f"This assignment is worth {total} points ({sum(ex.points for ex in auto)} autograded, "
        f"{sum(ex.points for ex in manual)} graded by hand).",
    ])


def _header(nb: NotebookExercises, repo_url: str, class_version: bool,
            graded: dict[str, bool], direction: str | None = None) -> str:
    link = f"{repo_url}/blob/main/notebooks/{nb.name}.ipynb"
    if any(ex.project for ex in nb.exercises):
        return _project_header(nb, link, direction or "")
    auto = [ex for ex in nb.exercises if not ex.manual and graded[ex.id]]
    manual = [ex for ex in nb.exercises if ex.manual]
    practice = [ex for ex in nb.exercises if not ex.manual and not graded[ex.id]]
    kinds = ", ".join(sorted({ex.kind for ex in nb.exercises}, key=KINDS.index))
    split = f"{sum(ex.points for ex in auto)} autograded"
    if manual:
        split += f", {sum(ex.points for ex in manual)} graded by hand"
    total = sum(ex.points for ex in auto + manual)
    version = (" This is your class's own version: its numbers differ from the course "
               "notebook's, so work them out here." if class_version else "")
    practice_line = (
        [f"Practice, 0 points: {', '.join(f'`{ex.id}`' for ex in practice)} (the public course "
         "notebook shows its solution, or its answer depends on the machine); its check still "
         "tells you whether your answer holds.", ""] if practice else [])
    return "\n".join([
        f"# Coursework {nb.number} · {nb.title}",
        "",
        f"Graded exercises of the course notebook [`{nb.name}.ipynb`]({link}) (Convolutional "
        "Sequence to Sequence Learning, Gehring et al., 2017). Work through the notebook first; "
        "the exercises here run on their own, on a CPU, in seconds." + version,
        "",
        "How to work:",
        "",
        "1. Run the setup cell below once.",
        "2. Answer each exercise in the cell under its task, in place of "
        "`raise NotImplementedError()` (keep the names, signatures and docstrings you are "
        "given): write a function's body (*implement*, *derive*), set the value asked for "
        "(*predict*), or fix the code shown (*debug*). An *explain* exercise asks for one or "
        "two sentences in place of \"YOUR ANSWER HERE\"; it is graded by hand.",
        "3. Run the test cell under your answer: it runs `convs2s.course.checks.<exercise>`, the "
        "same check as in the course notebook, and prints ✓, or what is wrong with one hint. "
        "In this graded copy a check never shows the value it grades: a *predict* check"
        + (" and a *derive* check only record your answer (this class's version has numbers "
           "of its own; grading decides)" if class_version else
           " only records your prediction (grading decides whether it holds)")
        + "; `checks.hint` and `checks.show_me` are off.",
        "4. Grading runs each answer again, with hidden tests, so make each answer right in "
        "general, not only for the visible cases. Do not edit the test cells.",
        "5. " + answer_rules.RULES,
        "6. Before you submit: restart the kernel and run all cells.",
        "",
        *practice_line,
        f"This assignment has {len(nb.exercises)} exercises ({kinds}) worth {total} points "
        f"({split}).",
    ])


def _versioned(ex: ExerciseCells, version: class_variants.Variant | None,
               where: str) -> ExerciseCells:
    """``ex`` as this copy asks it: a class's variant changes its task, answer and solution."""
    if version is None or version.public:
        return ex
    task = class_variants.apply_text(ex.task, version.replace, f"{where}: the task of {ex.id}")
    if version.note:
        task = f"{task}\n\n{version.note}"
    answer = class_variants.apply_text(ex.answer, version.answer_replace,
                                       f"{where}: the answer cell of {ex.id}")
    return replace(ex, task=task, answer=answer, solution=version.solution or ex.solution)


def build_assignment(nb: NotebookExercises, hidden: dict[str, Callable],
                     repo_url: str = DEFAULT_REPOSITORY, variant: str | None = None, *,
                     grade_practice: bool = False,
                     hidden_path: Path = Path("hidden"),
                     direction: str | None = None) -> tuple[dict, dict]:
    """The nbgrader source notebook (instructor version, a notebook JSON dict) of ``nb``, in the
    class's version drawn from ``variant`` (a secret or a name) or the public one (None), and
    its entry of ``grading.json``: per autograded exercise, this class's values, its answer
    names and its points. ``hidden`` is the notebook's hidden tests as :func:`read_hidden` reads
    them, with the versions its file declares (``VERSIONS``; a plain dict of tests declares
    none). Practice exercises (:func:`is_practice`) have a test cell worth nothing unless
    ``grade_practice``. A project trains ``direction`` (default: :func:`project_direction`
    of ``variant``)."""
    prefix = f"cw{nb.number}"
    class_version = variant is not None
    direction = project_direction(variant, direction)
    graded = {ex.id: not ex.manual and (grade_practice or not is_practice(ex))
              for ex in nb.exercises}
    cells = [
        _cell("markdown", _header(nb, repo_url, class_version, graded, direction),
              f"{prefix}-header",
              _nbgrader("header", locked=True)),
        _cell("code", _graded_setup(nb, class_version), f"{prefix}-setup",
              _nbgrader("setup", locked=True)),
    ]
    exercises = {}
    for n, ex in enumerate(nb.exercises, start=1):
        version = class_variants.variant(ex.id, variant, versions_of(hidden))
        ex = _versioned(ex, version, nb.path.name)
        cid = f"{prefix}-{n}"
        practice = not ex.manual and not graded[ex.id]
        cells.append(_cell("markdown", _task_markdown(ex, class_version, practice),
                           f"{cid}-task", _nbgrader(f"{ex.id}_task", locked=True)))
        if ex.manual:
            cells.append(_cell("markdown", ex.solution, f"{cid}-answer",
                               _nbgrader(ex.id, solution=True, grade=True, points=ex.points)))
            continue
        if ex.project:
            from convs2s.course import project

            params = {"direction": direction}
            project_test(hidden[ex.id], ex.id, params, hidden_path)  # it runs, before a release
            cells[-1]["source"] = (cells[-1]["source"] + ["\n", "\n", "**Your class's "
                                   f"direction: {project.arrow(direction)}.**"])
            cells.append(_cell("code", _project_answer(ex, direction, nb.path.name),
                               f"{cid}-answer", _nbgrader(ex.id, solution=True)))
            cells.append(_cell("code", grade_cell_source(ex), f"{cid}-tests",
                               _nbgrader(f"{ex.id}_tests", grade=True, locked=True,
                                         points=ex.points)))
            exercises[ex.id] = {"variant": params, "answer_names": [], "points": ex.points,
                                "kind": ex.kind, "file": project.SUBMISSION}
            continue
        cells.append(_cell("code", solution_cell_source(ex), f"{cid}-answer",
                           _nbgrader(ex.id, solution=True)))
        params = version.params if version is not None else {}
        hidden_cases(hidden[ex.id], ex.id, params, hidden_path)  # it runs, before any release
        if graded[ex.id]:
            cells.append(_cell("code", grade_cell_source(ex), f"{cid}-tests",
                               _nbgrader(f"{ex.id}_tests", grade=True, locked=True,
                                         points=ex.points)))
            exercises[ex.id] = {"variant": params, "answer_names": list(ex.answer_names),
                                "points": ex.points, "kind": ex.kind}
        else:
            cells.append(_cell("code", grade_cell_source(ex, graded=False), f"{cid}-tests",
                               _nbgrader(f"{ex.id}_tests", locked=True)))
    notebook = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                           "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return notebook, {"notebook": nb.number, "exercises": exercises}

# --------------------------------------------------------------------------------------------
# Writing the course, and --clean
# --------------------------------------------------------------------------------------------


@dataclass
class BuiltAssignment:
    """One written assignment."""

    name: str
    path: Path
    exercises: tuple[ExerciseCells, ...]
    notebook: dict = field(repr=False)
    grading: dict = field(repr=False, default_factory=dict)  # its entry of grading.json

    @property
    def points(self) -> int:
        """What the assignment is worth: its autograded and hand-graded exercises (practice
        exercises are worth nothing)."""
        autograded = self.grading.get("exercises", {})
        return sum(ex.points for ex in self.exercises if ex.manual or ex.id in autograded)


def course_notebooks(notebooks_dir: str | Path) -> list[Path]:
    """The course notebooks ``NN_<name>.ipynb``, in order."""
    return sorted(p for p in Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb") if p.is_file())


def _is_within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


def _read_marker(folder: Path) -> list[str] | None:
    """The files listed in ``folder``'s marker, or None when it has no (readable) marker."""
    marker = folder / MARKER
    if not marker.is_file() or marker.is_symlink():
        return None
    try:
        data = json.loads(marker.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    files = data.get("files") if isinstance(data, dict) else None
    if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
        return None
    return files


def _write_marker(folder: Path, files: list[str] | set[str]) -> None:
    write_json_atomic(folder / MARKER, {
        "tool": "tools/coursework.py",
        "note": "this folder was made by `python -m tools.coursework`; --clean removes the "
                "files listed here, and nothing else",
        "files": sorted(files),
    })


def is_nbgrader_output(path: Path) -> bool:
    """Whether the notebook ``path`` was generated by nbgrader (a student version, a
    submission): nbgrader stores a checksum in its graded and locked cells, which an instructor
    version (this tool's output) never has."""
    if not path.is_file():  # a folder, a pipe: not a notebook
        return False
    try:
        cells = json.loads(path.read_text(encoding="utf-8")).get("cells", [])
    except (OSError, ValueError, AttributeError):
        return False
    return isinstance(cells, list) and any(
        isinstance(c, dict) and isinstance(c.get("metadata"), dict)
        and isinstance(c["metadata"].get("nbgrader"), dict)
        and "checksum" in c["metadata"]["nbgrader"] for c in cells)


def _nbgrader_folder(folder: Path) -> Path | None:
    """The nbgrader folder (``<course>/release``, ``<course>/submitted``, ...) that ``folder``
    (resolved) is or lies in, or None."""
    for candidate in (folder, *folder.parents):
        if candidate.name in NBGRADER_FOLDERS and any(
                (candidate.parent / f).is_file() for f in NBGRADER_COURSE_FILES):
            return candidate
    return None


def check_out(out_dir: str | Path, notebooks_dir: str | Path, *, clean: bool = False) -> Path:
    """Refuse (:class:`OutRefused`, one line) an ``--out`` this tool must not write into;
    return it resolved. Leaves nothing behind (whether files can be made there is found by
    making one, removed at once).

    Refused: a file, or a path under one; a folder that cannot be written; the course notebooks'
    folder, anything inside it or holding it; one of nbgrader's folders of a course (its
    student versions, submissions) or anything inside one; an existing folder without this
    tool's marker; a folder of this tool's holding a notebook nbgrader generated (a release
    copied there). A symlink is judged by the folder it points to. With ``clean``, also the
    current folder and anything holding it.
    """
    out = Path(out_dir)
    dangling = dangling_link_problem(out, "--out")
    if dangling is not None:  # resolving it would make the folder at the link's target
        raise OutRefused(dangling)
    try:
        resolved = out.resolve()
    except (OSError, RuntimeError, ValueError) as e:  # a symlink loop, a NUL byte
        raise OutRefused(f"--out {out}: not a usable path ({e}); choose another --out") from None
    if resolved.exists() and not resolved.is_dir():
        raise OutRefused(f"--out {out} is a file, not a folder: give a folder for the "
                         "assignments (default coursework/source)")
    existing = resolved
    while not existing.exists():  # the folder will be made inside the nearest existing one
        existing = existing.parent
    if not existing.is_dir():
        raise OutRefused(f"--out {out} is inside {existing}, which is a file, not a folder: "
                         "give a folder for the assignments")
    why = cannot_write_in(existing)
    if why:
        raise OutRefused(f"cannot write into {existing} (for --out {out}: {why}); choose "
                         "another --out")
    verb = "--clean" if clean else "write into"
    notebooks = Path(notebooks_dir).resolve()
    if _is_within(notebooks, resolved) or _is_within(resolved, notebooks):
        raise OutRefused(f"refusing to {verb} {out}: it is, holds or lies in the course "
                         f"notebooks ({notebooks_dir}); choose another --out")
    if clean and _is_within(Path.cwd().resolve(), resolved):
        raise OutRefused(f"refusing to --clean {out}: it is or holds the current folder; "
                         "choose another --out")
    nbgrader = _nbgrader_folder(resolved)
    if nbgrader is not None:
        raise OutRefused(f"refusing to {verb} {out}: it is or lies in nbgrader's "
                         f"{nbgrader.name}/ folder of the course in {nbgrader.parent}, where "
                         "nbgrader keeps what it generates; the instructor versions go to "
                         "its source/ folder (default --out coursework/source)")
    if not resolved.exists():
        return resolved
    if _read_marker(resolved) is None:
        raise OutRefused(f"refusing to {verb} {out}: it has no {MARKER} marker, so this tool "
                         "did not make it (its files would mix with what is there); choose a "
                         "new --out, or delete that folder yourself")
    for notebook in sorted(resolved.glob("*/*.ipynb")):
        if is_nbgrader_output(notebook):
            raise OutRefused(f"refusing to {verb} {out}: it holds "
                             f"{notebook.relative_to(resolved)}, a notebook nbgrader generated "
                             "(a student version), so it is a release; the instructor "
                             "versions go to nbgrader's source/ folder (default --out "
                             "coursework/source)")
    return resolved


def _check_targets(out: Path, resolved: Path, targets: list[str], listed: list[str] | None):
    """Refuse to write a target through a symlinked folder, or over a file the marker does not
    list (this tool did not write it)."""
    for rel in targets:
        target = resolved / rel
        folder = target.parent
        if folder.is_symlink() or (os.path.lexists(folder) and not folder.is_dir()):
            raise OutRefused(f"refusing to write {out / rel}: {out / folder.name} is not a "
                             "folder this tool made (a symlink or a file); remove it or choose "
                             "another --out")
        if os.path.lexists(target) and (target.is_symlink() or not target.is_file()
                                        or rel not in (listed or [])):
            raise OutRefused(f"refusing to overwrite {out / rel}: this tool did not write it "
                             f"(its {MARKER} does not list it); move it away or choose another "
                             "--out")


def clean(out_dir: str | Path, notebooks_dir: str | Path) -> list[Path]:
    """Remove what this tool wrote to ``out_dir`` (the files its marker lists, then the folders
    left empty); return what was removed. Refuses (:class:`CleanRefused`) a folder without the
    marker, the notebooks' folder, anything holding it, and the current folder. A folder that a
    user's file keeps alive keeps its marker (listing nothing): it is still this tool's."""
    out = Path(out_dir)
    resolved, notebooks = out.resolve(), Path(notebooks_dir).resolve()
    if not out.exists():
        return []
    if _is_within(notebooks, resolved) or _is_within(resolved, notebooks):
        raise CleanRefused(f"refusing to --clean {out}: it is or holds the course notebooks "
                           f"({notebooks_dir}); choose another --out")
    if _is_within(Path.cwd().resolve(), resolved):
        raise CleanRefused(f"refusing to --clean {out}: it is or holds the current folder; "
                           "choose another --out")
    if not out.is_dir() or out.is_symlink():
        raise CleanRefused(f"refusing to --clean {out}: not a folder this tool made")
    files = _read_marker(out)
    if files is None:
        raise CleanRefused(f"refusing to --clean {out}: it has no {MARKER} marker, so this tool "
                           "did not make it; delete it yourself or choose another --out")
    removed, folders = [], set()
    for rel in files:
        target = Path(os.path.normpath(out / rel))
        if Path(rel).is_absolute() or not _is_within(target.resolve().parent, resolved):
            continue  # a marker that names something outside the folder: not ours
        if target.is_file() or target.is_symlink():
            target.unlink()
            removed.append(target)
        parent = target.parent
        while parent != out and _is_within(parent, out):
            folders.add(parent)
            parent = parent.parent
    for folder in sorted(folders, key=lambda p: len(p.parts), reverse=True):
        try:
            folder.rmdir()  # only when empty: a user's file keeps its folder
            removed.append(folder)
        except OSError:
            pass
    if any(entry.name != MARKER for entry in out.iterdir()):
        _write_marker(out, [])  # a user's file is still here: the folder stays ours, empty
        return removed
    (out / MARKER).unlink()
    try:
        out.rmdir()
        removed.append(out)
    except OSError:
        pass
    return removed


def _with_hidden_tests(notebooks_dir: str | Path, hidden_dir: str | Path,
                       only: set[str] | None):
    """(notebook, its hidden tests, their file) for every course notebook with exercises (those
    numbered or named in ``only``), each hidden-test file checked against its notebook."""
    for path in course_notebooks(notebooks_dir):
        if only and path.stem[:2] not in only and path.stem not in only:
            continue
        nb = read_notebook(path)
        if not nb.exercises:
            continue
        hidden_path = Path(hidden_dir) / f"{nb.number}.py"
        hidden = read_hidden(hidden_path)
        _check_hidden(nb, hidden, hidden_path)
        yield nb, hidden, hidden_path


#: What autograding grades against, beside the source folder (never released).
GRADING_FILE = "grading.json"
#: The class's secret the variants are drawn from, beside the source folder (never released).
SECRET_FILE = "variant-secret"


def _write_grading(path: Path, assignments: dict, *, replace_all: bool) -> None:
    """Write ``grading.json`` (readable by its owner only): this build's assignments, and those
    of an earlier build that this one did not rebuild (``--only``)."""
    old = {}
    if not replace_all and path.is_file():
        try:
            old = json.loads(path.read_text(encoding="utf-8")).get("assignments", {})
        except (OSError, ValueError, AttributeError):
            old = {}
    write_json_atomic(path, {"assignments": {**old, **assignments}})
    os.chmod(path, 0o600)


class MadeHere:
    """The files and folders one run creates (none of them there before it), so that a run that
    fails removes them again (:meth:`remove`): only those, and a folder only while it is empty,
    so that nothing that was there before, and nothing anyone else put there meanwhile, goes."""

    def __init__(self) -> None:
        self.paths: list[Path] = []

    def about_to_make(self, path: str | Path) -> None:
        """Note ``path`` (a file or folder about to be made) and the folders above it that do
        not exist yet; what exists now is never noted."""
        missing, p = [], Path(path)
        while not os.path.lexists(p) and p != p.parent:
            missing.append(p)
            p = p.parent
        self.paths += [m for m in reversed(missing) if m not in self.paths]

    def remove(self) -> None:
        """Remove what was noted, the last made first (a folder only once empty)."""
        for p in reversed(self.paths):
            try:
                if p.is_dir() and not p.is_symlink():
                    p.rmdir()  # only when empty
                elif os.path.lexists(p):
                    p.unlink()
            except OSError:  # not empty, or gone: leave it
                pass
        self.paths = []


def class_secret(course: Path, out: Path | str = "--out", made: MadeHere | None = None) -> str:
    """The class's secret (``course/variant-secret``), made at random the first time: every
    later build of the course draws the same numbers from it (what it makes is noted in
    ``made``). One line (CourseworkError) when it cannot be read or written there."""
    path = course / SECRET_FILE
    try:
        if path.is_file():
            secret = path.read_text(encoding="utf-8").strip()
            if secret:
                return secret
        if made is not None:
            made.about_to_make(path)
        course.mkdir(parents=True, exist_ok=True)
        secret = secrets.token_hex(16)
        write_text_atomic(path, secret + "\n")
        os.chmod(path, 0o600)
    except (OSError, UnicodeDecodeError) as e:
        why = getattr(e, "strerror", None) or type(e).__name__
        raise CourseworkError(f"cannot keep the class's secret beside --out {out} ({path}: "
                              f"{why}); choose another --out, or give --variant NAME") from None
    return secret


def write_assignments(out_dir: str | Path, notebooks_dir: str | Path = "notebooks",
                      hidden_dir: str | Path = "coursework/hidden", *,
                      repo_url: str | None = None, clean_first: bool = False,
                      only: set[str] | None = None,
                      variant: str | None = None, grade_practice: bool = False,
                      grading_file: str | Path | None = None,
                      direction: str | None = None,
                      made: MadeHere | None = None) -> list[BuiltAssignment]:
    """Write ``out_dir/<name>/<name>.ipynb`` for every course notebook with exercises (or those
    numbered or named in ``only``), and ``grading_file`` (default: ``grading.json`` beside
    ``out_dir``, the instructor's course folder): what autograding grades each exercise against.
    ``out_dir`` is checked first (:func:`check_out`), then everything is read and checked before
    anything is written; with no exercise to build, nothing is written at all.

    ``clean_first`` first removes what an earlier run wrote (see :func:`clean`). What it makes
    is noted in ``made`` (:class:`MadeHere`), and removed again if writing fails.
    """
    made = MadeHere() if made is None else made
    out = Path(out_dir)
    resolved = check_out(out, notebooks_dir, clean=clean_first)
    if repo_url is None:
        repo_url = repository_url(Path(notebooks_dir).resolve().parent)
    planned = []
    for nb, hidden, hidden_path in _with_hidden_tests(notebooks_dir, hidden_dir, only):
        planned.append((nb, build_assignment(nb, hidden, repo_url, variant,
                                             grade_practice=grade_practice,
                                             hidden_path=hidden_path, direction=direction)))
    if not planned:  # nothing to build: nothing written (no empty folder, no grading.json)
        return []
    targets = [f"{nb.name}/{nb.name}.ipynb" for nb, _ in planned]
    listed = _read_marker(resolved) if resolved.is_dir() else None
    _check_targets(out, resolved, targets, listed)
    built = []
    grading_path = Path(grading_file) if grading_file else resolved.parent / GRADING_FILE
    try:
        if clean_first:
            clean(out, notebooks_dir)
            listed = None
        made.about_to_make(resolved / MARKER)
        try:
            resolved.mkdir(parents=True, exist_ok=True)
        except OSError as e:  # e.g. under /proc, where stat says yes and mkdir says no
            raise CourseworkError(f"cannot create the folder --out {out} ({e.strerror or e}); "
                                  "choose another --out") from None
        # the marker first: a run killed halfway still leaves a folder --clean can empty
        _write_marker(resolved, set(listed or []) | set(targets))
        for (nb, (notebook, grading)), rel in zip(planned, targets, strict=True):
            made.about_to_make(resolved / rel)
            (resolved / nb.name).mkdir(exist_ok=True)
            write_text_atomic(resolved / rel,
                              json.dumps(notebook, indent=1, ensure_ascii=False) + "\n")
            built.append(BuiltAssignment(nb.name, out / rel, nb.exercises, notebook, grading))
        made.about_to_make(grading_path)
        _write_grading(grading_path, {b.name: b.grading for b in built}, replace_all=not only)
    except BaseException as e:  # a full disk, Ctrl-C: what this run made goes again
        made.remove()
        if isinstance(e, OSError):
            raise CourseworkError(f"cannot write into --out {out} ({e.strerror or e}); choose "
                                  "another --out") from None
        raise
    return built


def check_hidden(notebooks_dir: str | Path, hidden_dir: str | Path,
                 variant: str | None = None,
                 only: set[str] | None = None) -> list[tuple[str, str, bool]]:
    """Hold a folder of hidden tests against the course: every autograded exercise has one, it
    runs for this version's values, the course's own solution (this version's) passes it and
    the answer cell as handed out fails it. (exercise, one line, ok) per exercise.

    The solutions are the course's, trusted: they run in this process
    (:func:`grader.in_this_process`), never a student's code."""
    out = []
    for nb, hidden, hidden_path in _with_hidden_tests(notebooks_dir, hidden_dir, only):
        for ex in nb.exercises:
            if ex.manual:
                continue
            if ex.project:  # graded on a file: its hidden test gives bands, not cases
                direction = project_direction(variant)
                found = project_test(hidden[ex.id], ex.id, {"direction": direction},
                                     hidden_path)
                out.append((ex.id, f"{nb.number} {ex.id}: a project; its hidden test grades "
                                   f"{found.direction} by {len(found.bands)} bands", True))
                continue
            version = class_variants.variant(ex.id, variant, versions_of(hidden))
            ex = _versioned(ex, version, nb.path.name)
            cases = hidden_cases(hidden[ex.id], ex.id, version.params if version else {},
                                 hidden_path)
            verdicts = []
            for code in (ex.solution, ex.answer):
                namespace: dict = {"__name__": "__main__"}
                with contextlib.redirect_stdout(io.StringIO()):
                    try:
                        exec(compile(_with_checks_import(nb.setup) + "\n" + code,  # noqa: S102
                                     f"<{ex.id}>", "exec"), namespace)
                    except Exception:  # noqa: BLE001, S110 - the stub raises NotImplementedError
                        pass
                    answers = {n: namespace.get(n) for n in ex.answer_names}
                    verdicts.append(grader.in_this_process(ex.id, cases, answers))
            solution, stub = verdicts
            ok = solution.passed and not stub.passed
            line = (f"{nb.number} {ex.id}: {len(cases)} cases; the solution passes, the answer "
                    "cell as handed out fails" if ok else
                    f"{nb.number} {ex.id}: " + (f"the solution fails: {solution.line}"
                                                if not solution.passed else
                                                "the answer cell as handed out passes"))
            out.append((ex.id, line, ok))
    return out


# --------------------------------------------------------------------------------------------
# Sample answers (a hidden-test file's SAMPLES): the visible check and grading agree on each
# --------------------------------------------------------------------------------------------

#: The groups of :class:`testing.Samples`: ``right`` ones both verdicts accept, ``wrong`` and
#: ``shortcut`` ones both refuse (a shortcut one for calling what its exercise declares).
SAMPLE_GROUPS = ("right", "wrong", "shortcut")
#: Sandboxes graded at a time (each is a process of its own; one per core, at most 4).
SAMPLE_WORKERS = max(1, min(4, len(os.sched_getaffinity(0))))
#: What a refusal for calling a declared shortcut says (the check's and the sandbox's alike).
SHORTCUT_SAID = "it called "


@dataclass(frozen=True)
class SampleSetup:
    """One autograded exercise's samples (None where its file declares none) and what both
    verdicts need: the check runs as in the course notebook, grading as in the public graded
    copy, on the hidden test's cases for the public version (a sample answers the notebook's own
    numbers, whatever a class's version asks)."""

    exercise: str
    samples: testing.Samples | None
    hidden_path: Path
    answer_names: tuple[str, ...]
    check_setup: str  # the notebook's exercise-setup cell, with ``checks`` imported
    grading_setup: str  # the public graded copy's setup cell (:func:`_graded_setup`)
    cases: list = field(repr=False)  # the hidden test's, public version

    def answers(self) -> list[tuple[str, int, str]]:
        """(group, index in it, the answer cell's text) of every sample, group by group."""
        if self.samples is None:
            return []
        return [(group, i, answer) for group in SAMPLE_GROUPS
                for i, answer in enumerate(getattr(self.samples, group))]


@dataclass(frozen=True)
class SampleVerdicts:
    """What the visible check and grading said of one sample (``grading`` None: not run)."""

    setup: SampleSetup = field(repr=False)
    group: str
    index: int
    answer: str
    check: bool  # the check said ✓
    check_said: str  # its refusal, or its last line (one line)
    grading: grader.Verdict | None

    @property
    def where(self) -> str:
        return f"SAMPLES[{self.setup.exercise!r}].{self.group}[{self.index}]"

    @property
    def problem(self) -> str | None:
        """One line when a verdict disagrees with the sample's group (None when both agree):
        a right sample refused by either, or breaking a static rule of ``answer_rules`` that
        grading does not flag for the instructor; a wrong or shortcut one accepted by either;
        a shortcut one refused for something else than calling a declared shortcut."""
        graded = self.grading
        if self.group == "right":
            if not self.check or (graded is not None and not graded.passed):
                what = "is refused"
            elif graded is not None and not graded.flagged and self._breaks_a_rule():
                what = "breaks a static rule of answer_rules, and grading does not flag it"
            else:
                return None
        elif self.check or (graded is not None and graded.passed):
            what = "is accepted"
        elif self.group == "shortcut" and (SHORTCUT_SAID not in self.check_said or (
                graded is not None and SHORTCUT_SAID not in graded.line)):
            what = "is refused, but not for calling a shortcut its exercise declares"
        else:
            return None
        said = (f"the check said {'✓' if self.check else '✗'} ({self.check_said}), grading "
                f"said {graded.line if graded is not None else 'nothing (not run)'}")
        return (f"{self.setup.exercise}: {self.where} in {self.setup.hidden_path} {what}: "
                f"{said}; the sample: {_one_line(self.answer)}")

    def _breaks_a_rule(self) -> bool:
        from convs2s.course.checks import EXERCISES

        declared = EXERCISES.get(self.setup.exercise)
        return bool(answer_rules.problems(self.answer, declared.forbidden_names if declared
                                          else frozenset()))


def _one_line(text: str, width: int = 120) -> str:
    line = " ⏎ ".join(part.strip() for part in text.strip().splitlines() if part.strip())
    return line if len(line) <= width else line[:width - 1] + "…"


def sample_setups(notebooks_dir: str | Path, hidden_dir: str | Path,
                  only: set[str] | None = None) -> Iterator[SampleSetup]:
    """A :class:`SampleSetup` for every autograded exercise of the course notebooks (those
    numbered or named in ``only``) in notebook order, its samples read from its hidden-test
    file (checked against its notebook, as a build checks it)."""
    for nb, hidden, hidden_path in _with_hidden_tests(notebooks_dir, hidden_dir, only):
        check_setup = _with_checks_import(nb.setup)
        grading_setup = _graded_setup(nb, class_version=False)
        for ex in nb.exercises:
            if ex.manual or ex.project:  # a project has no answer cell to sample
                continue
            version = class_variants.variant(ex.id, None, versions_of(hidden))
            cases = hidden_cases(hidden[ex.id], ex.id, version.params if version else {},
                                 hidden_path)
            yield SampleSetup(ex.id, samples_of(hidden).get(ex.id), hidden_path,
                              ex.answer_names, check_setup, grading_setup, cases)


@contextlib.contextmanager
def fresh_checks_session() -> Iterator[None]:
    """The checks' session state as a new notebook kernel has it (not a graded copy, no wrong
    tries yet), restored afterwards."""
    from convs2s.course.checks import _core

    saved = (_core._graded, _core._class_version, _core._recorded, dict(_core._wrong_tries))
    _core._graded, _core._class_version, _core._recorded = False, False, frozenset()
    _core._wrong_tries.clear()
    try:
        yield
    finally:
        _core._graded, _core._class_version, _core._recorded = saved[:3]
        _core._wrong_tries.clear()
        _core._wrong_tries.update(saved[3])


def define_answer(setup: SampleSetup, answer: str) -> tuple:
    """The values of ``answer``'s answer names, its cell run in this process as the course
    notebook runs it (the instructor's samples, trusted): the exercise-setup cell, then the
    answer cell (``answer_rules.define``, which keeps its text as IPython does, for the check's
    static read)."""
    namespace: dict = {"__name__": "__main__"}
    exec(compile(setup.check_setup, "<setup cell>", "exec"), namespace)  # noqa: S102
    answer_rules.define(answer, namespace, f" {setup.exercise}")
    return tuple(namespace.get(n) for n in setup.answer_names)


def sample_check(setup: SampleSetup, answer: str) -> tuple[bool, str]:
    """The visible check on ``answer`` as the course notebook runs it (:func:`define_answer`,
    then ``checks.<exercise>(<answer names>)``) in a fresh session: (whether it said ✓, what it
    said: its refusal, or its last line)."""
    from convs2s.course import checks

    printed = io.StringIO()
    with fresh_checks_session(), contextlib.redirect_stdout(printed):
        try:
            passed = getattr(checks, setup.exercise)(*define_answer(setup, answer)) is True
        except Exception as e:  # noqa: BLE001 - a wrong answer raises: that is its verdict
            return False, " ".join(str(e).split())[:300] or type(e).__name__
    lines = [line for line in printed.getvalue().splitlines() if line.strip()]
    return passed, (lines[-1].strip()[:300] if lines else "nothing")


def run_samples(setup: SampleSetup, *, grade: bool = True,
                workers: int = SAMPLE_WORKERS) -> list[SampleVerdicts]:
    """Every sample of ``setup`` through the visible check (:func:`sample_check`, here, one by
    one) and, with ``grade``, through grading as ``nbgrader autograde`` does it
    (``grader.grade``: the graded copy's setup cell and the answer cell in the sandbox, on the
    hidden test's calls, judged here), ``workers`` sandboxes at a time while the checks run.
    Raises ``sandbox.SandboxUnavailable`` where ``grade`` and no sandbox starts."""
    answers = setup.answers()
    pool = ThreadPoolExecutor(max_workers=workers)
    try:
        graded = [pool.submit(grader.grade, setup.exercise, setup=setup.grading_setup,
                              answer=answer, answer_names=setup.answer_names, cases=setup.cases)
                  if grade else None for _, _, answer in answers]
        checked = [sample_check(setup, answer) for _, _, answer in answers]
        verdicts = [future.result() if future is not None else None for future in graded]
    finally:  # interrupted: no sandbox starts after this (those running end within their limit)
        pool.shutdown(wait=True, cancel_futures=True)
    return [SampleVerdicts(setup, group, index, answer, check, said, verdict)
            for (group, index, answer), (check, said), verdict
            in zip(answers, checked, verdicts, strict=True)]


def _check_samples(notebooks_dir: str | Path, hidden_dir: str | Path,
                   only: set[str] | None) -> int:
    """``--check-hidden``'s second half: every sample through the visible check and sandboxed
    grading (the check only, said in one line, where no sandbox starts), one line per exercise;
    stops at the first disagreement with one line (2)."""
    why = sandbox.unavailable()
    if why is not None:
        print(f"… no sandbox starts here, so the samples run through the visible checks only, "
              f"not through grading: {why}", flush=True)
    for setup in sample_setups(notebooks_dir, hidden_dir, only):
        if setup.samples is None:
            print(f"… {setup.exercise}: no samples (SAMPLES[{setup.exercise!r}] = Samples(...) "
                  f"in {setup.hidden_path})", flush=True)
            continue
        problem = next((v.problem for v in run_samples(setup, grade=why is None)
                        if v.problem is not None), None)
        if problem is not None:
            print(f"✗ {problem}", flush=True)
            return 2
        counts = ", ".join(f"{len(getattr(setup.samples, g))} {g}" for g in SAMPLE_GROUPS)
        print(f"✓ {setup.exercise}: {counts} samples agree"
              f"{'' if why is None else ' (the visible check only)'}", flush=True)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m tools.coursework",
        description="Write the nbgrader source notebooks (instructor versions) from the course "
                    "notebooks' exercises and coursework/hidden/.")
    parser.add_argument("--out", default="coursework/source",
                        help="nbgrader's source folder (default: coursework/source): a new "
                             f"folder or one this tool made (it holds {MARKER})")
    parser.add_argument("--notebooks", default="notebooks",
                        help="the course notebooks (default: notebooks)")
    parser.add_argument("--hidden", default="coursework/hidden",
                        help="the hidden tests, NN.py per notebook (default: coursework/hidden)")
    parser.add_argument("--clean", action="store_true",
                        help="first remove what an earlier run wrote to --out (only a folder "
                             f"this tool made: it holds {MARKER})")
    parser.add_argument("--only", nargs="*", default=None,
                        help="notebook numbers or names to build (default: all)")
    version = parser.add_mutually_exclusive_group()
    version.add_argument("--variant", default=None, metavar="NAME",
                         help="the class's own numbers for every predict and derive exercise, "
                              "drawn from NAME (keep it secret: the same name gives the same "
                              "copy); default: from a random secret kept in variant-secret "
                              "beside --out, made the first time")
    version.add_argument("--public", action="store_true",
                         help="the course notebooks' own numbers (practice and tests only: the "
                              "public notebooks answer them)")
    parser.add_argument("--grade-practice", action="store_true",
                        help="give the implement and debug exercises (whose solutions the "
                             "public notebooks show) and the predict exercises graded on their "
                             "form only their points; default: practice, 0 points")
    parser.add_argument("--check-hidden", action="store_true",
                        help="write nothing: hold --hidden against the course (each autograded "
                             "exercise has a test; the course's solution passes it, the handed-"
                             "out cell fails it), for this version's numbers; then run every "
                             "sample answer of its SAMPLES through the visible check and "
                             "sandboxed grading (the public version) and stop at the first "
                             "that disagrees")
    parser.add_argument("--project-direction", default=None, metavar="SRC-TRG",
                        help="the direction notebook 09's project trains in this class's copy "
                             "(fr-en, en-fr, cs-en or en-cs); default: drawn from the class's "
                             "secret or --variant (--public: the notebook's, fr-en)")
    parser.add_argument("--grading", default=None, metavar="FILE",
                        help="where to write what autograding grades against (default: "
                             "grading.json beside --out)")
    args = parser.parse_args(argv)
    if not Path(args.notebooks).is_dir():
        print(cut(f"error: no notebooks folder {args.notebooks} (run from the repository root "
                  "or pass --notebooks)"), file=sys.stderr)
        return 2
    unknown = _unknown_only(args.notebooks, args.only or [])
    if unknown is not None:
        print(cut(f"error: {unknown}"), file=sys.stderr)
        return 2
    made = MadeHere()  # what this run creates: removed again if it fails
    try:
        if args.check_hidden:
            variant = (class_variants.check_name(args.variant) if args.variant is not None
                       else None)
            results = check_hidden(args.notebooks, args.hidden, variant,
                                   set(args.only) if args.only else None)
            for _ex, line, ok in results:
                print(f"{'✓' if ok else '✗'} {line}", flush=True)
            if not results or not all(ok for *_, ok in results):
                return 2
            return _check_samples(args.notebooks, args.hidden,
                                  set(args.only) if args.only else None)
        if args.public:
            variant = None
        elif args.variant is not None:
            variant = class_variants.check_name(args.variant)
        else:
            check_out(Path(args.out), args.notebooks, clean=args.clean)  # before any secret
            variant = class_secret(Path(args.out).resolve().parent, args.out, made)
        built = write_assignments(args.out, args.notebooks, args.hidden,
                                  clean_first=args.clean,
                                  only=set(args.only) if args.only else None, variant=variant,
                                  grade_practice=args.grade_practice, grading_file=args.grading,
                                  direction=args.project_direction, made=made)
    except (CourseworkError, class_variants.VariantError, sandbox.SandboxUnavailable,
            OSError) as e:  # OSError: e.g. a hidden-test path that is a folder
        made.remove()  # e.g. the secret made for a build that then found a broken notebook
        print(f"error: {cut(str(e))}", file=sys.stderr)  # a huge --out is not echoed whole
        return 2
    except BaseException:  # Ctrl-C, SIGTERM, a bug: nothing of this run stays either
        made.remove()
        raise
    for b in built:
        kinds = ", ".join(f"{ex.kind} {ex.id}" for ex in b.exercises)
        print(f"{b.name}: {len(b.exercises)} exercises, {b.points} points ({kinds}) -> "
              f"{b.path.parent}")
    if not built:
        made.remove()
        where = (f"notebook{'s' if len(args.only) > 1 else ''} {', '.join(args.only)} "
                 f"(--only) in {args.notebooks}" if args.only else
                 f"{args.notebooks}/NN_*.ipynb")
        print(cut(f"error: no exercises found in {where}: exercises are cells whose metadata "
                  "names one (see tools/README.md)"), file=sys.stderr)
        return 2
    return 0


def _unknown_only(notebooks_dir: str | Path, only: list[str]) -> str | None:
    """One line naming the first of ``--only``'s numbers or names that is no course notebook,
    and the numbers there are; None when all are."""
    notebooks = course_notebooks(notebooks_dir)
    numbers = sorted({p.stem[:2] for p in notebooks})
    for wanted in only:
        if not any(wanted in (p.stem[:2], p.stem) for p in notebooks):
            there = (f"its notebooks are numbered {', '.join(numbers)}" if numbers else
                     "it holds no NN_<name>.ipynb notebook")
            return (f"--only {wanted}: there is no notebook {wanted} in {notebooks_dir} "
                    f"({there}); give one of those numbers, or a notebook's name without "
                    ".ipynb")
    return None


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback. What the run made is removed again (:class:`MadeHere`), and each file it
    replaced is whole, the old one or the new, so nothing is left half-written."""
    return run_command(lambda: main(argv), ": what this run made is removed, and each file it "
                       "replaced is whole (an earlier build that --clean removed stays "
                       "removed); run it again")

