"""A control group of its own for a process tree: at most so many tasks, so much memory.

Used by :mod:`convs2s.system.sandbox`, so that a fork bomb or a tree of memory-hungry processes
stops at the group's limits instead of taking the machine. A group can be made only where the
machine lets this process write the control-group filesystem (root on most Linux machines, a
delegated subtree under systemd); elsewhere :func:`limited` yields None and the caller falls
back to per-process limits.

cgroup v1 (a ``pids`` and a ``memory`` hierarchy, as on this course's CI machine) and cgroup v2
(one unified hierarchy with the ``pids`` and ``memory`` controllers) are both handled. A new group
is made inside this process's own (read from /proc/self/cgroup), never beside it.
"""

from __future__ import annotations

import contextlib
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path("/sys/fs/cgroup")
#: How long :func:`limited` waits, at most, for a group's last task to be gone before it
#: removes the group (seconds; it checks every 10 ms).
EMPTY_WAIT = 10.0


@dataclass(frozen=True)
class Group:
    """The folders of one group (one per hierarchy). A process joins it by writing its PID into
    each folder's ``cgroup.procs`` (:mod:`convs2s.system.sandbox` has its shell do that)."""

    folders: tuple[Path, ...]

    def tasks(self) -> int:
        total = 0
        for folder in self.folders:
            with contextlib.suppress(OSError):
                total += len((folder / "cgroup.procs").read_text().split())
        return total


def _make(parent: Path, name: str, settings: dict[str, str]) -> Path | None:
    """``parent/name`` with ``settings`` written, or None (and nothing left) where it cannot."""
    folder = parent / name
    try:
        folder.mkdir()
    except OSError:
        return None
    try:
        for key, value in settings.items():
            (folder / key).write_text(value)
    except OSError:
        folder.rmdir()
        return None
    return folder


def _own(hierarchy: str) -> Path | None:
    """The folder of this process's own group in ``hierarchy`` (a v1 controller's name, or ""
    for v2), from /proc/self/cgroup: new groups go inside it, so that what the sandbox uses is
    still counted where this process is counted."""
    try:
        lines = Path("/proc/self/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        _id, controllers, path = line.split(":", 2)
        if controllers.split(",") == [hierarchy] or (not hierarchy and not controllers):
            return (ROOT / hierarchy / path.lstrip("/")) if hierarchy else ROOT / path.lstrip("/")
    return None


def _create(tasks: int, memory_bytes: int) -> Group | None:
    name = f"convs2s-sandbox-{secrets.token_hex(6)}"
    if (ROOT / "cgroup.controllers").is_file():  # v2: one hierarchy
        parent = _own("")
        try:
            controllers = (parent / "cgroup.subtree_control").read_text().split()
        except (OSError, TypeError):
            return None
        if "pids" not in controllers:
            return None
        settings = {"pids.max": str(tasks)}
        if "memory" in controllers:
            settings["memory.max"] = str(memory_bytes)
        folder = _make(parent, name, settings)
        return Group((folder,)) if folder else None
    pids_parent, memory_parent = _own("pids"), _own("memory")  # v1: one per controller
    pids = _make(pids_parent, name, {"pids.max": str(tasks)}) if pids_parent else None
    if pids is None:
        return None
    memory = (_make(memory_parent, name, {"memory.limit_in_bytes": str(memory_bytes)})
              if memory_parent else None)
    return Group((pids,) + ((memory,) if memory else ()))


def _remove(group: Group) -> None:
    import time

    deadline = time.monotonic() + EMPTY_WAIT
    while group.tasks() and time.monotonic() < deadline:  # the last tasks of a killed tree
        time.sleep(0.01)
    for folder in group.folders:
        with contextlib.suppress(OSError):
            folder.rmdir()


@contextlib.contextmanager
def limited(*, tasks: int, memory_bytes: int) -> Iterator[Group | None]:
    """A fresh group limited to ``tasks`` tasks and ``memory_bytes`` of memory (None where none
    can be made here), removed afterwards."""
    group = _create(tasks, memory_bytes) if os.name == "posix" else None
    try:
        yield group
    finally:
        if group is not None:
            _remove(group)
