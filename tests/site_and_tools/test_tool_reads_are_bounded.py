"""``python -m tools.strip_solutions --check`` (and ``tools.notebook_format.read_notebook``,
which the site reads notebooks with) read a notebook only if it is a regular file of a notebook's
size, and JSON nested too deeply is one line: ``/dev/zero`` once grew to 22.8 GB, a FIFO hung
the command, and deep JSON gave a RecursionError traceback.

The command runs in a child process whose memory is bounded to 2 GB and which is stopped, and
the test failed, if it is still running after two minutes (a hang)."""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def _bounded_memory() -> None:  # in the child, before it runs
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


def _child(*args: str) -> subprocess.CompletedProcess:
    """``python *args`` in the repository, its memory bounded; the test fails if it hangs."""
    proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=_bounded_memory)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail(f"python {' '.join(args)} hangs")
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


@pytest.fixture
def odd_files(tmp_path) -> dict[str, Path]:
    fifo = tmp_path / "pipe.ipynb"
    os.mkfifo(fifo)
    deep = tmp_path / "deep.ipynb"
    deep.write_text("[" * 100_000 + "]" * 100_000)
    huge = tmp_path / "huge.ipynb"
    with open(huge, "wb") as f:
        f.truncate(6 << 30)  # sparse: 6 GB that take no disk
    return {"/dev/zero": Path("/dev/zero"), "a FIFO": fifo, "deeply nested JSON": deep,
            "a 6 GB file": huge}


WHY = {"/dev/zero": "is not a regular file", "a FIFO": "is not a regular file",
       "deeply nested JSON": "nested too deeply", "a 6 GB file": "is over 67,108,864 bytes"}


@pytest.mark.parametrize("kind", list(WHY))
def test_strip_solutions_check_refuses_what_is_not_a_notebook_in_one_line(odd_files, kind):
    done = _child("-m", "tools.strip_solutions", "--check", str(odd_files[kind]))
    assert done.returncode == 2 and done.stdout == "", done.stderr[-500:]
    assert done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr[-500:]
    assert WHY[kind] in done.stderr and str(odd_files[kind]) in done.stderr


_READ = """
import sys
from tools.notebook_format import NotebookFormatError, read_notebook
try:
    read_notebook(sys.argv[1])
except NotebookFormatError as e:
    print(e)
"""


@pytest.mark.parametrize("kind", list(WHY))
def test_read_notebook_refuses_what_is_not_a_notebook_in_one_line(odd_files, kind):
    done = _child("-c", _READ, str(odd_files[kind]))
    assert done.returncode == 0 and done.stderr == "", done.stderr[-500:]
    assert done.stdout.count("\n") == 1 and WHY[kind] in done.stdout, done.stdout[-500:]
