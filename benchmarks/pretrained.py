"""The shipped translator against the run it comes from: float16 weights vs float32, same scores?

    python benchmarks/pretrained.py runs/pretrained_de_en \
        --json benchmarks/results/pretrained_de_en.json

Scores the run's ``final.pt`` (float32 weights) and a float16 copy of it, made the way
``tools/export_pretrained.py`` makes the shipped file (``--shipped FILE`` scores that file
instead), on the validation split (what every choice rested on) and on test2016 (reported,
never used for a choice): greedy and beam 5 with the length penalty the run chose, sacreBLEU 13a
and chrF. The two must agree within 0.1 BLEU; the report says whether they do.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("pretrained"))

import torch
from common import json_arg, stamp, write_report

from convs2s.data import load_multi30k
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.evaluate import evaluate
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser

TOLERANCE = 0.1  # BLEU points


def float16_copy(ckpt: Checkpoint) -> Checkpoint:
    """``ckpt`` with its weights rounded to float16 (the model reads them back into float32)."""
    from dataclasses import replace

    return replace(ckpt, state_dict={k: v.to(torch.float16) if v.is_floating_point() else v
                                     for k, v in ckpt.state_dict.items()})


def scores(ckpt: Checkpoint, pairs, device) -> dict:
    t0 = time.perf_counter()
    m = evaluate(Translator.from_checkpoint(ckpt, device=device), pairs, beam_sizes=[1, 5])
    return {"loss": m["loss"], "sentences": m["sentences"], "length_penalty": m["length_penalty"],
            **{f"beam{b}": {k: m[f"beam{b}"][k] for k in ("sacrebleu", "chrf", "tutorial_bleu")}
               for b in (1, 5)}, "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="the run folder (its final.pt)")
    parser.add_argument("--shipped", type=Path, help="the shipped float16 file to score "
                        "(default: a float16 copy of final.pt, made here)")
    parser.add_argument("--device", help="cpu, cuda, ... (default: the best there is)")
    parser.add_argument("--json", type=json_arg, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    device = environment.check_device(args.device)
    final = Checkpoint.load(args.run / "final.pt")
    half = Checkpoint.load(args.shipped) if args.shipped else float16_copy(final)
    data = load_multi30k(src=final.pipeline.src_lang, trg=final.pipeline.trg_lang)
    report = {"run": str(args.run), "device": environment.describe_device(device),
              "threads": torch.get_num_threads(), "choices": final.choices,
              "epochs": final.epoch, "splits": {}}
    for split in ("valid", "test"):
        row = {"float32": scores(final, data[split], device),
               "float16": scores(half, data[split], device)}
        row["beam5_difference"] = (row["float16"]["beam5"]["sacrebleu"]
                                   - row["float32"]["beam5"]["sacrebleu"])
        row["greedy_difference"] = (row["float16"]["beam1"]["sacrebleu"]
                                    - row["float32"]["beam1"]["sacrebleu"])
        report["splits"][split] = row
        print(f"{split}: beam 5 (α = {row['float32']['length_penalty']:g}) sacreBLEU float32 "
              f"{row['float32']['beam5']['sacrebleu']:.2f}, float16 "
              f"{row['float16']['beam5']['sacrebleu']:.2f}; greedy "
              f"{row['float32']['beam1']['sacrebleu']:.2f} / "
              f"{row['float16']['beam1']['sacrebleu']:.2f}")
    report["within_tolerance"] = all(
        abs(r[k]) <= TOLERANCE for r in report["splits"].values()
        for k in ("beam5_difference", "greedy_difference"))
    print(f"float16 within {TOLERANCE} BLEU of float32 everywhere: {report['within_tolerance']}")
    write_report(args.json, stamp({"benchmark": "pretrained", **report}))
    return 0

