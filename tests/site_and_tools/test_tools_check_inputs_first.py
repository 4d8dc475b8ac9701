"""The tools check what they are given before they make anything or start slow work, and say
what is wrong in one line naming the option.

- ``python -m tools.site``: a missing ``--notebooks`` is found before the translator's export
  (minutes) and before ``--out``'s folders are made; a build that fails leaves none of the
  folders it made.
- ``python -m tools.badges --root nope``: one line naming ``--root`` and the path.
- ``python -m tools.screenshots --checkpoint FILE``: a file that is no checkpoint is refused
  before JupyterLab starts, as a missing one is.
- ``python -m tools.export_pretrained --scores FILE`` with bytes that are not UTF-8: one line
  naming the file; Ctrl-C or SIGTERM while torch loads: one line, exit 130 or 143.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from signal_support import run_while_torch_loads

from tools import badges, export_pretrained, screenshots, site

ROOT = Path(__file__).resolve().parents[2]


def _one_line(capsys, *words: str) -> str:
    out, err = capsys.readouterr()
    assert err.count("\n") == 1 and err.startswith("error: ") and out == "", (out, err)
    assert "Traceback" not in err
    for word in words:
        assert word in err, (word, err)
    return err


# -- tools.site ---------------------------------------------------------------------------------


def _no_export(calls: list):
    def write_assets(dest, log=print):
        calls.append(dest)
        raise site.TranslatorAssetError("the export was not meant to start")
    return write_assets


def test_site_refuses_missing_notebooks_before_making_anything(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    calls: list = []
    monkeypatch.setattr(site, "write_assets", _no_export(calls))
    out = tmp_path / "build" / "deep" / "site"
    for notebooks, words in ((tmp_path / "nope", ["--notebooks", "no such folder"]),
                             (tmp_path, ["no course notebooks", str(tmp_path)])):
        assert site.main(["--out", str(out), "--notebooks", str(notebooks)]) == 2
        _one_line(capsys, *words)
        assert calls == [], "the translator's export started first"
        assert list(tmp_path.iterdir()) == [], "a folder was made"


def test_site_refuses_a_malformed_notebook_before_the_export(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    calls: list = []
    monkeypatch.setattr(site, "write_assets", _no_export(calls))
    notebooks = tmp_path / "notebooks"
    notebooks.mkdir()
    (notebooks / "00_start.ipynb").write_text("[]", encoding="utf-8")
    assert site.main(["--out", str(tmp_path / "build" / "site"), "--notebooks",
                      str(notebooks)]) == 2
    _one_line(capsys, "00_start.ipynb", "not a Jupyter notebook")
    assert calls == [], "the translator's export started first"
    assert [p.name for p in tmp_path.iterdir()] == ["notebooks"], "a folder was made"


def test_a_failed_site_build_leaves_no_folder_it_made(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    calls: list = []
    monkeypatch.setattr(site, "write_assets", _no_export(calls))
    (tmp_path / "build").mkdir()
    (tmp_path / "build" / "mine.txt").write_text("keep")
    assert site.main(["--out", str(tmp_path / "build" / "new" / "site")]) == 2
    _one_line(capsys, "the export was not meant to start")
    assert len(calls) == 1
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["build", "mine.txt"]


# -- tools.badges -------------------------------------------------------------------------------


def test_badges_names_a_root_that_is_no_repository(tmp_path, capsys):
    (tmp_path / "a_file").write_text("x")
    (tmp_path / "empty").mkdir()
    for root, words in ((tmp_path / "nope", "no such folder"),
                        (tmp_path / "a_file", "is a file"),
                        (tmp_path / "empty", "has no pyproject.toml")):
        assert badges.main(["--root", str(root)]) == 2
        _one_line(capsys, f"--root {root}", words)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a_file", "empty"]


# -- tools.screenshots --------------------------------------------------------------------------


@pytest.fixture
def no_capture(monkeypatch) -> list:
    """No browser needed; capturing (JupyterLab, Chromium) records its call instead."""
    calls: list = []

    def capture(names, notebooks, work_dir, log=print, checkpoint=None):
        calls.append(checkpoint)
        return {}

    monkeypatch.setattr(screenshots, "browser_unavailable", lambda: None)
    monkeypatch.setattr(screenshots, "capture", capture)
    return calls


def test_screenshots_checks_the_checkpoint_before_starting_anything(tmp_path, capsys,
                                                                    no_capture, tiny_ckpt):
    not_one = tmp_path / "notes.pt"
    not_one.write_text("not a checkpoint\n")
    out = tmp_path / "images"
    for checkpoint, words in ((not_one, "is no checkpoint"),
                              (tmp_path / "missing.pt", "is not a file"),
                              (tmp_path, "is a folder")):
        assert screenshots.main(["--out", str(out), "--notebooks", str(ROOT / "notebooks"),
                                 "--checkpoint", str(checkpoint)]) == 2
        _one_line(capsys, f"--checkpoint {checkpoint}", words)
        assert no_capture == [] and not out.exists()
    # a checkpoint notebook 06 can use goes through
    assert screenshots.main(["--out", str(out), "--notebooks", str(ROOT / "notebooks"),
                             "--checkpoint", str(tiny_ckpt)]) == 0
    assert no_capture == [tiny_ckpt]


# -- tools.export_pretrained --------------------------------------------------------------------


def test_export_pretrained_names_scores_that_are_not_utf8(tmp_path, capsys):
    scores = tmp_path / "scores.json"
    scores.write_bytes(b'{"machine": "Ger\xe4t"}\n')
    argv = ["--run", str(tmp_path / "run"), "--direction", "de-en", "--machine", "m",
            "--command", "c", "--scores", str(scores)]
    assert export_pretrained.main(argv) == 2
    _one_line(capsys, f"--scores {scores}", "not UTF-8", "iconv")
    scores.write_text("{not json", encoding="utf-8")
    assert export_pretrained.main(argv) == 2
    _one_line(capsys, f"--scores {scores}", "not JSON")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["scores.json"]



@pytest.mark.parametrize(("sig", "line", "status"), [("SIGINT", "interrupted.", 130),
                                                     ("SIGTERM", "stopped by SIGTERM.", 143)])
def test_a_signal_while_torch_loads_stops_export_pretrained_in_one_line(tmp_path, sig, line,
                                                                        status):
    """A stand-in torch signals its own import (tests/system/test_signals.py's way)."""
    done = run_while_torch_loads(tmp_path, sig, "-m", "tools.export_pretrained", "--help")
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (status, [line], "")


@pytest.mark.parametrize(("sig", "word", "status"), [("SIGINT", "interrupted", 130),
                                                     ("SIGTERM", "stopped by SIGTERM", 143)])
@pytest.mark.parametrize("command", ["tools.site", "tools.site.flipbook_data"])
def test_a_signal_while_torch_loads_stops_the_site_builders_in_one_line(tmp_path, command, sig,
                                                                        word, status):
    """The package tools.site imported torch at its top (through the widgets' declarations),
    before either command's StopSignals: a traceback. Now torch loads inside the command, and
    the site's build leaves no folder it made."""
    out = tmp_path / "made" / "site"
    args = (["--out", str(out)] if command == "tools.site"
            else ["--run", str(tmp_path / "none.pt")])
    done = run_while_torch_loads(tmp_path, sig, "-m", command, *args)
    lines = done.stderr.splitlines()
    assert (done.returncode, len(lines), done.stdout) == (status, 1, ""), done.stderr
    assert lines[0].startswith(f"{word}: ") and "Traceback" not in done.stderr, lines
    assert not (tmp_path / "made").exists()


def test_export_pretrained_as_a_command_still_reads_its_arguments():
    done = subprocess.run([sys.executable, "-m", "tools.export_pretrained", "--run", "x"],
                          cwd=ROOT, text=True, capture_output=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "required" in done.stderr and "Traceback" not in done.stderr
