"""The trainer's step eager and compiled: tokens per second, compile time, model FLOP utilisation.

    python benchmarks/compiled_step.py [--preset gpu] [--device cuda] [--compile reduce-overhead]
                                       [--batches real|synthetic] [--steps 40] [--rounds 3]
                                       [--json out.json]

A step is the trainer's (``convs2s.run.train``): forward, label-smoothed loss, backward,
gradient clipping, AdamW (fused on a CUDA GPU: ``convs2s.run.prepare.make_optimizer``) at the
trainer's learning rate (its warm-up), under the device's mixed precision
(``convs2s.run.precision``). ``eager``: ``next_token_loss`` of the model,
as the trainer runs by default; ``compiled``: ``compiled_loss`` of
``compile_for_training``'s module, as the trainer runs with ``--compile MODE`` (under CUDA graphs,
``reduce-overhead`` and ``max-autotune``, each batch padded to one of a few shapes first:
``static_shapes``). Two copies of one model, each with its own optimizer.

The batches: ``real`` (default) are the first ``--steps`` training batches of the preset's
Multi30k epoch 1, as the trainer's loader makes them (needs the data: ``CONVS2S_DATA_DIR``);
``synthetic`` are random tokens, all of one shape (``--src-len``, ``--trg-len``; no data), so
they say nothing of the many shapes real batches have.

1. **Compile.** The compiled copy goes over the batches ``--warmup`` times first (compiling, and
   under CUDA graphs recording one graph per padded shape the first times it meets it): timed
   apart, as ``compile_s``; then the eager copy as many times (both have taken as many steps).
2. **Steps.** ``--rounds`` passes over the batches, the two copies taking turns batch by batch so
   both see the same machine; a pass's time is the sum of its steps (each ends with
   ``loss.item()``, which waits for the device, as the trainer's does); the median pass.
3. **FLOPs.** ``torch.utils.flop_counter.FlopCounterMode`` counts the eager step's forward and
   backward on the batches (the work the step needs: the compiled step's padding is not
   counted), per real target token. The model FLOP utilisation is that work per second over the
   GPU's dense tensor-core peak for the autocast's 16-bit type (:data:`PEAK_TFLOPS`, from the
   vendors' data sheets); for a device not in the table, or in float32, FLOP/s only.

Tokens per second count real (non-pad) target tokens. ``mean_loss``: each copy's over the timed
passes, a check that both train; they differ a little, as compiled dropout draws other masks.
Run it with nothing else running.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import sys
import time

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("compiled_step"))

import torch
from common import json_arg, stamp, write_report

#: Dense (no sparsity) bfloat16/float16 tensor-core peaks in TFLOP/s by a part of the device's
#: name, the more specific names first; the vendors' data sheets.
PEAK_TFLOPS = (
    ("H100 PCIe", 756.0),
    ("H100 NVL", 835.0),
    ("H100", 989.0),  # SXM ("NVIDIA H100 80GB HBM3")
    ("H200", 989.0),
    ("A100", 312.0),
    ("L40S", 362.0),
    ("L40", 181.0),
    ("L4", 121.0),
    ("T4", 65.0),  # float16 (a T4 has no bfloat16)
)


def peak_tflops(device_name: str) -> float | None:
    """The dense 16-bit peak of a GPU named ``device_name``, or None for one not in the table."""
    for part, peak in PEAK_TFLOPS:
        if part in device_name:
            return peak
    return None


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> dict:
    from torch.utils.flop_counter import FlopCounterMode
    from train_step import step_batches

    from convs2s.model import ConvS2S
    from convs2s.model.loss import next_token_loss
    from convs2s.run.compiled_training import (
        compile_for_training,
        compiled_loss,
        static_shapes,
    )
    from convs2s.run.precision import clipped_gradients, mixed_precision, update
    from convs2s.run.prepare import make_optimizer
    from convs2s.run.presets import PRESETS
    from convs2s.run.train import learning_rate
    from convs2s.system import environment
    from convs2s.system.arguments import OneLineParser
    from convs2s.system.compiling import COMPILE_MODES, CUDA_GRAPH_MODES

    parser = OneLineParser(prog="python benchmarks/compiled_step.py",
                           description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="gpu", choices=sorted(PRESETS))
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--compile", default="reduce-overhead", choices=COMPILE_MODES)
    parser.add_argument("--batches", default="real", choices=("real", "synthetic"))
    parser.add_argument("--steps", type=int, default=40, help="batches in a pass")
    parser.add_argument("--warmup", type=int, default=3,
                        help="passes of the compiled step before timing (compiling, recording)")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes of each step")
    parser.add_argument("--flop-batches", type=int, default=10,
                        help="batches whose FLOPs are counted")
    parser.add_argument("--vocab", type=int, default=8000,
                        help="synthetic: both vocabularies' size")
    parser.add_argument("--src-len", type=int, default=15, help="synthetic: source length")
    parser.add_argument("--trg-len", type=int, default=16, help="synthetic: target length")
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    for name in ("steps", "warmup", "rounds", "flop_batches", "vocab", "src_len", "trg_len"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    preset = PRESETS[args.preset]
    device, preset, batches, src_vocab, trg_vocab, pad = step_batches(
        parser, args, rows=max(1, preset.max_tokens // (args.trg_len + 1)), n=args.steps)
    real = [int((t[:, 1:] != pad).sum()) for _, t in batches]
    torch.manual_seed(0)
    config = dataclasses.replace(preset.model, src_vocab_size=src_vocab, trg_vocab_size=trg_vocab,
                                 src_pad_idx=pad, trg_pad_idx=pad)
    eager = ConvS2S(config).to(device).train()
    twin = copy.deepcopy(eager)
    compiled = compile_for_training(twin, args.compile, device)
    precision = mixed_precision(device, preset.amp)
    static = args.compile in CUDA_GRAPH_MODES
    max_positions = preset.model.max_positions

    def make_step(model, net, is_compiled):
        opt, scaler = make_optimizer(model, preset), precision.scaler()
        done = [0]  # updates so far: the trainer's learning-rate schedule

        def step(src, trg):
            if is_compiled:
                loss = compiled_loss(net, src, trg, src_pad=pad, trg_pad=pad,
                                     label_smoothing=preset.label_smoothing,
                                     autocast=precision.autocast(),
                                     max_positions=max_positions, static=static)
            else:
                loss = next_token_loss(net, src, trg, pad, preset.label_smoothing,
                                       precision.autocast())
            clipped_gradients(loss, opt, scaler, model.parameters(), preset.clip_norm)
            done[0] += 1
            update(opt, scaler, learning_rate(preset, done[0], 1.0))
            return loss.item()  # waits for the device, as the trainer does

        return step

    steps = {"eager": make_step(eager, eager, False),
             "compiled": make_step(twin, compiled, True)}
    shapes = {tuple(x.shape for x in static_shapes(s, t, pad, pad, max_positions)) if static
              else (s.shape, t.shape) for s, t in batches}
    print(f"{args.preset}-sized model, {args.batches} batches: {len(batches)} batches, "
          f"{len(shapes)} shapes {'after padding ' if static else ''}for the compiled step, "
          f"{sum(real) / len(batches):,.0f} real target tokens per batch on average; "
          f"{precision.describe()}; on {environment.describe_device(device)}")

    # 1. compile (and record CUDA graphs), warm up
    t0 = time.perf_counter()
    for _ in range(args.warmup):
        for src, trg in batches:
            steps["compiled"](src, trg)
    _sync(device)
    compile_s = time.perf_counter() - t0
    for _ in range(args.warmup):  # as many updates as the compiled copy's
        for src, trg in batches:
            steps["eager"](src, trg)
    print(f"compiling ({args.compile}) and {args.warmup} warm-up passes: {compile_s:.1f} s")

    # 2. the two steps, taking turns
    passes: dict[str, list[float]] = {name: [] for name in steps}
    losses: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(args.rounds):
        spent = dict.fromkeys(steps, 0.0)
        for src, trg in batches:
            for name, step in steps.items():
                t0 = time.perf_counter()
                losses[name].append(step(src, trg))
                spent[name] += time.perf_counter() - t0
        for name in steps:
            passes[name].append(spent[name])
    median = {name: statistics.median(v) for name, v in passes.items()}
    tokens_per_s = {name: sum(real) / sec for name, sec in median.items()}

    # 3. the step's counted work, per real target token
    counted = batches[:args.flop_batches]
    counter_model = copy.deepcopy(eager)
    with FlopCounterMode(display=False) as counter:
        for src, trg in counted:
            next_token_loss(counter_model, src, trg, pad, preset.label_smoothing,
                            precision.autocast()).backward()
    flops_per_token = counter.get_total_flops() / sum(real[:len(counted)])
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else ""
    peak = peak_tflops(name) if precision.enabled else None
    flops_per_s = {k: flops_per_token * v for k, v in tokens_per_s.items()}
    mfu = {k: v / (peak * 1e12) for k, v in flops_per_s.items()} if peak else None

    ratio = tokens_per_s["compiled"] / tokens_per_s["eager"]
    print(f"\none pass over the {len(batches)} batches, median of {args.rounds}:")
    for k in steps:
        share = f", MFU {100 * mfu[k]:.1f}% of {peak:.0f} TFLOP/s" if mfu else ""
        print(f"  {k:<8} {median[k]:7.2f} s  {tokens_per_s[k]:10,.0f} real tokens/s  "
              f"{flops_per_s[k] / 1e12:7.2f} TFLOP/s{share}")
    print(f"compiled / eager tokens per second: {ratio:.3f}x; "
          f"{flops_per_token / 1e6:.1f} MFLOP per real target token (counted)")
    report = stamp({
        "preset": args.preset, "batches": args.batches, "compile": args.compile,
        "device": environment.describe_device(device), "precision": precision.describe(),
        "batch_count": len(batches), "compiled_shapes": len(shapes),
        "real_tokens_per_batch": sum(real) / len(batches), "warmup_passes": args.warmup,
        "rounds": args.rounds, "compile_s": compile_s,
        "median_pass_s": median, "tokens_per_s": tokens_per_s,
        "compiled_over_eager": ratio, "flops_per_real_token": flops_per_token,
        "flops_counted_on_batches": len(counted), "model_flops_per_s": flops_per_s,
        "peak_tflops": peak, "mfu": mfu,
        "mean_loss": {k: statistics.fmean(v) for k, v in losses.items()}})
    if args.batches == "synthetic":
        report.update(vocab=args.vocab, src_len=args.src_len, trg_len=args.trg_len)
    write_report(args.json, report)
    return report

