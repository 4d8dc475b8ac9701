"""What every benchmark script shares: how it names itself and how it writes its JSON."""

from __future__ import annotations

import shlex
import sys
from collections.abc import Callable
from datetime import date
from pathlib import Path

from convs2s.system.atomic_files import write_json_atomic
from convs2s.system.signals import run_command


def command() -> str:
    """The command line that produced a figure, for the results table (benchmarks/RESULTS.md)."""
    return "python " + " ".join(shlex.quote(a) for a in sys.argv)


def stamp(report: dict) -> dict:
    """``report`` plus today's date and the command (the results table's last two columns)."""
    return {**report, "date": date.today().isoformat(), "command": command()}


def write_report(path: Path | str | None, report: dict) -> None:
    """Write ``report`` as JSON to ``path`` (if given) atomically: no half-written file ever.

    A new file gets the mode the umask gives, an existing one keeps its own."""
    if path is None:
        return
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    write_json_atomic(Path(path), report)
    print(f"wrote {path}")


def run_main(main: Callable[[], int | None]) -> int:
    """Run a benchmark's ``main`` the way the package's commands run: a user's mistake or an
    environment problem is one line on stderr and exit 1; Ctrl-C exits 130 and SIGTERM 143,
    each with one line, never a traceback (:mod:`convs2s.system.signals`). Figures written so far
    stay (they are written atomically); what the interrupted measurement had not written is
    simply not there."""
    from convs2s.data import DataError
    from convs2s.run.checkpoint import CheckpointError

    def guarded() -> int | None:
        try:
            return main()
        except (CheckpointError, DataError, FileNotFoundError, ValueError) as e:
            print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
            return 1
        except OSError as e:
            print(f"error: {e.strerror or e}{f' ({e.filename})' if e.filename else ''}",
                  file=sys.stderr)
            return 1

    return run_command(guarded, f" ({Path(sys.argv[0]).name})")
