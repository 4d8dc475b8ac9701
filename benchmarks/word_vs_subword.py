"""Word against subword vocabularies at equal training time, scored on validation.

    python benchmarks/word_vs_subword.py [--minutes 10] \\
        [--json benchmarks/results/word_vs_subword_de_en.json]

Trains the ``cpu`` preset (lower-cased words, ``min_freq`` 2) and the ``cpu_subword`` preset
(cased sentencepiece pieces) side by side, one CPU thread each, with the same time budget, by
running ``benchmarks/quality.py`` twice at once (so both see the same machine), and writes
their validation scores (greedy and beam 5) and learning curves into one JSON file. Notebook
05's "why subwords" section reads it. Only validation is scored: this comparison chose the
tokenizer.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import json_arg, run_main, stamp, write_report

from convs2s.system.arguments import OneLineParser

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=10.0)
    parser.add_argument("--runs", type=Path, default=Path("runs"),
                        help="where the two runs go (bench_wvs_word, bench_wvs_subword)")
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    if not 0 < args.minutes < float("inf"):  # NaN too: checked here, not in each child run
        parser.error(f"--minutes must be a number of minutes above 0, not {args.minutes:g}")
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    report = {"benchmark": "word_vs_subword", "minutes": args.minutes, "threads_each": 1,
              "split": "valid", "runs": {}}
    with tempfile.TemporaryDirectory() as tmp:
        procs = {}
        for kind, preset in (("word", "cpu"), ("subword", "cpu_subword")):
            out_json = Path(tmp) / f"{kind}.json"
            cmd = [sys.executable, str(HERE / "quality.py"), "--preset", preset,
                   "--max-minutes", str(args.minutes), "--split", "valid", "--overwrite",
                   "--out", str(args.runs / f"bench_wvs_{kind}"), "--json", str(out_json)]
            log = open(Path(tmp) / f"{kind}.log", "w")
            procs[kind] = (subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT),
                           out_json, log)
        for kind, (proc, out_json, log) in procs.items():
            rc = proc.wait()
            log.close()
            text = (Path(tmp) / f"{kind}.log").read_text()
            print(f"--- {kind} ---\n{text}")
            if rc != 0:
                print(f"error: the {kind} run failed (exit {rc})", file=sys.stderr)
                return 1
            result = json.loads(out_json.read_text())
            report["runs"][kind] = {k: result[k] for k in (
                "preset", "settings", "train_seconds", "steps", "epochs", "best_epoch",
                "best_valid_loss", "parameters", "device", "threads", "sentences", "loss",
                "perplexity", "beam1", "beam5", "valid_curve")}
    write_report(args.json, stamp(report))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
