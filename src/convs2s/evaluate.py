"""Evaluate a checkpoint on a Multi30k split: perplexity and BLEU (greedy and beam).

    python -m convs2s.evaluate --checkpoint runs/cpu/best.pt --split test [--json metrics.json]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from convs2s import config
from convs2s.data import TranslationDataset, load_multi30k, make_loader, make_tokenizer
from convs2s.metrics import corpus_bleu
from convs2s.train import evaluate_loss
from convs2s.translate import Translator, detokenize

SPLITS = ("train", "valid", "test")


def evaluate(translator: Translator, pairs, *, beam_sizes=(1, 5), limit: int | None = None) -> dict:
    """Perplexity and both BLEU scores for ``pairs`` (``(german, english)``) at each beam size.

    Sentences too long for the model are skipped and counted (``skipped``).
    """
    pairs = list(pairs)[:limit] if limit else list(pairs)
    keep = []
    for de, en in pairs:
        try:
            translator._tokens(de)
            keep.append((de, en))
        except ValueError:
            pass
    tok_trg = make_tokenizer("en", lower=True)
    ds = TranslationDataset(keep, translator.src_tokenizer, tok_trg, translator.src_vocab,
                            translator.trg_vocab, max_len=translator.max_positions)
    loader = make_loader(ds, batch_size=64, shuffle=False, bucket=False)
    loss = evaluate_loss(translator.model, loader, translator.trg_vocab.pad_idx, translator.device)
    result = {"sentences": len(keep), "skipped": len(pairs) - len(keep), "loss": loss,
              "perplexity": math.exp(min(loss, 50))}
    sources, refs = [de for de, _ in keep], [en for _, en in keep]
    for beam in beam_sizes:
        t0 = time.perf_counter()
        tokens = translator.translate_tokens(sources, beam_size=beam)
        seconds = time.perf_counter() - t0
        scores = corpus_bleu([detokenize(t) for t in tokens], refs, hyp_tokens=tokens)
        result[f"beam{beam}"] = {"sacrebleu": scores.sacrebleu, "tutorial_bleu": scores.tutorial,
                                 "signature": scores.signature, "seconds": seconds,
                                 "sentences_per_s": len(sources) / max(seconds, 1e-9)}
    return result


def write_json_atomic(path: Path, obj) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=2)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m convs2s.evaluate", description=__doc__)
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("--split", choices=SPLITS, default="test")
    parser.add_argument("--beam-sizes", type=int, nargs="+", default=[1, 5])
    parser.add_argument("--limit", type=int, help="only the first N sentences")
    parser.add_argument("--data-dir", type=Path)
    parser.add_argument("--device")
    parser.add_argument("--json", type=Path, help="where to write the metrics "
                        "(default: metrics_<split>.json beside the checkpoint)")
    args = parser.parse_args(argv)
    try:
        translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
        pairs = load_multi30k(args.data_dir)[args.split]
        metrics = evaluate(translator, pairs, beam_sizes=args.beam_sizes, limit=args.limit)
    except (ValueError, TypeError, RuntimeError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    metrics.update({"checkpoint": str(args.checkpoint), "split": args.split,
                    "device": config.describe_device(translator.device),
                    "date": date.today().isoformat()})
    out = args.json or args.checkpoint.with_name(f"metrics_{args.split}.json")
    write_json_atomic(out, metrics)
    print(f"{args.split}: {metrics['sentences']} sentences, perplexity {metrics['perplexity']:.2f}")
    for beam in args.beam_sizes:
        m = metrics[f"beam{beam}"]
        print(f"  beam {beam}: sacreBLEU {m['sacrebleu']:.2f}  tutorial BLEU "
              f"{m['tutorial_bleu']:.2f}  ({m['sentences_per_s']:.1f} sentences/s)")
    print(f"wrote {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
