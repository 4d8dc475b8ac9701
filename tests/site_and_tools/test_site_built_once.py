"""``make test`` builds the site once, beside the tests (tests/shared_site.py): the tests that
check it wait for that build, whichever way it ends, and a build nobody waited for is stopped.
A made-up builder stands for ``python -m tools.site`` (the real one takes half a minute); the
``built`` fixture's own site is the real one (tests/site_and_tools/test_site.py)."""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import pytest
import shared_site

from tools import site

RESULT = site.BuildResult(
    Path("/made/up/site"),
    site.Staged([site.Lesson("01_a", "01 · A", "5 minutes", ("one", "two"), "none")], 3, 1,
                {"01_a.ipynb": "ab" * 32}),
    12.5, ["a warning"])

# A builder that writes RESULT's record, then exits only once the file "go" exists (or at once
# with "fail": no record, a line on stderr, status 2). Called with --out OUT --record FILE.
BUILDER = r"""
import json, os, sys, time
args = sys.argv[1:]
out, record = args[args.index("--out") + 1], args[args.index("--record") + 1]
go = os.path.join(os.path.dirname(out), "go")
if os.path.exists(os.path.join(os.path.dirname(out), "fail")):
    print("error: the made-up build failed", file=sys.stderr)
    sys.exit(2)
with open(record + ".tmp", "w") as f:
    f.write(os.environ["RECORD"])
os.replace(record + ".tmp", record)
while not os.path.exists(go):
    time.sleep(0.02)  # poll for the condition
"""


@pytest.fixture
def make_test(tmp_path, monkeypatch):
    """As under ``make unit``: CONVS2S_TEST_SITE set, no build of this run started yet (the
    real one of this test run, if any, kept aside and put back afterwards)."""
    monkeypatch.setattr(shared_site, "_builder", None)
    monkeypatch.setenv(shared_site.SITE_VARIABLE, str(tmp_path / "site"))
    monkeypatch.delenv(shared_site.RUN_VARIABLE, raising=False)
    monkeypatch.setenv("RECORD", json.dumps(RESULT.as_record()))
    yield tmp_path
    shared_site.finish()


def _wait_for(condition, what: str) -> None:
    deadline = time.monotonic() + 120
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)  # poll for the condition


def test_the_tests_wait_until_the_one_build_has_ended_and_read_its_record(make_test):
    shared_site.start([sys.executable, "-c", BUILDER])
    run = Path(os.environ[shared_site.RUN_VARIABLE])
    got = []
    waiter = threading.Thread(target=lambda: got.append(shared_site.wait()))
    waiter.start()
    _wait_for((run / "record.json").exists, "the record")
    # the record is there, but the builder has not exited: the waiter must still wait
    assert waiter.is_alive() and shared_site._builder.poll() is None
    (make_test / "go").touch()
    waiter.join(timeout=120)
    assert not waiter.is_alive() and shared_site._builder.wait(timeout=120) == 0
    assert got == [RESULT]


def test_a_failed_build_fails_the_site_tests_with_its_log(make_test):
    (make_test / "fail").touch()
    shared_site.start([sys.executable, "-c", BUILDER])
    with pytest.raises(AssertionError, match="the made-up build failed"):
        shared_site.wait()


def test_a_build_nobody_waited_for_is_stopped_and_its_files_removed(make_test):
    shared_site.start([sys.executable, "-c", BUILDER])
    run = Path(os.environ[shared_site.RUN_VARIABLE])
    builder = shared_site._builder
    _wait_for((run / "record.json").exists, "the builder to start")
    shared_site.finish()
    assert builder.poll() is not None, "the builder still runs"
    assert not run.exists() and shared_site.RUN_VARIABLE not in os.environ


def test_a_worker_starts_no_build_of_its_own(make_test, monkeypatch):
    monkeypatch.setenv(shared_site.RUN_VARIABLE, str(make_test / "the controllers"))
    shared_site.start([sys.executable, "-c", "raise SystemExit('must not run')"])
    assert shared_site._builder is None


def test_without_make_nothing_is_shared(monkeypatch):
    monkeypatch.setattr(shared_site, "_builder", None)
    monkeypatch.delenv(shared_site.SITE_VARIABLE, raising=False)
    monkeypatch.delenv(shared_site.RUN_VARIABLE, raising=False)
    shared_site.start([sys.executable, "-c", "raise SystemExit('must not run')"])
    assert shared_site._builder is None and shared_site.wait() is None
