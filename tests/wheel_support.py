"""The course's wheel, built as a learner's `pip install` builds it (tests/site_and_tools:
test_wheel.py reads it, test_colab_like.py installs it)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src" / "convs2s"
#: The shipped models (convs2s.pretrained) are the checkpoints a copy keeps.
MODELS = SRC / "run" / "models"
# What a copy of the repository leaves out: environments, VCS, and what runs and builds write.
_SKIP_NAMES = shutil.ignore_patterns(".git", ".venv", ".venv-*", "build", "dist", "*.egg-info",
                                     "__pycache__", "runs", "checkpoints", "*.pt",
                                     ".pytest_cache", ".ruff_cache", "release", "source",
                                     "submitted", "autograded", "feedback", "gradebook.db",
                                     ".ipynb_checkpoints", "images")


def skip(folder: str, names: list[str]) -> set[str]:
    skipped = _SKIP_NAMES(folder, names)
    if Path(folder).resolve() == MODELS.resolve():
        skipped = {n for n in skipped if not n.endswith(".pt")}
    return skipped


def build_wheel(tmp: Path) -> Path:
    """``pip wheel --no-deps`` of a copy of the repository (tools/ and coursework/ beside src/,
    as in a clone) into ``tmp/dist``; the wheel's path."""
    copy = tmp / "repo"
    shutil.copytree(ROOT, copy, ignore=skip)
    assert (copy / "tools" / "coursework.py").exists()  # beside the package, as in a clone
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
         "-w", str(tmp / "dist"), str(copy)],
        capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    [built] = list((tmp / "dist").glob("convs2s-*.whl"))
    return built
