"""Translation quality of a training preset: train it, then score it on test2016.

    python benchmarks/quality.py --preset cpu [--json benchmarks/results/quality_cpu.json]
    python benchmarks/quality.py --checkpoint runs/cpu/best.pt    # score a run you already have

Trains ``--preset`` exactly as ``python -m convs2s.train --preset NAME`` does (same data, same
code path, the preset's own time budget), reloads its best checkpoint (lowest validation loss)
and evaluates it on a Multi30k split (test2016 by default) with :func:`convs2s.evaluate.evaluate`:

- BLEU for greedy decoding and for beam search (beam 5), both kinds: sacreBLEU (13a,
  detokenized, cased: the standard) and the tutorial-comparable score (BLEU-4 on lower-cased
  tokens: what the classic PyTorch tutorials printed);
- perplexity under teacher forcing;
- parameters, training wall time, epochs and steps, decoding sentences/s, device and date.

It prints a table and writes everything as JSON. The presets' sizes: ``quick`` (seconds, a
smoke test of the pipeline: its BLEU is near zero), ``cpu`` (about 27 minutes on 2 cores, 25 of
them training), ``gpu`` (one GPU; run it only where there is one). Run nothing else meanwhile:
the ``cpu`` preset has a wall-time budget, so a busy machine trains fewer epochs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import torch
from common import stamp, write_report

from convs2s import config
from convs2s.checkpoint import load_checkpoint
from convs2s.data import load_multi30k
from convs2s.evaluate import SPLITS, evaluate
from convs2s.model import count_parameters
from convs2s.train import PRESETS, train
from convs2s.translate import Translator


def training_summary(checkpoint: Path) -> dict:
    """What a run's checkpoints say about its training (the last one when it is beside)."""
    best = load_checkpoint(checkpoint, map_location="cpu")
    last_path = checkpoint.with_name("last.pt")
    last = load_checkpoint(last_path, map_location="cpu") if last_path.exists() else best
    state, best_state = last["train_state"], best["train_state"]
    return {"preset": best.get("preset", {}).get("name"),
            "train_seconds": state["seconds"], "steps": state["step"],
            "epochs": state["epoch"], "best_epoch": best_state["epoch"],
            "best_valid_loss": best_state["best_valid_loss"]}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--preset", choices=sorted(PRESETS), default="cpu",
                      help="train this preset, then evaluate it (default: cpu)")
    what.add_argument("--checkpoint", type=Path,
                      help="evaluate this checkpoint (a best.pt) instead of training")
    parser.add_argument("--out", type=Path,
                        help="run folder for the checkpoints (default: runs/bench_<preset>)")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete a run already in --out and train afresh")
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument("--beam-sizes", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--device", help="cpu, cuda, ... (default: the best there is)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.checkpoint is not None and args.checkpoint.suffix != ".pt":
        parser.error(f"--checkpoint {args.checkpoint}: expected a .pt file written by "
                     "convs2s.train (e.g. runs/cpu/best.pt)")
    device = torch.device(args.device) if args.device else config.device()
    data = load_multi30k()

    if args.checkpoint is None:
        out = args.out or Path("runs") / f"bench_{args.preset}"
        if (out / "last.pt").exists():
            if not args.overwrite:
                print(f"error: {out} already holds a run; score it with --checkpoint "
                      f"{out / 'best.pt'}, or train afresh with --overwrite (deletes it) or "
                      "another --out", file=sys.stderr)
                return 2
            for name in ("best.pt", "last.pt"):
                (out / name).unlink(missing_ok=True)
        print(f"training preset {args.preset!r} into {out} on {config.describe_device(device)}")
        t0 = time.perf_counter()
        result = train(args.preset, out, data=data, device=device, progress=False)
        wall = time.perf_counter() - t0
        if result.best_path is None:
            print("error: training saved no best checkpoint", file=sys.stderr)
            return 1
        checkpoint = result.best_path
        print(f"trained in {wall / 60:.1f} min ({result.stopped})")
    else:
        checkpoint, wall = args.checkpoint, None

    summary = training_summary(checkpoint)
    translator = Translator.from_checkpoint(checkpoint, device=device)
    t0 = time.perf_counter()
    metrics = evaluate(translator, data[args.split], beam_sizes=args.beam_sizes)
    eval_seconds = time.perf_counter() - t0
    report = stamp({
        "benchmark": "quality", **summary, "checkpoint": str(checkpoint),
        "parameters": count_parameters(translator.model),
        "device": config.describe_device(device), "threads": torch.get_num_threads(),
        "wall_seconds_train_call": wall, "eval_seconds": eval_seconds,
        "split": args.split, **metrics})

    print(f"\npreset {summary['preset']}: {report['parameters']:,} parameters; trained "
          f"{summary['train_seconds'] / 60:.1f} min, {summary['epochs']} epochs "
          f"(best {summary['best_epoch']}), {summary['steps']} steps; {report['device']}")
    print(f"{args.split}: {metrics['sentences']} sentences ({metrics['skipped']} too long, "
          f"skipped), perplexity {metrics['perplexity']:.2f}")
    print(f"{'decoding':<10} {'sacreBLEU':>10} {'tutorial BLEU':>14} {'sentences/s':>12}")
    for beam in args.beam_sizes:
        m = metrics[f"beam{beam}"]
        name = "greedy" if beam == 1 else f"beam {beam}"
        print(f"{name:<10} {m['sacrebleu']:>10.2f} {m['tutorial_bleu']:>14.2f} "
              f"{m['sentences_per_s']:>12.1f}")
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
