"""convs2s.system.folder_locks: a run folder's lock file is never followed or written through."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# -- a run folder from elsewhere: its lock file is never followed or written through ----------


def _planted_link(tmp_path):
    from convs2s.system.folder_locks import LOCK_NAME

    outside = tmp_path / "outside.txt"
    outside.write_text("precious\n")
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).symlink_to(outside)
    return folder, outside


def test_a_lock_file_that_is_a_symbolic_link_is_refused_and_its_target_untouched(tmp_path):
    from convs2s.system.folder_locks import UnsafeLock, folder_lock

    folder, outside = _planted_link(tmp_path)
    with pytest.raises(UnsafeLock, match="not a plain file") as e:
        with folder_lock(folder):
            pass
    assert "\n" not in str(e.value)
    assert outside.read_text() == "precious\n"


def test_a_dangling_lock_link_creates_nothing_at_its_target(tmp_path):
    from convs2s.system.folder_locks import LOCK_NAME, UnsafeLock, folder_lock

    folder = tmp_path / "run"
    folder.mkdir()
    (folder / LOCK_NAME).symlink_to(tmp_path / "made_by_the_lock")
    with pytest.raises(UnsafeLock):
        with folder_lock(folder):
            pass
    assert not (tmp_path / "made_by_the_lock").exists()


@pytest.mark.parametrize("kind", ["folder", "fifo"])
def test_a_lock_place_holding_a_folder_or_a_pipe_is_refused(tmp_path, kind):
    from convs2s.system.folder_locks import LOCK_NAME, UnsafeLock, folder_lock

    lock = tmp_path / LOCK_NAME
    lock.mkdir() if kind == "folder" else os.mkfifo(lock)
    with pytest.raises(UnsafeLock):
        with folder_lock(tmp_path):
            pass


def test_train_refuses_a_run_folder_with_a_planted_lock_link_in_one_line(tmp_path, capsys):
    from convs2s.run.train import main

    folder, outside = _planted_link(tmp_path)
    code = main(["--preset", "quick", "--out", str(folder)])
    err = capsys.readouterr().err.strip()
    assert code != 0 and len(err.splitlines()) == 1 and "not a plain file" in err, err
    assert outside.read_text() == "precious\n"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs Linux's /proc")
def test_a_folder_that_takes_no_new_folder_is_named_at_once():
    """mkdir in /proc says "no such file" though /proc is there: that is not a parent removed
    by another process (which make_folders retries), and it is said so, naming /proc."""
    from convs2s.system.folder_locks import make_folders

    with pytest.raises(FileNotFoundError) as raised:
        make_folders("/proc/convs2s-no/such")
    assert raised.value.strerror == "/proc takes no new folder", raised.value


def test_a_parent_removed_and_made_again_by_another_process_is_retried(tmp_path, monkeypatch):
    """Another process that removes the parent and makes it again (twice) between this call's
    mkdir and its look at the parent is a race to wait out, not a folder that takes none."""
    from convs2s.system import folder_locks

    parent, target = tmp_path / "p", tmp_path / "p" / "c"
    parent.mkdir()
    real_mkdir, raced = os.mkdir, []

    def mkdir(path, *args, **kwargs):
        if Path(path) == target and len(raced) < 3:  # the other process, just before us
            raced.append(path)
            os.rmdir(parent)
            real_mkdir(parent)
            raise FileNotFoundError(2, "No such file or directory", str(path))
        return real_mkdir(path, *args, **kwargs)

    monkeypatch.setattr(folder_locks.os, "mkdir", mkdir)
    assert folder_locks.make_folders(target) == [target] and target.is_dir()
    assert len(raced) == 3
