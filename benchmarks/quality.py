"""Translation quality of a training preset, in any direction: train it, then score it.

    python benchmarks/quality.py --preset cpu [--json benchmarks/results/quality_cpu.json]
    python benchmarks/quality.py --preset cpu --src en --trg de --tokenizer subword \\
        --vocab-size 8000 --max-minutes 30 --json benchmarks/results/quality_cpu_en_de.json
    python benchmarks/quality.py --checkpoint runs/cpu/best.pt    # score a run you already have

Trains ``--preset`` exactly as ``python -m convs2s.train --preset NAME`` does (same data, same
code path, the preset's own time budget unless ``--max-minutes``; ``--src/--trg``,
``--tokenizer``, ``--vocab-size``, ``--joint-vocab`` override the preset as the training CLI's
options do; ``--share-embed`` ties the decoder's output layer to its token embedding;
``--average-last`` how many epochs the final model may average), then scores the model the run
ends with: ``final.pt`` (the last epochs averaged and beam search's length penalty, both
chosen on validation by :mod:`convs2s.run.final_choices`, decoded with that length penalty)
where the preset makes one, else ``best.pt`` (lowest validation loss):

- on ``--split`` (test2016 by default): sacreBLEU (13a, detokenized, cased: the standard), chrF
  and the tutorial-comparable BLEU (BLEU-4 on lower-cased spaCy tokens), for greedy decoding and
  beam 5; perplexity under teacher forcing;
- on validation, the same for that model (what presets are chosen on: the test set is only
  reported, never used for a choice);
- the learning curve: after every epoch, the weights are copied (milliseconds, counted in the
  training time) and, once training is over, scored on validation with greedy decoding:
  sacreBLEU and chrF against the training wall time at that epoch's end;
- parameters, training wall time, epochs and steps, decoding sentences/s, device and date.

It prints a table and writes everything as JSON (the test figures at the top level, as before;
``valid`` and ``valid_curve`` beside them). Run nothing else meanwhile: presets have a
wall-time budget, so a busy machine trains fewer epochs.

A run folder this script makes (or finds empty) gets a marker of its own,
``.made_by_quality_benchmark``. ``--overwrite`` deletes the checkpoints of a run (``best.pt``,
``last.pt``, ``final.pt``, ``averaged.pt``, ``snapshots/epochNN.pt``) only in a folder that
carries it; a run that ``python -m convs2s.train`` or you put in ``--out`` is never deleted
(the command refuses in one line: choose another ``--out``, or delete those files yourself).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("quality"))

import torch
from common import count_arg, json_arg, run_main, stamp, write_report  # noqa: F401 (run_main: for callers)

from convs2s.data import LANGUAGES, DataError, load_multi30k
from convs2s.data.subword import TOKENIZER_KINDS
from convs2s.model import count_parameters
from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.evaluate import SPLITS, evaluate
from convs2s.run.presets import PRESETS
from convs2s.run.run_folder import describe_os_error
from convs2s.run.train import train
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import MAX_BEAM_SIZE, OneLineParser, bounded_int_arg, folder_arg
from convs2s.system.atomic_files import write_text_atomic
from convs2s.system.folder_locks import LOCK_NAME, FolderInUse, made_and_locked
from convs2s.system.signals import Terminated

OPTION = {"src_lang": "--src", "trg_lang": "--trg", "tokenizer": "--tokenizer",
          "vocab_size": "--vocab-size", "joint_vocab": "--joint-vocab",
          "share_input_output_embed": "--share-embed", "max_minutes": "--max-minutes",
          "average_last": "--average-last"}


def training_summary(checkpoint: Path) -> dict:
    """What a run's checkpoints say about its training (best.pt and last.pt beside
    ``checkpoint`` when they are there)."""
    given = Checkpoint.load(checkpoint)
    best_path, last_path = checkpoint.with_name("best.pt"), checkpoint.with_name("last.pt")
    best = Checkpoint.load(best_path) if best_path.exists() else given
    last = Checkpoint.load(last_path) if last_path.exists() else best
    state, best_state = last.train_state or {}, best.train_state or {}
    return {"preset": (best.preset or {}).get("name"),
            "settings": best.preset or {},
            "train_seconds": state["seconds"], "steps": state["step"],
            "epochs": state["epoch"], "best_epoch": best_state["epoch"],
            "best_valid_loss": best_state["best_valid_loss"],
            "history": state["history"]}


#: The marker of a run folder this script made (or found empty): only there does --overwrite
#: delete a run.
MARKER = ".made_by_quality_benchmark"

#: A run's checkpoints, which --overwrite deletes (and ``snapshots/epochNN.pt``).
RUN_FILES = ("best.pt", "last.pt", "final.pt", "averaged.pt")


def run_files(out: Path) -> list[Path]:
    """The checkpoints of a run in ``out``: what :func:`remove_run` deletes."""
    found = [out / name for name in RUN_FILES if (out / name).is_file()]
    folder = out / "snapshots"
    if folder.is_dir() and not folder.is_symlink():
        found += sorted(folder.glob("epoch[0-9][0-9].pt"))
    return found


def overwrite_problem(out: Path) -> str | None:
    """Why --overwrite may not delete the run in ``out`` (one line), or None: it holds no run,
    or one this script made (``out`` carries :data:`MARKER`)."""
    found = run_files(out)
    if not found or (out / MARKER).is_file():
        return None
    names = ", ".join(p.relative_to(out).as_posix() for p in found[:3])
    more = f" and {len(found) - 3} more" if len(found) > 3 else ""
    return (f"--overwrite deletes only a run this script made, and {out} holds {names}{more} "
            f"that it did not make (no {MARKER} there, e.g. a run of python -m convs2s.train): "
            "give another --out, or delete those files yourself")


def mark(out: Path) -> bool:
    """Mark ``out`` as this script's run folder if it holds nothing yet (its lock aside: a
    folder it made, or found empty), written atomically; whether this call wrote the marker."""
    if (out / MARKER).is_file() or not set(os.listdir(out)) <= {LOCK_NAME}:
        return False
    write_text_atomic(out / MARKER, "A run folder made by benchmarks/quality.py: its --overwrite "
                      "deletes the run's checkpoints here.\n")
    return True


def remove_run(out: Path) -> None:
    """Delete what a run of this script made in ``out`` (for --overwrite), nothing else: only
    in a folder that carries :data:`MARKER` (``ValueError`` otherwise, one line)."""
    problem = overwrite_problem(out)
    if problem:
        raise ValueError(problem)
    for path in run_files(out):
        path.unlink()
    folder = out / "snapshots"
    if folder.is_dir() and not folder.is_symlink() and not any(folder.iterdir()):
        folder.rmdir()


def learning_curve(translator: Translator, snapshots: list[tuple[dict, dict]], pairs,
                   beam: int = 1) -> list[dict]:
    """Validation sacreBLEU/chrF of each epoch's weights, with that epoch's training time."""
    best = {k: v.clone() for k, v in translator.model.state_dict().items()}
    curve = []
    try:
        for row, weights in snapshots:
            translator.model.load_state_dict(weights)
            translator.model.eval()
            m = evaluate(translator, pairs, beam_sizes=[beam])[f"beam{beam}"]
            curve.append({"epoch": row["epoch"], "train_seconds": row["seconds"],
                          "valid_loss": row["valid_loss"], "beam": beam,
                          "valid_sacrebleu": m["sacrebleu"], "valid_chrf": m["chrf"]})
            print(f"  epoch {row['epoch']:>2}  {row['seconds'] / 60:5.1f} min  valid sacreBLEU "
                  f"{m['sacrebleu']:5.2f}  chrF {m['chrf']:5.2f}", flush=True)
    finally:
        translator.model.load_state_dict(best)
        translator.model.eval()
    return curve


def _print_scores(title: str, metrics: dict, beams) -> None:
    print(f"{title}: {metrics['sentences']} sentences ({metrics['skipped']} too long, skipped), "
          f"perplexity {metrics['perplexity']:.2f}")
    print(f"{'decoding':<10} {'sacreBLEU':>10} {'chrF':>7} {'tutorial BLEU':>14} "
          f"{'sentences/s':>12}")
    for beam in beams:
        m = metrics[f"beam{beam}"]
        name = "greedy" if beam == 1 else f"beam {beam}"
        print(f"{name:<10} {m['sacrebleu']:>10.2f} {m['chrf']:>7.2f} {m['tutorial_bleu']:>14.2f} "
              f"{m['sentences_per_s']:>12.1f}")


def _positive_minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of minutes > 0, not {text!r}")
    return value


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    what = parser.add_mutually_exclusive_group()
    what.add_argument("--preset", choices=sorted(PRESETS), default="cpu",
                      help="train this preset, then evaluate it (default: cpu)")
    what.add_argument("--checkpoint", type=Path,
                      help="evaluate this checkpoint (a best.pt) instead of training")
    parser.add_argument("--src", choices=LANGUAGES, help="source language (default: preset's)")
    parser.add_argument("--trg", choices=LANGUAGES, help="target language (default: preset's)")
    parser.add_argument("--tokenizer", choices=TOKENIZER_KINDS,
                        help="word or subword (default: preset's)")
    parser.add_argument("--vocab-size", type=int, help="subword pieces per vocabulary")
    parser.add_argument("--joint-vocab", action=argparse.BooleanOptionalAction, default=None,
                        help="subword: one vocabulary for both languages, or one each")
    parser.add_argument("--share-embed", action=argparse.BooleanOptionalAction, default=None,
                        help="tie the decoder's output layer to its token embedding (fairseq's "
                             "--share-input-output-embed; default: the preset's)")
    parser.add_argument("--max-minutes", type=_positive_minutes,
                        help="training time budget (default: the preset's)")
    parser.add_argument("--out", type=folder_arg("--out"),
                        help="run folder for the checkpoints (default: runs/bench_<preset>"
                        "[_<src>_<trg>])")
    parser.add_argument("--overwrite", action="store_true",
                        help="delete a run this script made in --out (its folder carries "
                        f"{MARKER}) and train afresh; a run made otherwise is never deleted")
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument("--beam-sizes", type=bounded_int_arg(MAX_BEAM_SIZE), nargs="+",
                        default=[1, 5])
    parser.add_argument("--no-curve", action="store_true",
                        help="skip the learning curve (validation BLEU after every epoch)")
    parser.add_argument("--average-last", type=count_arg, help="epochs averaged at most for the "
                        "final model (0: none, best.pt is scored; default: the preset's)")
    parser.add_argument("--device", help="cpu, cuda, ... (default: the best there is)")
    parser.add_argument("--json", type=json_arg, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if args.checkpoint is not None and args.checkpoint.suffix != ".pt":
        parser.error(f"--checkpoint {args.checkpoint}: expected a .pt file written by "
                     "convs2s.run.train (e.g. runs/cpu/best.pt)")
    overrides = {k: v for k, v in (("src_lang", args.src), ("trg_lang", args.trg),
                                   ("tokenizer", args.tokenizer), ("vocab_size", args.vocab_size),
                                   ("joint_vocab", args.joint_vocab),
                                   ("share_input_output_embed", args.share_embed),
                                   ("max_minutes", args.max_minutes),
                                   ("average_last", args.average_last)) if v is not None}
    if args.checkpoint is not None and overrides:
        parser.error("--checkpoint takes its direction and tokenizer from the checkpoint; "
                     "leave out " + ", ".join(OPTION[k] for k in overrides))
    try:
        preset = PRESETS[args.preset].replace(**overrides)
    except ValueError as e:
        parser.error(str(e))
    try:
        device = environment.check_device(args.device)
    except ValueError as e:
        parser.error(str(e))
    try:
        return run(args, preset, device)
    except KeyboardInterrupt as e:
        sigterm = isinstance(e, Terminated)
        print(f"{'stopped by SIGTERM' if sigterm else 'interrupted'}; the run folder keeps "
              "what was saved (resume training with python -m convs2s.train --resume)",
              file=sys.stderr)
        return 143 if sigterm else 130
    except (CheckpointError, DataError, FileNotFoundError, FloatingPointError, ValueError) as e:
        said = (f"{e.strerror} ({e.filename})" if isinstance(e, OSError) and e.strerror
                and e.filename else str(e))  # not "[Errno 2] ..."
        print(f"error: {' '.join(said.split())}", file=sys.stderr)
        return 1
    except OSError as e:
        print(f"error: {describe_os_error(e, args.out or Path('runs'))}", file=sys.stderr)
        return 1


def run(args, preset, device) -> int:
    """Train (unless --checkpoint), score, report; errors propagate to :func:`main`."""
    snapshots: list[tuple[dict, dict]] = []
    if args.checkpoint is None:
        data = load_multi30k(src=preset.src_lang, trg=preset.trg_lang)
        default = f"bench_{preset.name}"
        if (preset.src_lang, preset.trg_lang) != ("de", "en"):
            default += f"_{preset.src_lang}_{preset.trg_lang}"
        out = args.out or Path("runs") / default
        if (out / "last.pt").exists() and not args.overwrite:
            scored = next(out / n for n in ("final.pt", "best.pt", "last.pt")
                          if (out / n).exists())
            print(f"error: {out} already holds a run; score it with --checkpoint "
                  f"{scored}, or train afresh with another --out, or with --overwrite "
                  "(deletes it, if this script made it)", file=sys.stderr)
            return 2

        def keep(row: dict, model: torch.nn.Module) -> None:  # each epoch's weights
            if not args.no_curve:
                snapshots.append((row, {k: v.detach().to("cpu", copy=True)
                                        for k, v in model.state_dict().items()}))

        try:
            with made_and_locked(out):  # held from the deleting to the last snapshot written
                problem = overwrite_problem(out) if args.overwrite else None
                if problem:
                    print(f"error: {problem}", file=sys.stderr)
                    return 2
                if args.overwrite:
                    remove_run(out)
                marked = mark(out)
                try:
                    print(f"training preset {preset.name!r} ({preset.src_lang}->"
                          f"{preset.trg_lang}, {preset.tokenizer}) into {out} on "
                          f"{environment.describe_device(device)}")
                    t0 = time.perf_counter()
                    result = train(preset, out, data=data, device=device, progress=False,
                                   on_epoch_end=keep)
                    wall = time.perf_counter() - t0
                except BaseException:  # nothing trained: the folder as it was (or none)
                    if marked and set(os.listdir(out)) <= {LOCK_NAME, MARKER}:
                        (out / MARKER).unlink(missing_ok=True)
                    raise
        except FolderInUse as e:
            raise CheckpointError(str(e)) from None
        if result.best_path is None:
            print("error: training saved no best checkpoint", file=sys.stderr)
            return 1
        checkpoint = result.final_path or result.best_path
        if args.no_curve:
            snapshots = []
        print(f"trained in {wall / 60:.1f} min ({result.stopped})")
    else:
        checkpoint, wall, data = args.checkpoint, None, None

    summary = training_summary(checkpoint)
    ckpt = Checkpoint.load(checkpoint)
    translator = Translator.from_checkpoint(ckpt, device=device)
    alpha = ckpt.length_penalty  # chosen on validation for final.pt; 1.0 otherwise
    if data is None:
        data = load_multi30k(src=translator.src_lang, trg=translator.trg_lang)
    t0 = time.perf_counter()
    metrics = evaluate(translator, data[args.split], beam_sizes=args.beam_sizes,
                       length_penalty=alpha)
    eval_seconds = time.perf_counter() - t0
    valid = (metrics if args.split == "valid" else
             evaluate(translator, data["valid"], beam_sizes=args.beam_sizes,
                      length_penalty=alpha))
    curve = None
    if snapshots:
        print("learning curve (validation, greedy):")
        curve = learning_curve(translator, snapshots, data["valid"])
    history = summary.pop("history")
    report = stamp({
        "benchmark": "quality", **summary, "checkpoint": str(checkpoint),
        "length_penalty": alpha, "final_choices": ckpt.choices,
        "parameters": count_parameters(translator.model),
        "device": environment.describe_device(device), "threads": torch.get_num_threads(),
        "wall_seconds_train_call": wall, "eval_seconds": eval_seconds,
        "split": args.split, **metrics,
        "valid": {k: v for k, v in valid.items() if k not in ("tokenizer",)},
        "valid_curve": curve,
        "valid_loss_curve": [{k: r[k] for k in ("epoch", "seconds", "valid_loss")}
                             for r in history]})

    print(f"\npreset {summary['preset']} ({translator.src_lang}->{translator.trg_lang}, "
          f"{translator.pipeline.kind}): {report['parameters']:,} parameters; trained "
          f"{summary['train_seconds'] / 60:.1f} min, {summary['epochs']} epochs "
          f"(best {summary['best_epoch']}), {summary['steps']} steps; {report['device']}")
    _print_scores(args.split, metrics, args.beam_sizes)
    if args.split != "valid":
        _print_scores("valid", valid, args.beam_sizes)
    write_report(args.json, report)
    return 0

