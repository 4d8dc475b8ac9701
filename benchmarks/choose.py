"""Choices made after training, on the validation split only: checkpoint averaging and α.

    python benchmarks/choose.py runs/bench_cpu_subword [--json benchmarks/results/choose.json]

Reads a run folder written by ``benchmarks/quality.py --keep-snapshots`` (``best.pt`` and
``snapshots/epochNN.pt``, each epoch's weights) and makes two choices, each on validation:

1. **Weights.** The best checkpoint (lowest validation loss), or the average of the last
   ``k`` epochs' weights (k = 2 … 5; every parameter averaged, as fairseq's
   ``average_checkpoints.py`` does). Chosen by validation sacreBLEU with greedy decoding.
2. **Length penalty** α of beam search (score = Σ log p / len^α; 1.0 is fairseq's default), for
   beam 5: α in 0, 0.5, 1.0, 1.5, 2.0, chosen by validation sacreBLEU.

A tie keeps the simpler choice (fewer averaged epochs, α = 1). The chosen weights are written as
``averaged.pt`` in the run folder (a normal checkpoint: ``translate``/``evaluate`` read it);
``--split`` (test2016 by default) is then scored once, with the plain choice (best.pt, α = 1)
beside it: the test set is reported, never used for a choice.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

import torch
from common import run_main, stamp, write_report

from convs2s import config
from convs2s.checkpoint import Checkpoint, CheckpointError
from convs2s.data import DataError, load_multi30k
from convs2s.evaluate import SPLITS, evaluate
from convs2s.translate import OneLineParser, Translator

AVERAGES = (1, 2, 3, 4, 5)
ALPHAS = (0.0, 0.5, 1.0, 1.5, 2.0)


def average(weights: list[dict]) -> dict:
    """The element-wise mean of state dicts with the same keys (floating tensors averaged)."""
    out = {}
    for key, first in weights[0].items():
        if torch.is_floating_point(first):
            out[key] = sum(w[key].double() for w in weights).div(len(weights)).to(first.dtype)
        else:
            out[key] = first.clone()
    return out


def load_snapshots(run: Path, best: Checkpoint) -> list[tuple[dict, dict]]:
    """Each epoch's ``(history row, weights)`` from ``run/snapshots``, oldest first.

    Snapshots are checkpoints (read with ``weights_only=True``, like every checkpoint) that
    name the run that wrote them: one from another run (another vocabulary, say) is refused."""
    files = sorted((run / "snapshots").glob("epoch*.pt"))
    if not files:
        raise FileNotFoundError(f"{run / 'snapshots'} holds no epochNN.pt files; train with "
                                "benchmarks/quality.py --keep-snapshots")
    out = []
    for f in files:
        snap = Checkpoint.load(f)
        if best.run_id is None or snap.run_id != best.run_id:
            raise CheckpointError(
                f"{f} belongs to another run than {run / 'best.pt'} (run {snap.run_id} vs "
                f"{best.run_id}); train again with benchmarks/quality.py --overwrite "
                "--keep-snapshots, which removes the old run's snapshots")
        out.append((snap.extra.get("row", {"epoch": snap.epoch}), snap.state_dict))
    return out


def best_of(results: list[dict], key: str, prefer) -> dict:
    """The row with the highest ``key``; among equal scores, the one ``prefer`` ranks first."""
    top = max(r[key] for r in results)
    return min((r for r in results if r[key] == top), key=prefer)


def choose(run: Path, device, split: str = "test", beam: int = 5) -> dict:
    best_path = run / "best.pt"
    best = Checkpoint.load(best_path)
    snapshots = load_snapshots(run, best)
    translator = Translator.from_checkpoint(best, device=device)
    data = load_multi30k(src=translator.src_lang, trg=translator.trg_lang)
    best_state = {k: v.detach().to("cpu", copy=True)
                  for k, v in translator.model.state_dict().items()}
    best_epoch = best.epoch

    def score(weights: dict, beams, alpha: float = 1.0, pairs=None) -> dict:
        translator.model.load_state_dict(weights)
        translator.model.eval()
        return evaluate(translator, pairs or data["valid"], beam_sizes=beams,
                        length_penalty=alpha)

    t0 = time.perf_counter()
    averages = []
    for k in AVERAGES:
        if k == 1:
            weights, epochs = best_state, [best_epoch]
        elif k <= len(snapshots):
            weights = average([w for _, w in snapshots[-k:]])
            epochs = [r["epoch"] for r, _ in snapshots[-k:]]
        else:
            continue
        m = score(weights, [1])
        averages.append({"k": k, "epochs": epochs, "valid_loss": m["loss"],
                         "valid_sacrebleu_greedy": m["beam1"]["sacrebleu"],
                         "valid_chrf_greedy": m["beam1"]["chrf"]})
        print(f"  weights: {'best.pt' if k == 1 else f'average of epochs {epochs}':<34} valid "
              f"loss {m['loss']:.4f}  greedy sacreBLEU {m['beam1']['sacrebleu']:.2f}", flush=True)
    chosen = best_of(averages, "valid_sacrebleu_greedy", prefer=lambda r: r["k"])
    weights = (best_state if chosen["k"] == 1 else
               average([w for _, w in snapshots[-chosen["k"]:]]))

    alphas = []
    for alpha in ALPHAS:
        m = score(weights, [beam], alpha)[f"beam{beam}"]
        alphas.append({"alpha": alpha, "valid_sacrebleu": m["sacrebleu"], "valid_chrf": m["chrf"]})
        print(f"  beam {beam}, length penalty {alpha:.1f}: valid sacreBLEU {m['sacrebleu']:.2f}  "
              f"chrF {m['chrf']:.2f}", flush=True)
    alpha = best_of(alphas, "valid_sacrebleu", prefer=lambda r: abs(r["alpha"] - 1.0))["alpha"]
    choose_seconds = time.perf_counter() - t0

    averaged_path = None
    if chosen["k"] > 1:
        best.state_dict = weights
        best.extra["averaged_epochs"] = chosen["epochs"]
        averaged_path = best.save(run / "averaged.pt")

    plain = score(best_state, [1, beam], 1.0, data[split])
    final = score(weights, [1, beam], alpha, data[split])
    translator.model.load_state_dict(best_state)
    return {"run": str(run), "src_lang": translator.src_lang, "trg_lang": translator.trg_lang,
            "device": config.describe_device(device), "threads": torch.get_num_threads(),
            "choose_seconds": choose_seconds, "averages": averages, "chosen_k": chosen["k"],
            "chosen_epochs": chosen["epochs"], "alphas": alphas, "chosen_alpha": alpha,
            "averaged_checkpoint": str(averaged_path) if averaged_path else None,
            "split": split, "beam": beam,
            "plain": {f"beam{b}": {k: plain[f"beam{b}"][k] for k in ("sacrebleu", "chrf")}
                      for b in (1, beam)},
            "chosen": {f"beam{b}": {k: final[f"beam{b}"][k] for k in ("sacrebleu", "chrf")}
                       for b in (1, beam)}}


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", type=Path, help="a run folder with best.pt and snapshots/")
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument("--device", help="cpu, cuda, ... (default: the best there is)")
    parser.add_argument("--json", type=Path, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    try:
        device = config.check_device(args.device)
    except ValueError as e:
        parser.error(str(e))
    if not (args.run / "best.pt").is_file():
        print(f"error: {args.run / 'best.pt'} does not exist; give the folder of a run trained "
              "with benchmarks/quality.py --keep-snapshots", file=sys.stderr)
        return 2
    try:
        report = choose(args.run, device, args.split)
    except (FileNotFoundError, CheckpointError, DataError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    beam = report["beam"]
    for name in ("plain", "chosen"):
        r = report[name]
        what = ("best.pt, α = 1" if name == "plain" else
                f"k = {report['chosen_k']}, α = {report['chosen_alpha']}")
        m = r[f"beam{beam}"]
        print(f"{args.split} {name:<6} ({what}): greedy sacreBLEU {r['beam1']['sacrebleu']:.2f}, "
              f"beam {beam} {m['sacrebleu']:.2f} (chrF {m['chrf']:.2f})")
    write_report(args.json, stamp({"benchmark": "choose", **report}))
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
