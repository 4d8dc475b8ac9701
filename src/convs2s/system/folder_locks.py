"""Holding a folder for one run at a time: the lock of a run's folder, and the folder made and
locked as one step.

:func:`folder_lock` holds a folder for this thread: an exclusive ``flock`` on its
``.convs2s.lock`` file, which dies with its process, so a killed run leaves no stale lock.
:func:`made_and_locked` makes a run's folder and locks it as one step: one run per folder,
however many start at the same instant, and a run removes only a folder it made and still
holds. A lock file planted by a folder from elsewhere is never followed or written through
(:class:`UnsafeLock`).
"""

from __future__ import annotations

import errno
import os
import stat
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

try:
    import fcntl
except ImportError:  # Windows: no flock; the lock does nothing there
    fcntl = None

__all__ = ["LOCK_NAME", "FolderInUse", "UnsafeLock", "folder_lock", "made_and_locked",
           "make_folders", "remove_empty_folders"]

LOCK_NAME = ".convs2s.lock"
_this_thread = threading.local()  # .held: real path of a locked folder -> [fd, depth]


def _held() -> dict[str, list]:
    """The folders this thread holds: a lock is taken per thread, so that two runs started
    in threads of one process exclude each other as two processes do."""
    if not hasattr(_this_thread, "held"):
        _this_thread.held = {}
    return _this_thread.held


class FolderInUse(RuntimeError):
    """Another live process holds the folder (a run writing its checkpoints there)."""


class UnsafeLock(FolderInUse):
    """The lock file's place holds something other than a plain file (a symbolic link, a
    folder, a pipe): a run folder from elsewhere may plant one, and following it would
    overwrite a file outside the folder."""


def _open_lock_file(path: Path) -> int:
    """The lock file opened for reading and writing (created if missing), never through a
    symbolic link and only if it is a plain file; ``UnsafeLock`` (one line) otherwise."""
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    refuse = UnsafeLock(f"{path} is not a plain file (a symbolic link, a folder or a device): "
                        "this run will not write through it; remove it or choose another --out "
                        "folder.")
    if path.is_symlink():  # where O_NOFOLLOW does not exist
        raise refuse
    try:
        fd = os.open(path, flags, 0o666)
    except OSError as e:
        if e.errno in (errno.ELOOP, errno.EISDIR, errno.ENXIO, errno.EMLINK):
            raise refuse from None
        raise
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise refuse
    return fd


def _still_there(fd: int, path: Path) -> bool:
    """Whether ``path`` is still the file open as ``fd`` (not removed, nor replaced)."""
    try:
        st = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino)


def _take(folder: Path) -> str:
    """Lock ``folder`` for this thread (re-entrant) and return its key for :func:`_let_go`.

    ``FolderInUse`` while another thread or process holds it; ``FileNotFoundError`` if the
    folder is gone. A lock file its folder's maker removed while we waited for it (the maker
    gives a folder up with the lock still held) is not a lock: the current one is taken."""
    key, held = os.path.realpath(folder), _held()
    if key in held:
        held[key][1] += 1
        return key
    if fcntl is None:
        held[key] = [None, 1]
        return key
    path = folder / LOCK_NAME
    while True:
        fd = _open_lock_file(path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise FolderInUse(
                f"{folder} is in use by another run (process {holder}) writing its checkpoints "
                "there: wait for it to end, or choose another --out folder.") from None
        except OSError:  # a file system without locks: carry on unlocked
            break
        if _still_there(fd, path):
            break
        os.close(fd)
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    held[key] = [fd, 1]
    return key


def _let_go(key: str) -> None:
    held = _held()
    held[key][1] -= 1
    if not held[key][1]:
        fd = held.pop(key)[0]
        if fd is not None:
            os.close(fd)  # releases the lock; the file stays (removing it would race)


@contextmanager
def folder_lock(folder: str | os.PathLike) -> Iterator[None]:
    """Hold ``folder`` for this thread while the block runs; another thread or process is
    refused.

    An exclusive ``flock`` on ``folder/.convs2s.lock``: the lock dies with its process (a
    killed run leaves no stale lock), and the file names the holder's process id for the
    message. Re-entrant within a thread (a benchmark that holds the folder may call ``train``,
    which takes it again). ``FolderInUse`` (one line) while another holds it. Where the system
    has no ``flock`` (Windows) it does nothing. The lock file is never opened through a
    symbolic link, and must be a plain file (``UnsafeLock``, one line, otherwise).
    """
    key = _take(Path(folder))
    try:
        yield
    finally:
        _let_go(key)


def _identity(folder: Path) -> tuple[int, int, int] | None:
    """``folder``'s device, inode and change time while it is a folder, else None: a folder
    removed and made again by another process is another folder (even where the inode number
    is used again, its change time is new)."""
    try:
        st = os.stat(folder)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_ctime_ns) if stat.S_ISDIR(st.st_mode) else None


def make_folders(folder: str | os.PathLike) -> list[Path]:
    """Make ``folder`` and its missing parents; the folders this call's own ``mkdir`` made,
    deepest first (a folder another process made at the same instant is not among them).

    ``OSError`` as ``mkdir`` gives it (``FileExistsError``: a file is in the way), after
    removing the parents this call made."""
    folder = Path(folder)
    made: list[Path] = []
    parent_there = 0  # "no such file" from mkdir while the same parent was there all along
    for _ in range(100):  # another process may remove a parent we made or found: try again
        before = _identity(folder.parent)
        try:
            os.mkdir(folder)
            return [folder, *made]
        except FileExistsError:
            if not folder.is_dir():
                remove_empty_folders(made)
                raise
            return made
        except FileNotFoundError:
            if folder.parent == folder:
                raise
            try:
                parents = make_folders(folder.parent)
            except OSError:
                remove_empty_folders(made)
                raise
            # the same folder before and after: no process removed and made it again
            same = not parents and before is not None and _identity(folder.parent) == before
            parent_there = parent_there + 1 if same else 0
            if parent_there == 2:  # twice: a folder that takes no new folder (/proc), no race
                remove_empty_folders(made)
                raise FileNotFoundError(errno.ENOENT, f"{folder.parent} takes no new folder",
                                        str(folder)) from None
            made = [*parents, *made]
        except OSError:
            remove_empty_folders(made)
            raise
    raise FileNotFoundError(errno.ENOENT, "its parent folders keep being removed", str(folder))


def remove_empty_folders(folders: list[Path]) -> None:
    """Remove ``folders`` (deepest first) while they are empty; stop at the first that is not."""
    for folder in folders:
        try:
            folder.rmdir()
        except OSError:
            return


@contextmanager
def made_and_locked(folder: str | os.PathLike) -> Iterator[list[Path]]:
    """Make ``folder`` if missing and hold its lock (:func:`folder_lock`) while the block runs;
    yields the folders this call made (:func:`make_folders`).

    Whoever makes the folder does not own it: the lock does. Two runs started at the same
    instant may both find it missing; one ``mkdir`` makes it, and the first to lock it wins, the
    other is refused (``FolderInUse``) and removes nothing. If the block fails while the folder
    holds nothing but the lock, the folders this call made are removed before the lock is let
    go, so that nothing another run holds is ever removed; a run that was waiting for that lock
    finds it gone and makes the folder again.
    """
    folder = Path(folder)
    for attempt in range(100):
        made = make_folders(folder)
        try:
            key = _take(folder)
            break
        except FileNotFoundError:  # its maker gave it up between our mkdir and our lock
            if attempt == 99:
                raise
    try:
        yield made
    except BaseException:
        if made[:1] == [folder] and _only_the_lock(folder):
            (folder / LOCK_NAME).unlink(missing_ok=True)
            remove_empty_folders(made)
        raise
    finally:
        _let_go(key)


def _only_the_lock(folder: Path) -> bool:
    try:
        return set(os.listdir(folder)) <= {LOCK_NAME}
    except OSError:
        return False
