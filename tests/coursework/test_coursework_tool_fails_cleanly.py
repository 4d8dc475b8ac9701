"""The course's tools under a careless or hostile user.

``tools/coursework.py`` writes only into a folder it made (its ``.convs2s-coursework`` marker)
or a new one, never where nbgrader keeps student versions, judges a symlink by where it points,
and says what is wrong with ``--out`` in one line before any work. Every tool
(``coursework``, ``badges``, ``screenshots``, ``strip_solutions``, ``time_estimate``,
``site.flipbook_data``) stops on Ctrl-C or SIGTERM
with one line and exit 130 / 143, never a traceback. Each tool is started with SIGINT and SIGTERM
at their defaults (``signal_support.default_signals``), so that the tests also pass when the test
run itself was started with SIGINT ignored (a background job, ``nohup``).
"""

from __future__ import annotations

import errno
import json
import os
import select
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from signal_support import default_signals, run_while_torch_loads, wait_until_blocked
from test_nbgrader_release import FIXTURE_HIDDEN, _cli, _course, fixture_notebook, write_fixture

from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
# A limit for a subprocess to reach the point the test waits for: generous for a busy machine.
START_LIMIT_S = 300


def _tree(folder: Path) -> dict[str, bytes | str]:
    """Every file (its bytes), folder and symlink under ``folder``; symlinks are not followed."""
    found: dict[str, bytes | str] = {}
    for dirpath, dirnames, filenames in os.walk(folder):
        here = Path(dirpath)
        for name in dirnames + filenames:
            path = here / name
            key = path.relative_to(folder).as_posix()
            if path.is_symlink():
                found[key] = f"-> {os.readlink(path)}"
            elif path.is_dir():
                found[key] = "folder"
            else:
                found[key] = path.read_bytes()
    return found


def _refused(proc: subprocess.CompletedProcess, *words: str) -> None:
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    assert proc.stdout == "", proc.stdout
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


# --------------------------------------------------------------------------------------------
# It writes only into folders it made
# --------------------------------------------------------------------------------------------


def test_an_existing_folder_without_the_marker_is_refused(tmp_path):
    write_fixture(tmp_path)
    mine = tmp_path / "my_notes"
    mine.mkdir()
    (mine / "notes.txt").write_text("my notes")
    (tmp_path / "empty").mkdir()
    before = _tree(tmp_path)
    for out, words in [
        ("notebooks", ["course notebooks"]),  # `--out notebooks --only 01` wrote into it
        (str(tmp_path / "notebooks"), ["course notebooks"]),
        ("notebooks/new", ["course notebooks"]),
        (".", ["course notebooks"]),
        ("my_notes", ["has no .convs2s-coursework marker", "my_notes"]),
        ("empty", ["has no .convs2s-coursework marker"]),
        ("hidden", ["has no .convs2s-coursework marker"]),
    ]:
        _refused(_cli(tmp_path, "--out", out, "--only", "01"), *words)
        assert _tree(tmp_path) == before, out
    # what it made itself it writes again, and a new folder it makes (with its marker)
    assert _cli(tmp_path, "--out", "made").returncode == 0
    assert _cli(tmp_path, "--out", "made", "--only", "01").returncode == 0
    assert json.loads((tmp_path / "made" / coursework.MARKER).read_text())["files"] == [
        "01_made_up/01_made_up.ipynb"]


def test_a_symlink_is_judged_by_the_folder_it_points_to(tmp_path):
    repo = tmp_path / "repo"
    write_fixture(repo)
    (repo / "README.md").write_text("# the course\n")
    link = tmp_path / "link_to_repo"
    link.symlink_to(repo, target_is_directory=True)
    before = _tree(repo)
    _refused(_cli(repo, "--out", str(link)), "course notebooks")  # it wrote into the root
    assert _tree(repo) == before
    (tmp_path / "to_hidden").symlink_to(repo / "hidden", target_is_directory=True)
    _refused(_cli(repo, "--out", str(tmp_path / "to_hidden")), "marker")
    assert _tree(repo) == before

    # A folder it made, whose assignment folder was replaced by a link into the notebooks.
    made = tmp_path / "made"
    assert _cli(repo, "--out", str(made)).returncode == 0
    shutil.rmtree(made / "01_made_up")
    (made / "01_made_up").symlink_to(repo / "notebooks", target_is_directory=True)
    before = _tree(repo)
    _refused(_cli(repo, "--out", str(made)), "01_made_up")
    assert _tree(repo) == before

    # A link to a folder it made is that folder: written there, nowhere else.
    (made / "01_made_up").unlink()
    (tmp_path / "to_made").symlink_to(made, target_is_directory=True)
    assert _cli(repo, "--out", str(tmp_path / "to_made")).returncode == 0
    assert (made / "01_made_up" / "01_made_up.ipynb").is_file()
    assert _tree(repo) == before


def test_a_file_its_marker_does_not_list_is_not_overwritten(tmp_path):
    write_fixture(tmp_path)
    out = tmp_path / "made"
    assert _cli(tmp_path, "--out", str(out)).returncode == 0
    marker = json.loads((out / coursework.MARKER).read_text())
    marker["files"] = []  # e.g. a notebook someone put there by hand
    (out / coursework.MARKER).write_text(json.dumps(marker))
    (out / "01_made_up" / "01_made_up.ipynb").write_text('{"mine": true}')
    _refused(_cli(tmp_path, "--out", str(out)), "01_made_up.ipynb")
    assert (out / "01_made_up" / "01_made_up.ipynb").read_text() == '{"mine": true}'


def test_never_writes_an_instructor_version_where_a_release_is(tmp_path):
    notebooks, hidden = write_fixture(tmp_path)
    course = tmp_path / "course"
    course.mkdir()
    _course(course, notebooks, hidden)  # source/ by this tool, release/ by nbgrader
    release = course / "release"
    student = release / "01_made_up" / "01_made_up.ipynb"
    assert "BEGIN SOLUTION" not in student.read_text()
    before = _tree(course)
    # nbgrader's release folder, as nbgrader made it (once, `--out coursework/release
    # --only 06` replaced the student notebook with the instructor version)
    _refused(_cli(tmp_path, "--out", str(release), "--only", "01"), "release")
    _refused(_cli(tmp_path, "--out", str(release / "01_made_up")), "release")
    assert _tree(course) == before
    # the same folder with a marker (this tool wrote there before nbgrader did)
    (release / coursework.MARKER).write_text(json.dumps(
        {"files": ["01_made_up/01_made_up.ipynb"]}))
    before = _tree(course)
    _refused(_cli(tmp_path, "--out", str(release)), "release")
    assert _tree(course) == before
    # a release copied elsewhere, marker and all: known by nbgrader's checksums in its cells
    handout = tmp_path / "handout"
    shutil.copytree(release, handout)
    before = _tree(handout)
    _refused(_cli(tmp_path, "--out", str(handout)), "01_made_up.ipynb", "nbgrader")
    assert _tree(handout) == before
    # the release folder of a course where it does not exist yet
    shutil.rmtree(release)
    _refused(_cli(tmp_path, "--out", str(release)), "release")
    assert not release.exists()
    # the source folder regenerates as before
    assert _cli(tmp_path, "--out", str(course / "source"), "--clean").returncode == 0
    assert "BEGIN SOLUTION" in (course / "source" / "01_made_up" / "01_made_up.ipynb").read_text()


# --------------------------------------------------------------------------------------------
# An --out that cannot be a folder is one line, before any work
# --------------------------------------------------------------------------------------------


def test_an_out_that_cannot_be_a_folder_is_one_line(tmp_path):
    write_fixture(tmp_path)
    (tmp_path / "README.md").write_text("# readme\n")
    cases = [("README.md", "is a file, not a folder"),
             ("README.md/sub", "README.md, which is a file")]
    if Path("/proc/self").is_dir():
        cases.append(("/proc/x", "/proc/x"))
    for out, words in cases:
        _refused(_cli(tmp_path, "--out", out), words)
    assert (tmp_path / "README.md").read_text() == "# readme\n"
    # from the command line: no traceback either
    proc = subprocess.run(
        [sys.executable, "-m", "tools.coursework", "--out", str(tmp_path / "README.md" / "sub"),
         "--notebooks", str(tmp_path / "notebooks"), "--hidden", str(tmp_path / "hidden")],
        cwd=ROOT, capture_output=True, text=True)
    _refused(proc, "which is a file, not a folder")


def test_a_dangling_out_symlink_is_refused_and_its_target_not_made(tmp_path):
    write_fixture(tmp_path)
    (tmp_path / "link").symlink_to(tmp_path / "nowhere" / "x")
    _refused(_cli(tmp_path, "--out", "link", "--public"), "symbolic link", "does not exist")
    assert not (tmp_path / "nowhere").exists()


def test_a_huge_out_is_not_echoed_whole(tmp_path):
    write_fixture(tmp_path)
    proc = _cli(tmp_path, "--out", "a" * 3000 + "/x", "--public")
    _refused(proc)
    assert len(proc.stderr) < 400 and "3,00" in proc.stderr, proc.stderr


def test_the_out_error_comes_before_any_work(tmp_path):
    """A wrong --out is reported even when the notebooks would fail later: it is checked
    first, before a notebook is read."""
    nb = fixture_notebook()
    nb["cells"][3]["metadata"]["convs2s"]["points"] = 0
    write_fixture(tmp_path, nb)
    (tmp_path / "README.md").write_text("# readme\n")
    _refused(_cli(tmp_path, "--out", "README.md"), "README.md is a file, not a folder")


# --------------------------------------------------------------------------------------------
# A run that fails leaves nothing it made, and nothing that was there is touched
# --------------------------------------------------------------------------------------------


def test_only_a_notebook_that_does_not_exist_is_named_with_those_that_do(tmp_path):
    write_fixture(tmp_path)
    before = _tree(tmp_path)
    for wanted in ("99", "01x", "made_up"):
        proc = _cli(tmp_path, "--out", "course/source", "--only", "01", wanted)
        _refused(proc, f"--only {wanted}: there is no notebook {wanted}", "numbered 01")
        assert "no exercises found" not in proc.stderr
        assert _tree(tmp_path) == before, wanted  # no variant-secret, no grading.json


def _broken(notebooks: Path) -> None:
    (notebooks / "02_broken.ipynb").write_text('{"cells": [')


@pytest.mark.parametrize("case", ["broken notebook", "no exercises", "broken hidden test"])
def test_a_failed_build_removes_what_it_made_and_only_that(tmp_path, case):
    """The class's secret (made first), the --out folders, its marker and grading.json were
    left behind by a build that then failed: gone again, while what was there stays as it
    was."""
    notebooks, hidden = write_fixture(tmp_path)
    args = ["--out", "course/source"]
    if case == "broken notebook":
        _broken(notebooks)
    elif case == "no exercises":
        nb = json.loads((notebooks / "01_made_up.ipynb").read_text())
        nb["cells"] = [c for c in nb["cells"] if "convs2s" not in c["metadata"]]
        (notebooks / "00_intro.ipynb").write_text(json.dumps(nb))
        args += ["--only", "00"]
    else:
        (hidden / "01.py").write_text("def broken(:\n")
    before = _tree(tmp_path)
    proc = _cli(tmp_path, *args)
    _refused(proc, "no exercises found in notebook 00" if case == "no exercises" else "")
    assert _tree(tmp_path) == before

    # an earlier build's course: its secret, grading.json, notebooks and a file of the user's
    # stay exactly as they were
    (notebooks / "02_broken.ipynb").unlink(missing_ok=True)
    (hidden / "01.py").write_text(FIXTURE_HIDDEN)
    assert _cli(tmp_path, *args[:2]).returncode == 0
    (tmp_path / "course" / "notes.txt").write_text("mine")
    _broken(notebooks)
    before = _tree(tmp_path)
    _refused(_cli(tmp_path, "--out", "course/source"), "02_broken.ipynb")
    assert _tree(tmp_path) == before


def test_a_build_that_fails_writing_removes_what_it_made(tmp_path, monkeypatch):
    """A write that fails halfway (a full disk) takes back the folders, marker and secret this
    run made."""
    write_fixture(tmp_path)
    before = _tree(tmp_path)

    def full_disk(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(coursework, "_write_grading", full_disk)
    _refused(_cli(tmp_path, "--out", "course/source"), "No space left on device")
    assert _tree(tmp_path) == before


# --------------------------------------------------------------------------------------------
# Ctrl-C and SIGTERM: one line, exit 130 / 143, for every tool
# --------------------------------------------------------------------------------------------


def _open_writer(fifo: Path, proc: subprocess.Popen) -> int:
    """Wait until ``proc`` opens ``fifo`` for reading; return our end (kept open, so that its
    read blocks until we close it)."""
    deadline = time.monotonic() + START_LIMIT_S
    while True:
        try:
            return os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO:  # ENXIO: no reader yet
                raise
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "the tool never opened its input"
        time.sleep(0.05)  # poll the condition again


def _wait_for_line(proc: subprocess.Popen, wanted: str) -> None:
    deadline = time.monotonic() + START_LIMIT_S
    while time.monotonic() < deadline:
        ready, _, _ = select.select([proc.stdout], [], [], 1.0)
        if ready:
            line = proc.stdout.readline()
            assert line, ("the tool ended early", proc.communicate())
            if line.strip() == wanted:
                return
        assert proc.poll() is None, proc.communicate()
    raise AssertionError(f"no {wanted!r} within {START_LIMIT_S} s")


def _stopped(proc: subprocess.Popen, sig: int, fd: int | None = None, wchan: str = "pipe") -> str:
    """Send ``sig`` once the tool is blocked (reading our FIFO ``fd``, or in ``wchan``); the
    tool's one line on stderr, once it has exited as it should. A tool still running when the
    wait ends is killed: no test leaves a process behind."""
    try:
        wait_until_blocked(proc.pid, wchan, START_LIMIT_S)
        proc.send_signal(sig)
        _, stderr = proc.communicate(timeout=START_LIMIT_S)
    finally:
        if fd is not None:
            os.close(fd)
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 128 + sig, (proc.returncode, stderr)
    assert "Traceback" not in stderr and stderr.count("\n") == 1, stderr
    assert "interrupted" in stderr or "SIGTERM" in stderr, stderr
    return stderr


SIGNALS = [pytest.param(signal.SIGINT, id="ctrl-c"), pytest.param(signal.SIGTERM, id="sigterm")]


@pytest.mark.parametrize("sig", SIGNALS)
def test_coursework_stops_on_ctrl_c_and_sigterm_in_one_line(tmp_path, sig):
    notebooks, hidden = write_fixture(tmp_path)
    fifo = hidden / "01.py"  # the tool blocks reading it: stopped in the middle of its work
    fifo.unlink()
    os.mkfifo(fifo)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tools.coursework", "--out", str(tmp_path / "out"),
         "--notebooks", str(notebooks), "--hidden", str(hidden)],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=default_signals)
    fd = _open_writer(fifo, proc)
    _stopped(proc, sig, fd)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("sig", SIGNALS)
def test_badges_stops_on_ctrl_c_and_sigterm_in_one_line(tmp_path, sig):
    (tmp_path / "pyproject.toml").write_text(textwrap.dedent("""\
        [project.urls]
        Repository = "https://github.com/someone/fork"
        """))
    fifo = tmp_path / "README.md"  # the tool blocks reading it
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-m", "tools.badges", "--root", str(tmp_path)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    fd = _open_writer(fifo, proc)
    _stopped(proc, sig, fd)


# `python -m tools.strip_solutions`, stopped while it reads a notebook (it refuses a FIFO, so
# the read itself is made to wait).
STRIP_BLOCKED = """\
import runpy, signal

import convs2s.system.local_files as local_files

def read_small(*args, **kwargs):
    print("reading", flush=True)
    while True:
        signal.pause()

local_files.read_small = read_small
runpy.run_module("tools.strip_solutions", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig", SIGNALS)
def test_strip_solutions_stops_on_ctrl_c_and_sigterm_in_one_line(tmp_path, sig):
    notebook = tmp_path / "01_x.ipynb"
    notebook.write_text('{"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}')
    proc = subprocess.Popen([sys.executable, "-c", STRIP_BLOCKED, str(notebook)],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    _wait_for_line(proc, "reading")
    _stopped(proc, sig, wchan="pause")
    assert [p.name for p in tmp_path.iterdir()] == ["01_x.ipynb"], "nothing else written"


# `python -m tools.screenshots` itself, stopped where capturing starts (copying the notebooks,
# before minutes of JupyterLab and Chromium); CONVS2S_CHROMIUM names any executable file.
SCREENSHOTS_BLOCKED = """\
import runpy, shutil, signal

def copytree(*args, **kwargs):
    print("capturing", flush=True)
    while True:
        signal.pause()

shutil.copytree = copytree
runpy.run_module("tools.screenshots", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize("sig", SIGNALS)
def test_screenshots_stops_on_ctrl_c_and_sigterm_in_one_line(tmp_path, sig):
    pytest.importorskip("playwright")
    proc = subprocess.Popen(
        [sys.executable, "-c", SCREENSHOTS_BLOCKED, "--out", str(tmp_path / "images"),
         "--notebooks", str(ROOT / "notebooks")],
        cwd=ROOT, env=dict(os.environ, CONVS2S_CHROMIUM=sys.executable),
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    _wait_for_line(proc, "capturing")
    _stopped(proc, sig, wchan="pause")
    assert not (tmp_path / "images").exists()  # --out is made only once every shot is taken


# `python -m tools.time_estimate` and `python -m tools.site.flipbook_data`, stopped while they
# read (their reading made to wait), through the `cli` their `__main__` calls.
BLOCKED_CLI = """\
import importlib, signal, sys

module = importlib.import_module(sys.argv[1])

def blocked(*args, **kwargs):
    print("reading", flush=True)
    while True:
        signal.pause()

setattr(module, sys.argv[2], blocked)
sys.exit(module.cli([]))
"""


@pytest.mark.parametrize("sig", SIGNALS)
@pytest.mark.parametrize("tool, reader", [("tools.time_estimate", "estimate"),
                                          ("tools.site.flipbook_data", "sentences_04")])
def test_time_estimate_and_flipbook_data_stop_on_ctrl_c_and_sigterm_in_one_line(tool, reader,
                                                                                 sig):
    proc = subprocess.Popen([sys.executable, "-c", BLOCKED_CLI, tool, reader],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_signals)
    _wait_for_line(proc, "reading")
    _stopped(proc, sig, wchan="pause")



@pytest.mark.parametrize(("sig", "line", "status"), [("SIGINT", "interrupted.", 130),
                                                     ("SIGTERM", "stopped by SIGTERM.", 143)])
def test_coursework_stopped_while_torch_loads_is_one_line(tmp_path, sig, line, status):
    """The course's checks load torch in the command's first seconds: a signal then was a
    traceback."""
    done = run_while_torch_loads(tmp_path, sig, "-m", "tools.coursework", "--help")
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (status, [line], "")
