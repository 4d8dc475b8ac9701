"""Where a training step's time goes, and what two changes to the step saved.

    python benchmarks/train_step.py [--preset cpu_subword] [--batches real|synthetic]
                                    [--device cpu] [--steps 20] [--json out.json]

One process, one model size (a training preset's). A step is what the trainer does: forward,
label-smoothed loss, backward, gradient clipping, AdamW. The batches: ``real`` (default) are
the first ``--steps`` training batches of the preset's Multi30k epoch 1, as the trainer's
loader makes them, one per timed round (over a whole epoch, 14% of a ``cpu_subword`` batch's
target positions are padding); ``synthetic`` are
random tokens of the preset's ``max_tokens``, ``--trg-len`` positions per sentence, the last
up to ``--pad-share`` of each target padding (no data needed).

1. **Profile.** ``torch.profiler`` over a few steps of the package's step: the operators that
   take the most time (self time), and the step's counted arithmetic against its duration
   (GFLOP/s), beside a plain large matrix product on the same device, the rate the step could
   at most reach.
2. **Three steps, interleaved** (three copies of one model, their steps taking turns so all
   see the same machine load; medians, and ratios):
   ``before``: each ``ConvGLUBlock``'s convolution as ``F.conv1d`` and the output layer at
   every position (the package before those changes); ``matmul``: the convolution as one matrix
   product over its windows (``convs2s.model.layers.conv_as_matmul``); ``now``: that, and the
   output layer only where the next token is real (``convs2s.model.loss.next_token_loss``), the
   package's step today. All three compute the same loss and gradients
   (``tests/model/test_loss.py``, and the reference test against fairseq passes with either
   convolution).

Run it with nothing else running; the ratios are the figures to quote, the milliseconds are
this machine's. Tokens per second count real (non-pad) target tokens.
"""

from __future__ import annotations

import copy
import dataclasses
import statistics
import sys
import time
from contextlib import contextmanager

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("train_step"))

import torch
from common import json_arg, stamp, write_report

from convs2s.system.arguments import OneLineParser


@contextmanager
def conv1d_blocks():
    """Every ConvGLUBlock computes its convolution with F.conv1d (the path before the changes)."""
    from convs2s.model.layers import ConvGLUBlock

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


def synthetic_batches(vocab: int, batch: int, src_len: int, trg_len: int, pad_share: float,
                      n: int = 4) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """Random ``(src, trg)`` batches: ``trg`` has ``trg_len + 1`` positions (<bos> first), of
    which each sentence's last ``0 .. pad_share * trg_len`` are padding (id 0)."""
    g = torch.Generator().manual_seed(1)
    batches = []
    for _ in range(n):
        src = torch.randint(4, vocab, (batch, src_len), generator=g)
        trg = torch.randint(4, vocab, (batch, trg_len + 1), generator=g)
        pads = torch.randint(0, int(pad_share * trg_len) + 1, (batch,), generator=g)
        for b, k in enumerate(pads.tolist()):
            if k:
                trg[b, -k:] = 0
        batches.append((src, trg))
    return batches


def real_batches(preset, n: int) -> tuple[list, int, int]:
    """The first ``n`` training batches of the preset's epoch 1 (the trainer's loader), the
    vocabulary size and the target padding id."""
    from convs2s.data import make_loader
    from convs2s.run.prepare import prepare_data

    train_ds, _, src_vocab, trg_vocab = prepare_data(preset)
    if src_vocab.pad_idx != trg_vocab.pad_idx:
        raise ValueError("the benchmark expects one padding id for both vocabularies.")
    loader = make_loader(train_ds, max_tokens=preset.max_tokens, shuffle=True, seed=preset.seed)
    batches = []
    for src, trg in loader:
        batches.append((src, trg))
        if len(batches) == n:
            break
    return batches, (len(src_vocab), len(trg_vocab)), trg_vocab.pad_idx


def step_batches(parser, args, rows: int | None = None, pad_share: float = 0.3,
                 n: int = 4) -> tuple:
    """What both step benchmarks (this one and ``compiled_step.py``) start from, after their
    own argument checks: the device, the preset, and ``args.batches``'s batches on the device
    (``real``: the first ``args.steps`` of epoch 1; ``synthetic``: ``n`` batches of ``rows``
    sentences, the preset's ``max_tokens`` over ``args.trg_len`` when ``rows`` is None), with
    the vocabulary sizes and the padding id: ``(device, preset, batches, src_vocab, trg_vocab,
    pad)``. A length the preset cannot hold is the parser's error."""
    from convs2s.run.presets import PRESETS
    from convs2s.system import environment

    device = environment.check_device(args.device)
    preset = PRESETS[args.preset]
    if max(args.src_len, args.trg_len + 1) > preset.model.max_positions:
        parser.error(f"--src-len/--trg-len must fit the preset's {preset.model.max_positions} "
                     "positions")
    if args.batches == "real":
        batches, (src_vocab, trg_vocab), pad = real_batches(preset, args.steps)
    else:
        rows = rows if rows is not None else max(1, preset.max_tokens // args.trg_len)
        batches = synthetic_batches(args.vocab, rows, args.src_len, args.trg_len, pad_share,
                                    n=n)
        src_vocab = trg_vocab = args.vocab
        pad = 0
    batches = [(s.to(device), t.to(device)) for s, t in batches]
    return device, preset, batches, src_vocab, trg_vocab, pad


def main(argv: list[str] | None = None) -> dict:
    from torch.utils.flop_counter import FlopCounterMode

    from convs2s.model import ConvS2S
    from convs2s.model.loss import next_token_loss, sequence_loss
    from convs2s.run.prepare import make_optimizer
    from convs2s.run.presets import PRESETS
    from convs2s.system import environment

    parser = OneLineParser(prog="python benchmarks/train_step.py",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", default="cpu_subword", choices=sorted(PRESETS))
    parser.add_argument("--batches", default="real", choices=("real", "synthetic"))
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--steps", type=int, default=20, help="timed steps per variant")
    parser.add_argument("--profile-steps", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=8000,
                        help="synthetic: both vocabularies' size")
    parser.add_argument("--src-len", type=int, default=15, help="synthetic: source length")
    parser.add_argument("--trg-len", type=int, default=16, help="synthetic: target length")
    parser.add_argument("--pad-share", type=float, default=0.3,
                        help="synthetic: at most this share of each target is padding")
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    for name in ("steps", "profile_steps", "vocab", "src_len", "trg_len"):
        if getattr(args, name) < 1:
            parser.error(f"--{name.replace('_', '-')} must be at least 1")
    if not 0 <= args.pad_share < 1:
        parser.error("--pad-share must be in [0, 1)")
    device, preset, batches, src_vocab, trg_vocab, pad = step_batches(
        parser, args, pad_share=args.pad_share)
    torch.manual_seed(0)
    config = dataclasses.replace(preset.model, src_vocab_size=src_vocab, trg_vocab_size=trg_vocab,
                                 src_pad_idx=pad, trg_pad_idx=pad)
    model = ConvS2S(config).to(device).train()
    positions = sum(t[:, 1:].numel() for _, t in batches)
    real = sum(int((t[:, 1:] != pad).sum()) for _, t in batches)

    def full_loss(net, src, trg):  # the output layer at every position, as before the changes
        logits, _ = net(src, trg[:, :-1])
        return sequence_loss(logits, trg[:, 1:], pad, preset.label_smoothing)

    def masked_loss(net, src, trg):  # the package's loss now
        return next_token_loss(net, src, trg, pad, preset.label_smoothing)

    def make_step(net, loss_fn):
        opt = make_optimizer(net, preset)

        def step(src, trg):
            loss = loss_fn(net, src, trg)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(net.parameters(), preset.clip_norm)
            opt.step()
            return loss.item()  # waits for the device, as the trainer does

        return step

    def flops(loss_fn) -> float:
        """Mean counted FLOPs of forward + backward over the batches."""
        twin = copy.deepcopy(model)
        with FlopCounterMode(display=False) as counter:
            for src, trg in batches:
                loss_fn(twin, src, trg).backward()
        return float(counter.get_total_flops()) / len(batches)

    variants = {"before": (full_loss, conv1d_blocks), "matmul": (full_loss, None),
                "now": (masked_loss, None)}
    steps = {name: (make_step(copy.deepcopy(model), fn), patch)
             for name, (fn, patch) in variants.items()}
    full_gflop, masked_gflop = flops(full_loss) / 1e9, flops(masked_loss) / 1e9
    gflop = {"before": full_gflop, "matmul": full_gflop, "now": masked_gflop}  # a convolution
    # counts the same FLOPs as its matrix product over the windows
    print(f"{args.preset}-sized model, {args.batches} batches: {len(batches)} batches of "
          f"{positions / len(batches):,.0f} target positions on average, "
          f"{100 * (1 - real / positions):.1f}% of them padding, on "
          f"{environment.describe_device(device)}")

    # 1. where the time goes (the package's step)
    from torch.profiler import ProfilerActivity, profile

    step = steps["now"][0]
    for i in range(2):
        step(*batches[i % len(batches)])
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda"
                                           else [])
    profiles = {}
    for name in ("before", "now"):
        step, patch = steps[name]
        with (patch() if patch else _nothing()), profile(activities=activities) as prof:
            for i in range(args.profile_steps):
                step(*batches[i % len(batches)])
        rows = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
        total = sum(e.self_cpu_time_total for e in rows) or 1
        profiles[name] = [{"op": e.key, "share": e.self_cpu_time_total / total,
                           "ms_per_step": e.self_cpu_time_total / 1000 / args.profile_steps}
                          for e in rows[:8]]
        print(f"\nwhere a step's time goes, {name} (self time, top 8):")
        for r in profiles[name]:
            print(f"  {r['op']:<36} {100 * r['share']:5.1f} %  {r['ms_per_step']:8.1f} ms")

    # 2. the three steps, interleaved
    times: dict[str, list[float]] = {name: [] for name in steps}
    for r in range(args.steps + 1):
        for name, (step, patch) in steps.items():
            with patch() if patch else _nothing():
                t0 = time.perf_counter()
                step(*batches[r % len(batches)])
                if r:  # the first round warms up
                    times[name].append(time.perf_counter() - t0)
    peak = matmul_rate(device)
    medians = {name: statistics.median(v) for name, v in times.items()}
    tokens = real / len(batches)  # real target tokens per step, on average
    print(f"\none step, median of {args.steps} (GFLOP: counted, mean over the batches):")
    for name, sec in medians.items():
        print(f"  {name:<7} {sec * 1000:7.0f} ms  {tokens / sec:8,.0f} real tokens/s  "
              f"{gflop[name]:6.1f} GFLOP  {gflop[name] / sec:6.1f} GFLOP/s")
    print(f"  a 2048^3 matrix product on this device: {peak:.1f} GFLOP/s")
    ratios = {name: medians[name] / medians["before"] for name in ("matmul", "now")}
    for name, ratio in ratios.items():
        print(f"{name} / before step time: {ratio:.3f} ({100 * (1 - ratio):.0f}% less time, "
              f"{1 / ratio:.2f}x the tokens per second)")
    report = stamp({
        "preset": args.preset, "batches": args.batches,
        "device": environment.describe_device(device),
        "steps": args.steps, "batch_count": len(batches),
        "target_positions_per_step": positions / len(batches),
        "real_tokens_per_step": tokens, "padding_share": 1 - real / positions,
        "step_gflop": gflop, "matmul_peak_gflops": peak,
        "median_ms": {k: v * 1000 for k, v in medians.items()},
        "tokens_per_s": {k: tokens / v for k, v in medians.items()},
        "ratio_over_before": ratios, "profile": profiles})
    if args.batches == "synthetic":
        report.update(vocab=args.vocab, src_len=args.src_len, trg_len=args.trg_len,
                      pad_share=args.pad_share)
    write_report(args.json, report)
    return report


@contextmanager
def _nothing():
    yield

