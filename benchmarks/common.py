"""What every benchmark script shares: how it names itself and how it writes its JSON."""

from __future__ import annotations

import shlex
import sys
from datetime import date
from pathlib import Path

from convs2s.fileio import write_json_atomic


def command() -> str:
    """The command line that produced a figure, for the README's results table."""
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
