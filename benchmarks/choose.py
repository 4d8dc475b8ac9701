"""The final model's choices for a run folder, on the validation split, then the test split.

    python benchmarks/choose.py runs/bench_cpu_subword [--json benchmarks/results/choose.json]

A thin caller of :func:`convs2s.run.final_choices.finalize`, which training now runs by itself at
its end (presets with ``average_last``): it (re)makes ``final.pt`` in a run folder from ``best.pt``
and the run's ``snapshots/epochNN.pt`` (the last epochs' weights), choosing on validation between
best.pt and the average of the last k epochs (by greedy sacreBLEU) and beam search's length penalty
α (by beam-5 sacreBLEU). ``--split`` (test2016 by default) is then scored once for the plain choice
(best.pt, α = 1) and for final.pt: the test set is reported, never used for a choice.
"""

from __future__ import annotations

import sys
from pathlib import Path

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("choose"))

import torch
from common import json_arg, stamp, write_report

from convs2s.data import DataError, load_multi30k
from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.evaluate import SPLITS, evaluate
from convs2s.run.final_choices import ALPHAS, average, finalize  # noqa: F401 (ALPHAS, average: re-exported)
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser

MAX_K = 5


def choose(run: Path, device, split: str = "test", beam: int = 5) -> dict:
    best = Checkpoint.load(run / "best.pt")
    data = load_multi30k(src=best.pipeline.src_lang, trg=best.pipeline.trg_lang)
    path = finalize(run, data["valid"], device=device, beam=beam, max_k=MAX_K)
    chosen = Checkpoint.load(path)
    c = chosen.choices

    def scores(ckpt: Checkpoint, alpha: float) -> dict:
        m = evaluate(Translator.from_checkpoint(ckpt, device=device), data[split],
                     beam_sizes=[1, beam], length_penalty=alpha)
        return {f"beam{b}": {k: m[f"beam{b}"][k] for k in ("sacrebleu", "chrf")}
                for b in (1, beam)}

    return {"run": str(run), "src_lang": best.pipeline.src_lang,
            "trg_lang": best.pipeline.trg_lang, "device": environment.describe_device(device),
            "threads": torch.get_num_threads(), "choose_seconds": c["seconds"],
            "averages": c["averages"], "chosen_k": c["k"], "chosen_epochs": c["epochs"],
            "alphas": c["alphas"], "chosen_alpha": c["length_penalty"],
            "final_checkpoint": str(path), "split": split, "beam": beam,
            "plain": scores(best, 1.0), "chosen": scores(chosen, chosen.length_penalty)}


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run folder with best.pt and snapshots/")
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument("--device", help="cpu, cuda, ... (default: the best there is)")
    parser.add_argument("--json", type=json_arg, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    try:
        device = environment.check_device(args.device)
    except ValueError as e:
        parser.error(str(e))
    if not (args.run / "best.pt").is_file():
        print(f"error: {args.run / 'best.pt'} does not exist; give the folder of a run trained "
              "(python -m convs2s.train or benchmarks/quality.py)", file=sys.stderr)
        return 2
    try:
        report = choose(args.run, device, args.split)
    except (FileNotFoundError, CheckpointError, DataError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    # Ctrl-C and SIGTERM: run_main says so in one line and exits 130 / 143, as every benchmark
    beam = report["beam"]
    for name in ("plain", "chosen"):
        r = report[name]
        what = ("best.pt, α = 1" if name == "plain" else
                f"k = {report['chosen_k']}, α = {report['chosen_alpha']}")
        m = r[f"beam{beam}"]
        print(f"{args.split} {name:<6} ({what}): greedy sacreBLEU {r['beam1']['sacrebleu']:.2f}, "
              f"beam {beam} {m['sacrebleu']:.2f} (chrF {m['chrf']:.2f})")
    write_report(args.json, stamp({"benchmark": "choose", **report}))
    return 0

