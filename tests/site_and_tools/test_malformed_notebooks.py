"""The course's tools on a file that is not a proper notebook: one line, nothing written.

``tools.strip_solutions``, ``tools.site`` and ``tools.coursework`` read a notebook's JSON with
plain dict and list access; ``tools.notebook_format`` checks its shape first. Each case below
once ended the tool in a traceback (AttributeError, TypeError) instead of one line naming the
file and what is wrong.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tools import coursework, site, strip_solutions
from tools.notebook_format import NotebookFormatError, check_notebook

ROOT = Path(__file__).resolve().parents[2]
FIRST = ("# 01 · A lesson\n\n**What you will learn**\n- a thing\n\n"
         "**Estimated time:** 5 minutes.\n")


def _good() -> dict:
    """A notebook every tool accepts, with a solution cell that stores an output."""
    return {"cells": [
        {"cell_type": "markdown", "id": "a", "metadata": {}, "source": FIRST},
        {"cell_type": "code", "id": "b", "execution_count": 1, "source": "#@title Solution\nx = 1",
         "metadata": {"cellView": "form"},
         "outputs": [{"output_type": "stream", "name": "stdout", "text": "1\n"}]},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def _malformed(case: str):
    nb = _good()
    cells = nb["cells"]
    if case == "a list, not a notebook":
        return [nb]
    if case == "cells that are strings":
        nb["cells"] = ["# 01 · A lesson", *cells]
    elif case == "a source of numbers":
        cells[1]["source"] = [1, 2]
    elif case == "metadata that is a list":
        cells[1]["metadata"] = ["cellView", "form"]
    elif case == "convs2s metadata that is a string":
        cells[1]["metadata"]["convs2s"] = "solution"
    elif case == "jupyter metadata that is a list":
        cells[1]["metadata"]["jupyter"] = ["source_hidden"]
    elif case == "outputs that are a string":
        cells[1]["outputs"] = "1"
    elif case == "an output that is a list":
        cells[1]["outputs"] = [["1"]]
    elif case == "widget state of numbers":
        nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {
            "state": {"m1": 3}}}
    return nb


# each case, and what the message says is wrong
CASES = [("a list, not a notebook", "not a Jupyter notebook"),
         ("cells that are strings", "cell 0: a cell must be an object"),
         ("a source of numbers", "its source must be"),
         ("metadata that is a list", "its metadata must be an object"),
         ("convs2s metadata that is a string", "metadata.convs2s must be an object"),
         ("jupyter metadata that is a list", "metadata.jupyter must be an object"),
         ("outputs that are a string", "its outputs must be a list"),
         ("an output that is a list", "must be an object, not a list"),
         ("widget state of numbers", "model m1 must be an object")]


def _folder(tmp_path: Path, case: str) -> tuple[Path, Path, Path]:
    """notebooks/ holding a good notebook 00 (with a solution output to strip) and the
    malformed notebook 01; their paths."""
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    good, bad = notebooks / "00_good.ipynb", notebooks / "01_bad.ipynb"
    good.write_text(json.dumps(_good()).replace("01 · A lesson", "00 · Good"))
    bad.write_text(json.dumps(_malformed(case)))
    return notebooks, good, bad


def _one_line(err: str, path: Path, words: str) -> None:
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert str(path) in err and words in err, err


@pytest.mark.parametrize(("case", "words"), CASES)
def test_each_shape_problem_is_named_in_one_line(case, words):
    with pytest.raises(NotebookFormatError) as e:
        check_notebook(_malformed(case), "x.ipynb")
    assert str(e.value).startswith("x.ipynb: ") and "\n" not in str(e.value)
    assert words in str(e.value), str(e.value)


def test_the_course_notebooks_and_a_good_one_pass():
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        check_notebook(json.loads(path.read_text(encoding="utf-8")), path)
    good = _good()
    assert check_notebook(copy.deepcopy(good), "x") == good


@pytest.mark.parametrize(("case", "words"), CASES)
def test_strip_solutions_refuses_a_malformed_notebook_in_one_line_writing_nothing(
        tmp_path, capsys, case, words):
    notebooks, good, bad = _folder(tmp_path, case)
    before = good.read_text()
    assert strip_solutions.main([str(good), str(bad)]) == 2
    out, err = capsys.readouterr()
    _one_line(err, bad, words)
    assert good.read_text() == before, "the good notebook is not written either"
    assert strip_solutions.main([str(good)]) == 0, "the good one alone is stripped"
    assert good.read_text() != before


@pytest.mark.parametrize(("case", "words"), CASES)
def test_site_refuses_a_malformed_notebook_in_one_line_writing_nothing(
        tmp_path, capsys, monkeypatch, case, words):
    notebooks, _, bad = _folder(tmp_path, case)
    monkeypatch.chdir(ROOT)  # the README, images and pyproject.toml of the course
    out = tmp_path / "site"
    assert site.main(["--out", str(out), "--notebooks", str(notebooks)]) == 2
    _one_line(capsys.readouterr().err, bad, words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["notebooks"], "nothing written"


@pytest.mark.parametrize(("case", "words"), CASES)
def test_coursework_refuses_a_malformed_notebook_in_one_line_writing_nothing(
        tmp_path, capsys, case, words):
    notebooks, _, bad = _folder(tmp_path, case)
    (tmp_path / "hidden").mkdir()
    out = tmp_path / "source"
    assert coursework.main(["--out", str(out), "--notebooks", str(notebooks),
                            "--hidden", str(tmp_path / "hidden")]) == 2
    _one_line(capsys.readouterr().err, bad, words)
    assert not out.exists()
