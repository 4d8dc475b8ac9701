"""Grade one exercise: the student's code runs in a sandbox, the verdict is decided here.

The instructor's side of grading (``coursework/sandbox_grading.py`` calls it for every
autograded cell of ``nbgrader autograde``; the tests call it directly):

1. the hidden test (a function of ``coursework/hidden/NN.py``, given this copy's variant)
   returns its cases (:class:`convs2s.course.checks.testing.Case`), here, outside;
2. only the cases' calls, as data, go into the sandbox with the setup cell and the answer cell:
   ``python -I -m convs2s.course.checks.sandboxed`` under :func:`convs2s.system.sandbox.run`
   (read-only system and Python, one scratch folder, no network, no view of the grading
   folder, time, memory and process limits; the whole tree killed at the wall-clock limit);
3. what comes back is data (JSON, read with :func:`testing.decode`), and each case's judgement
   runs here, where the expected values are.

The static read of the answer (:func:`answer_rules.problems`) is advisory: what it flags is
listed for the instructor beside the verdict; it takes no marks away.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from convs2s.course.checks import _core, answer_rules, testing
from convs2s.course.checks.sandboxed import MARKER
from convs2s.system import sandbox

#: The longest answer cell graded (characters).
MAX_ANSWER = 1_000_000
#: Seconds and bytes one exercise's sandbox may use (nbgrader_config.py may change the time).
DEFAULT_LIMITS = sandbox.Limits(wall_seconds=120, cpu_seconds=120)


@dataclass(frozen=True)
class Verdict:
    """What grading says of one answer: ``passed``, one ``line`` for the student (never an
    expected value), and what the static read flagged, for the instructor."""

    passed: bool
    line: str
    flagged: tuple[str, ...] = field(default=())


def forbidden(exercise: str) -> list[str]:
    """The functions removed from the sandbox before ``exercise``'s answer runs (the same table
    as the check's refusals: the exercise's declared ``shortcuts``), then the PyTorch operators
    refused at the dispatcher (``"aten::glu"``)."""
    declared = _core.EXERCISES.get(exercise)
    shortcuts = declared.shortcuts if declared else ()
    return ([shortcut.target for shortcut in shortcuts]
            + [shortcut.operator for shortcut in shortcuts if shortcut.operator])


def _results(outcome: sandbox.Outcome, count: int) -> list[dict] | str:
    """The calls' outcomes from the sandbox's output, or why there are none (one line)."""
    if outcome.timed_out:
        return "the answer took longer than the time limit to run (it was stopped)"
    lines = outcome.stdout.decode("utf-8", errors="replace").splitlines()
    found = [line for line in lines if line.startswith(MARKER)]
    if not found:
        if outcome.killed_by == "SIGXCPU":
            return "the answer used more than its CPU-time limit (it was stopped)"
        last = " ".join(_plain(outcome.stderr.decode("utf-8", errors="replace"),
                               len(outcome.stderr)).split()[-12:])
        return (f"the answer's process ended before it returned anything (exit "
                f"{outcome.returncode}{': ' + last if last else ''})")[:300]
    try:
        results = json.loads(found[-1][len(MARKER):])
    except (ValueError, RecursionError):
        return "the answer's results could not be read"
    if not isinstance(results, list) or len(results) != count or \
            not all(isinstance(r, dict) for r in results):
        return "the answer's results could not be read"
    return results


def _judge(case: testing.Case, result: dict) -> str | None:
    """Why ``case`` does not hold for ``result`` (one line for the student), or None."""
    if "raised" in result:
        raised, message = _plain(result.get("raised"), 60), _plain(result.get("message", ""), 300)
        where = _plain(result.get("where", ""), 40)
        if raised == "NotImplementedError":
            return "not answered yet (the answer cell still raises NotImplementedError)"
        if case.raises is not None and raised == case.raises and not where:
            return None
        said = f"{where + ' ' if where else ''}raised {raised}{': ' + message if message else ''}"
        return f"should raise {case.raises}; {said}" if case.raises is not None else said
    if case.raises is not None:
        return f"should raise {case.raises}, raised nothing"
    try:
        value = testing.decode(result.get("returned"))
    except Exception:  # noqa: BLE001 - the data are the student's: whatever fails to decode
        return "the result could not be read as data"
    try:
        case.accept(value)
    except testing.WrongForm as e:
        return _plain(str(e), 300)
    except Exception:  # noqa: BLE001 - any failure to hold (the data are the student's)
        return "does not hold"
    return None


def _plain(text: object, most: int) -> str:
    """``text`` as one line of printable characters, at most ``most`` of them: what the sandbox
    sent may hold newlines or terminal escapes meant to forge a verdict line in the log."""
    text = text if isinstance(text, str) else f"a {type(text).__name__}"
    printable = "".join(c if c.isprintable() else " " for c in text[:4 * most + 64])
    return " ".join(printable.split())[:most]


def grade(exercise: str, *, setup: str, answer: str, answer_names: Sequence[str],
          cases: Sequence[testing.Case], limits: sandbox.Limits = DEFAULT_LIMITS,
          hidden_folders: Sequence[Path] = ()) -> Verdict:
    """Run ``answer`` on ``cases`` in a sandbox and judge what it returned, here.

    ``hidden_folders``: folders the sandbox must not show even where a package folder lies
    inside one (the grading folder). Raises :class:`sandbox.SandboxUnavailable` where no
    sandbox can start: grading for credit never runs student code without one.
    """
    if len(answer) > MAX_ANSWER:
        return Verdict(False, f"✗ {exercise}: the answer cell is over {MAX_ANSWER:,} characters "
                       "long: write the answer, not data")
    declared = _core.EXERCISES.get(exercise)
    flagged = tuple(answer_rules.problems(answer, declared.forbidden_names if declared else
                                          frozenset()))
    if not cases:
        return Verdict(False, f"{exercise}: the hidden test has no cases", flagged)
    job = {"exercise": exercise, "setup": setup, "answer": answer,
           "answer_names": list(answer_names), "forbidden": forbidden(exercise),
           "calls": [case.call.to_data() for case in cases]}
    outcome = sandbox.run([sys.executable, "-I", "-m", "convs2s.course.checks.sandboxed"],
                          stdin=json.dumps(job).encode(), limits=limits, hidden=hidden_folders,
                          env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                               "MPLBACKEND": "Agg", "CONVS2S_QUICK": "1"})
    results = _results(outcome, len(cases))
    if isinstance(results, str):
        return Verdict(False, f"✗ {exercise}: {results}", flagged)
    for n, (case, result) in enumerate(zip(cases, results, strict=True), start=1):
        why = _judge(case, result)
        if why is not None:
            return Verdict(False, f"✗ {exercise}: hidden case {n} of {len(cases)} ({case.what}): "
                           f"{why}", flagged)
    return Verdict(True, f"✓ {exercise}: all {len(cases)} hidden cases held", flagged)


def in_this_process(exercise: str, cases: Sequence[testing.Case], answers: dict) -> Verdict:
    """Judge ``answers`` (the answer's names and values, already defined in this process) on
    ``cases`` without a sandbox: each call made here, through the same data coding and the same
    judgement as :func:`grade`, with the exercise's shortcuts refused (:func:`_core.refusing`).

    For answers you trust (the course's own solutions, an instructor trying a private hidden
    test), never for a student's code: that runs only in the sandbox, through :func:`grade`."""
    from convs2s.course.checks.sandboxed import _make

    names = list(answers)
    for n, case in enumerate(cases, start=1):
        try:
            with _core.refusing(exercise):  # a call to a shortcut fails when the block ends
                result = _make(json.loads(json.dumps(case.call.to_data())), dict(answers), names)
        except _core.ShortcutRefused as e:
            result = {"raised": "ShortcutRefused", "message": str(e)}
        result = json.loads(json.dumps(result))  # what the sandbox's line would carry
        why = _judge(case, result)
        if why is not None:
            return Verdict(False, f"✗ {exercise}: hidden case {n} of {len(cases)} ({case.what}): "
                           f"{why}")
    return Verdict(True, f"✓ {exercise}: all {len(cases)} hidden cases held")


def load_hidden(path: str | Path) -> dict:
    """The hidden tests of one notebook (``hidden/NN.py``): its functions by exercise id.

    The file is the instructor's and is run here, outside any sandbox, as trusted code."""
    import importlib.util

    path = Path(path)
    spec = importlib.util.spec_from_file_location(f"convs2s_hidden_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise ImportError(f"{path}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return {name: fn for name, fn in vars(module).items()
            if callable(fn) and not name.startswith("_") and getattr(fn, "__module__", None)
            == module.__name__}
