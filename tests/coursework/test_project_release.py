"""Assignment 09 (the project) in a class's copy: its direction is drawn from the class's secret
(the same secret, the same direction; every direction drawn by some class), or fixed with
``--project-direction``, and written into the task, the working cell and grading.json; a
direction the project does not offer is refused in one line. No sandbox, no training."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest

from convs2s.course import project
from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
NAME = "09_project_train_your_own_translator"


def test_a_class_draws_its_direction_from_its_secret():
    drawn = {name: coursework.project_direction(name) for name in
             (f"class-{n}" for n in range(40))}
    assert set(drawn.values()) == set(project.DIRECTIONS)
    assert all(coursework.project_direction(name) == d for name, d in drawn.items())
    assert coursework.project_direction(None) == project.DEFAULT_DIRECTION == "fr-en"
    assert coursework.project_direction("class-1", "en-cs") == "en-cs"
    with pytest.raises(coursework.CourseworkError, match="--project-direction: the project's "
                       "direction is one of fr-en, en-fr, cs-en, en-cs, not 'de-en'"):
        coursework.project_direction("class-1", "de-en")


def _build(tmp_path: Path, *flags: str) -> tuple[int, str]:
    err = io.StringIO()
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):
        code = coursework.main(["--out", str(tmp_path / "source"), "--only", "09", *flags])
    return code, err.getvalue()


def test_the_class_copy_names_its_direction_everywhere(tmp_path):
    code, err = _build(tmp_path, "--variant", "spring-class", "--project-direction", "en-cs")
    assert code == 0, err
    cells = json.loads((tmp_path / "source" / NAME / f"{NAME}.ipynb").read_text())["cells"]
    text = ["".join(c["source"]) for c in cells]
    assert any("**Your class's direction: en→cs.**" in t for t in text)
    (working,) = [t for t in text if t.startswith("DIRECTION = ")]
    assert working.splitlines()[0].startswith('DIRECTION = "en-cs"')
    assert "**en→cs**" in text[0]  # the header
    grading = json.loads((tmp_path / "grading.json").read_text())["assignments"][NAME]
    assert grading["exercises"]["translator"]["variant"] == {"direction": "en-cs"}


def test_a_direction_the_project_does_not_offer_is_one_line(tmp_path):
    code, err = _build(tmp_path, "--public", "--project-direction", "de-en")
    assert code == 2 and err.count("\n") == 1 and "--project-direction" in err, err
    assert not (tmp_path / "source").exists()
