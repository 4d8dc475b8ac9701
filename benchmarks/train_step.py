"""Where a training step's time goes, and the block convolution as conv1d vs as a matrix product.

    python benchmarks/train_step.py [--preset cpu_subword] [--device cpu] [--steps 20]
                                    [--src-len 15] [--trg-len 16] [--json out.json]

One process, one model size (a training preset's), synthetic batches of the preset's
``max_tokens`` target tokens (``--trg-len`` tokens per sentence, no padding: the step's cost
depends on the shapes, not on which tokens they are). A step is what the trainer does: forward,
label-smoothed loss, backward, gradient clipping, AdamW.

1. **Profile.** ``torch.profiler`` over a few steps: the operators that take the most time
   (self time), and the step's arithmetic (``convs2s.baselines.training_flops``) against its
   duration (GFLOP/s), beside a plain large matrix product on the same device, the rate the
   step could at most reach.
2. **conv1d vs matmul.** The same steps with each ``ConvGLUBlock``'s convolution computed as
   ``F.conv1d`` (how the package computed it before issue 27) and as one matrix product over
   the windows (``convs2s.layers.conv_as_matmul``, the package's way now): two copies of one
   model, their steps interleaved so both see the same machine load; medians, and the ratio.
   The two compute the same sums in another order (the reference test against fairseq passes
   with either).

Run it with nothing else running; the ratio is the figure to quote, the milliseconds are this
machine's.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from contextlib import contextmanager

import torch
from common import run_main, stamp, write_report


@contextmanager
def conv1d_blocks():
    """Every ConvGLUBlock computes its convolution with F.conv1d (the path before issue 27)."""
    from convs2s.layers import ConvGLUBlock

    before = ConvGLUBlock._linearizable
    ConvGLUBlock._linearizable = lambda self: False
    try:
        yield
    finally:
        ConvGLUBlock._linearizable = before


def matmul_rate(device: torch.device, n: int = 2048, repeats: int = 5) -> float:
    """GFLOP/s of an n x n x n float32 matrix product: about the most this device gives."""
    a, b = torch.randn(n, n, device=device), torch.randn(n, n, device=device)
    for _ in range(2):
        a @ b
    _sync(device)
    t0 = time.perf_counter()
    for _ in range(repeats):
        a @ b
    _sync(device)
    return 2 * n**3 * repeats / (time.perf_counter() - t0) / 1e9


def _sync(device: torch.device) -> None:
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def main(argv: list[str] | None = None) -> dict:
    from convs2s import config
    from convs2s.baselines import training_flops
    from convs2s.loss import sequence_loss
    from convs2s.model import ConvS2S
    from convs2s.train import PRESETS, make_optimizer

    parser = argparse.ArgumentParser(prog="python benchmarks/train_step.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cpu_subword", choices=sorted(PRESETS))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=8000, help="both vocabularies' size")
    parser.add_argument("--src-len", type=int, default=15)
    parser.add_argument("--trg-len", type=int, default=16)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    for name in ("steps", "profile_steps", "vocab", "src_len", "trg_len"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    device = config.check_device(args.device)
    preset = PRESETS[args.preset]
    if max(args.src_len, args.trg_len + 1) > preset.max_positions:
        parser.error(f"--src-len/--trg-len must fit the preset's {preset.max_positions} positions")

    torch.manual_seed(0)
    model = ConvS2S(args.vocab, args.vocab, src_pad_idx=0, trg_pad_idx=0,
                    **preset.model_kwargs()).to(device).train()
    batch = max(1, preset.max_tokens // args.trg_len)
    g = torch.Generator().manual_seed(1)
    batches = [(torch.randint(4, args.vocab, (batch, args.src_len), generator=g).to(device),
                torch.randint(4, args.vocab, (batch, args.trg_len + 1), generator=g).to(device))
               for _ in range(4)]
    tokens = batch * args.trg_len

    def make_step(net):
        opt = make_optimizer(net, preset)

        def step(src, trg):
            logits, _ = net(src, trg[:, :-1])
            loss = sequence_loss(logits, trg[:, 1:], 0, preset.label_smoothing)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), preset.clip_norm)
            opt.step()
            return loss.item()  # waits for the device, as the trainer does

        return step

    variants = {"conv1d": (make_step(copy.deepcopy(model)), conv1d_blocks),
                "matmul": (make_step(model), None)}
    print(f"{args.preset}-sized model, batches of {batch} x {args.trg_len} = {tokens:,} target "
          f"tokens, on {config.describe_device(device)}")

    # 1. where the time goes (the package's way)
    from torch.profiler import ProfilerActivity, profile

    step = variants["matmul"][0]
    for i in range(2):
        step(*batches[i])
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    profiles = {}
    for name, (step, patch) in variants.items():
        with (patch() if patch else _nothing()), profile(activities=activities) as prof:
            for i in range(args.profile_steps):
                step(*batches[i % 4])
        rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in rows) or 1
        profiles[name] = [{"op": e.key, "share": e.self_cpu_time_total / total,
                           "ms_per_step": e.self_cpu_time_total / 1000 / args.profile_steps}
                          for e in rows[:8]]
        print(f"\nwhere a step's time goes, convolution as {name} (self time, top 8):")
        for r in profiles[name]:
            print(f"  {r['op']:<36} {100 * r['share']:5.1f} %  {r['ms_per_step']:8.1f} ms")

    # 2. conv1d vs matmul, interleaved
    times: dict[str, list[float]] = {name: [] for name in variants}
    for r in range(args.steps + 1):
        for name, (step, patch) in variants.items():
            with patch() if patch else _nothing():
                t0 = time.perf_counter()
                step(*batches[r % 4])
                if r:  # the first round warms up
                    times[name].append(time.perf_counter() - t0)
    flops = training_flops(model, *batches[0], pad_idx=0,
                           label_smoothing=preset.label_smoothing)["flops"]
    peak = matmul_rate(device)
    medians = {name: statistics.median(v) for name, v in times.items()}
    ratio = medians["matmul"] / medians["conv1d"]
    print(f"\none step ({flops / 1e9:.1f} GFLOP of matrix products and convolutions), median "
          f"of {args.steps}:")
    for name, sec in medians.items():
        print(f"  convolution as {name:<7} {sec * 1000:7.0f} ms  {tokens / sec:8,.0f} tokens/s  "
              f"{flops / sec / 1e9:6.1f} GFLOP/s")
    print(f"  a 2048^3 matrix product on this device: {peak:.1f} GFLOP/s")
    print(f"matmul / conv1d step time: {ratio:.3f} ({100 * (1 - ratio):.0f}% less time)")
    report = stamp({
        "preset": args.preset, "device": config.describe_device(device), "batch": batch,
        "trg_len": args.trg_len, "src_len": args.src_len, "tokens": tokens, "steps": args.steps,
        "step_gflop": flops / 1e9, "matmul_peak_gflops": peak,
        "median_ms": {k: v * 1000 for k, v in medians.items()},
        "tokens_per_s": {k: tokens / v for k, v in medians.items()},
        "ratio_matmul_over_conv1d": ratio, "profile": profiles})
    write_report(args.json, report)
    return report


@contextmanager
def _nothing():
    yield


if __name__ == "__main__":
    sys.exit(run_main(main))
