"""Peak memory of training: resident memory on the CPU, allocated memory on a GPU.

    python benchmarks/memory.py [--preset cpu] [--steps 60] [--device cpu|cuda] [--json out.json]

Builds the preset's model and data exactly as `convs2s.run.train.train` does and runs training
steps on the largest batches of an epoch first (peak memory comes from the longest batch), then
reports the process's peak resident set size (CPU) or `torch.cuda.max_memory_allocated` (GPU).
Targets: the `cpu` preset within 3 GB of RAM; the `gpu` preset within 12 GB of GPU memory, so
it fits the 16 GB GPU a free Colab gives.
"""

from __future__ import annotations

import resource
import shlex
import sys
import time
from datetime import date

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("memory"))

import torch
from common import json_arg, write_report

from convs2s.data import load_multi30k, make_loader
from convs2s.model import count_parameters
from convs2s.model.loss import sequence_loss
from convs2s.run.precision import mixed_precision
from convs2s.run.prepare import build_model, make_optimizer, prepare_data
from convs2s.run.presets import PRESETS
from convs2s.run.translate_cli import device_arg
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser, whole_number_arg

TARGETS = {("cpu", "cpu"): "3 GB RAM", ("gpu", "cuda"): "12 GB GPU"}  # (preset, device type)


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
    parser.add_argument("--steps", type=whole_number_arg, default=60,
                        help="training steps, on the largest batches first (default: 60)")
    parser.add_argument("--device", type=device_arg)
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    device = args.device or environment.device()
    preset = PRESETS[args.preset]
    train_ds, _, src_vocab, trg_vocab = prepare_data(preset, load_multi30k())
    model = build_model(preset, src_vocab, trg_vocab).to(device)
    optimizer = make_optimizer(model, preset)
    loader = make_loader(train_ds, max_tokens=preset.max_tokens, seed=preset.seed)
    batches = list(loader)
    batches.sort(key=lambda b: -(b[0].numel() + b[1].numel()))  # the largest first
    precision = mixed_precision(device, preset.amp)  # as training does
    scaler = precision.scaler()
    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    t0 = time.perf_counter()
    for src, trg in batches[: args.steps]:
        src, trg = src.to(device), trg.to(device)
        with precision.autocast():
            logits, _ = model(src, trg[:, :-1])
        loss = sequence_loss(logits, trg[:, 1:], trg_vocab.pad_idx, preset.label_smoothing)
        optimizer.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
    seconds = time.perf_counter() - t0
    rss_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024**2  # KiB on Linux
    report = {"benchmark": "memory", "preset": args.preset,
              "device": environment.describe_device(device),
              "parameters": count_parameters(model), "steps": min(args.steps, len(batches)),
              "peak_rss_gb": rss_gb, "seconds": seconds, "date": date.today().isoformat(),
              "command": "python " + " ".join(shlex.quote(a) for a in sys.argv)}
    if device.type == "cuda":
        report["peak_gpu_gb"] = torch.cuda.max_memory_allocated(device) / 1024**3
    # The targets belong to a preset on its own kind of device (TARGETS); anything else, such as
    # the gpu preset trained on a CPU in float32, is reported as a proxy with no target.
    target = TARGETS.get((args.preset, device.type))
    report["target"] = target
    note = f"target within {target}" if target else "no target for this preset on this device"
    print(f"preset {args.preset}: {report['parameters']:,} parameters, peak RSS {rss_gb:.2f} GB"
          + (f", peak GPU {report['peak_gpu_gb']:.2f} GB" if "peak_gpu_gb" in report else "")
          + f" ({note}); {report['steps']} largest batches in {seconds:.0f} s")
    write_report(args.json, report)
    return 0

