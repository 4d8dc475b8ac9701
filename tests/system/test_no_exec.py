"""convs2s.system.no_exec: once forbidden, no thread of the process and nothing it forks can start
a program. Each test installs the filter in a child Python (never in the test process: the
filter cannot be removed)."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap

import pytest

from convs2s.system import no_exec

needs_filter = pytest.mark.skipif(
    not sys.platform.startswith("linux") or platform.machine() not in no_exec.ARCHITECTURES,
    reason="the filter exists for Linux on x86-64 and aarch64")


def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300)


@needs_filter
def test_after_forbid_no_route_starts_a_program():
    done = _child("""
        import os, subprocess, threading
        from convs2s.system import no_exec
        assert subprocess.run(["true"]).returncode == 0  # before: it can
        started = threading.Thread(target=lambda: threading.Event().wait(30), daemon=True)
        started.start()  # a thread that exists before the filter follows it too
        no_exec.forbid()
        refused = []
        for name, start in [("subprocess", lambda: subprocess.run(["true"])),
                            ("os.popen", lambda: os.popen("true").read()),
                            ("os.execv", lambda: os.execv("/bin/true", ["true"])),
                            ("os.posix_spawn",
                             lambda: os.waitpid(os.posix_spawn("/bin/true", ["true"], {}), 0))]:
            try:
                start()
            except PermissionError:
                refused.append(name)
        box = []
        thread = threading.Thread(target=lambda: box.append(os.system("true")))
        thread.start()
        thread.join()
        refused += ["os.system in a new thread"] if box[0] != 0 else []
        pid = os.fork()
        if pid == 0:
            try:
                os.execv("/bin/true", ["true"])
            except PermissionError:
                os._exit(7)
            os._exit(0)
        code = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
        refused += ["exec in a forked child"] if code == 7 else []
        print(",".join(refused))
        """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip().split(",") == [
        "subprocess", "os.popen", "os.execv", "os.posix_spawn", "os.system in a new thread",
        "exec in a forked child"]


@needs_filter
def test_the_rest_of_python_still_works_under_the_filter():
    done = _child("""
        import os, tempfile, threading
        from convs2s.system import no_exec
        no_exec.forbid()
        import torch  # imports, threads, files and forks are not programs
        with tempfile.TemporaryFile() as f:
            f.write(b"x")
        t = threading.Thread(target=lambda: None)
        t.start()
        t.join()
        pid = os.fork()
        if pid == 0:
            os._exit(5)
        print(torch.ones(3).sum().item(), os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1]))
        """)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["3.0", "5"]


def test_each_filter_is_eight_instructions_ending_in_allow_then_refuse():
    for machine in no_exec.ARCHITECTURES:
        code = no_exec.program(machine)
        assert len(code) == 8 * 8
        last_two = [code[i:i + 8] for i in (48, 56)]
        assert [int.from_bytes(r[4:], sys.byteorder) for r in last_two] == [0x7FFF0000, 0x50001]


def test_where_no_filter_exists_forbid_says_so_in_one_line(monkeypatch):
    monkeypatch.setattr(platform, "machine", lambda: "sparc64")
    with pytest.raises(no_exec.NoExecUnavailable) as e:
        no_exec.forbid()
    assert "\n" not in str(e.value) and "x86-64" in str(e.value)
