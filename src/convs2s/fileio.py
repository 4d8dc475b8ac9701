"""Writing files so that nothing half-written is ever left behind.

Every file the package writes (checkpoints, data downloads, metrics JSON) goes through
:func:`atomic_write`: the bytes go to a temporary file in the same folder, which is renamed over
the target only once complete. A crash, Ctrl-C or ``kill -9`` leaves either the old file or the
new one, never a mix. The new file keeps the mode of the file it replaces, or gets the mode the
user's umask gives a new file (``mkstemp`` alone would make it 0600).

The temporary files are named ``.<name>.<random>.tmp`` (``.part`` for downloads); a process
killed with ``kill -9`` cannot remove its own, so :func:`remove_stale_temps` removes that
pattern, and only that pattern, at the next start.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import IO, Any

TEMP_SUFFIXES = (".tmp", ".part")


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
    mode = new_file_mode(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=suffix)
    try:
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


def write_text_atomic(path: str | os.PathLike, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically, keeping the file's mode."""
    return atomic_write(path, lambda f: f.write(text.encode("utf-8")))


def write_json_atomic(path: str | os.PathLike, obj: Any, *, indent: int = 2) -> Path:
    """Write ``obj`` as JSON (UTF-8, a final newline) to ``path`` atomically."""
    return write_text_atomic(path, json.dumps(obj, indent=indent, ensure_ascii=False) + "\n")


def is_own_temp(name: str, target: str | None = None) -> bool:
    """Whether ``name`` is one of :func:`atomic_write`'s temporary files (of ``target``)."""
    if not name.startswith(".") or not name.endswith(TEMP_SUFFIXES):
        return False
    stem = name[1:].rsplit(".", 2)[0]  # ".best.pt.abc123.tmp" -> "best.pt"
    return target is None or stem == target


def remove_stale_temps(folder: str | os.PathLike, targets: list[str] | None = None) -> list[Path]:
    """Remove the temporary files an earlier, killed run left in ``folder``; return them.

    Only files named like :func:`atomic_write`'s (``.<target>.<random>.tmp`` / ``.part``), of
    the given target names if any, are touched; nothing else in the folder is.
    """
    folder = Path(folder)
    removed = []
    if not folder.is_dir():
        return removed
    for entry in folder.iterdir():
        if not entry.is_file() or entry.is_symlink():
            continue
        if targets is None and is_own_temp(entry.name) or \
                targets is not None and any(is_own_temp(entry.name, t) for t in targets):
            entry.unlink(missing_ok=True)
            removed.append(entry)
    return removed
