"""Beam search's length penalty α over a finer grid, on the validation split, for several models.

    python benchmarks/alpha_grid.py --pretrained de-en --checkpoint runs/x/final.pt \
        [--alphas 0.6 0.7 ...] [--json benchmarks/results/alpha_grid_de_en.json]

Training's final choices (:mod:`convs2s.run.final_choices`) try α = 0, 0.5, 1, 1.5 and 2. This
asks whether a step of 0.1 around 1 would change which model is best: one beam search per model
scores every α (:func:`convs2s.run.evaluate.score_alphas`). Validation only; the models must
translate the same direction.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from common import json_arg, run_main, stamp, write_report

from convs2s.data import load_multi30k
from convs2s.model.search import check_length_penalty
from convs2s.run.evaluate import score_alphas
from convs2s.run.pretrained import PretrainedError, pretrained, record
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser

DEFAULT_ALPHAS = [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", action="append", default=[], metavar="DIRECTION",
                        help="a shipped model: de-en or en-de (may be repeated)")
    parser.add_argument("--checkpoint", action="append", default=[], type=Path,
                        help="a checkpoint file, e.g. a run's final.pt (may be repeated)")
    parser.add_argument("--alphas", nargs="+", type=float, default=DEFAULT_ALPHAS)
    parser.add_argument("--beam", type=int, default=5)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ... (default: cpu)")
    parser.add_argument("--json", type=json_arg, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if not args.pretrained and not args.checkpoint:
        parser.error("give at least one model: --pretrained DIRECTION or --checkpoint FILE")
    try:
        alphas = [check_length_penalty(a) for a in args.alphas]
        device = environment.check_device(args.device)
        for d in args.pretrained:  # every shipped model named, before the first is scored
            record(d)
    except (ValueError, PretrainedError) as e:
        parser.error(str(e))
    models = ([(f"pretrained {d}", lambda d=d: pretrained(d, device=device))
               for d in args.pretrained] +
              [(str(p), lambda p=p: Translator.from_checkpoint(p, device=device))
               for p in args.checkpoint])
    report, direction, pairs = {}, None, None
    for name, load in models:
        translator = load()
        here = (translator.src_lang, translator.trg_lang)
        if direction is None:
            direction = here
            pairs = load_multi30k(src=here[0], trg=here[1])["valid"]
        elif here != direction:
            parser.error(f"{name} translates {'-'.join(here)}, the first model "
                         f"{'-'.join(direction)}; compare models of one direction")
        rows = score_alphas(translator, pairs, alphas, beam_size=args.beam)
        best = max(rows, key=lambda r: r["sacrebleu"])
        print(f"{name}: " + ", ".join(f"α {r['alpha']:g} {r['sacrebleu']:.2f}" for r in rows)
              + f"  (best: α {best['alpha']:g}, {best['sacrebleu']:.2f})", flush=True)
        report[name] = rows
    write_report(args.json, stamp({"benchmark": "alpha_grid", "split": "valid",
                                   "direction": "-".join(direction), "beam": args.beam,
                                   "device": environment.describe_device(device),
                                   "threads": torch.get_num_threads(), "models": report}))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
