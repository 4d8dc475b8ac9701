"""Writing files so that nothing half-written is ever left behind.

Every file the package writes (checkpoints, data downloads, metrics JSON) goes through
:func:`atomic_write`: the bytes go to a temporary file in the same folder, which is renamed over
the target only once complete. A crash, Ctrl-C or ``kill -9`` leaves either the old file or the
new one, never a mix. The new file keeps the mode of the file it replaces, or gets the mode the
user's umask gives a new file (``mkstemp`` alone would make it 0600).

The temporary files are named ``.<name>.<random>.tmp`` (``.part`` for downloads), ``<random>``
being ``mkstemp``'s eight characters; a process killed with ``kill -9`` cannot remove its own,
so :func:`remove_stale_temps` removes that pattern, and only that pattern, at the next start.
While a temporary file is being written its writer holds an exclusive ``flock`` on it (where the
system has ``fcntl``); the lock dies with the process, so a file still locked belongs to a live
writer (another notebook, a second training run) and is left alone.

A run's folder is made and locked by :mod:`convs2s.system.folder_locks`.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

try:
    import fcntl
except ImportError:  # Windows: no flock; an open file cannot be deleted there anyway
    fcntl = None

TEMP_SUFFIXES = (".tmp", ".part")

# ".<target>.<mkstemp's 8 random characters><suffix>", e.g. ".best.pt.k2x_9abq.tmp"
_TEMP_NAME = re.compile(r"\.(?P<target>.+)\.[a-z0-9_]{8}(?P<suffix>\.[a-z]+)", re.DOTALL)


def _umask() -> int:
    mask = os.umask(0o022)  # reading the umask means setting it; put it straight back
    os.umask(mask)
    return mask


def new_file_mode(path: str | os.PathLike) -> int:
    """The mode ``path`` should get: its current one if it exists, else 0666 less the umask."""
    try:
        return os.stat(path).st_mode & 0o7777
    except FileNotFoundError:
        return 0o666 & ~_umask()


def atomic_write(path: str | os.PathLike, write: Callable[[IO[bytes]], Any], *,
                 suffix: str = ".tmp") -> Path:
    """Call ``write(f)`` on a temporary file beside ``path``, then rename it to ``path``.

    The folder must exist. On any exception (a full disk, Ctrl-C) the temporary file is removed
    and the exception propagates; ``path`` is left as it was.
    """
    path = Path(path)
    if suffix not in TEMP_SUFFIXES:
        raise ValueError(f"suffix={suffix!r}: use one of {TEMP_SUFFIXES} (what cleanup removes).")
    mode = new_file_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
        _lock(fd)
        with os.fdopen(fd, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def cannot_write_in(folder: str | os.PathLike) -> str | None:
    """None if a file can be made in ``folder``, found by making one (and removing it); else
    why not, in the system's words ("Permission denied", "No such file or directory").

    ``os.access`` answers yes to root for any folder, ``/proc`` and read-only mounts included,
    so a command that checked with it would fail after its work instead of before. The probe
    (``.write-probe.<random>.tmp``) is removed at once; where it cannot be removed (a folder
    that takes files but lets none go), that is said instead."""
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".write-probe.", suffix=".tmp")
    except OSError as e:
        return e.strerror or str(e)
    try:
        os.close(fd)
    finally:
        try:
            os.unlink(probe)
        except OSError as e:
            return f"a file made there cannot be removed again ({e.strerror or e}): {probe}"
    return None


def _lock(fd: int) -> None:
    """Mark the temporary file as in use; the lock goes when the file is closed or we die."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a file system without locks: write anyway
            pass


def _in_use(path: Path) -> bool:
    """Whether a live process holds the write lock of ``path`` (False where locks are unknown)."""
    if fcntl is None:
        return False
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return True  # cannot look: leave it alone
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return False  # nobody holds it (closing fd releases ours)
    except OSError:
        return True
    finally:
        os.close(fd)


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically, keeping the file's mode."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def write_json_atomic(path: str | os.PathLike, obj: Any, *, indent: int = 2) -> Path:
    """Write ``obj`` as JSON (UTF-8, a final newline) to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def is_own_temp(name: str, target: str | None = None, *,
                suffixes: tuple[str, ...] = TEMP_SUFFIXES) -> bool:
    """Whether ``name`` is one of :func:`atomic_write`'s temporary files (of ``target``).

    ``".best.pt.k2x_9abq.tmp"`` is (of ``"best.pt"``); ``".best.pt.tmp"``, ``"best.pt.tmp"``
    or ``".notes.txt"`` are not.
    """
    m = _TEMP_NAME.fullmatch(name)
    if m is None or m["suffix"] not in suffixes:
        return False
    return target is None or m["target"] == target


def remove_stale_temps(folder: str | os.PathLike, targets: list[str] | None = None, *,
                       suffixes: tuple[str, ...] = TEMP_SUFFIXES) -> list[Path]:
    """Remove the temporary files an earlier, killed run left in ``folder``; return them.

    Only regular files named like :func:`atomic_write`'s (``.<target>.<random>.tmp`` /
    ``.part``), of the given target names and suffixes if any, are touched; nothing else in the
    folder is. A temporary file a live process is still writing (it holds the lock) is kept,
    and so is one that cannot be removed (a read-only folder): cleanup never fails.
    """
    folder = Path(folder)
    removed: list[Path] = []
    if not folder.is_dir():
        return removed
    try:
        entries = list(folder.iterdir())
    except OSError:
        return removed
    for entry in entries:
        own = (is_own_temp(entry.name, suffixes=suffixes) if targets is None else
               any(is_own_temp(entry.name, t, suffixes=suffixes) for t in targets))
        if not own or entry.is_symlink() or not entry.is_file() or _in_use(entry):
            continue
        try:
            entry.unlink()
        except OSError:  # gone already, or a read-only folder: nothing to do
            continue
        removed.append(entry)
    return removed
