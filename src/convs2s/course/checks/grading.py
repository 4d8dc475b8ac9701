"""Grade one exercise in a fresh Python process, from the answer cell's text.

``python -m convs2s.course.checks.grading`` reads one job (JSON) on standard input and writes
one verdict (JSON) as its last line of standard output. The nbgrader preprocessor in
``coursework/fresh_process_grading.py`` runs it once per autograded cell, so a grade comes from
the answer's code alone, never from the student's kernel (whatever else ran there).

A job holds the assignment's setup cell, the answer cell as the student wrote it, and the test
cell as the instructor wrote it (restored by nbgrader): its visible part
(``assert checks.<exercise>(<answer names>)``) and its hidden part, which defines
``_hidden_test(<answer names>)`` and calls it. The steps:

1. the answer cell is read, not run (:func:`answer_rules.problems`): a cell that breaks a rule
   scores 0 with one line saying which;
2. the setup cell, then the answer cell run in one namespace, the exercise's shortcuts refused
   (:func:`convs2s.course.checks.refusing`);
3. the visible part runs in that namespace (the check, as in the notebook);
4. the hidden part runs in a namespace of its own that holds only the answer's names, so no
   name the student defines can meet a name of the hidden test.

Nothing the answer prints reaches the verdict line; the verdict line starts with a token only
the caller knows.
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from dataclasses import dataclass

from convs2s.course.checks import answer_rules

#: The most characters of the answer's own output a verdict keeps.
MAX_OUTPUT = 4_000


@dataclass(frozen=True)
class Job:
    """What one grading run needs (all text, as the notebook holds it)."""

    exercise: str
    answer_names: tuple[str, ...]
    setup: str
    answer: str
    visible: str
    hidden: str


def _one_line(text: str, limit: int = 400) -> str:
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[:limit] + "…"


def _failure(error: BaseException) -> str:
    if isinstance(error, AssertionError):
        return _one_line(str(error) or "an assertion of the tests did not hold")
    if isinstance(error, SystemExit):
        return "the answer called sys.exit() (SystemExit): a function returns its answer"
    return _one_line(f"{type(error).__name__}: {error}")


def grade(job: Job) -> tuple[bool, str, str]:
    """(passed, one line, what the cells printed) for ``job``, in this process."""
    from convs2s.course.checks import refusing

    found = answer_rules.problems(job.answer, job.exercise)
    if found:
        return False, f"refused: the answer cell {found[0]} (see the rules in the header)", ""
    out = io.StringIO()
    namespace: dict = {"__name__": "__main__"}
    step = "the setup cell"
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(out):
            exec(compile(job.setup, "<setup cell>", "exec"), namespace)  # noqa: S102
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
            step = "the answer cell"
            with refusing(job.exercise):
                exec(compile(job.answer, "<answer cell>", "exec"), namespace)  # noqa: S102
            missing = [name for name in job.answer_names if name not in namespace]
            if missing:
                return False, (f"the answer cell does not define {', '.join(missing)} (keep the "
                               "names you are given)"), out.getvalue()[-MAX_OUTPUT:]
            step = "the check"
            exec(compile(job.visible, "<test cell>", "exec"), namespace)  # noqa: S102
            if job.hidden.strip():
                step = "the hidden tests"
                hidden_namespace = {"__name__": "__hidden__",
                                    **{name: namespace[name] for name in job.answer_names}}
                exec(compile(job.hidden, "<hidden tests>", "exec"),  # noqa: S102
                     hidden_namespace)
    except BaseException as e:  # noqa: BLE001 - any failure of the answer is a verdict
        if isinstance(e, KeyboardInterrupt):
            raise
        return False, f"{step}: {_failure(e)}", out.getvalue()[-MAX_OUTPUT:]
    return True, "passed the check and the hidden tests", out.getvalue()[-MAX_OUTPUT:]


def main() -> int:
    """Read a job on stdin: ``{"token", "exercise", "answer_names", "setup", "answer",
    "visible", "hidden"}``; print ``<token> {"passed", "line", "output"}`` last."""
    try:
        raw = json.loads(sys.stdin.read())
        token = str(raw.pop("token"))
        job = Job(exercise=str(raw["exercise"]),
                  answer_names=tuple(str(n) for n in raw["answer_names"]),
                  setup=str(raw["setup"]), answer=str(raw["answer"]),
                  visible=str(raw["visible"]), hidden=str(raw["hidden"]))
    except (ValueError, KeyError, TypeError) as e:
        print(f"error: not a grading job ({e})", file=sys.stderr)
        return 2
    passed, line, output = grade(job)
    sys.stdout.write(f"\n{token} " + json.dumps({"passed": passed, "line": line,
                                                 "output": output}) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
