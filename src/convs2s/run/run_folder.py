"""A training run's folder (``--out``): made, held against a second run, checked before any
work, cleaned up after a failure; and the one-line description of an ``OSError`` there.

One run per folder: :func:`held` makes the folder and takes its lock as one step
(:func:`~convs2s.system.folder_locks.made_and_locked`) for the whole run, refuses a folder
holding another run unless resuming it, and probes that the checkpoints can be written before
training starts; the temporary files of checkpoint writes a killed run left are removed, and
only those. A run that fails removes the folders it made, if it left them empty and still holds
them.
"""

from __future__ import annotations

import errno
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from convs2s.run.checkpoint import CheckpointError
from convs2s.run.final_choices import FINAL, SNAPSHOT_NAME, SNAPSHOTS
from convs2s.system.atomic_files import remove_stale_temps
from convs2s.system.folder_locks import FolderInUse, made_and_locked, remove_empty_folders

__all__ = ["CHECKPOINTS", "claim_folder", "describe_os_error", "held", "remove_empty_folders",
           "remove_killed_runs_temps", "start_over"]

CHECKPOINTS = ("last.pt", "best.pt")
# ".epoch03.pt.<anything>": the snapshot a temporary file was for (atomic_files checks the rest)
_SNAPSHOT_TEMP = re.compile(rf"\.({SNAPSHOT_NAME.pattern})\..*", re.DOTALL)


@contextmanager
def held(folder: Path, resume: bool) -> Iterator[None]:
    """While inside, ``folder`` is this process's run folder: made if needed and locked as one
    step (:func:`~convs2s.system.folder_locks.made_and_locked`), and checked by
    :func:`claim_folder`. If the block fails, the folders this made are removed when the run
    left them empty (its lock aside), before the lock is let go. Another run holding the folder,
    or a folder that cannot be made, is a one-line ``CheckpointError``."""
    inside = False
    try:
        with made_and_locked(folder):
            inside = True
            claim_folder(folder, resume)
            yield
    except FolderInUse as e:
        raise CheckpointError(str(e)) from None
    except OSError as e:
        if inside:
            raise
        raise _unwritable(folder, e) from None


def _unwritable(folder: Path, e: OSError) -> CheckpointError:
    if isinstance(e, FileExistsError | NotADirectoryError):
        return CheckpointError(f"cannot write checkpoints into {folder}: it (or a folder above "
                               "it) is a file. Choose another --out folder.")
    return CheckpointError(f"cannot write checkpoints into {folder} ({e.strerror}). Choose "
                           "another --out folder, or make this one writable.")


def claim_folder(folder: Path, resume: bool) -> None:
    """Check, before any work, that ``folder`` (made, and held by this process) can take this
    run's checkpoints.

    Refuses a folder holding another run (unless resuming it), or a folder it cannot write to
    (probed with a temporary file of the checkpoints' own pattern), and removes the temporary
    files a killed run left (:func:`remove_killed_runs_temps`): a folder holding only those
    and the lock counts as empty.
    """
    snapshots = folder / SNAPSHOTS
    if snapshots.is_symlink() or snapshots.exists() and not snapshots.is_dir():
        raise CheckpointError(f"{snapshots} is not a folder (a symbolic link or a file): this "
                              "run writes and removes its snapshots there only in a folder of "
                              "its own. Remove it, or choose another --out folder.")
    if resume and not (folder / "last.pt").is_file():
        raise CheckpointError(f"{folder} holds no last.pt to resume from; start a new run "
                              "without resume=True (--resume), or pass the run's folder.")
    if not resume and (any((folder / name).exists() for name in (*CHECKPOINTS, FINAL))
                       or any((folder / SNAPSHOTS).glob("epoch*.pt"))):
        raise CheckpointError(
            f"{folder} already holds a training run (last.pt). Continue it with "
            "resume=True (--resume), or choose another output folder."
        )
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".last.pt.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise _unwritable(folder, e) from None
    remove_killed_runs_temps(folder)


def remove_killed_runs_temps(folder: Path) -> None:
    """Remove the temporary files of checkpoint writes a killed run left in ``folder``:
    ``.last.pt.*.tmp``, ``.best.pt.*.tmp``, ``.final.pt.*.tmp`` and ``snapshots/.epochNN.pt.
    *.tmp``, in exactly the pattern of :func:`~convs2s.system.atomic_files.atomic_write`'s names
    (``*`` its eight random characters), and not while a live writer holds one. Nothing else."""
    remove_stale_temps(folder, [*CHECKPOINTS, FINAL])
    snapshots = folder / SNAPSHOTS
    if snapshots.is_dir() and not snapshots.is_symlink():
        names = {m[1] for p in snapshots.iterdir() if (m := _SNAPSHOT_TEMP.fullmatch(p.name))}
        remove_stale_temps(snapshots, sorted(names), suffixes=(".tmp",))


def start_over(folder: str | os.PathLike) -> list[Path]:
    """Remove the training run in ``folder`` so that a new one can start there: its
    checkpoints (last.pt, best.pt, final.pt), its epoch snapshots (``snapshots/epochNN.pt``, and
    the snapshots folder once empty) and the temporary files a killed run left, holding the
    folder's lock while it does: a run still training there is refused (one-line
    ``CheckpointError``) and loses nothing. Anything else in the folder (a copy you keep there,
    your notes, evaluate's metrics) stays. Returns what it removed; nothing for a missing folder.
    """
    folder = Path(folder)
    if not folder.is_dir():
        return []
    removed: list[Path] = []
    try:
        with made_and_locked(folder):
            remove_killed_runs_temps(folder)
            for name in (*CHECKPOINTS, FINAL):
                path = folder / name
                if path.is_file() or path.is_symlink():  # a link goes, never what it points to
                    path.unlink()
                    removed.append(path)
            snapshots = folder / SNAPSHOTS
            if snapshots.is_dir() and not snapshots.is_symlink():
                for path in sorted(snapshots.iterdir()):
                    if SNAPSHOT_NAME.fullmatch(path.name) and (path.is_file()
                                                              or path.is_symlink()):
                        path.unlink()
                        removed.append(path)
                if not any(snapshots.iterdir()):
                    snapshots.rmdir()
    except FolderInUse as e:
        raise CheckpointError(str(e)) from None
    return removed


def describe_os_error(e: OSError, folder: Path) -> str:
    """One line naming an OSError's problem and its fix."""
    where = Path(e.filename).parent if e.filename else folder
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"no space left on device in {where}: free some space there, or choose another "
                "--out folder on a disk with room.")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (f"cannot write to {e.filename or folder} ({e.strerror}): choose another --out "
                "folder, or make this one writable.")
    return f"{e.strerror or e} ({e.filename or folder})."
