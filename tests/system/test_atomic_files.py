"""convs2s.system.atomic_files: atomic writes that keep modes, and the removal of stale temporary
files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from convs2s.system.atomic_files import (
    atomic_write,
    cannot_write_in,
    is_own_temp,
    remove_stale_temps,
    write_json_atomic,
    write_text_atomic,
)


@pytest.fixture
def umask():
    old = os.umask(0o022)
    yield os.umask
    os.umask(old)


def mode(path) -> int:
    return path.stat().st_mode & 0o777


def names(folder) -> list[str]:
    return sorted(p.name for p in folder.iterdir())


@pytest.mark.parametrize("mask", [0o022, 0o027, 0o077], ids=["022", "027", "077"])
def test_new_file_gets_the_umask_mode_existing_file_keeps_its_own(tmp_path, umask, mask):
    umask(mask)
    path = write_text_atomic(tmp_path / "a.txt", "one")
    assert mode(path) == 0o666 & ~mask and path.read_text() == "one"
    path.chmod(0o640)
    write_text_atomic(path, "two")
    assert mode(path) == 0o640 and path.read_text() == "two"
    assert names(tmp_path) == ["a.txt"]


def test_a_failing_write_leaves_the_old_file_and_no_temp(tmp_path):
    path = write_text_atomic(tmp_path / "a.txt", "old")

    def half(f):
        f.write(b"new but ")
        raise OSError(28, "No space left on device")

    with pytest.raises(OSError, match="No space left"):
        atomic_write(path, half)
    assert path.read_text() == "old" and names(tmp_path) == ["a.txt"]
    with pytest.raises(KeyboardInterrupt):
        atomic_write(tmp_path / "b.txt", lambda f: (_ for _ in ()).throw(KeyboardInterrupt))
    assert names(tmp_path) == ["a.txt"]
    with pytest.raises(ValueError, match="suffix='.bak'"):
        atomic_write(path, lambda f: None, suffix=".bak")


def test_json_is_written_by_a_json_writer(tmp_path):
    obj = {"branch": 'it\'s "quoted"\n', "bleu": 37.71, "wörter": ["ä", None]}
    path = write_json_atomic(tmp_path / "m.json", obj)
    assert json.loads(path.read_text(encoding="utf-8")) == obj
    assert path.read_text(encoding="utf-8").endswith("}\n")


@pytest.mark.parametrize(("name", "target", "own"), [
    (".best.pt.k2x_9abq.tmp", None, True),
    (".best.pt.k2x_9abq.tmp", "best.pt", True),
    (".best.pt.k2x_9abq.tmp", "last.pt", False),
    (".last.pt.k2x_9abq.tmp", "best.pt", False),
    (".train.de.gz.0a1b2c3d.part", "train.de.gz", True),
    (".best.pt.tmp", None, False),  # no random part
    (".best.pt.k2x.tmp", None, False),  # not mkstemp's 8 characters
    ("best.pt.k2x_9abq.tmp", None, False),  # not hidden
    (".best.pt.k2x_9abq.bak", None, False),  # not our suffix
    (".notes.txt", None, False),
])
def test_is_own_temp(name, target, own):
    assert is_own_temp(name, target) is own


def test_remove_stale_temps_removes_only_its_own_pattern(tmp_path):
    own = [".best.pt.k2x_9abq.tmp", ".last.pt.00000000.tmp", ".train.de.gz.abcdefgh.part"]
    other = ["best.pt", ".best.pt.tmp", "notes.tmp", ".hidden", "x.part"]
    for name in own + other:
        (tmp_path / name).write_bytes(b"x")
    (tmp_path / ".dir.abcdefgh.tmp").mkdir()  # a folder, never removed
    os.symlink(tmp_path / "best.pt", tmp_path / ".link.abcdefgh.tmp")  # a link, never removed
    keep = other + [".dir.abcdefgh.tmp", ".link.abcdefgh.tmp"]

    removed = remove_stale_temps(tmp_path, ["best.pt"], suffixes=(".part",))
    assert removed == []
    removed = remove_stale_temps(tmp_path, ["best.pt", "train.de.gz"])
    assert sorted(p.name for p in removed) == [".best.pt.k2x_9abq.tmp",
                                                ".train.de.gz.abcdefgh.part"]
    assert names(tmp_path) == sorted(keep + [".last.pt.00000000.tmp"])
    assert [p.name for p in remove_stale_temps(tmp_path)] == [".last.pt.00000000.tmp"]
    assert names(tmp_path) == sorted(keep)
    assert remove_stale_temps(tmp_path / "missing") == []


def test_a_live_writers_temp_file_is_kept(tmp_path):
    started, finish = threading.Event(), threading.Event()

    def slow(f):
        f.write(b"part one ")
        started.set()
        assert finish.wait(60)
        f.write(b"part two")

    writer = threading.Thread(target=atomic_write, args=(tmp_path / "big.bin", slow))
    writer.start()
    try:
        assert started.wait(60)
        [temp] = tmp_path.iterdir()
        assert is_own_temp(temp.name, "big.bin")
        assert remove_stale_temps(tmp_path) == []  # locked by the live writer
        assert temp.exists()
    finally:
        finish.set()
        writer.join(60)
    assert names(tmp_path) == ["big.bin"]
    assert (tmp_path / "big.bin").read_bytes() == b"part one part two"


def test_a_writer_killed_with_kill_9_leaves_a_temp_the_next_start_removes(tmp_path):
    target = tmp_path / "last.pt"
    script = (
        "import time\n"
        "from convs2s.system.atomic_files import atomic_write\n"
        "def write(f):\n"
        "    f.write(b'half'); f.flush(); print('writing', flush=True); time.sleep(600)\n"
        f"atomic_write({str(target)!r}, write)\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "writing"
        assert remove_stale_temps(tmp_path) == []  # alive: its file is in use
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    [orphan] = tmp_path.iterdir()
    assert is_own_temp(orphan.name, "last.pt")
    deadline = time.monotonic() + 60
    removed = remove_stale_temps(tmp_path, ["last.pt", "best.pt"])
    while not removed and time.monotonic() < deadline:  # the kernel drops the lock at exit
        time.sleep(0.05)
        removed = remove_stale_temps(tmp_path, ["last.pt", "best.pt"])
    assert removed == [orphan] and names(tmp_path) == []


@pytest.mark.skipif(os.name != "posix", reason="needs POSIX folder permissions")
def test_a_read_only_folder_is_not_an_error(tmp_path, monkeypatch):
    (tmp_path / ".best.pt.k2x_9abq.tmp").write_bytes(b"x")
    if os.geteuid() == 0:  # root removes files from read-only folders: the refusal is made up
        real_unlink = Path.unlink

        def refused(self, *args, **kwargs):
            if self.parent == tmp_path:
                raise PermissionError(13, "Permission denied", str(self))
            return real_unlink(self, *args, **kwargs)
        monkeypatch.setattr(Path, "unlink", refused)
    tmp_path.chmod(0o555)
    try:
        assert remove_stale_temps(tmp_path) == []
    finally:
        tmp_path.chmod(0o755)
        monkeypatch.undo()
    assert names(tmp_path) == [".best.pt.k2x_9abq.tmp"]


def test_cannot_write_in_tries_a_file_and_leaves_nothing(tmp_path):
    assert cannot_write_in(tmp_path) is None and list(tmp_path.iterdir()) == []
    assert cannot_write_in(tmp_path / "missing") == "No such file or directory"
    (tmp_path / "file").write_text("x")
    assert cannot_write_in(tmp_path / "file") == "Not a directory"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_cannot_write_in_is_not_fooled_where_os_access_is():
    """/proc takes no new file, though os.access says root may write there."""
    assert cannot_write_in("/proc")


def test_a_probe_that_cannot_be_removed_is_said_so(tmp_path, monkeypatch):
    """A folder that takes files but lets none go (append-only) keeps the probe: said, with
    its name, not a traceback."""
    from convs2s.system import atomic_files

    def refuse(path):
        raise PermissionError(1, "Operation not permitted", str(path))

    monkeypatch.setattr(atomic_files.os, "unlink", refuse)
    said = cannot_write_in(tmp_path)
    assert said.startswith("a file made there cannot be removed again (Operation not "
                           "permitted): ") and ".write-probe." in said, said
