"""nbgrader preprocessor: every autograded cell graded again, in a fresh process, from the
answer cell's text. ``nbgrader_config.py`` (beside this file) puts it right after nbgrader's
``Execute`` in ``nbgrader autograde``.

``Execute`` runs the submission top to bottom in one kernel, where any cell a student added can
change what a later test cell sees (replace a function of torch, switch a check off). So this
step throws away what the kernel said in each autograded test cell and puts there what
``python -m convs2s.course.checks.grading`` says instead: the assignment's setup cell and test
cell as nbgrader restored them from the gradebook, and the student's answer cell, run in a new
Python process with nothing else of the submission. nbgrader then scores the cell as usual (an
error output scores 0). The verdict is one line in the cell's output, which the student sees in
the feedback.
"""

from __future__ import annotations

import ast
import json
import os
import secrets
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

from nbconvert.preprocessors import Preprocessor
from nbformat.v4 import new_output
from traitlets import Bool, Integer

#: The grade_id of an assignment's setup cell (tools/coursework.py writes it).
SETUP_ID = "setup"
#: nbgrader's markers around the hidden tests in a test cell.
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"


def _visible_and_hidden(source: str) -> tuple[str, str]:
    """A test cell's visible part (the check) and its hidden part ("" when there is none)."""
    before, found, rest = source.partition(BEGIN_HIDDEN)
    hidden, _, after = rest.partition(END_HIDDEN)
    return (before + after, hidden) if found else (source, "")


def _check_call(visible: str) -> tuple[str, tuple[str, ...]] | None:
    """(exercise, answer names) of the test cell's ``assert checks.<exercise>(names)``."""
    try:
        tree = ast.parse(visible)
    except SyntaxError:
        return None
    for node in tree.body:
        call = node.test if isinstance(node, ast.Assert) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name) and call.func.value.id == "checks"
                and all(isinstance(a, ast.Name) for a in call.args)):
            return call.func.attr, tuple(a.id for a in call.args)
    return None


def run_job(job: dict, timeout: int, python: str = sys.executable) -> tuple[bool, str, str]:
    """Run one grading job in a fresh process: (passed, one line, what the cells printed)."""
    token = secrets.token_hex(16)
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONSTARTUP", "PYTHONINSPECT", "PYTHONBREAKPOINT")}
    env.update(CONVS2S_QUICK="1", OMP_NUM_THREADS="1", MPLBACKEND="Agg")
    try:
        proc = subprocess.run([python, "-m", "convs2s.course.checks.grading"],
                              input=json.dumps({"token": token, **job}), capture_output=True,
                              text=True, timeout=timeout, env=env, cwd=os.getcwd())
    except subprocess.TimeoutExpired:
        return False, f"the answer took longer than {timeout} s to grade", ""
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(token + " "):
            verdict = json.loads(line[len(token) + 1:])
            return bool(verdict["passed"]), str(verdict["line"]), str(verdict["output"])
    tail = " ".join(proc.stderr.split()[-30:])
    return False, f"grading stopped without a verdict (exit {proc.returncode}): {tail}", ""


class GradeInFreshProcess(Preprocessor):
    """Replace each autograded code cell's outputs with the verdict of a fresh process."""

    enabled = Bool(True, help="grade in a fresh process (nbconvert's preprocessors start "
                   "switched off)").tag(config=True)
    timeout = Integer(120, help="seconds one exercise may take to grade").tag(config=True)

    def preprocess(self, nb, resources):
        cells = nb.cells
        meta = [c.metadata.get("nbgrader", {}) for c in cells]
        setup = next((c.source for c, m in zip(cells, meta, strict=True)
                      if m.get("grade_id") == SETUP_ID), "")
        answers = {m.get("grade_id"): c for c, m in zip(cells, meta, strict=True)
                   if m.get("solution") and c.cell_type == "code"}
        todo = []  # (cell, exercise, job or a verdict)
        for cell, m in zip(cells, meta, strict=True):
            if not (m.get("grade") and not m.get("solution") and cell.cell_type == "code"):
                continue
            visible, hidden = _visible_and_hidden(cell.source)
            found = _check_call(visible)
            if found is None:
                continue  # not one of the course's test cells: nbgrader's verdict stands
            exercise, names = found
            answer = answers.get(exercise)
            if answer is None:
                todo.append((cell, exercise, (False, f"no answer cell for {exercise}", "")))
            else:
                todo.append((cell, exercise, {
                    "exercise": exercise, "answer_names": list(names), "setup": setup,
                    "answer": answer.source, "visible": visible, "hidden": hidden}))
        # one fresh process per exercise, as many at a time as the machine has cores
        with ThreadPoolExecutor(max_workers=max(1, min(len(todo), os.cpu_count() or 1))) as pool:
            verdicts = list(pool.map(
                lambda item: item[2] if isinstance(item[2], tuple)
                else run_job(item[2], self.timeout), todo))
        for (cell, exercise, _), (passed, line, output) in zip(todo, verdicts, strict=True):
            self.log.info("%s: %s", exercise, line)
            outputs = []
            if output.strip():
                outputs.append(new_output("stream", name="stdout", text=output))
            if passed:
                outputs.append(new_output("stream", name="stdout",
                                          text=f"graded in a fresh process: {line}\n"))
            else:
                outputs.append(new_output("error", ename="NotGraded", evalue=line,
                                          traceback=[f"graded in a fresh process: {line}"]))
            cell.outputs = outputs
        return nb, resources
