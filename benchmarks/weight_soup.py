"""Weight soups: the element-wise mean of several runs' weights, scored on the validation split.

    python benchmarks/weight_soup.py --checkpoint runs/a/final.pt --checkpoint runs/b/final.pt \
        [--checkpoint ...] [--json benchmarks/results/weight_soup_en_de.json]

A training run averages its own last epochs (:mod:`convs2s.run.final_choices`). Runs continued
from one model (``--init-from``) stay near it, so the weights of *different* runs can be averaged
too: a "model soup" (Wortsman et al., ICML 2022), still one model of the same size. This asks
whether that helps, with the rules a run's final choices follow, on validation only:

1. Each model ("ingredient") and the **uniform soup** (the mean of all) scored by greedy
   sacreBLEU.
2. The **greedy soup** (Wortsman et al.'s recipe): the ingredients in order of their greedy
   score, best first; each is added if the soup's greedy score rises with it (a tie keeps the
   smaller soup, as a run's own choice keeps fewer epochs).
3. Beam search (``--beam``, default 5) over the length penalties of the final choices
   (α = 0, 0.5, 1, 1.5, 2) for the single model with the best greedy score, the uniform soup
   and the greedy soup.

The models must translate the same direction with the same vocabularies and the same model
settings; anything else is refused in one line before any scoring. Nothing is written but
``--json``: this measures, it ships nothing.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("weight_soup"))

import torch
from common import json_arg, stamp, write_report

from convs2s.data import load_multi30k
from convs2s.run.checkpoint import Checkpoint, CheckpointError, vocab_to_dict
from convs2s.run.evaluate import evaluate, score_alphas
from convs2s.run.final_choices import ALPHAS, average
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import MAX_BEAM_SIZE, OneLineParser, bounded_int_arg


def same_model(first: Checkpoint, other: Checkpoint) -> str | None:
    """Why ``other``'s weights cannot be averaged with ``first``'s (one phrase), or None."""
    if (other.pipeline.src_lang, other.pipeline.trg_lang) != (first.pipeline.src_lang,
                                                               first.pipeline.trg_lang):
        return (f"translates {other.pipeline.src_lang}-{other.pipeline.trg_lang}, the first "
                f"model {first.pipeline.src_lang}-{first.pipeline.trg_lang}")
    if (other.model_class, dict(other.model_config)) != (first.model_class,
                                                          dict(first.model_config)):
        return "has other model settings than the first model"
    if (vocab_to_dict(other.src_vocab), vocab_to_dict(other.trg_vocab)) != (
            vocab_to_dict(first.src_vocab), vocab_to_dict(first.trg_vocab)):
        return "has other vocabularies than the first model"
    if other.pipeline.record() != first.pipeline.record():
        return "splits text another way than the first model (its text pipeline differs)"
    return None


def greedy_soup(names: list[str], scores: dict[str, float],
                score_of: Callable[[list[str]], float]) -> tuple[list[str], float, list[dict]]:
    """Wortsman et al.'s greedy soup: ``names`` in order of ``scores`` (best first; equal
    scores keep the given order), each added if ``score_of(soup + [name])`` beats the soup's
    score. Returns the soup's names, its score and one row per step tried."""
    order = sorted(names, key=lambda n: -scores[n])
    soup, best = [order[0]], scores[order[0]]
    steps = [{"ingredients": list(soup), "valid_sacrebleu_greedy": best, "kept": True}]
    for name in order[1:]:
        score = score_of(soup + [name])
        kept = score > best
        steps.append({"ingredients": soup + [name], "valid_sacrebleu_greedy": score,
                      "kept": kept})
        if kept:
            soup, best = soup + [name], score
    return soup, best, steps


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--checkpoint", action="append", default=[], type=Path,
                        help="a checkpoint file, e.g. a run's final.pt (two or more)")
    parser.add_argument("--beam", type=bounded_int_arg(MAX_BEAM_SIZE), default=5,
                        help="beam size (default: 5)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ... (default: cpu)")
    parser.add_argument("--json", type=json_arg, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if len(args.checkpoint) < 2:
        parser.error("give two or more models to average: --checkpoint FILE --checkpoint FILE")
    try:
        device = environment.check_device(args.device)
    except ValueError as e:
        parser.error(str(e))
    names = [str(p) for p in args.checkpoint]
    if len(set(names)) < len(names):
        parser.error("a checkpoint is named twice; give each model once")
    checkpoints: list[Checkpoint] = []
    for path in args.checkpoint:  # every file read and checked before the first is scored
        try:
            ckpt = Checkpoint.load(path)
        except (CheckpointError, OSError) as e:
            said = " ".join(str(e).split())
            parser.error(said if str(path) in said else f"--checkpoint {path}: {said}")
        why = same_model(checkpoints[0], ckpt) if checkpoints else None
        if why:
            parser.error(f"{path} {why}; average models of one run's family")
        checkpoints.append(ckpt)

    first = checkpoints[0]
    src, trg = first.pipeline.src_lang, first.pipeline.trg_lang
    pairs = load_multi30k(src=src, trg=trg)["valid"]
    translator = Translator.from_checkpoint(first, device=device)
    weights = {n: {k: v.float() if v.is_floating_point() else v
                   for k, v in c.state_dict.items()}
               for n, c in zip(names, checkpoints, strict=True)}
    del checkpoints

    def load(members: list[str]) -> None:
        translator.model.load_state_dict(average([weights[m] for m in members]))
        translator.model.eval()

    def greedy(members: list[str]) -> float:
        load(members)
        score = evaluate(translator, pairs, beam_sizes=[1])["beam1"]["sacrebleu"]
        print(f"  greedy: {' + '.join(members)}: valid sacreBLEU {score:.2f}", flush=True)
        return score

    singles = {n: greedy([n]) for n in names}
    uniform = greedy(names)
    soup, soup_score, steps = greedy_soup(names, singles, greedy)
    best_single = max(names, key=lambda n: singles[n])

    def beam_rows(members: list[str]) -> list[dict]:
        load(members)
        rows = score_alphas(translator, pairs, ALPHAS, beam_size=args.beam)
        print(f"  beam {args.beam}: {' + '.join(members)}: " + ", ".join(
            f"α {r['alpha']:g} {r['sacrebleu']:.2f}" for r in rows), flush=True)
        return rows

    beamed = {"best single model by greedy": {"ingredients": [best_single],
                                    "valid_sacrebleu_greedy": singles[best_single]},
              "uniform soup": {"ingredients": names, "valid_sacrebleu_greedy": uniform},
              "greedy soup": {"ingredients": soup, "valid_sacrebleu_greedy": soup_score}}
    done: dict[tuple, list[dict]] = {}
    for row in beamed.values():
        key = tuple(sorted(row["ingredients"]))
        if key not in done:
            done[key] = beam_rows(row["ingredients"])
        row["beam"] = done[key]
        top = max(done[key], key=lambda r: (r["sacrebleu"], -abs(r["alpha"] - 1.0)))
        row["best_alpha"], row["valid_sacrebleu_beam"] = top["alpha"], top["sacrebleu"]
    for what, row in beamed.items():
        print(f"{what} ({len(row['ingredients'])} of {len(names)}): greedy "
              f"{row['valid_sacrebleu_greedy']:.2f}, beam {args.beam} "
              f"{row['valid_sacrebleu_beam']:.2f} (α {row['best_alpha']:g})")
    write_report(args.json, stamp({
        "benchmark": "weight_soup", "split": "valid", "direction": f"{src}-{trg}",
        "sentences": len(pairs), "beam": args.beam,
        "device": environment.describe_device(device), "threads": torch.get_num_threads(),
        "ingredients": {n: {"valid_sacrebleu_greedy": s} for n, s in singles.items()},
        "greedy_soup_steps": steps, "results": beamed}))
    return 0
