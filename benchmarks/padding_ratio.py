"""Padding ratio of one Multi30k training epoch: length-bucketed batches vs random batches.

    python benchmarks/padding_ratio.py [--batch-size 128] [--seed 0] [--json out.json]

Reads Multi30k from CONVS2S_DATA_DIR (or the cache, downloading if needed), tokenizes and
numericalises the training split as the course does (lowercased spaCy tokens, vocab with
min_freq=2), then batches one epoch twice with the same batch size: with bucketing
(``make_loader(..., bucket=True)``) and as plain random batches (``bucket=False``). It prints
a table of pad tokens / all tokens (src and trg together, and each side) and can write JSON.
"""

from __future__ import annotations

import datetime as dt
import platform
import shlex
import sys
import time
import warnings

from common import json_arg, run_main, write_report

from convs2s.system.arguments import OneLineParser, whole_number_arg


def count(loader, pad_idx: int) -> dict:
    stats = {"batches": 0, "src_pad": 0, "src_all": 0, "trg_pad": 0, "trg_all": 0}
    for src, trg in loader:
        stats["batches"] += 1
        stats["src_pad"] += int((src == pad_idx).sum())
        stats["src_all"] += src.numel()
        stats["trg_pad"] += int((trg == pad_idx).sum())
        stats["trg_all"] += trg.numel()
    pad, total = stats["src_pad"] + stats["trg_pad"], stats["src_all"] + stats["trg_all"]
    stats["padding_ratio"] = pad / total
    stats["src_padding_ratio"] = stats["src_pad"] / stats["src_all"]
    stats["trg_padding_ratio"] = stats["trg_pad"] / stats["trg_all"]
    return stats


def main(argv: list[str] | None = None) -> dict:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-size", type=whole_number_arg, default=128,
                        help="sentences per batch (default: 128)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--max-len", type=int, default=None, help="drop longer examples")
    parser.add_argument("--json", type=json_arg, metavar="PATH",
                        help="also write the results as JSON here")
    args = parser.parse_args(argv)

    import spacy
    import torch

    from convs2s.data import (
        TranslationDataset,
        Vocab,
        load_multi30k,
        make_loader,
        make_tokenizer,
        padding_ratio,
    )
    from convs2s.system.environment import cpu_model, data_dir, describe_device

    t0 = time.perf_counter()
    train = load_multi30k()["train"]
    tok_de, tok_en = make_tokenizer("de"), make_tokenizer("en")
    src_vocab = Vocab.build(tok_de(de) for de, _ in train)
    trg_vocab = Vocab.build(tok_en(en) for _, en in train)
    with warnings.catch_warnings():  # the drops are in the table this prints (and the error)
        warnings.simplefilter("ignore", UserWarning)
        data = TranslationDataset(train, tok_de, tok_en, src_vocab, trg_vocab,
                                  max_len=args.max_len)
    prep_s = time.perf_counter() - t0
    if len(data) == 0:
        parser.error(f"no training pair fits in --max-len {args.max_len} positions (bos and eos "
                     f"included; all {data.n_dropped:,} dropped): give a larger --max-len, or none")
    pad = src_vocab.pad_idx
    assert trg_vocab.pad_idx == pad

    results = {}
    for name, bucket in (("bucketed", True), ("random", False)):
        loader = make_loader(data, batch_size=args.batch_size, seed=args.seed, bucket=bucket)
        t = time.perf_counter()
        results[name] = count(loader, pad)
        results[name]["epoch_seconds"] = round(time.perf_counter() - t, 3)
        # the package's helper must agree with the count above
        check = padding_ratio(
            make_loader(data, batch_size=args.batch_size, seed=args.seed, bucket=bucket), pad
        )
        assert abs(check - results[name]["padding_ratio"]) < 1e-12

    print(
        f"Multi30k train: {len(data)} examples ({data.n_dropped} dropped), "
        f"batch size {args.batch_size}, seed {args.seed}; prep {prep_s:.1f} s"
    )
    print(f"{'batching':<10} {'batches':>8} {'pad/all':>8} {'src':>8} {'trg':>8} {'epoch s':>8}")
    for name, r in results.items():
        print(
            f"{name:<10} {r['batches']:>8} {r['padding_ratio']:>8.1%} "
            f"{r['src_padding_ratio']:>8.1%} {r['trg_padding_ratio']:>8.1%} "
            f"{r['epoch_seconds']:>8.2f}"
        )
    b, r = results["bucketed"], results["random"]
    print(
        f"bucketing cuts the padded tokens per epoch from "
        f"{r['src_all'] + r['trg_all']:,} to {b['src_all'] + b['trg_all']:,} "
        f"({(b['src_all'] + b['trg_all']) / (r['src_all'] + r['trg_all']):.0%})."
    )

    report = {
        "benchmark": "padding_ratio",
        "command": " ".join(shlex.quote(a) for a in [sys.executable, *sys.argv]),
        "date": dt.datetime.now().astimezone().isoformat(timespec="seconds"),
        "device": describe_device(torch.device("cpu")),
        "cpu": cpu_model() or platform.machine(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "spacy": spacy.__version__,
        "data_dir": str(data_dir()),
        "batch_size": args.batch_size,
        "seed": args.seed,
        "max_len": args.max_len,
        "examples": len(data),
        "dropped": data.n_dropped,
        "src_vocab": len(src_vocab),
        "trg_vocab": len(trg_vocab),
        "prep_seconds": round(prep_s, 2),
        "results": results,
    }
    write_report(args.json, report)
    return report


if __name__ == "__main__":
    sys.exit(run_main(main))
