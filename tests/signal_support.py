"""What the tests that signal a child process share, and the check that none is left behind.

Imported as ``from signal_support import ...`` (pytest puts tests/ on sys.path, as it does for
conftest). Plain functions, so that a test reads what it calls.

A process started with SIGINT ignored (a background job of a non-interactive shell, ``nohup``,
some CI launchers) passes "ignored" on to every process it starts, and Python keeps an ignored
SIGINT ignored: a test that sends Ctrl-C to a child it started with the inherited disposition
would wait for an exit that never comes. Every test that signals a child therefore starts it
with ``preexec_fn=default_signals``, and sends its signal once the child is blocked where the
test wants to stop it (:func:`wait_until_blocked`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

PROC = Path("/proc")
ROOT = Path(__file__).resolve().parents[1]
# Processes a test run may keep until it exits (started by the standard library, not a test).
_KEPT = ("multiprocessing.resource_tracker", "multiprocessing.forkserver")


def default_signals() -> None:
    """In the child (``preexec_fn``): SIGINT and SIGTERM as in a terminal (their default
    actions; Python then turns SIGINT into KeyboardInterrupt), whatever the test run
    inherited."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def wait_until_blocked(pid: int, wchan: str, limit_s: float) -> None:
    """Return once process ``pid`` sleeps in the kernel waiting where ``wchan`` says (a word
    of /proc/<pid>/wchan: "pipe" for a read from a pipe or FIFO, "pause" for signal.pause()).

    A signal that arrives after Python has run its last check but before the blocking call
    starts is noted by Python's C handler and then waits for the call to end, which here is
    never: the command would not stop. Sent while the process is blocked, it interrupts the
    call. Where /proc tells nothing (no /proc, or a kernel that hides wchan), the process
    sleeping at all is taken as the sign."""
    proc = PROC / str(pid)
    if not proc.is_dir():
        time.sleep(1.0)  # nothing to watch: give it a second to reach its blocking call
        return
    deadline = time.monotonic() + limit_s
    while time.monotonic() < deadline:
        found = _stat(pid)
        if found is None or found[0] == "Z":
            return  # it ended: the caller sees how
        try:
            where = (proc / "wchan").read_text().strip()
        except OSError:
            where = ""
        if found[0] == "S" and (wchan in where or where in ("", "0")):
            return
        time.sleep(0.01)  # poll the condition again
    raise AssertionError(f"process {pid} did not block ({wchan}) within {limit_s} s")


def _stat(pid: int) -> tuple[str, int] | None:
    """(state, parent pid) of a process from /proc, or None if it is gone."""
    try:
        text = (PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def command_line(pid: int) -> str:
    try:
        raw = (PROC / str(pid) / "cmdline").read_bytes()
    except OSError:
        return "?"
    return raw.replace(b"\0", b" ").decode(errors="replace").strip()[:200]


def living_descendants(pid: int | None = None) -> list[int]:
    """The processes ``pid`` (default: this one) started, and theirs, that still run (zombies,
    which have exited, are not counted), leaves first; [] where there is no /proc."""
    pid = os.getpid() if pid is None else pid
    if not PROC.is_dir():
        return []
    parents: dict[int, int] = {}
    states: dict[int, str] = {}
    for entry in PROC.iterdir():
        if entry.name.isdigit():
            found = _stat(int(entry.name))
            if found:
                states[int(entry.name)], parents[int(entry.name)] = found
    order, todo = [], [pid]
    while todo:
        parent = todo.pop()
        children = [p for p, pp in parents.items() if pp == parent]
        order += children
        todo += children
    return [p for p in reversed(order) if states.get(p) != "Z"]


def leftover_processes() -> list[int]:
    """This process's living descendants other than the standard library's helpers."""
    return [p for p in living_descendants()
            if not any(kept in command_line(p) for kept in _KEPT)]


def kill_all(pids: list[int]) -> None:
    """SIGKILL each process (leaves first) and reap those that are this process's children."""
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
    for pid in pids:
        try:
            os.waitpid(pid, 0)
        except ChildProcessError:  # not our child: its own parent reaps it
            pass


#: A stand-in for torch whose import stops its own process with the signal named in
#: CONVS2S_TEST_SIGNAL: the signal arrives while a command loads torch.
FAKE_TORCH = """import os, signal, time
os.kill(os.getpid(), getattr(signal, os.environ["CONVS2S_TEST_SIGNAL"]))
time.sleep(60)  # the signal is handled before this ends
"""


def run_while_torch_loads(tmp_path: Path, sig: str, *args: str) -> subprocess.CompletedProcess:
    """``python ARGS`` from the repository's root, the stand-in torch (:data:`FAKE_TORCH`, made
    in ``tmp_path``) first on the path, SIGINT and SIGTERM at their default actions: ``sig``
    ("SIGINT" or "SIGTERM") arrives while the command imports torch. What it did, captured."""
    fake = tmp_path / "torch"
    fake.mkdir()
    (fake / "__init__.py").write_text(FAKE_TORCH, encoding="utf-8")
    env = {**os.environ, "CONVS2S_TEST_SIGNAL": sig,
           "PYTHONPATH": os.pathsep.join([str(tmp_path), str(ROOT / "src"), str(ROOT)])}
    return subprocess.run([sys.executable, *args], env=env, text=True, cwd=ROOT,
                          capture_output=True, preexec_fn=default_signals, timeout=300)
