"""The test suite passes whoever launches it, and leaves no process behind.

A test run started with SIGINT ignored (a background job of a non-interactive shell, ``nohup``,
some CI launchers) passes "ignored" on to every process it starts, and Python keeps an ignored
SIGINT ignored; a test that sends Ctrl-C to such a child waits for an exit that never comes.
Every test that signals a child starts it with ``signal_support.default_signals``. Here those
tests, found by reading the test files, run again in a pytest whose parent ignores SIGINT and
SIGTERM; and conftest's end-of-run guard is shown to fail a run that leaves a process running,
and to kill that process.
"""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from signal_support import command_line

ROOT = Path(__file__).resolve().parents[1]
TESTS = ROOT / "tests"
# A call that signals a process: proc.send_signal(sig), os.kill(pid, sig), os.killpg(pgid, sig).
_SIGNAL_CALL = re.compile(r"\b(?:send_signal|os\.killpg|os\.kill)\(([^()]*(?:\([^()]*\))?[^()]*)\)")
# Tests whose signal only stops what they started, with SIGKILL after it: JupyterLab, a minute
# to start, is stopped by SIGTERM to its process group at the end of the test.
CLEANUP_ONLY = {"tests/site_and_tools/test_lab.py::test_make_lab_serves_jupyterlab"}


def _signals_another_process(source: str) -> bool:
    """Whether ``source`` sends a signal other than SIGKILL (which cannot be ignored) to a
    process other than itself."""
    return any("SIGKILL" not in m.group(1) and "getpid()" not in m.group(1)
               for m in _SIGNAL_CALL.finditer(source))


def signal_tests() -> list[str]:
    """The node ids of the tests in tests/ that signal a child process, themselves or through a
    helper function of their file."""
    found = []
    for path in sorted(TESTS.rglob("test_*.py")):
        if path == Path(__file__).resolve():
            continue
        source = path.read_text(encoding="utf-8")
        functions = {node.name: ast.get_source_segment(source, node)
                     for node in ast.parse(source).body if isinstance(node, ast.FunctionDef)}
        helpers = [name for name, text in functions.items()
                   if not name.startswith("test_") and _signals_another_process(text)]
        for name, text in functions.items():
            if name.startswith("test_") and (
                    _signals_another_process(text)
                    or any(re.search(rf"\b{helper}\(", text) for helper in helpers)):
                found.append(f"{path.relative_to(ROOT).as_posix()}::{name}")
    return found


def _ignore_sigint_and_sigterm() -> None:
    """In the child: the launcher of a background job, or nohup (and SIGTERM too)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def test_the_signal_tests_are_found():
    tests = signal_tests()
    for expected in ("test_coursework_tool_fails_cleanly.py::test_badges_stops_on_ctrl_c_and_",
                     "test_coursework_tool_fails_cleanly.py::test_screenshots_stops_on_ctrl_c",
                     "test_site.py::test_sigterm_mid_build",
                     "test_benchmark_cli.py::test_a_real_sigterm_to_a_benchmark"):
        assert any(expected in t for t in tests), (expected, tests)
    # in-process signals and SIGKILL are not among them
    assert not any("test_atomic_files.py" in t or "tests/system/test_signals.py" in t
                   for t in tests), tests
    assert set(CLEANUP_ONLY) <= set(tests), "CLEANUP_ONLY names a test that is not there"


@pytest.mark.slow
def test_the_signal_tests_pass_under_a_parent_that_ignores_sigint_and_sigterm():
    probe = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal("
                            "signal.SIGINT) is signal.SIG_IGN, signal.getsignal(signal.SIGTERM)"
                            " is signal.SIG_IGN)"], capture_output=True, text=True,
                           preexec_fn=_ignore_sigint_and_sigterm, timeout=60)
    assert probe.stdout.split() == ["True", "True"], "the child inherits both as ignored"
    tests = [t for t in signal_tests() if t not in CLEANUP_ONLY]
    proc = subprocess.Popen(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rfEs", *tests],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        preexec_fn=_ignore_sigint_and_sigterm, start_new_session=True)
    try:
        out, _ = proc.communicate(timeout=1500)
    finally:
        if proc.poll() is None:  # stuck: everything it started goes with it
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
    assert proc.returncode == 0, out[-6000:]
    assert re.search(r"\b\d+ passed\b", out) and " failed" not in out, out[-6000:]


LEAKING_TEST = """\
import subprocess, sys
from pathlib import Path


def test_leaves_a_process_running():
    proc = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)  # leaked"])
    Path({pid_file!r}).write_text(str(proc.pid))
"""


def _alive(pid: int) -> bool:
    """Whether ``pid`` still runs the process the leaking test started (not a zombie)."""
    if "# leaked" not in command_line(pid):
        return False
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="the guard reads Linux's /proc")
@pytest.mark.parametrize("guarded", [True, False], ids=["with the guard", "without (control)"])
def test_a_process_a_test_leaves_running_fails_the_run_and_is_killed(tmp_path, guarded):
    """The guard is conftest's session fixture, loaded here as a plugin (``-p conftest``); the
    control runs the same test without it: the run passes and the process outlives it."""
    pid_file = tmp_path / "pid"
    (tmp_path / "test_leak.py").write_text(textwrap.dedent(LEAKING_TEST.format(
        pid_file=str(pid_file))))
    plugin = ["-p", "conftest"] if guarded else []
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *plugin,
         "--rootdir", str(tmp_path), "test_leak.py"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, PYTHONPATH=os.pathsep.join([str(TESTS), str(ROOT)])))
    pid = int(pid_file.read_text())
    try:
        if guarded:
            assert done.returncode != 0, done.stdout
            assert "processes left running by the tests (now killed)" in done.stdout
            assert "time.sleep(600)" in done.stdout, done.stdout
            assert not _alive(pid), "the guard killed it"
        else:
            assert done.returncode == 0, done.stdout + done.stderr
            deadline = time.monotonic() + 10
            while not _alive(pid) and time.monotonic() < deadline:
                time.sleep(0.05)  # until /proc shows it: it was started just before the exit
            assert _alive(pid), "without the guard the process outlives the run"
    finally:
        if _alive(pid):
            os.kill(pid, signal.SIGKILL)
