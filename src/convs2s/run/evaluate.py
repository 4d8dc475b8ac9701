"""Evaluate a checkpoint on a Multi30k split: perplexity, BLEU and chrF (greedy and beam).

    python -m convs2s.evaluate --checkpoint runs/cpu/best.pt --split test [--json metrics.json]

The languages and the tokenizer come from the checkpoint (German to English, word-level, for a
checkpoint written before checkpoints recorded them); the split is read in that direction.

The metrics go to ``metrics_<split>_<checkpoint name>.json`` beside the checkpoint (so
``best.pt`` and ``last.pt`` get a file each: ``metrics_test_best.json``, ``metrics_test_last.json``)
or to ``--json``. Metrics are written only over metrics: the file's name must end in ``.json``,
and a file already there must be a JSON object this command wrote (``"written_by":
"convs2s.evaluate"``, or the keys every metrics file had before that marker); anything else (a
checkpoint, someone's notes) is refused and left as it is. Replacing earlier metrics is said.
The JSON is written atomically (a new file gets the mode the umask gives, an existing one keeps
its own); the target and its folder are checked before any work is done.

Mistakes are one line and exit status 1 (2 for arguments); Ctrl-C stops with one line and 130,
SIGTERM with one line and 143, no metrics written and no temporary file left.
"""

from __future__ import annotations

import json
import math
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from convs2s.data import TranslationDataset, load_multi30k, make_loader
from convs2s.model.loss import evaluate_loss
from convs2s.run.metrics import corpus_bleu
from convs2s.run.translate_cli import add_model_choice, chosen_translator, device_arg
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import (
    MAX_BEAM_SIZE,
    OneLineParser,
    bounded_int_arg,
    brief,
    check_size,
    whole_number_arg,
)
from convs2s.system.atomic_files import write_json_atomic
from convs2s.system.signals import run_command, say, stopped

__all__ = ["SPLITS", "WRITTEN_BY", "check_metrics_target", "check_writable", "default_json",
           "evaluate", "main", "write_json_atomic"]

SPLITS = ("train", "valid", "test")

#: The marker every metrics file this command writes carries (``"written_by"``).
WRITTEN_BY = "convs2s.evaluate"
# What every metrics file held before the marker: such a file may be replaced too.
_METRICS_KEYS = {"checkpoint", "split", "sentences", "perplexity"}
_MAX_METRICS_BYTES = 1 << 20  # a metrics file is a few kB


def evaluate(translator: Translator, pairs, *, beam_sizes=(1, 5), limit: int | None = None,
             length_penalty: float | None = None) -> dict:
    """Perplexity, both BLEU scores and chrF for ``pairs`` at each beam size.

    ``pairs`` are ``(source, target)`` sentences in the translator's direction (raw, cased
    text). The target side is tokenized by the translator's own pipeline for the perplexity; the
    scores compare the detokenized output with the raw references (see
    :func:`convs2s.run.metrics.corpus_bleu`).

    Sentences too long for the model are skipped and counted (``skipped``). ``limit``: only
    the first ``limit`` pairs (a positive integer; None: all). ``beam_sizes=()`` computes the
    perplexity alone. ``length_penalty``: beam search's exponent, 0 to 10 (None: the
    translator's own, which for a ``final.pt`` is the one chosen on validation; else 1.0,
    fairseq's default); the result records it.
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be None (all) or a positive integer, got {limit!r}.")
    beam_sizes = list(beam_sizes)
    try:
        beam_sizes = [check_size(b, "beam_size", MAX_BEAM_SIZE) for b in beam_sizes]
    except ValueError:
        raise ValueError(f"beam_sizes must be positive integers, at most {MAX_BEAM_SIZE:,}, "
                         f"got {brief(beam_sizes)}.") from None
    # checked before the work, not after the perplexity; None: the translator's own (final.pt's)
    alpha = translator.length_penalty_for(length_penalty)
    pairs = list(pairs)[:limit] if limit is not None else list(pairs)
    keep = _fitting(translator, pairs)
    ds = TranslationDataset(keep, translator.src_tokenizer, translator.trg_tokenizer,
                            translator.src_vocab, translator.trg_vocab,
                            max_len=translator.max_positions)
    loader = make_loader(ds, batch_size=64, shuffle=False, bucket=False)
    loss = evaluate_loss(translator.model, loader, translator.trg_vocab.pad_idx, translator.device)
    result = {"src_lang": translator.src_lang, "trg_lang": translator.trg_lang,
              "tokenizer": translator.pipeline.settings_dict(),
              "sentences": len(keep), "skipped": len(pairs) - len(keep), "loss": loss,
              "perplexity": math.exp(min(loss, 50)), "length_penalty": alpha}
    sources, refs = [s for s, _ in keep], [t for _, t in keep]
    words = translator.pipeline.kind == "word"
    for beam in beam_sizes:
        t0 = time.perf_counter()
        tokens = translator.translate_tokens(sources, beam_size=beam,
                                             length_penalty=alpha)
        seconds = time.perf_counter() - t0
        scores = corpus_bleu([translator.detokenize(t) for t in tokens], refs,
                             lang=translator.trg_lang, hyp_tokens=tokens if words else None)
        result[f"beam{beam}"] = {"sacrebleu": scores.sacrebleu, "tutorial_bleu": scores.tutorial,
                                 "chrf": scores.chrf, "signature": scores.signature,
                                 "chrf_signature": scores.chrf_signature, "seconds": seconds,
                                 "sentences_per_s": len(sources) / max(seconds, 1e-9)}
    return result


def _fitting(translator: Translator, pairs) -> list:
    """The pairs whose source the translator can take (not empty, not too long)."""
    keep = []
    for source, target in pairs:
        try:
            translator._tokens(source)
            keep.append((source, target))
        except ValueError:
            pass
    return keep


def score_alphas(translator: Translator, pairs, alphas, *, beam_size: int = 5) -> list[dict]:
    """sacreBLEU and chrF of beam search at each length penalty in ``alphas``, from one search.

    The same figures as ``evaluate(..., beam_sizes=[beam_size], length_penalty=alpha)`` for
    each α (too-long sources skipped alike), for the cost of one beam search instead of one per
    α (see :func:`convs2s.model.search.beam_search_alphas`); no perplexity. One dict per α, in
    order:
    ``{"alpha", "sacrebleu", "chrf", "sentences"}``.
    """
    alphas = list(alphas)
    keep = _fitting(translator, list(pairs))
    sources, refs = [s for s, _ in keep], [t for _, t in keep]
    words = translator.pipeline.kind == "word"
    per_alpha = translator.translate_tokens_alphas(sources, alphas, beam_size=beam_size)
    rows = []
    for alpha, tokens in zip(alphas, per_alpha, strict=True):
        scores = corpus_bleu([translator.detokenize(t) for t in tokens], refs,
                             lang=translator.trg_lang, hyp_tokens=tokens if words else None)
        rows.append({"alpha": alpha, "sacrebleu": scores.sacrebleu, "chrf": scores.chrf,
                     "sentences": len(sources)})
    return rows


def check_writable(path: Path) -> None:
    """Raise ``OSError`` unless a file can be written (atomically) at ``path``, before any work.

    The folder must exist and accept a new file (tried with a temporary file that vanishes at
    once); ``path`` must not be a folder.
    """
    path = Path(path)
    folder = path.parent.resolve()
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a file name such as {path / 'm.json'}")
    if not folder.is_dir():
        what = "is not a folder" if folder.exists() else "does not exist"
        raise FileNotFoundError(f"the folder {folder} {what}; create it or choose another path")
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        raise PermissionError(f"cannot write in {folder} ({e.strerror or e}); choose a "
                              "writable folder") from e


def default_json(checkpoint: Path, split: str) -> Path:
    """``metrics_<split>_<checkpoint name>.json`` beside the checkpoint (one file per
    checkpoint: evaluating ``last.pt`` does not replace ``best.pt``'s metrics)."""
    return checkpoint.with_name(f"metrics_{split}_{checkpoint.stem}.json")


def check_metrics_target(path: Path) -> dict | None:
    """Raise ``ValueError``/``OSError`` unless metrics may be written at ``path``; return the
    metrics the file holds now (``None``: no file there yet).

    The rule: the name ends in ``.json``; a file already there is a JSON object this command
    wrote (``"written_by": "convs2s.evaluate"``, or every key a metrics file had before that
    marker); the folder accepts a new file (:func:`check_writable`). Anything else, a checkpoint
    given by mistake above all, is refused and left as it is.
    """
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a folder; give a file name such as {path / 'm.json'}")
    if path.suffix.lower() != ".json":
        raise ValueError("its name does not end in .json, and metrics are written only to a "
                         ".json file (so that a checkpoint or any other file is never "
                         "overwritten); give --json a name ending in .json")
    old = None
    if path.exists():
        why = None
        try:
            if not path.is_file():
                why = "not a regular file"
            elif path.stat().st_size > _MAX_METRICS_BYTES:
                why = f"over {_MAX_METRICS_BYTES} bytes"
            else:
                old = json.loads(path.read_bytes())
                if not isinstance(old, dict):
                    why = f"a JSON {type(old).__name__}, not an object"
                elif old.get("written_by") != WRITTEN_BY and not _METRICS_KEYS <= set(old):
                    why = f"a JSON object without \"written_by\": \"{WRITTEN_BY}\""
        except (OSError, ValueError) as e:  # unreadable, not UTF-8, not JSON
            why = "not JSON" if isinstance(e, ValueError) else f"unreadable: {e.strerror or e}"
        if why is not None:
            raise ValueError(f"it exists and is not a metrics file written by {WRITTEN_BY} "
                             f"({why}), so it was left as it is; give --json a new file name")
    check_writable(path)
    return old


def main(argv: list[str] | None = None) -> int:
    return run_command(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = OneLineParser(prog="python -m convs2s.evaluate",
                           description="Evaluate a checkpoint or a shipped model on a "
                           "Multi30k split (in its direction): perplexity, BLEU and chrF "
                           "(greedy and beam).")
    add_model_choice(parser)
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument("--beam-sizes", type=bounded_int_arg(MAX_BEAM_SIZE), nargs="+",
                        default=[1, 5])
    parser.add_argument("--limit", type=whole_number_arg,
                        help="only the first N sentences (N >= 1)")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--device", type=device_arg, help="cpu, cuda, cuda:N or mps "
                        "(default: the best available)")
    parser.add_argument("--json", type=Path, help="where to write the metrics, a .json file "
                        "(default: metrics_<split>_<checkpoint name>.json beside the "
                        "checkpoint; with --pretrained, metrics_<split>_pretrained_<direction>"
                        ".json here); an existing file is replaced only if it holds metrics")
    args = parser.parse_args(argv)
    # A checkpoint path that is no file ("." or a folder, a missing file) is reported by the
    # loader below ("... Did you mean runs/q/best.pt?"); only a file has a default JSON name.
    if args.pretrained is not None:  # not beside the installed package's file
        out = args.json or Path(f"metrics_{args.split}_pretrained_{args.pretrained}.json")
    else:
        out = args.json or (default_json(args.checkpoint, args.split)
                            if _is_file(args.checkpoint) else None)
    try:
        if out is not None:
            check_metrics_target(out)
    except (OSError, ValueError) as e:
        return _cannot_write(out, e)
    try:
        translator = chosen_translator(args)
        out = out or default_json(args.checkpoint, args.split)
        pairs = load_multi30k(args.data_dir, src=translator.src_lang,
                              trg=translator.trg_lang)[args.split]
        n = len(pairs) if args.limit is None else min(args.limit, len(pairs))
        beams = ", ".join(map(str, args.beam_sizes))
        print(f"evaluating {n} {args.split} sentences {translator.src_lang}->"
              f"{translator.trg_lang} (perplexity; beam sizes {beams}) ...", flush=True)
        metrics = evaluate(translator, pairs, beam_sizes=args.beam_sizes, limit=args.limit)
        metrics.update({"checkpoint": (str(args.checkpoint) if args.pretrained is None else
                                       f"convs2s.pretrained({args.pretrained!r})"),
                        "split": args.split,
                        "device": environment.describe_device(translator.device),
                        "date": date.today().isoformat(), "written_by": WRITTEN_BY})
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        say(f"error: {e}")
        return 1
    except MemoryError:
        say("error: out of memory; evaluate on a machine with more memory, or use --limit.")
        return 1
    except KeyboardInterrupt as e:
        return stopped(e, "; no metrics written")
    try:
        old = check_metrics_target(out)  # again: the file may have changed during the work
        write_json_atomic(out, metrics)
    except (OSError, ValueError) as e:
        return _cannot_write(out, e)
    except KeyboardInterrupt as e:
        return stopped(e, "; no metrics written")
    print(f"{args.split} {translator.src_lang}->{translator.trg_lang}: {metrics['sentences']} "
          f"sentences, perplexity {metrics['perplexity']:.2f}")
    for beam in args.beam_sizes:
        m = metrics[f"beam{beam}"]
        print(f"  beam {beam}: sacreBLEU {m['sacrebleu']:.2f}  chrF {m['chrf']:.2f}  tutorial "
              f"BLEU {m['tutorial_bleu']:.2f}  ({m['sentences_per_s']:.1f} sentences/s)")
    replaced = (f", replacing the metrics it held ({old.get('checkpoint')}, "
                f"{old.get('split')}, {old.get('date')})") if old is not None else ""
    print(f"wrote {out}{replaced}")
    return 0


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long, ...: the loader says what is wrong
        return False


def _cannot_write(out: Path, e: Exception) -> int:
    say(f"error: cannot write the metrics to {out}: {e}.")
    return 1


if __name__ == "__main__":
    sys.exit(main())
