"""Evaluate a checkpoint on a Multi30k split: perplexity, BLEU and chrF (greedy and beam).

    python -m convs2s.evaluate --checkpoint runs/cpu/best.pt --split test [--json metrics.json]

The languages and the tokenizer come from the checkpoint (German to English, word-level, for a
checkpoint written before checkpoints recorded them); the split is read in that direction.

The metrics JSON is written atomically (a new file gets the mode the umask gives, an existing
one keeps its own); that its folder is writable is checked before any work is done.
"""

from __future__ import annotations

import math
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from convs2s import config
from convs2s.data import TranslationDataset, load_multi30k, make_loader
from convs2s.fileio import write_json_atomic
from convs2s.metrics import corpus_bleu
from convs2s.train import evaluate_loss
from convs2s.translate import OneLineParser, Translator, device_arg, positive_int_arg

__all__ = ["SPLITS", "evaluate", "check_writable", "main", "write_json_atomic"]

SPLITS = ("train", "valid", "test")


def evaluate(translator: Translator, pairs, *, beam_sizes=(1, 5), limit: int | None = None,
             length_penalty: float = 1.0) -> dict:
    """Perplexity, both BLEU scores and chrF for ``pairs`` at each beam size.

    ``pairs`` are ``(source, target)`` sentences in the translator's direction (raw, cased
    text). The target side is tokenized by the translator's own pipeline for the perplexity; the
    scores compare the detokenized output with the raw references (see
    :func:`convs2s.metrics.corpus_bleu`).

    Sentences too long for the model are skipped and counted (``skipped``). ``limit``: only
    the first ``limit`` pairs (a positive integer; None: all). ``beam_sizes=()`` computes the
    perplexity alone. ``length_penalty``: beam search's exponent (1.0: fairseq's default).
    """
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise ValueError(f"limit must be None (all) or a positive integer, got {limit!r}.")
    beam_sizes = list(beam_sizes)
    if any(isinstance(b, bool) or not isinstance(b, int) or b < 1 for b in beam_sizes):
        raise ValueError(f"beam_sizes must be positive integers, got {beam_sizes!r}.")
    pairs = list(pairs)[:limit] if limit is not None else list(pairs)
    keep = []
    for source, target in pairs:
        try:
            translator._tokens(source)
            keep.append((source, target))
        except ValueError:
            pass
    ds = TranslationDataset(keep, translator.src_tokenizer, translator.trg_tokenizer,
                            translator.src_vocab, translator.trg_vocab,
                            max_len=translator.max_positions)
    loader = make_loader(ds, batch_size=64, shuffle=False, bucket=False)
    loss = evaluate_loss(translator.model, loader, translator.trg_vocab.pad_idx, translator.device)
    result = {"src_lang": translator.src_lang, "trg_lang": translator.trg_lang,
              "tokenizer": translator.pipeline.settings_dict(),
              "sentences": len(keep), "skipped": len(pairs) - len(keep), "loss": loss,
              "perplexity": math.exp(min(loss, 50))}
    sources, refs = [s for s, _ in keep], [t for _, t in keep]
    words = translator.pipeline.kind == "word"
    for beam in beam_sizes:
        t0 = time.perf_counter()
        tokens = translator.translate_tokens(sources, beam_size=beam,
                                             length_penalty=length_penalty)
        seconds = time.perf_counter() - t0
        scores = corpus_bleu([translator.detokenize(t) for t in tokens], refs,
                             lang=translator.trg_lang, hyp_tokens=tokens if words else None)
        result[f"beam{beam}"] = {"sacrebleu": scores.sacrebleu, "tutorial_bleu": scores.tutorial,
                                 "chrf": scores.chrf, "signature": scores.signature,
                                 "chrf_signature": scores.chrf_signature, "seconds": seconds,
                                 "sentences_per_s": len(sources) / max(seconds, 1e-9)}
    return result


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


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m convs2s.evaluate",
                           description="Evaluate a checkpoint on a Multi30k split (in the "
                           "checkpoint's direction): perplexity, BLEU and chrF (greedy and beam).")
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument("--beam-sizes", type=positive_int_arg, nargs="+", default=[1, 5])
    parser.add_argument("--limit", type=positive_int_arg,
                        help="only the first N sentences (N >= 1)")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--device", type=device_arg, help="cpu, cuda, cuda:N or mps "
                        "(default: the best available)")
    parser.add_argument("--json", type=Path, help="where to write the metrics "
                        "(default: metrics_<split>.json beside the checkpoint)")
    args = parser.parse_args(argv)
    out = args.json or args.checkpoint.with_name(f"metrics_{args.split}.json")
    try:
        if args.json is not None or args.checkpoint.is_file():  # else: "No checkpoint at ..."
            check_writable(out)
    except OSError as e:
        print(f"error: cannot write the metrics to {out}: {e}.", file=sys.stderr)
        return 1
    try:
        translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
        pairs = load_multi30k(args.data_dir, src=translator.src_lang,
                              trg=translator.trg_lang)[args.split]
        metrics = evaluate(translator, pairs, beam_sizes=args.beam_sizes, limit=args.limit)
        metrics.update({"checkpoint": str(args.checkpoint), "split": args.split,
                        "device": config.describe_device(translator.device),
                        "date": date.today().isoformat()})
        write_json_atomic(out, metrics)
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("interrupted; no metrics written.", file=sys.stderr)
        return 130
    print(f"{args.split} {translator.src_lang}->{translator.trg_lang}: {metrics['sentences']} "
          f"sentences, perplexity {metrics['perplexity']:.2f}")
    for beam in args.beam_sizes:
        m = metrics[f"beam{beam}"]
        print(f"  beam {beam}: sacreBLEU {m['sacrebleu']:.2f}  chrF {m['chrf']:.2f}  tutorial "
              f"BLEU {m['tutorial_bleu']:.2f}  ({m['sentences_per_s']:.1f} sentences/s)")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
