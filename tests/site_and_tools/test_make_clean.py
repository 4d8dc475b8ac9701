"""`make clean` removes the virtual environments the Makefile made, and only those: a `.venv`
a user made for their own packages (the name most tools use), or a folder named with
``VENV=...``, is kept with a line that says why."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="needs make")


def _make(folder: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "-C", str(folder), *args],
                          capture_output=True, text=True, timeout=120)


def test_clean_removes_the_venvs_it_made_and_keeps_a_users(tmp_path):
    made, mine = tmp_path / "made", tmp_path / "mine"
    for venv in (made, mine):
        (venv / "bin").mkdir(parents=True)
        (venv / "bin" / "python").write_text("a user's interpreter")
    (made / ".convs2s-made").write_text("")  # what the Makefile's venv rule leaves
    done = _make(tmp_path, "clean", f"VENV={made}", f"LAB_VENV={mine}")
    assert done.returncode == 0, done.stderr
    assert not made.exists()
    assert (mine / "bin" / "python").read_text() == "a user's interpreter"
    assert f"kept {mine}: this Makefile did not make it" in done.stdout


def test_the_venv_rule_leaves_the_mark_clean_looks_for(tmp_path):
    """The rule itself, dry run: it makes the venv and marks it."""
    venv = tmp_path / "v"
    done = _make(tmp_path, "-n", f"{venv}/bin/python", f"VENV={venv}")
    assert done.returncode == 0, done.stderr
    assert f"-m venv {venv}" in done.stdout and f"touch {venv}/.convs2s-made" in done.stdout
