"""The part of grading that runs student code: inside the sandbox, it returns data, no verdict.

``python -I -m convs2s.course.checks.sandboxed`` is what :mod:`convs2s.course.checks.grader`
starts in the sandbox (:mod:`convs2s.system.sandbox`). It reads one job (JSON) on standard
input: the assignment's setup cell, the student's answer cell, the exercise's forbidden
functions and the hidden test's calls (:class:`convs2s.course.checks.testing.Call`, as data).
It then

1. runs the setup cell;
2. forbids this process and all it forks to start another program (:mod:`convs2s.system.no_exec`),
   then removes the functions the exercise forbids from this process (``F.glu`` where it asks
   for a GLU, the package's own answer for a derive exercise): each becomes a function that
   raises :class:`~convs2s.course.checks._core.ShortcutRefused`, so that no alias, however it
   was reached, finds the original; an operator of PyTorch's that such a function computes
   (``aten::glu``) refuses at PyTorch's dispatcher, by every route through it (a Python
   re-implementation of it, such as ``torch._refs``'s, is not a route through it);
3. runs the answer cell (its output goes to standard error, which the grader ignores);
4. makes each call and writes what it returned, or the name of what it raised, as data: one
   JSON line after :data:`MARKER` on standard output.

Nothing here decides a grade and nothing of the expected values is here: the grader compares
the data with them outside the sandbox. A student's code may print, forge that line, exit or
crash at will: it can change only the data its own answer is judged by.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import sys

from convs2s.system import no_exec

#: Starts the line that carries the results (the last such line counts).
MARKER = "convs2s-sandboxed-results "
#: The most characters of one exception message carried out.
MAX_MESSAGE = 300


#: The refusals of removed functions since the current call began (:func:`_outcome`): a call
#: that reached one fails with it, also when the answer caught the error (as the check does).
_refused: list[str] = []


#: The ``torch.library.Library`` objects whose kernels refuse operators (kept: a library's
#: kernels are withdrawn when it is collected).
_refusing_libraries: list = []


def _refuse_operator(name: str) -> None:
    """Register, for every overload of the operator ``name`` (``"aten::glu"``), a CPU kernel that
    refuses: every route to PyTorch's dispatcher reaches it (``torch.ops.aten.glu``, the JIT's
    operator table, a fresh ``torch.ops`` namespace)."""
    import warnings

    import torch

    from convs2s.course.checks._core import ShortcutRefused

    namespace, _, op = name.partition("::")
    message = (f"it called {name} (F.{op} by another name), which this exercise asks you to "
               "write yourself")

    def refused(*_args, **_kwargs):
        _refused.append(message)
        raise ShortcutRefused(message)

    library = torch.library.Library(namespace, "IMPL")
    with warnings.catch_warnings():  # "Overriding a previously registered kernel": the point
        warnings.simplefilter("ignore")
        for overload in getattr(getattr(torch.ops, namespace), op).overloads():
            library.impl(op if overload == "default" else f"{op}.{overload}", refused, "CPU")
    _refusing_libraries.append(library)


def _remove(targets: list[str]) -> None:
    """Replace each ``"module:Attr.attr"`` by a function that refuses (for this process); refuse
    each operator ``"namespace::name"`` at the dispatcher (:func:`_refuse_operator`)."""
    from convs2s.course.checks._core import ShortcutRefused, _resolve

    for target in targets:
        if "::" in target:
            _refuse_operator(target)
            continue
        try:
            owner, attr = _resolve(target)
        except (ImportError, AttributeError):
            continue

        def refused(*_args, _target=target, **_kwargs):
            message = (f"it called {_target.replace(':', '.')}, which this exercise asks you to "
                       "write yourself")
            _refused.append(message)
            raise ShortcutRefused(message)

        with contextlib.suppress(AttributeError, TypeError):
            setattr(owner, attr, refused)


def _outcome(fn, *args, **kwargs) -> dict:
    from convs2s.course.checks.testing import encode

    _refused.clear()
    try:
        result = fn(*args, **kwargs)
        outcome = {"returned": encode(result)}
    except BaseException as e:  # noqa: BLE001 - whatever the answer raised is its result
        if isinstance(e, SystemExit):
            outcome = {"raised": "SystemExit", "message": "the answer called sys.exit()"}
        else:
            text = " ".join(str(e).split())[:MAX_MESSAGE] if not isinstance(e, RecursionError) \
                else "maximum recursion depth exceeded"
            outcome = {"raised": type(e).__name__[:60], "message": text}
    if _refused:  # a removed function was called, whatever the answer did with its error
        outcome = {"raised": "ShortcutRefused", "message": _refused[0][:MAX_MESSAGE]}
    return outcome


def _make(one: dict, namespace: dict, names: list[str]) -> dict:
    from convs2s.course.checks.testing import decode

    kind, target = one["kind"], one["target"]
    if kind == "value":
        if target not in namespace:
            return {"raised": "NameError", "message": f"the answer cell does not set {target}"}
        return _outcome(lambda: namespace[target])
    args, kwargs = decode(one["args"]), decode(one["kwargs"])
    if kind == "call":
        fn = namespace.get(target)
        if fn is None:
            return {"raised": "NameError", "message": f"the answer cell does not define {target}"}
        return _outcome(fn, *args, **kwargs)
    if kind == "probe" and target.startswith("convs2s."):
        module, _, name = target.partition(":")
        probe = getattr(importlib.import_module(module), name)
        answers = {n: namespace.get(n) for n in names}
        return _outcome(probe, answers, **kwargs)
    return {"raised": "ValueError", "message": f"not a call grading makes: {kind} {target}"}


def run(job: dict) -> list[dict]:
    """The outcome of each of ``job``'s calls (this process: the sandbox)."""
    namespace: dict = {"__name__": "__main__"}
    names = [str(n) for n in job["answer_names"]]
    with contextlib.redirect_stdout(sys.stderr):
        try:
            exec(compile(job["setup"], "<setup cell>", "exec"), namespace)  # noqa: S102
        except BaseException as e:  # noqa: BLE001
            failed = {"raised": type(e).__name__[:60], "where": "the setup cell",
                      "message": " ".join(str(e).split())[:MAX_MESSAGE]}
            return [failed for _ in job["calls"]]
        try:
            no_exec.forbid()  # a program started from the answer would have them all back
        except no_exec.NoExecUnavailable as e:
            failed = {"raised": "NoExecUnavailable", "where": "grading", "message": str(e)}
            return [failed for _ in job["calls"]]
        _remove([str(t) for t in job["forbidden"]])
        answer = _outcome(lambda: exec(compile(job["answer"], "<answer cell>", "exec"),  # noqa: S102
                                       namespace))
        if "raised" in answer:
            return [{**answer, "where": "the answer cell"} for _ in job["calls"]]
        return [_make(one, namespace, names) for one in job["calls"]]


#: What a job holds, with the type of each field.
JOB_FIELDS = {"setup": str, "answer": str, "answer_names": list, "forbidden": list, "calls": list}


def read_job(text: str) -> dict:
    """The job in ``text``, or ValueError (one line) when it is not one."""
    try:
        job = json.loads(text)
    except (ValueError, RecursionError) as e:
        raise ValueError(f"not JSON ({type(e).__name__})") from None
    if not isinstance(job, dict):
        raise ValueError(f"a JSON object is expected, not {type(job).__name__}")
    for key, kind in JOB_FIELDS.items():
        if not isinstance(job.get(key), kind):
            raise ValueError(f"its {key!r} must be a {kind.__name__}")
    if not all(isinstance(c, dict) and isinstance(c.get("kind"), str)
               and isinstance(c.get("target"), str) for c in job["calls"]):
        raise ValueError("each of its calls must be an object with a kind and a target")
    return job


def _stop_at_the_cpu_limit(signum, _frame) -> None:
    """The CPU-time limit's SIGXCPU: this process is its sandbox's process 1, which the kernel
    does not stop on a signal it has no handler for; end as that signal would have."""
    os._exit(128 + signum)


def main() -> int:
    signal.signal(signal.SIGXCPU, _stop_at_the_cpu_limit)
    try:
        job = read_job(sys.stdin.read())
    except ValueError as e:
        print(f"error: not a grading job: {e} (python -m convs2s.course.checks.sandboxed reads "
              "the job convs2s.course.checks.grader writes)", file=sys.stderr)
        return 2
    results = run(job)
    data = ("\n" + MARKER + json.dumps(results) + "\n").encode()
    while data:
        data = data[os.write(1, data):]
    os._exit(0)  # no atexit handler or thread of the answer's runs after this


if __name__ == "__main__":
    raise SystemExit(main())
