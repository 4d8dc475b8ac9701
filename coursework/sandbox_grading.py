"""nbgrader preprocessor: every autograded cell graded in a sandbox, the verdict decided outside.

``nbgrader_config.py`` (beside this file) puts this step in ``nbgrader autograde`` *instead of*
nbgrader's ``Execute``: a submitted notebook is never run in a kernel on the grading machine.
For each autograded test cell (``<exercise>_tests``) this step takes the assignment's setup cell
and the test cell as nbgrader restored them from the gradebook, the student's answer cell
(``<exercise>``), and this class's values for the exercise from ``grading.json`` (written by
``make student`` into this folder, never released). The hidden test (``hidden/NN.py``, run here
as the instructor's own code) gives the cases; :func:`convs2s.course.checks.grader.grade` runs
the answer on their calls in a bubblewrap sandbox that cannot see this folder, and judges the
data that comes back here. The cell's output becomes the verdict line (an error output when it
failed, so that nbgrader scores it 0); the student sees that line in the feedback, never a
hidden value. What the advisory static read flagged is logged for the instructor.

The project (notebook 09's, an exercise of kind ``project`` in ``grading.json``) is graded on
the file the student hands in beside the notebook, ``final.pt``, read from the submission
folder (``submitted/<student>/<assignment>/``; ``nbgrader_config.py`` makes autograde copy no
file of a submission but its notebooks, so a huge file is never copied):
:func:`convs2s.course.project.grade` puts its bytes and the source side of the instructor's
test files (``project_test_files``) into a sandbox that loads it through the checkpoint guard
and translates; the BLEU score and the points (the hidden test's bands, or ``project_bands``)
are decided here. The cell's output is the verdict line and, when it scored, the points
(nbgrader's partial credit); a bad submission's is an error line, 0 points.

Where no sandbox can start, autograde stops with one line saying what to install: grading for
credit never runs student code without one.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from traitlets import Bool, Dict, Float, Integer, Unicode

from convs2s.course import project
from convs2s.course.checks import grader
from convs2s.system import sandbox

#: The grade_id of an assignment's setup cell (tools/coursework.py writes it).
SETUP_ID = "setup"
TESTS_SUFFIX = "_tests"
#: What the advisory static read flagged, a JSON line per flag (assignment, student, exercise).
FLAGS_FILE = "grading-flags.jsonl"


class SandboxUnavailableError(RuntimeError):
    """Autograde cannot grade for credit here (one line: why, and what to install)."""


def refuse_without_sandbox() -> None:
    """Exit (status 2) with one line when no sandbox can start here: `nbgrader autograde` then
    grades nothing rather than run student code without one."""
    import sys

    why = sandbox.unavailable()
    if why is not None:
        print(f"error: nbgrader autograde needs a sandbox to run student code: {why}",
              file=sys.stderr)
        raise SystemExit(2)


class GradeInSandbox(Preprocessor):
    """Give each autograded test cell the verdict of its exercise's sandboxed grading."""

    enabled = Bool(True, help="grade in a sandbox (nbconvert's preprocessors start switched "
                   "off: without this, no cell would be graded and every one would pass)"
                   ).tag(config=True)
    timeout = Integer(120, help="seconds one exercise's sandbox may run").tag(config=True)
    grading_file = Unicode("grading.json", help="this class's grading values (make student)"
                           ).tag(config=True)
    hidden_dir = Unicode("hidden", help="the hidden tests, NN.py per notebook").tag(config=True)
    workers = Integer(0, help="sandboxes at a time (0: one per core)").tag(config=True)
    submitted_dir = Unicode("submitted", help="nbgrader's folder of submissions, where the "
                            "project's final.pt is read").tag(config=True)
    project_test_files = Dict({}, help="the project's test files by direction: "
                              '{"fr-en": ["test.fr", "test.en"]}, source then reference, one '
                              "sentence a line (plain or .gz); never released").tag(config=True)
    project_bands = Dict({}, help="bands of your own by direction, replacing the hidden test's: "
                         '{"fr-en": [[35.0, 1.0], [30.0, 0.5]]}, [lowest test BLEU, share of '
                         "the points]").tag(config=True)
    project_seconds = Float(project.DEFAULT_SECONDS, help="seconds one submission's sandbox "
                            "may take to load final.pt and translate the test sentences"
                            ).tag(config=True)

    def _project_pairs(self, root: Path, direction: str) -> list[tuple[str, str]]:
        """The instructor's test pairs of ``direction`` (ProjectConfigError, one line)."""
        files = self.project_test_files.get(direction)
        if not (isinstance(files, list | tuple) and len(files) == 2):
            raise project.ProjectConfigError(
                f"no test files for the project's direction {direction}: set "
                f'c.GradeInSandbox.project_test_files = {{"{direction}": [SOURCE, REFERENCE]}} '
                "in nbgrader_config.py (coursework/README.md, \"The project\")")
        return project.read_test_files(*(root / Path(f).expanduser() for f in files))

    def _project_test(self, test, direction: str, points: float):
        """The hidden test's ProjectTest with this class's points, the time limit and the
        configuration's bands, if it gives some for ``direction``."""
        import dataclasses

        bands = self.project_bands.get(direction)
        changes = {"points": float(points), "seconds": float(self.project_seconds)}
        if bands is not None:
            try:
                changes["bands"] = tuple(project.Band(float(f), float(s)) for f, s in bands)
            except (TypeError, ValueError):
                raise project.ProjectConfigError(
                    f"c.GradeInSandbox.project_bands[{direction!r}] must be a list of [lowest "
                    "test BLEU, share of the points] pairs") from None
        return dataclasses.replace(test, **changes)

    def _course(self, resources) -> tuple[Path, dict]:
        root = Path(resources.get("nbgrader", {}).get("course_root") or os.getcwd())
        if not (root / self.grading_file).is_file():
            root = Path(os.getcwd())
        with open(root / self.grading_file, encoding="utf-8") as f:
            return root, json.load(f)

    def preprocess(self, nb, resources):
        why = sandbox.unavailable()
        if why is not None:
            raise SandboxUnavailableError(f"autograde needs a sandbox to run student code: {why}")
        root, course = self._course(resources)
        assignment = resources.get("nbgrader", {}).get("assignment")
        spec = course["assignments"].get(assignment)
        if spec is None:
            raise ValueError(f"{self.grading_file} has no assignment {assignment!r}: run make "
                             "student again")
        hidden = grader.load_hidden(root / self.hidden_dir / f"{spec['notebook']}.py")
        meta = [c.metadata.get("nbgrader", {}) for c in nb.cells]
        setup = next((c.source for c, m in zip(nb.cells, meta, strict=True)
                      if m.get("grade_id") == SETUP_ID), "")
        answers = {m.get("grade_id"): c.source for c, m in zip(nb.cells, meta, strict=True)
                   if m.get("solution") and c.cell_type == "code"}
        todo = []
        for cell, m in zip(nb.cells, meta, strict=True):
            grade_id = str(m.get("grade_id", ""))
            if not (m.get("grade") and not m.get("solution") and cell.cell_type == "code"
                    and grade_id.endswith(TESTS_SUFFIX)):
                continue
            exercise = grade_id[:-len(TESTS_SUFFIX)]
            todo.append((cell, exercise, spec["exercises"].get(exercise)))
        limits = sandbox.Limits(wall_seconds=self.timeout, cpu_seconds=self.timeout)
        hidden_folders = [root.resolve(), Path(os.getcwd()).resolve()]
        python = Path(sys.prefix).resolve()
        if any(python == h or h in python.parents for h in hidden_folders):
            raise SandboxUnavailableError(
                f"the Python environment ({python}) lies inside the grading folder, which the "
                "sandbox hides: install it elsewhere (e.g. the course's .venv) and grade again")

        projects = {exercise: (ex, self._project_test(hidden[exercise](dict(ex["variant"])),
                                                      ex["variant"]["direction"], ex["points"]))
                    for _, exercise, ex in todo
                    if ex is not None and ex.get("kind") == "project" and exercise in hidden}
        pairs = {exercise: self._project_pairs(root, test.direction)
                 for exercise, (_, test) in projects.items()}
        student = resources.get("nbgrader", {}).get("student")
        folder = root / self.submitted_dir / str(student) / str(assignment)

        def verdict(item) -> grader.Verdict | project.ProjectVerdict:
            _cell, exercise, ex = item
            if exercise in projects:
                return project.grade(folder, projects[exercise][1], pairs[exercise],
                                     hidden_folders=hidden_folders)
            if ex is None or exercise not in hidden:
                return grader.Verdict(False, f"✗ {exercise}: not an exercise of this class's "
                                      "grading (grading.json)")
            if exercise not in answers:
                return grader.Verdict(False, f"✗ {exercise}: the submission has no answer cell "
                                      "for it")
            cases = hidden[exercise](dict(ex["variant"]))
            return grader.grade(exercise, setup=setup, answer=answers[exercise],
                                answer_names=ex["answer_names"], cases=cases, limits=limits,
                                hidden_folders=hidden_folders)

        workers = self.workers or max(1, min(len(todo), os.cpu_count() or 1))
        with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
            verdicts = list(pool.map(verdict, todo))
        flags = []
        for (cell, exercise, _), v in zip(todo, verdicts, strict=True):
            self.log.info("%s: %s", exercise, v.line)
            cell.execution_count = None
            if isinstance(v, project.ProjectVerdict):
                cell.outputs = [new_output("error", ename="NotGraded", evalue=v.line,
                                           traceback=[f"graded in a sandbox: {v.line}"])
                                ] if v.refused else [
                    new_output("stream", name="stdout", text=f"graded in a sandbox: {v.line}\n"),
                    new_output("execute_result", data={"text/plain": f"{v.points:g}"},
                               execution_count=None)]
                continue
            for flag in v.flagged:
                self.log.warning("%s: for the instructor: the static read flags: %s",
                                 exercise, flag)
                flags.append({"assignment": assignment, "student": student,
                              "exercise": exercise, "passed": v.passed, "flag": flag})
            if v.passed:
                cell.outputs = [new_output("stream", name="stdout",
                                           text=f"graded in a sandbox: {v.line}\n")]
            else:
                cell.outputs = [new_output("error", ename="NotGraded", evalue=v.line,
                                           traceback=[f"graded in a sandbox: {v.line}"])]
            cell.execution_count = None
        if flags:  # beside the scores, for the instructor to read (never shown to students)
            with open(root / FLAGS_FILE, "a", encoding="utf-8") as f:
                f.writelines(json.dumps(flag) + "\n" for flag in flags)
        return nb, resources
