"""Notebook 05's ``START_OVER``: :func:`convs2s.run.run_folder.start_over` removes the run in a
folder (its checkpoints, snapshots and a killed run's temporary files) and nothing else a learner
keeps there, and never under a run still training in it."""

from __future__ import annotations

import threading

import pytest

from convs2s.run.checkpoint import CheckpointError
from convs2s.run.run_folder import held, start_over

WAIT_S = 120  # the most a wait may take before the test fails (a condition, never slept)


def _a_run(folder):
    """A run folder as training leaves it, with a learner's own files beside the run."""
    (folder / "snapshots").mkdir(parents=True)
    for name in ("last.pt", "best.pt", "final.pt", "snapshots/epoch01.pt", "snapshots/epoch02.pt",
                 ".last.pt.k2x_9abq.tmp"):  # the last: a killed run's half-written checkpoint
        (folder / name).write_bytes(b"run")
    for name in ("final_backup.pt", "notes.md", "metrics_valid_final.json", "snapshots/mine.txt"):
        (folder / name).write_text("mine")


def _files(folder):
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*")
                  if p.is_file() and p.name != ".convs2s.lock")


def test_start_over_removes_the_run_and_keeps_the_learners_files(tmp_path):
    folder = tmp_path / "runs" / "05_cpu_subword"
    _a_run(folder)
    removed = start_over(folder)
    assert sorted(p.relative_to(folder).as_posix() for p in removed) == [
        "best.pt", "final.pt", "last.pt", "snapshots/epoch01.pt", "snapshots/epoch02.pt"]
    assert _files(folder) == ["final_backup.pt", "metrics_valid_final.json", "notes.md",
                              "snapshots/mine.txt"]
    with held(folder, resume=False):  # a new run may start there
        pass


def test_an_emptied_snapshots_folder_goes_and_a_link_goes_without_its_target(tmp_path):
    folder, kept = tmp_path / "run", tmp_path / "elsewhere.pt"
    (folder / "snapshots").mkdir(parents=True)
    (folder / "snapshots" / "epoch03.pt").write_bytes(b"run")
    kept.write_text("a learner's model")
    (folder / "last.pt").symlink_to(kept)
    start_over(folder)
    assert not (folder / "snapshots").exists() and not (folder / "last.pt").is_symlink()
    assert kept.read_text() == "a learner's model"


def test_a_run_still_training_there_is_refused_and_loses_nothing(tmp_path):
    folder = tmp_path / "run"
    _a_run(folder)
    inside, done = threading.Event(), threading.Event()

    def training():  # the run in another kernel or terminal, holding its folder
        with held(folder, resume=True):
            inside.set()
            done.wait(WAIT_S)

    run = threading.Thread(target=training)
    run.start()
    try:
        assert inside.wait(WAIT_S)
        before = _files(folder)  # as the run holds it (it removed the killed run's temp)
        with pytest.raises(CheckpointError, match="is in use by another run") as e:
            start_over(folder)
        assert "\n" not in str(e.value)
    finally:
        done.set()
        run.join(WAIT_S)
    assert _files(folder) == before


def test_no_folder_is_nothing_to_do_and_nothing_is_made(tmp_path):
    assert start_over(tmp_path / "missing") == []
    assert not (tmp_path / "missing").exists()
