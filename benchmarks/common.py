"""What every benchmark script shares: how it starts as a command (:func:`run_script`), how it
reads a count (:func:`count_arg`), how it names itself and how it writes its JSON."""

from __future__ import annotations

import argparse
import re
import shlex
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path

from convs2s.system.arguments import cut, whole_number_arg
from convs2s.system.atomic_files import cannot_write_in, write_json_atomic
from convs2s.system.signals import import_command, run_command

_ZERO = re.compile(r"[ \t]*[+-]?0+[ \t]*")


def count_arg(text: str) -> int:
    """argparse ``type`` of a count where 0 means none (warm-up steps, epochs averaged): a whole
    number from 0, written as :func:`~convs2s.system.arguments.whole_number_arg` takes one
    (ASCII digits); a negative number or anything else is refused in one line."""
    if _ZERO.fullmatch(text):
        return 0
    try:
        return whole_number_arg(text)
    except argparse.ArgumentTypeError as e:
        raise argparse.ArgumentTypeError(str(e).replace("at least 1", "at least 0")) from None


def command() -> str:
    """The command line that produced a figure, for the results table (benchmarks/RESULTS.md)."""
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def stamp(report: dict) -> dict:
    """``report`` plus today's date and the command (the results table's last two columns)."""
    return {**report, "date": date.today().isoformat(), "command": command()}


def json_problem(path: Path) -> str | None:
    """Why the report cannot be written to ``path`` at the end (one line), or None. Checked
    when the arguments are read, before minutes of measuring: a folder, a folder that does not
    exist (none is made), a place that cannot be written (found by making a file there,
    removed at once). Leaves nothing behind."""
    from convs2s.system.arguments import dangling_link_problem

    if not str(path).strip():
        return "is an empty name: give a file, e.g. benchmarks/results/NAME.json"
    if path.is_dir():
        return f"{path} is a folder: give a file to write, e.g. {path / 'results.json'}"
    dangling = dangling_link_problem(path, "", "remove the link, or give another file")
    if dangling:
        return dangling
    if path.exists() and not path.is_file():
        return f"{path} is not a regular file (a device or a pipe): give a file to write"
    folder = path.parent
    if not folder.exists():
        return f"{path}: its folder {folder} does not exist; make it first, or give another file"
    if not folder.is_dir():
        return f"{path}: {folder} is a file, not a folder; give a file in a folder"
    why = cannot_write_in(folder)
    if why:
        return f"{path}: cannot write into {folder} ({why}); give another file"
    return None


def json_arg(text: str) -> Path:
    """argparse ``type`` of ``--json``: a file the report can be written to
    (:func:`json_problem`), refused in one line before any work."""
    problem = json_problem(Path(text))
    if problem:
        raise argparse.ArgumentTypeError(problem)
    return Path(text)


def write_report(path: Path | str | None, report: dict) -> None:
    """Write ``report`` as JSON to ``path`` (if given) atomically: no half-written file ever.

    A new file gets the mode the umask gives, an existing one keeps its own. ``--json`` was
    checked before the work (:func:`json_arg`); a failure now (the place changed meanwhile, a
    full disk) names ``path``, never the temporary file written first."""
    if path is None:
        return
    try:
        write_json_atomic(Path(path), report)
    except OSError as e:
        raise OSError(e.errno, f"cannot write the report {path} "
                               f"({e.strerror or type(e).__name__})") from None
    print(f"wrote {path}")


def _said(e: Exception) -> str:
    """An error in one line: an ``OSError`` as its reason and file (no "[Errno 2]")."""
    if isinstance(e, OSError) and e.strerror:
        return f"{e.strerror}{f' ({e.filename})' if e.filename else ''}"
    return " ".join(str(e).split())


def run_main(main: Callable[[], int | None]) -> int:
    """Run a benchmark's ``main`` the way the package's commands run: a user's mistake (the
    package's errors: a shipped model, a checkpoint or data that cannot be used; a bad value,
    a missing file) is one line on stderr and exit 2, another environment problem (a full
    disk) one line and exit 1; Ctrl-C exits 130 and SIGTERM 143, each with one line, never a
    traceback (:mod:`convs2s.system.signals`). Figures written so far stay (they are written
    atomically); what the interrupted measurement had not written is simply not there."""

    def guarded() -> int | None:
        # loaded here, under run_command's StopSignals: they load torch, seconds
        from convs2s.data import DataError
        from convs2s.run.checkpoint import CheckpointError
        from convs2s.run.pretrained import PretrainedError
        from convs2s.system.folder_locks import FolderInUse

        try:
            return main()
        except (CheckpointError, DataError, PretrainedError, FolderInUse, FileNotFoundError,
                ValueError) as e:
            print(cut(f"error: {_said(e)}"), file=sys.stderr)
            return 2
        except OSError as e:
            print(cut(f"error: {_said(e)}"), file=sys.stderr)
            return 1

    return run_command(guarded, f" ({Path(sys.argv[0]).name})")


def run_script(name: str) -> int:
    """Run ``benchmarks/<name>.py`` as a command, from the top of that script (before it loads
    torch): the script imported as the module ``name`` under
    :func:`~convs2s.system.signals.import_command`, so that Ctrl-C or SIGTERM in the seconds
    torch takes to load stops it in one line, exit 130 or 143, as the package's commands do;
    then its ``main`` through :func:`run_main`."""
    return run_main(import_command(name))
