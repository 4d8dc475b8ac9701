"""Which optimizer and which initialisation train best on Multi30k, at equal wall time.

    python benchmarks/train_choices.py [--minutes 5] [--preset cpu] [--json out.json]

Trains the preset's model once per configuration, each for the same wall-clock budget on the
same data, batches and seed, and reports the best validation loss (per-token cross-entropy,
no smoothing) and perplexity each reached. The configurations:

- ``adamw/paper``: AdamW, the paper's initialisation (fairseq's fconv), weight norm on;
- ``adamw/pytorch``: AdamW, PyTorch's default initialisation (what most tutorials use);
- ``nesterov/paper``: the paper's optimizer, Nesterov SGD, lr 0.25, momentum 0.99.

The course's defaults come from this table (see ``convs2s.run.train`` and ``convs2s.model``).
"""

from __future__ import annotations

import math
import shlex
import sys
import time
from datetime import date
from pathlib import Path
from tempfile import TemporaryDirectory

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("train_choices"))

import torch
from common import json_arg, write_report

from convs2s.data import load_multi30k, make_loader
from convs2s.model.loss import evaluate_loss
from convs2s.run.prepare import prepare_data
from convs2s.run.presets import PRESETS
from convs2s.run.train import train
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser

CONFIGS = {
    "adamw/paper": dict(optimizer="adamw", init="paper"),
    "adamw/pytorch": dict(optimizer="adamw", init="pytorch"),
    "nesterov/paper": dict(optimizer="nesterov", init="paper", lr=0.25, weight_decay=0.0,
                           warmup_steps=0),
}


def run(name: str, preset, data, minutes: float, out: Path) -> dict:
    preset = preset.replace(max_minutes=minutes, epochs=1000, patience=1000, **CONFIGS[name])
    t0 = time.perf_counter()
    result = train(preset, out, data=data, progress=False, log=lambda *_: None)
    seconds = time.perf_counter() - t0
    _, valid_ds, _, _ = prepare_data(preset, data, (result.src_vocab, result.trg_vocab))
    loader = make_loader(valid_ds, max_tokens=preset.max_tokens, shuffle=False, bucket=False)
    loss = evaluate_loss(result.model, loader, result.trg_vocab.pad_idx, torch.device("cpu"))
    return {"config": name, "valid_loss": loss, "valid_ppl": math.exp(loss),
            "steps": result.steps, "epochs_done": len(result.history), "seconds": seconds}


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=5.0, help="budget per configuration")
    parser.add_argument("--preset", default="cpu", choices=sorted(PRESETS))
    parser.add_argument("--configs", nargs="+", default=list(CONFIGS), choices=list(CONFIGS))
    parser.add_argument("--json", type=json_arg)
    args = parser.parse_args(argv)
    data = load_multi30k()
    rows = []
    for name in args.configs:
        with TemporaryDirectory() as tmp:
            row = run(name, PRESETS[args.preset], data, args.minutes, Path(tmp))
        rows.append(row)
        print(f"{name:<16} valid loss {row['valid_loss']:.3f}  ppl {row['valid_ppl']:7.2f}  "
              f"{row['steps']} steps, {row['epochs_done']} epochs, {row['seconds']:.0f} s",
              flush=True)
    report = {"benchmark": "train_choices", "preset": args.preset, "minutes": args.minutes,
              "threads": torch.get_num_threads(), "device": environment.describe_device("cpu"),
              "date": date.today().isoformat(),
              "command": "python " + " ".join(shlex.quote(a) for a in sys.argv), "rows": rows}
    write_report(args.json, report)
    return 0

