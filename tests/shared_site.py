"""The course website, built once per test run while the tests run (``make test``).

``make unit`` sets ``CONVS2S_TEST_SITE=build/site``. The test session's first process (the one
that starts pytest-xdist's workers, or the only one) then starts ``python -m tools.site --out
build/site --record ...`` in the background at once (:func:`start`), and the tests that check
the site (the ``built`` fixture in conftest.py) wait for that one build (:func:`wait`) instead
of each worker building its own copy: the slow first build (the ONNX export and flipbook frames
of a fresh clone) runs beside the other tests, and ``build/site`` is what ``make site`` would
have made, checked.

How a waiting worker knows the build has ended, whichever way it ended: the first process
takes an exclusive ``flock`` on a lock file and hands that open file to the builder (a lock
belongs to the open file, so the builder holds it until it exits, even if it is killed); a
worker asks for a shared lock, which it gets only then, and reads the record the builder wrote
(``--record``). No record means the build failed: its log is in the failure message.

Without ``CONVS2S_TEST_SITE`` (plain ``pytest``) nothing starts, and ``built`` builds the site
into a temporary folder, as before.
"""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SITE_VARIABLE = "CONVS2S_TEST_SITE"  # where make wants the site (make unit: build/site)
RUN_VARIABLE = "CONVS2S_TEST_SITE_RUN"  # the build's lock, record and log (set by start)

_builder: subprocess.Popen | None = None  # in the process that started it


def start(command: list[str] | None = None) -> None:
    """In the session's first process: start the one build, if make asked for it and no build
    of this test run has started yet (workers inherit ``RUN_VARIABLE`` and start nothing).
    ``command``: the build (default ``python -m tools.site``), then ``--out OUT --record FILE``
    are added (another command: the tests of this module)."""
    global _builder
    out = os.environ.get(SITE_VARIABLE)
    if not out or os.environ.get(RUN_VARIABLE):
        return
    out = Path(out).resolve()
    run = Path(tempfile.mkdtemp(prefix="convs2s-test-site-"))
    lock = os.open(run / "lock", os.O_CREAT | os.O_RDWR, 0o600)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX)  # held by the builder from here until it exits
        with open(run / "log", "wb") as log:
            _builder = subprocess.Popen(
                [*(command or [sys.executable, "-m", "tools.site"]), "--out", str(out),
                 "--record", str(run / "record.json")],
                cwd=ROOT, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                pass_fds=(lock,))
    finally:
        os.close(lock)  # this process's copy: the builder's keeps the lock
    os.environ[RUN_VARIABLE] = str(run)  # before the workers start: they inherit it
    os.environ[SITE_VARIABLE] = str(out)


def wait():
    """The build's :class:`tools.site.BuildResult` once it has ended; an ``AssertionError``
    with its log if it failed. None where make asked for no shared site."""
    from tools import site

    run = os.environ.get(RUN_VARIABLE)
    if not run:
        return None
    run = Path(run)
    with open(run / "lock", "rb") as lock:
        fcntl.flock(lock, fcntl.LOCK_SH)  # granted once the builder has exited
    record = run / "record.json"
    log = (run / "log").read_text(errors="replace") if (run / "log").exists() else ""
    assert record.is_file(), f"the test run's site build (make unit) failed:\n{log[-3000:]}"
    return site.BuildResult.from_record(json.loads(record.read_text()))


def finish() -> None:
    """In the process that started the build, at the end of the session: a build nobody waited
    for is stopped (SIGTERM: tools.site leaves the earlier site whole), and the lock, record and
    log are removed."""
    global _builder
    if _builder is None:
        return
    if _builder.poll() is None:
        _builder.terminate()
    _builder.wait()
    _builder = None
    shutil.rmtree(os.environ.pop(RUN_VARIABLE), ignore_errors=True)
