"""Copy the benchmark reports the notebooks read into the package (``convs2s.course.reference``).

    python -m tools.ship_results

Each file of ``benchmarks/results/`` that matches ``convs2s.course.reference.SHIPPED`` is copied
into ``src/convs2s/course/results/`` (atomically, byte for byte), and a copy whose report is gone
is removed; nothing else there is touched. Run it after a benchmark rewrites one of them
(tests/course/test_reference_results.py fails until the copies equal the reports).
"""

from __future__ import annotations

import fnmatch
import sys
from pathlib import Path

from convs2s.course.reference import RESULTS_DIR, SHIPPED
from convs2s.system.atomic_files import atomic_write
from convs2s.system.signals import run_command

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "benchmarks" / "results"


def wanted(reports: Path = REPORTS) -> list[Path]:
    """The reports the notebooks read, in name order."""
    return sorted(p for p in reports.glob("*.json")
                  if any(fnmatch.fnmatch(p.name, pattern) for pattern in SHIPPED))


def ship(reports: Path = REPORTS, out: Path = RESULTS_DIR) -> tuple[list[str], list[str]]:
    """Copy; returns (written, removed) file names."""
    out.mkdir(parents=True, exist_ok=True)
    written, names = [], set()
    for report in wanted(reports):
        names.add(report.name)
        data = report.read_bytes()
        copy = out / report.name
        if not copy.is_file() or copy.read_bytes() != data:
            atomic_write(copy, lambda f, data=data: f.write(data))
            written.append(report.name)
    removed = []
    for copy in sorted(out.glob("*.json")):
        if copy.name not in names and any(fnmatch.fnmatch(copy.name, p) for p in SHIPPED):
            copy.unlink()
            removed.append(copy.name)
    return written, removed


def main() -> int:
    written, removed = ship()
    print(f"{RESULTS_DIR}: {len(written)} written, {len(removed)} removed, "
          f"{len(wanted())} in all")
    return 0


if __name__ == "__main__":
    sys.exit(run_command(main, ": each copy is the old or the new one; run it again"))
