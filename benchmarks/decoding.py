"""Decoding speed: incremental vs full-recompute greedy decoding, and beam 1 vs beam 5.

    python benchmarks/decoding.py [--checkpoint runs/05_cpu/best.pt] [--compile MODE]
                                  [--json out.json]

Incremental decoding feeds the decoder one token per step and keeps the last k-1 inputs of
every convolution in a cache; full recompute runs the decoder over the whole prefix at every
step. Both produce the same tokens (tests/model/test_search.py checks it); this measures what the
cache buys. To time a fixed number of steps, the end-of-sentence token is set to an id the
model never produces, so every sentence runs exactly ``length`` steps.

Without ``--checkpoint`` a randomly initialised model of a preset's size is used
(``--preset``, ``cpu`` by default; speed does not depend on the weights). Each figure is the
median of ``--repeats`` rounds, each round running every variant once in turn, in one process,
so the ratios compare like with like.

``--compile MODE`` (``default``, ``reduce-overhead``: CUDA graphs on a GPU, ``max-autotune``)
adds greedy decoding with compiled incremental steps (``compiled_greedy_decode(..., mode=MODE)``) to
each length's timings, next to eager incremental decoding: ``compiled s/s`` and its speed-up
over eager incremental. Its compile time (the first compiled call, at the first length) and
each length's warm-up call are timed apart (``compile_s``, ``compiled_warmup_s``), not in the
medians.
"""

from __future__ import annotations

import dataclasses
import shlex
import statistics
import sys
import time
from datetime import date
from pathlib import Path

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("decoding"))

import torch
from common import json_arg, write_report

from convs2s.model import ConvS2S, count_parameters
from convs2s.model.search import beam_search, greedy_decode
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.compiled_decoding import compiled_greedy_decode
from convs2s.run.presets import PRESETS
from convs2s.run.translate_cli import device_arg
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser, whole_number_arg
from convs2s.system.compiling import COMPILE_MODES


def _model(checkpoint: Path | None, preset_name: str = "cpu") -> ConvS2S:
    if checkpoint is not None:
        return Checkpoint.load(checkpoint).build_model()
    preset = PRESETS[preset_name]
    torch.manual_seed(0)
    return ConvS2S(dataclasses.replace(preset.model, src_vocab_size=7851, trg_vocab_size=5892,
                                       src_pad_idx=1, trg_pad_idx=1))


def _time(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


def _medians(variants: dict, repeats: int) -> dict:
    """Each variant's median time over ``repeats`` rounds, every round running each variant
    once in turn (interleaved: a slower spell of the machine falls on all of them)."""
    times = {name: [] for name in variants}
    for _ in range(repeats):
        for name, fn in variants.items():
            times[name].append(_time(fn))
    return {name: statistics.median(t) for name, t in times.items()}


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--checkpoint", type=Path, help="a trained model (default: random weights)")
    what.add_argument("--preset", default="cpu", choices=sorted(PRESETS),
                      help="sizes of the randomly initialised model (default: cpu)")
    parser.add_argument("--batch", type=whole_number_arg, default=32, help="sentences per batch")
    parser.add_argument("--src-len", type=whole_number_arg, default=14,
                        help="source length (tokens)")
    parser.add_argument("--lengths", type=whole_number_arg, nargs="+", default=[10, 20, 40])
    parser.add_argument("--repeats", type=whole_number_arg, default=3)
    parser.add_argument("--device", type=device_arg, default=None,
                        help="cpu, cuda, cuda:N or mps (default: the best there is)")
    parser.add_argument("--compile", choices=COMPILE_MODES, metavar="MODE",
                        help="also time greedy decoding with compiled incremental steps "
                             f"({', '.join(COMPILE_MODES)})")
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    device = args.device or environment.device()
    model = _model(args.checkpoint, args.preset).to(device).eval()
    vocab = model.config["src_vocab_size"]
    g = torch.Generator().manual_seed(0)
    src = torch.randint(4, vocab, (args.batch, args.src_len), generator=g).to(device)
    never = -1  # an eos id no argmax returns: every sentence runs the full length
    bos = 2
    rows = []
    print(f"{count_parameters(model):,} parameters, batch {args.batch}, device "
          f"{environment.describe_device(device)}")
    compile_s = None
    if args.compile:
        kw = dict(max_len=args.lengths[0], bos_idx=bos, eos_idx=never)
        compile_s = _time(lambda: compiled_greedy_decode(model, src, mode=args.compile, **kw))
        print(f"compiled steps ({args.compile}): first call {compile_s:.1f} s (compiling)")
    compiled_head = f" {'compiled s/s':>13} {'vs inc':>6}" if args.compile else ""
    print(f"{'length':>6} {'incremental s/s':>16}{compiled_head} {'full s/s':>10} {'ratio':>6} "
          f"{'beam1 s/s':>10} {'beam5 s/s':>10} {'ratio':>6}")
    for length in args.lengths:
        kw = dict(max_len=length, bos_idx=bos, eos_idx=never)
        greedy_decode(model, src, **kw)  # warm-up
        row = {"length": length}
        variants = {"inc": lambda kw=kw: greedy_decode(model, src, incremental=True, **kw)}
        if args.compile:  # its warm-up apart: a new shape may still compile (or record)
            variants["comp"] = lambda kw=kw: compiled_greedy_decode(model, src,
                                                                    mode=args.compile, **kw)
            row["compiled_warmup_s"] = _time(variants["comp"])
        variants.update(
            full=lambda kw=kw: greedy_decode(model, src, incremental=False, **kw),
            b1=lambda kw=kw: beam_search(model, src, beam_size=1, **kw),
            b5=lambda kw=kw: beam_search(model, src, beam_size=5, **kw))
        t = _medians(variants, args.repeats)
        compiled_cell = ""
        if args.compile:
            row.update(compiled_sent_per_s=args.batch / t["comp"],
                       compiled_speedup=t["inc"] / t["comp"])
            compiled_cell = f" {args.batch / t['comp']:>13.1f} {t['inc'] / t['comp']:>5.2f}x"
        row.update({"incremental_sent_per_s": args.batch / t["inc"],
                    "full_sent_per_s": args.batch / t["full"],
                    "incremental_speedup": t["full"] / t["inc"],
                    "beam1_sent_per_s": args.batch / t["b1"],
                    "beam5_sent_per_s": args.batch / t["b5"], "beam5_slowdown": t["b5"] / t["b1"]})
        rows.append(row)
        print(f"{length:>6} {row['incremental_sent_per_s']:>16.1f}{compiled_cell} "
              f"{row['full_sent_per_s']:>10.1f} {row['incremental_speedup']:>5.1f}x "
              f"{row['beam1_sent_per_s']:>10.1f} {row['beam5_sent_per_s']:>10.1f} "
              f"{row['beam5_slowdown']:>5.1f}x", flush=True)
    report = {"benchmark": "decoding", "device": environment.describe_device(device),
              "threads": torch.get_num_threads(), "parameters": count_parameters(model),
              "model": str(args.checkpoint) if args.checkpoint else f"preset {args.preset}",
              "batch": args.batch, "src_len": args.src_len, "date": date.today().isoformat(),
              "command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "rows": rows}
    if args.compile:
        report.update(compile=args.compile, compile_s=compile_s)
    write_report(args.json, report)
    return 0

