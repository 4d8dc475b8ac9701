"""Lower-case and all-caps source input, as typed and true-cased first: a cased model's BLEU.

    python benchmarks/truecasing.py [--pretrained de-en | --checkpoint FILE] \
        [--splits valid test] [--limit N] [--device cpu] \
        [--json benchmarks/results/truecasing_de_en.json]

A cased subword model (by default the shipped German→English one, ``convs2s.pretrained("de-en")``;
``--checkpoint`` scores another) translates Multi30k's validation split and test2016 seven ways:
the source as written; lower-cased (``str.lower``); lower-cased, then true-cased with the
training casing (:func:`convs2s.data.truecase.multi30k_casing`, each word's most frequent
casing in the source language's training captions: what notebook 06's widget uses where the
files are, :func:`convs2s.course.analysis.input_casing`); lower-cased, then true-cased with the
vocabulary's casing (:func:`convs2s.data.truecase.piece_casing` of the model's own source
tokenizer and vocabulary: the widget's choice without the data); and the same three for all-caps
(``str.upper``). Greedy decoding (beam 1), sacreBLEU 13a against the references
(:func:`convs2s.run.metrics.corpus_bleu`, as ``python -m convs2s.evaluate`` scores). A sentence
the translator refuses (:meth:`convs2s.run.translator.Translator.source_tokens`: too long, as
all-caps German can be in subword pieces, or none of its pieces known) counts as an empty
translation and is counted. For each true-cased row, the share of sentences restored exactly to
the source as written. ``--limit N``: the first N sentences of each split only (a quick look;
the table in benchmarks/RESULTS.md is of whole splits).
"""

from __future__ import annotations

import hashlib
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("truecasing"))

import torch
from common import json_arg, stamp, write_report

from convs2s.course.analysis import input_casing
from convs2s.data import load_multi30k
from convs2s.data.truecase import multi30k_casing, piece_casing, truecase
from convs2s.run.metrics import corpus_bleu
from convs2s.run.pretrained import PretrainedError, pretrained_checkpoint, pretrained_path, record
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser, whole_number_arg

#: The rows of the table, in order: (key, label, how the source is typed, casing restored with).
ROWS = (
    ("cased", "as written (cased)", None, None),
    ("lower", "lower-case", "lower", None),
    ("lower_training", "lower-case, then the training casing", "lower", "training"),
    ("lower_vocabulary", "lower-case, then the vocabulary's casing", "lower", "vocabulary"),
    ("upper", "all-caps", "upper", None),
    ("upper_training", "all-caps, then the training casing", "upper", "training"),
    ("upper_vocabulary", "all-caps, then the vocabulary's casing", "upper", "vocabulary"),
)
SPLITS = {"valid": "validation", "test": "test2016"}


def typed(sentence: str, case: str | None) -> str:
    """``sentence`` as typed all in lower case (``"lower"``), all in capitals (``"upper"``), or
    as written (None)."""
    return {None: sentence, "lower": sentence.lower(), "upper": sentence.upper()}[case]


def casings(translator: Translator) -> dict[str, Mapping[str, str] | Callable[[str], str]]:
    """The two casings the rows restore with: ``"training"``, the source language's training
    captions' (:func:`multi30k_casing`), and ``"vocabulary"``, the model's own subword
    vocabulary's (:func:`piece_casing`). ``ValueError`` (one line) for a model that reads
    lower-cased words (case is lost before it sees the input) or training files not there."""
    if not translator.pipeline.cased:
        raise ValueError("the model reads lower-cased words (a word-level, lower-cased pipeline): "
                         "input casing cannot matter to it; give a cased (subword) model")
    table = multi30k_casing(translator.src_lang)
    if table is None:
        raise ValueError(f"the Multi30k training split in {translator.src_lang!r} cannot be read "
                         "for its casing table; set CONVS2S_DATA_DIR to the Multi30k folder")
    return {"training": table,
            "vocabulary": piece_casing(translator.src_tokenizer, translator.src_vocab.stoi)}


def widget_casing(translator: Translator, chosen: Mapping[str, object]) -> str:
    """Which of ``chosen``'s casings notebook 06's widget restores with
    (:func:`input_casing`): ``"training"``, ``"vocabulary"`` or ``"none"``."""
    used = input_casing(translator)
    if used is None:
        return "none"
    return "training" if used is chosen["training"] else "vocabulary"


def row_sources(sources: Sequence[str], chosen: Mapping[str, object]) -> dict[str, list[str]]:
    """Every row's source sentences (:data:`ROWS`): ``sources`` typed as the row says, then, for
    a true-cased row, :func:`truecase` with its casing. Pure."""
    rows = {}
    for key, _, case, casing in ROWS:
        text = [typed(s, case) for s in sources]
        rows[key] = text if casing is None else [truecase(s, chosen[casing]) for s in text]
    return rows


def translate_all(translator: Translator, sentences: Sequence[str]) -> tuple[list[str], dict]:
    """Greedy translations of ``sentences``, one per sentence: ``""`` for one the translator
    refuses (:meth:`Translator.source_tokens`). Returns ``(translations, refused)``, where
    ``refused`` is ``{"count", "too_long", "first"}`` (``first``: the first refusal's message,
    or None)."""
    tokens, kept, refused = [], [], {"count": 0, "too_long": 0, "first": None}
    for i, sentence in enumerate(sentences):
        try:
            tokens.append(translator.source_tokens(sentence))
            kept.append(i)
        except ValueError as e:
            refused["count"] += 1
            refused["too_long"] += "handles at most" in str(e)
            refused["first"] = refused["first"] or f"sentence {i + 1}: {e}"
    out = [""] * len(sentences)
    decoded = translator.translate_token_lists(tokens, beam_size=1) if tokens else []
    for i, pieces in zip(kept, decoded, strict=True):
        out[i] = translator.detokenize(pieces)
    return out, refused


def restored(recased: Sequence[str], sources: Sequence[str]) -> float:
    """The share of ``recased`` sentences equal to their source as written (0 to 1)."""
    return sum(r == s for r, s in zip(recased, sources, strict=True)) / max(len(sources), 1)


def score_row(translator: Translator, sentences: Sequence[str], references: Sequence[str]) -> dict:
    """One row of one split: sacreBLEU 13a (and chrF) of the greedy translations of
    ``sentences`` against ``references``, with the refusals and the seconds it took."""
    t0 = time.perf_counter()
    hyps, refused = translate_all(translator, sentences)
    scores = corpus_bleu(hyps, list(references), lang=translator.trg_lang)
    return {"sacrebleu": scores.sacrebleu, "chrf": scores.chrf, "signature": scores.signature,
            "sentences": len(sentences), "refused": refused["count"],
            "refused_too_long": refused["too_long"], "first_refusal": refused["first"],
            "seconds": time.perf_counter() - t0}


def cell(row: dict) -> str:
    """A row's figure as the results table writes it."""
    text = f"{row['sacrebleu']:.2f}"
    extra = []
    if row.get("restored") is not None:
        extra.append(f"{100 * row['restored']:.1f}% restored")
    if row["refused"]:
        extra.append(f"{row['refused']} refused")
    return text + (f" ({', '.join(extra)})" if extra else "")


def markdown(splits: Mapping[str, dict]) -> str:
    """The results table (benchmarks/RESULTS.md's layout): one row per :data:`ROWS`, one column
    per split."""
    head = " | ".join(f"{SPLITS[s]} ({r['sentences']:,})" for s, r in splits.items())
    lines = [f"| source input | {head} |", "|---" * (len(splits) + 1) + "|"]
    for key, label, _, _ in ROWS:
        lines.append(f"| {label} | " + " | ".join(cell(r["rows"][key]) for r in splits.values())
                     + " |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    model = parser.add_mutually_exclusive_group()
    model.add_argument("--pretrained", metavar="DIRECTION",
                       help="a shipped model (default: de-en)")
    model.add_argument("--checkpoint", type=Path, help="a checkpoint file to score instead")
    parser.add_argument("--splits", nargs="+", choices=list(SPLITS), default=list(SPLITS),
                        help="the splits to score (default: valid test)")
    parser.add_argument("--limit", type=whole_number_arg,
                        help="only the first N sentences of each split (default: all)")
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ... (default: cpu)")
    parser.add_argument("--json", type=json_arg, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    direction = args.pretrained or "de-en"
    try:
        device = environment.check_device(args.device)
        if args.checkpoint is None:
            record(direction)
    except (ValueError, PretrainedError) as e:
        parser.error(str(e))
    splits = list(dict.fromkeys(args.splits))
    t_start = time.perf_counter()
    if args.checkpoint is None:
        name, path = f"pretrained {direction}", pretrained_path(direction)
        translator = Translator.from_checkpoint(pretrained_checkpoint(direction), device=device)
    else:
        name, path = str(args.checkpoint), args.checkpoint
        translator = Translator.from_checkpoint(args.checkpoint, device=device)
    chosen = casings(translator)
    data = load_multi30k(src=translator.src_lang, trg=translator.trg_lang)
    report = {"benchmark": "truecasing", "model": name,
              "model_sha256": hashlib.sha256(path.read_bytes()).hexdigest(),
              "direction": f"{translator.src_lang}-{translator.trg_lang}", "beam": 1,
              "widget_casing": widget_casing(translator, chosen), "limit": args.limit,
              "device": environment.describe_device(device),
              "threads": torch.get_num_threads(), "splits": {}}
    print(f"{name} ({report['direction']}), greedy, sacreBLEU 13a; the widget restores case "
          f"with the {report['widget_casing']} casing", flush=True)
    for split in splits:
        pairs = data[split][:args.limit] if args.limit else data[split]
        sources, references = [s for s, _ in pairs], [t for _, t in pairs]
        result = {"sentences": len(pairs), "rows": {}}
        for (key, label, _, casing), sentences in zip(ROWS, row_sources(sources, chosen).values(),
                                                      strict=True):
            row = {"label": label, **score_row(translator, sentences, references),
                   "restored": restored(sentences, sources) if casing else None}
            result["rows"][key] = row
            print(f"{SPLITS[split]} ({len(pairs):,}): {label}: {cell(row)}  "
                  f"[{row['seconds']:.0f} s]", flush=True)
        report["splits"][split] = result
    report["seconds"] = time.perf_counter() - t_start
    print(markdown(report["splits"]))
    print(f"{report['seconds']:.0f} s in all")
    write_report(args.json, stamp(report))
    return 0

