"""make test builds the site once (make site, with its record) and the tests read that build
(tests/shared_site.py): the record gives back the build's result, and a site built from other
notebooks than those there now is refused, saying what to run. The real build and its record
are checked by test_site.py (the ``built`` fixture); here a made-up site stands for it."""

from __future__ import annotations

import hashlib
import json

import pytest
import shared_site

from tools import site


def _made_up(tmp_path, monkeypatch):
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    nb = notebooks / "01_a.ipynb"
    nb.write_text("{}")
    out = tmp_path / "build" / "site"
    out.mkdir(parents=True)
    (out / site.MARKER).write_text("built")
    result = site.BuildResult(
        out, site.Staged([site.Lesson("01_a", "01 · A", "5 minutes", ("one",), "none")], 3, 1,
                         {"01_a.ipynb": hashlib.sha256(b"{}").hexdigest()}), 12.5, [])
    record = tmp_path / "build" / "site.json"
    record.write_text(json.dumps(result.as_record()))
    monkeypatch.setenv(shared_site.RECORD_VARIABLE, str(record))
    return notebooks, result


def test_the_tests_read_the_build_make_test_made(tmp_path, monkeypatch):
    notebooks, result = _made_up(tmp_path, monkeypatch)
    assert shared_site.recorded(notebooks) == result


def test_a_site_of_other_notebooks_is_refused(tmp_path, monkeypatch):
    notebooks, _ = _made_up(tmp_path, monkeypatch)
    (notebooks / "01_a.ipynb").write_text('{"changed": 1}')
    with pytest.raises(AssertionError, match="other notebooks.*run make test again"):
        shared_site.recorded(notebooks)


def test_a_record_without_its_site_is_refused(tmp_path, monkeypatch):
    notebooks, result = _made_up(tmp_path, monkeypatch)
    (result.out / site.MARKER).unlink()
    with pytest.raises(AssertionError, match="no site in .*run make site"):
        shared_site.recorded(notebooks)


def test_without_make_test_there_is_no_record(tmp_path, monkeypatch):
    monkeypatch.delenv(shared_site.RECORD_VARIABLE, raising=False)
    assert shared_site.recorded(tmp_path) is None
