"""CI time: wall time of each notebook under nbval in quick mode, and of the unit tests.

    python benchmarks/ci_time.py [--json out.json]

Runs exactly what `make test` runs, piece by piece, with CONVS2S_QUICK=1: the unit tests
(`pytest tests`) and `pytest --nbval-lax --nbval-current-env` on every notebook alone. Each
notebook must stay within the course's budget: 90 s for 01-04, 3 min for 05-08.
"""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
import time
from datetime import date
from pathlib import Path

from common import json_arg, run_main, write_report

from convs2s.system.arguments import OneLineParser

ROOT = Path(__file__).resolve().parents[1]


def budget(name: str) -> int:
    number = int(name[:2])
    return 90 if number <= 4 else 180


def timed(cmd: list[str], env: dict) -> tuple[float, int, str]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    tail = (proc.stdout + proc.stderr).strip().splitlines()[-1:] or [""]
    return time.perf_counter() - t0, proc.returncode, tail[0]


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=json_arg)
    parser.add_argument("--skip-unit", action="store_true")
    args = parser.parse_args(argv)
    env = dict(os.environ, CONVS2S_QUICK="1", MPLBACKEND="Agg")
    rows = []
    if not args.skip_unit:
        seconds, rc, tail = timed([sys.executable, "-m", "pytest", "tests", "-q"], env)
        rows.append({"what": "unit tests", "seconds": seconds, "ok": rc == 0, "budget": None,
                     "summary": tail})
        print(f"{'unit tests':<40} {seconds:7.1f} s  {tail}", flush=True)
    for nb in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        cmd = [sys.executable, "-m", "pytest", "--nbval-lax", "--nbval-current-env",
               "-p", "no:cacheprovider", "-q", str(nb.relative_to(ROOT))]
        seconds, rc, tail = timed(cmd, env)
        row = {"what": nb.name, "seconds": seconds, "ok": rc == 0, "budget": budget(nb.name),
               "within_budget": seconds <= budget(nb.name), "summary": tail}
        rows.append(row)
        flag = "" if row["within_budget"] else f"  OVER {row['budget']} s budget"
        print(f"{nb.name:<40} {seconds:7.1f} s  {tail}{flag}", flush=True)
    total = sum(r["seconds"] for r in rows)
    print(f"{'total':<40} {total:7.1f} s")
    sys.path.insert(0, str(ROOT / "src"))
    from convs2s.system.environment import describe_device

    report = {"benchmark": "ci_time", "device": describe_device("cpu"),
              "date": date.today().isoformat(), "total_seconds": total,
              "command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "rows": rows}
    write_report(args.json, report)
    return 0 if all(r["ok"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(run_main(main))
