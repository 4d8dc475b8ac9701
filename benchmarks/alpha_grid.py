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

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("alpha_grid"))

import torch
from common import json_arg, stamp, write_report

from convs2s.data import load_multi30k
from convs2s.model.search import check_length_penalty
from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.evaluate import score_alphas
from convs2s.run.pretrained import PretrainedError, pretrained, record
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import MAX_BEAM_SIZE, OneLineParser, bounded_int_arg

DEFAULT_ALPHAS = [0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.2, 1.3, 1.4]


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pretrained", action="append", default=[], metavar="DIRECTION",
                        help="a shipped model: de-en or en-de (may be repeated)")
    parser.add_argument("--checkpoint", action="append", default=[], type=Path,
                        help="a checkpoint file, e.g. a run's final.pt (may be repeated)")
    parser.add_argument("--alphas", nargs="+", type=float, default=DEFAULT_ALPHAS)
    parser.add_argument("--beam", type=bounded_int_arg(MAX_BEAM_SIZE), default=5,
                        help="beam size (default: 5)")
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
    # Every checkpoint read and its direction checked before the first model is scored
    # (minutes): the files read once, here; each model is built from its file when its turn
    # comes.
    found = [(f"pretrained {d}", tuple(d.split("-"))) for d in args.pretrained]
    checkpoints: list[Checkpoint | None] = []
    for path in args.checkpoint:
        try:
            ckpt = Checkpoint.load(path)
        except (CheckpointError, OSError) as e:
            said = " ".join(str(e).split())
            parser.error(said if str(path) in said else f"--checkpoint {path}: {said}")
        checkpoints.append(ckpt)
        found.append((str(path), (ckpt.pipeline.src_lang, ckpt.pipeline.trg_lang)))
    direction = found[0][1]
    for name, here in found[1:]:
        if here != direction:
            parser.error(f"{name} translates {'-'.join(here)}, the first model "
                         f"{'-'.join(direction)}; compare models of one direction")

    def from_file(i: int) -> Translator:  # its file read above: let go once built
        ckpt, checkpoints[i] = checkpoints[i], None
        return Translator.from_checkpoint(ckpt, device=device)

    models = ([(f"pretrained {d}", lambda d=d: pretrained(d, device=device))
               for d in args.pretrained] +
              [(str(p), lambda i=i: from_file(i)) for i, p in enumerate(args.checkpoint)])
    pairs = load_multi30k(src=direction[0], trg=direction[1])["valid"]
    report = {}
    for name, load in models:
        translator = load()
        here = (translator.src_lang, translator.trg_lang)
        if here != direction:  # a shipped model whose file says otherwise than its name
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

