"""Decoding speed: incremental vs full-recompute greedy decoding, and beam 1 vs beam 5.

    python benchmarks/decoding.py [--checkpoint runs/05_cpu/best.pt] [--json out.json]

Incremental decoding feeds the decoder one token per step and keeps the last k-1 inputs of
every convolution in a cache; full recompute runs the decoder over the whole prefix at every
step. Both produce the same tokens (tests/model/test_search.py checks it); this measures what the
cache buys. To time a fixed number of steps, the end-of-sentence token is set to an id the
model never produces, so every sentence runs exactly ``length`` steps.

Without ``--checkpoint`` a randomly initialised model of a preset's size is used
(``--preset``, ``cpu`` by default; speed does not depend on the weights). Each figure is the
median of ``--repeats`` runs, the variants interleaved in one process, so the ratios compare
like with like.
"""

from __future__ import annotations

import argparse
import dataclasses
import shlex
import statistics
import sys
import time
from datetime import date
from pathlib import Path

import torch
from common import run_main, write_report

from convs2s.model import ConvS2S, count_parameters
from convs2s.model.search import beam_search, greedy_decode
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.presets import PRESETS
from convs2s.system import environment


def _model(checkpoint: Path | None, preset_name: str = "cpu") -> ConvS2S:
    if checkpoint is not None:
        return Checkpoint.load(checkpoint).build_model()
    preset = PRESETS[preset_name]
    torch.manual_seed(0)
    return ConvS2S(dataclasses.replace(preset.model, src_vocab_size=7851, trg_vocab_size=5892,
                                       src_pad_idx=1, trg_pad_idx=1))


def _time(fn, repeats: int) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--checkpoint", type=Path, help="a trained model (default: random weights)")
    what.add_argument("--preset", default="cpu", choices=sorted(PRESETS),
                      help="sizes of the randomly initialised model (default: cpu)")
    parser.add_argument("--batch", type=int, default=32, help="sentences per batch")
    parser.add_argument("--src-len", type=int, default=14, help="source length (tokens)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[10, 20, 40])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--device", default=None)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args(argv)
    device = torch.device(args.device) if args.device else environment.device()
    model = _model(args.checkpoint, args.preset).to(device).eval()
    vocab = model.config["src_vocab_size"]
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab, (args.batch, args.src_len), generator=g).to(device)
    never = -1  # an eos id no argmax returns: every sentence runs the full length
    bos = 2
    rows = []
    print(f"{count_parameters(model):,} parameters, batch {args.batch}, device "
          f"{environment.describe_device(device)}")
    print(f"{'length':>6} {'incremental s/s':>16} {'full s/s':>10} {'ratio':>6} "
          f"{'beam1 s/s':>10} {'beam5 s/s':>10} {'ratio':>6}")
    for length in args.lengths:
        kw = dict(max_len=length, bos_idx=bos, eos_idx=never)
        greedy_decode(model, src, **kw)  # warm-up
        inc = _time(lambda kw=kw: greedy_decode(model, src, incremental=True, **kw), args.repeats)
        full = _time(lambda kw=kw: greedy_decode(model, src, incremental=False, **kw),
                     args.repeats)
        b1 = _time(lambda kw=kw: beam_search(model, src, beam_size=1, **kw), args.repeats)
        b5 = _time(lambda kw=kw: beam_search(model, src, beam_size=5, **kw), args.repeats)
        row = {"length": length, "incremental_sent_per_s": args.batch / inc,
               "full_sent_per_s": args.batch / full, "incremental_speedup": full / inc,
               "beam1_sent_per_s": args.batch / b1, "beam5_sent_per_s": args.batch / b5,
               "beam5_slowdown": b5 / b1}
        rows.append(row)
        print(f"{length:>6} {row['incremental_sent_per_s']:>16.1f} {row['full_sent_per_s']:>10.1f} "
              f"{row['incremental_speedup']:>5.1f}x {row['beam1_sent_per_s']:>10.1f} "
              f"{row['beam5_sent_per_s']:>10.1f} {row['beam5_slowdown']:>5.1f}x", flush=True)
    report = {"benchmark": "decoding", "device": environment.describe_device(device),
              "threads": torch.get_num_threads(), "parameters": count_parameters(model),
              "model": str(args.checkpoint) if args.checkpoint else f"preset {args.preset}",
              "batch": args.batch, "src_len": args.src_len, "date": date.today().isoformat(),
              "command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "rows": rows}
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
