"""Runs started together into one new --out folder: exactly one trains there, whoever makes the
folder, and no run removes a folder or a lock it does not hold.

The runs here are :func:`convs2s.run.run_folder.held`, what ``train`` holds its folder with,
raced in threads released by a barrier (many pairs) and in a child process paused between its
check for the folder and its ``mkdir``. Every wait is for a condition, never a fixed time.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from convs2s.run.checkpoint import CheckpointError
from convs2s.run.run_folder import held
from convs2s.system.folder_locks import LOCK_NAME

PAIRS = 200
WAIT_S = 120  # the most any one wait may take before the test fails (never slept)


class _Pair:
    """Two runs into one folder; each counts itself done once it is refused or inside."""

    def __init__(self):
        self.start = threading.Barrier(2)
        self.done = threading.Condition()
        self.attempts = 0
        self.inside: list[str] = []
        self.refused: list[str] = []
        self.seen_while_inside: list[tuple[bool, bool]] = []
        self.errors: list[str] = []

    def attempted(self) -> None:
        with self.done:
            self.attempts += 1
            self.done.notify_all()

    def run(self, folder: Path, name: str) -> None:
        self.start.wait(WAIT_S)
        try:
            with held(folder, resume=False):
                self.inside.append(name)
                self.attempted()
                with self.done:  # stay inside until the other run has tried
                    assert self.done.wait_for(lambda: self.attempts == 2, WAIT_S)
                # the other run was refused: this one still has its folder and its lock
                self.seen_while_inside.append(((folder / LOCK_NAME).is_file(), folder.is_dir()))
                (folder / "last.pt").write_text(name)
        except CheckpointError:
            self.refused.append(name)
            self.attempted()
        except Exception as e:  # anything else fails the test, without keeping the other waiting
            self.errors.append(f"{name}: {e!r}")
            self.attempted()


def test_two_runs_released_together_into_a_new_folder_give_exactly_one_run(tmp_path):
    switch = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # threads take turns as often as they can: more interleavings
    try:
        for i in range(PAIRS):
            folder = tmp_path / f"pair{i:03d}" / "run"  # neither folder exists yet
            pair = _Pair()
            threads = [threading.Thread(target=pair.run, args=(folder, name))
                       for name in ("a", "b")]
            for t in threads:
                t.start()
            for t in threads:
                t.join(WAIT_S)
            assert not pair.errors, (i, pair.errors)
            assert len(pair.inside) == 1 and len(pair.refused) == 1, (i, pair.inside)
            assert pair.seen_while_inside == [(True, True)], (i, "lost its lock or folder")
            assert (folder / "last.pt").read_text() == pair.inside[0], i  # no lost checkpoint
    finally:
        sys.setswitchinterval(switch)


def _paused_run(folder: Path) -> subprocess.Popen:
    """A child process that runs ``held(folder)``, paused just before its first ``mkdir`` (when
    it has seen the folder missing) until a line arrives on its stdin; it prints what became
    of it."""
    code = textwrap.dedent(f"""
        import os, sys
        from pathlib import Path
        from convs2s.run.checkpoint import CheckpointError
        from convs2s.run.run_folder import held

        real_mkdir = os.mkdir

        def paused_mkdir(*args, **kwargs):
            os.mkdir = real_mkdir
            print("paused", flush=True)
            sys.stdin.readline()
            return real_mkdir(*args, **kwargs)

        os.mkdir = paused_mkdir
        try:
            with held(Path({str(folder)!r}), resume=False):
                print("inside", flush=True)
        except CheckpointError as e:
            print("refused:", e, flush=True)
    """)
    return subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, text=True)


def test_a_run_paused_between_its_check_and_its_mkdir_removes_nothing_and_lets_no_third_in(
        tmp_path):
    folder = tmp_path / "run"
    second = _paused_run(folder)
    try:
        assert second.stdout.readline().strip() == "paused"
        assert not folder.exists()
        with held(folder, resume=False):  # the first run makes the folder and holds it
            second.stdin.write("go\n")
            second.stdin.flush()
            assert second.stdout.readline().startswith("refused: ")
            assert second.wait(WAIT_S) == 0
            assert (folder / LOCK_NAME).is_file(), "the second run removed the first's lock"
            third: list[str] = []

            def third_run():
                try:
                    with held(folder, resume=False):
                        third.append("inside")
                except CheckpointError:
                    third.append("refused")

            t = threading.Thread(target=third_run)
            t.start()
            t.join(WAIT_S)
            assert third == ["refused"], "a third run trained beside the first"
            (folder / "last.pt").write_text("first")
        assert (folder / "last.pt").read_text() == "first"
    finally:
        if second.poll() is None:
            second.kill()
        second.wait(WAIT_S)
        second.stdin.close()
        second.stdout.close()


def test_a_run_that_fails_in_a_folder_it_made_removes_it_and_its_lock(tmp_path):
    folder = tmp_path / "new" / "run"
    with pytest.raises(RuntimeError, match="data failed"):
        with held(folder, resume=False):
            raise RuntimeError("data failed")
    assert list(tmp_path.iterdir()) == []  # both folders it made are gone
    with held(folder, resume=False):  # and the next run makes them again
        assert (folder / LOCK_NAME).is_file()
