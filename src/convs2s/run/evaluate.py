"""Evaluate a checkpoint on a Multi30k split, or on any pair of files: perplexity, BLEU and chrF
(greedy and beam).

    python -m convs2s.evaluate --checkpoint runs/cpu/best.pt --split test [--json metrics.json]
    python -m convs2s.evaluate --checkpoint runs/cpu/best.pt --source news.de --reference news.en

The languages and the tokenizer come from the checkpoint (German to English, word-level, for a
checkpoint written before checkpoints recorded them); the split is read in that direction.
``--source`` and ``--reference`` (given together, and instead of ``--split`` and
``--data-dir``) are two line-aligned UTF-8 files, one sentence a line, in the checkpoint's
source and target languages (plain text, or gzip-compressed as Multi30k's own files are). They
are read as the Multi30k files are (lines end at ``\n``, a ``\r`` before it and a byte order
mark are dropped, the text is normalised to NFC), so that a split's own files score exactly as
``--split`` does. Both are read and checked before the model is loaded: a file that is missing,
unreadable, not UTF-8 or empty, files with different numbers of lines, more than
:data:`MAX_SENTENCES` lines, a line longer than ``MAX_LINE_BYTES`` or a file over
:data:`MAX_TEXT_BYTES` are refused in one line (exit status 2).

The metrics go to ``metrics_<split>_<checkpoint name>.json`` beside the checkpoint (so
``best.pt`` and ``last.pt`` get a file each: ``metrics_test_best.json``, ``metrics_test_last.json``;
for files, ``metrics_<source file name>_<checkpoint name>.json``, which records the two files'
paths instead of a split) or to ``--json``. Metrics are written only over metrics: the file's
name must end in ``.json``, and a file already there must be a JSON object this command wrote
(``"written_by": "convs2s.evaluate"``, or the keys every metrics file had before that marker);
anything else (a checkpoint, someone's notes) is refused and left as it is. Replacing earlier
metrics is said. The JSON is written atomically (a new file gets the mode the umask gives, an
existing one keeps its own); the target and its folder are checked before any work is done.

Mistakes are one line and exit status 1 (2 for arguments and input files); Ctrl-C stops with
one line and 130, SIGTERM with one line and 143, no metrics written and no temporary file left.
"""

from __future__ import annotations

import gzip
import json
import math
import shlex
import sys
import tempfile
import time
import zlib
from collections.abc import Iterable
from datetime import date
from pathlib import Path

from convs2s.data import TranslationDataset, load_multi30k, make_loader, nfc
from convs2s.data.batching import sentence_pairs
from convs2s.model.loss import evaluate_loss
from convs2s.run.metrics import corpus_bleu
from convs2s.run.translate_cli import add_model_choice, chosen_translator, device_arg
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.arguments import (
    MAX_BEAM_SIZE,
    MAX_LINE_BYTES,
    OneLineParser,
    WrongType,
    bounded_int_arg,
    brief,
    check_size,
    data_folder_arg,
    shown,
    whole_number_arg,
)
from convs2s.system.atomic_files import write_json_atomic
from convs2s.system.local_files import not_text
from convs2s.system.signals import run_command, say, stopped

__all__ = ["MAX_SENTENCES", "MAX_TEXT_BYTES", "SPLITS", "WRITTEN_BY", "BadInput",
           "check_metrics_target", "check_writable", "default_json", "evaluate", "main",
           "read_parallel", "read_sentences", "write_json_atomic"]

SPLITS = ("train", "valid", "test")

#: The marker every metrics file this command writes carries (``"written_by"``).
WRITTEN_BY = "convs2s.evaluate"
# What every metrics file held before the marker: such a file may be replaced too.
_METRICS_KEYS = {"checkpoint", "split", "sentences", "perplexity"}
_MAX_METRICS_BYTES = 1 << 20  # a metrics file is a few kB
#: The most lines ``--source``/``--reference`` may hold (Multi30k's test set has 1,000, a WMT
#: test set a few thousand): every line is held in memory and translated.
MAX_SENTENCES = 1_000_000
#: The most bytes of text one of those files may hold (after gzip), read or not yet.
MAX_TEXT_BYTES = 512 << 20


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
    if isinstance(beam_sizes, str) or not isinstance(beam_sizes, Iterable):
        raise WrongType(f"beam_sizes must be a list of beam sizes such as (1, 5) or [5], not "
                        f"{beam_sizes!r}.")
    beam_sizes = list(beam_sizes)
    try:
        beam_sizes = [check_size(b, "beam_size", MAX_BEAM_SIZE) for b in beam_sizes]
    except ValueError:
        raise ValueError(f"beam_sizes must be positive integers, at most {MAX_BEAM_SIZE:,}, "
                         f"got {brief(beam_sizes)}.") from None
    if not isinstance(translator, Translator):
        raise WrongType(f"evaluate takes a Translator (e.g. Translator.from_checkpoint(path) "
                        f"or convs2s.pretrained('de-en')), not {type(translator).__name__}.")
    # checked before the work, not after the perplexity; None: the translator's own (final.pt's)
    alpha = translator.length_penalty_for(length_penalty)
    pairs = list(sentence_pairs(pairs))  # checked: (source, target) pairs
    pairs = pairs[:limit] if limit is not None else pairs
    keep = _fitting(translator, pairs)
    if not keep and pairs:
        raise ValueError(f"none of the {len(pairs):,} pairs can be translated (each source is "
                         f"empty or longer than the model's {translator.max_positions} "
                         "positions): nothing to score.")
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


class BadInput(ValueError):
    """A ``--source``/``--reference`` file that cannot be scored (one line: what is wrong with
    which file, and how to fix it)."""


def read_sentences(path: str | Path, flag: str = "--source") -> list[str]:
    """The lines of the UTF-8 text file ``path`` (plain or gzip), one sentence a line, as
    :func:`convs2s.data.load_pairs` reads them: a line ends at ``\n`` (a ``\r`` before it and a
    byte order mark at the start are dropped), and is normalised to NFC.

    Read a line at a time; :class:`BadInput` (one line naming ``flag`` and the file) for a file
    that is missing, unreadable, not UTF-8 or empty, that holds more than
    :data:`MAX_SENTENCES` lines or :data:`MAX_TEXT_BYTES` bytes, or a line longer than
    ``MAX_LINE_BYTES``.
    """
    name = f"{flag} {shown(str(path))}"
    try:
        raw = open(path, "rb")  # noqa: SIM115 (closed below)
    except OSError as e:
        why = {FileNotFoundError: "there is no such file",
               IsADirectoryError: "it is a folder"}.get(type(e), e.strerror or str(e))
        raise BadInput(f"cannot read {name}: {why}; give a UTF-8 text file, one sentence a "
                       "line.") from None
    gzipped = False
    try:
        with raw:
            gzipped = raw.peek(2)[:2] == b"\x1f\x8b"  # Multi30k's own files are gzipped
            f = gzip.GzipFile(fileobj=raw, mode="rb") if gzipped else raw
            return _lines(f, name, path)
    except (OSError, EOFError, zlib.error) as e:
        if gzipped and isinstance(e, (gzip.BadGzipFile, EOFError, zlib.error)):
            raise BadInput(f"{name} is a truncated or corrupted gzip file ({e}); give an intact "
                           "file, or the uncompressed text.") from None
        raise BadInput(f"cannot read {name}: {e.strerror or e}; give a readable UTF-8 text "
                       "file, one sentence a line.") from None


def _lines(f, name: str, path) -> list[str]:
    lines: list[str] = []
    total = 0
    while True:
        line = f.readline(MAX_LINE_BYTES + 1)
        if not line:
            break
        total += len(line)
        lineno = len(lines) + 1
        binary = not_text(line) if lineno == 1 else None
        if binary is not None:  # before the length: an archive may hold no newline for long
            kind, unpack = binary
            q = shlex.quote(shown(str(path)))
            raise BadInput(f"{name} is {kind}, not text: " + (
                f"decompress it first, e.g. {unpack} {q} > {q}.txt" if unpack else
                "give a text file, one sentence a line") + ".")
        body = line.removesuffix(b"\n")
        if len(body.removesuffix(b"\r")) > MAX_LINE_BYTES:
            raise BadInput(f"line {lineno} of {name} is longer than {MAX_LINE_BYTES:,} bytes, so "
                           "not one sentence; give one sentence a line.")
        if len(lines) == MAX_SENTENCES or total > MAX_TEXT_BYTES:
            what = (f"more than {MAX_SENTENCES:,} lines" if len(lines) == MAX_SENTENCES else
                    f"more than {MAX_TEXT_BYTES >> 20} MiB of text")
            raise BadInput(f"{name} holds {what}, more than this command evaluates at once; "
                           "split it, or take its first lines (head -n 10000).")
        body = body.removesuffix(b"\r")
        if lineno == 1:
            body = body.removeprefix(b"\xef\xbb\xbf")  # a byte order mark is not text
        try:
            if b"\x00" in body:
                raise UnicodeError("NUL bytes, as UTF-16 or binary data has")
            text = body.decode("utf-8")
        except UnicodeError as e:
            what = (f"byte {body[e.start:e.start + 1]!r} at column {e.start + 1}"
                    if isinstance(e, UnicodeDecodeError) else str(e))
            q = shlex.quote(shown(str(path)))
            wide = b"\x00" in body or (lineno == 1 and body[:2] in (b"\xff\xfe", b"\xfe\xff"))
            was = "UTF-16" if wide else "LATIN1"  # iconv's name of the file's encoding
            raise BadInput(f"{name} is not UTF-8 text (line {lineno}: {what}); convert it "
                           f"first, e.g. iconv -f {was} -t UTF-8 {q} > {q}.utf8") from None
        lines.append(nfc(text))
    if not lines:
        raise BadInput(f"{name} is empty; give a file with one sentence a line.")
    return lines


def read_parallel(source: str | Path, reference: str | Path) -> list[tuple[str, str]]:
    """``(source, reference)`` sentence pairs from two line-aligned files
    (:func:`read_sentences`); :class:`BadInput` if either cannot be read, holds nothing but
    blank lines (no sentence to score), or their numbers of lines differ."""
    sources = read_sentences(source, "--source")
    references = read_sentences(reference, "--reference")
    blank = [f"{flag} {shown(str(path))}" for flag, path, lines in
             (("--source", source, sources), ("--reference", reference, references))
             if not any(line.strip() for line in lines)]
    if blank:
        raise BadInput(f"{' and '.join(blank)} hold{'s' if len(blank) == 1 else ''} no "
                       "sentences, only blank lines; give a file with one sentence a line.")
    if len(sources) != len(references):
        raise BadInput(f"--source {shown(str(source))} has {len(sources):,} lines but "
                       f"--reference {shown(str(reference))} has {len(references):,}; give "
                       "line-aligned files, one sentence pair a line.")
    return list(zip(sources, references, strict=True))


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
                           "Multi30k split (in its direction), or on any two line-aligned "
                           "files (--source, --reference): perplexity, BLEU and chrF "
                           "(greedy and beam).")
    add_model_choice(parser)
    parser.add_argument("--split", choices=SPLITS, default=None,
                        help="the Multi30k split to evaluate on (default: test)")
    parser.add_argument("--source", type=Path, metavar="FILE",
                        help="evaluate on this file instead of a split: UTF-8 text (or gzip), "
                        "one sentence a line, in the model's source language; needs "
                        "--reference")
    parser.add_argument("--reference", type=Path, metavar="FILE",
                        help="the reference translations of --source, line by line, in the "
                        "model's target language")
    parser.add_argument("--beam-sizes", type=bounded_int_arg(MAX_BEAM_SIZE), nargs="+",
                        default=[1, 5])
    parser.add_argument("--limit", type=whole_number_arg,
                        help="only the first N sentences (N >= 1)")
    parser.add_argument("--data-dir", type=data_folder_arg,
                        help="where the Multi30k files are (with --split)")
    parser.add_argument("--device", type=device_arg, help="cpu, cuda, cuda:N or mps "
                        "(default: the best available)")
    parser.add_argument("--json", type=Path, help="where to write the metrics, a .json file "
                        "(default: metrics_<split>_<checkpoint name>.json beside the "
                        "checkpoint, metrics_<source file name>_<checkpoint name>.json for "
                        "--source; with --pretrained, metrics_<split or source file name>"
                        "_pretrained_<direction>.json here); an existing file is replaced only "
                        "if it holds metrics")
    args = parser.parse_args(argv)
    files = args.source is not None or args.reference is not None
    if files:
        if args.source is None or args.reference is None:
            given, missing = (("--source", "--reference") if args.reference is None else
                              ("--reference", "--source"))
            parser.error(f"{given} needs {missing} too: give both files (the source sentences "
                         "and their reference translations, line by line).")
        for flag, value in (("--split", args.split), ("--data-dir", args.data_dir)):
            if value is not None:
                parser.error(f"{flag} and --source/--reference both say what to evaluate "
                             f"on; give {flag} (a Multi30k split) or the two files, not both.")
    split = args.split or "test"
    # what the metrics are of: a split, or the source file (the default JSON file's name)
    what = Path(args.source).name if files else split
    try:
        pairs = read_parallel(args.source, args.reference) if files else None
    except BadInput as e:
        say(f"{parser.prog}: error: {e}")
        return 2
    # A checkpoint path that is no file ("." or a folder, a missing file) is reported by the
    # loader below ("... Did you mean runs/q/best.pt?"); only a file has a default JSON name.
    if args.pretrained is not None:  # not beside the installed package's file
        out = args.json or Path(f"metrics_{what}_pretrained_{args.pretrained}.json")
    else:
        out = args.json or (default_json(args.checkpoint, what)
                            if _is_file(args.checkpoint) else None)
    try:
        if out is not None:
            check_metrics_target(out)
    except (OSError, ValueError) as e:
        return _cannot_write(out, e)
    try:
        translator = chosen_translator(args)
        out = out or default_json(args.checkpoint, what)
        if pairs is None:
            pairs = load_multi30k(args.data_dir, src=translator.src_lang,
                                  trg=translator.trg_lang)[split]
        n = len(pairs) if args.limit is None else min(args.limit, len(pairs))
        beams = ", ".join(map(str, args.beam_sizes))
        of = f"sentences of {shown(str(args.source))}" if files else f"{split} sentences"
        print(f"evaluating {n} {of} {translator.src_lang}->"
              f"{translator.trg_lang} (perplexity; beam sizes {beams}) ...", flush=True)
        metrics = evaluate(translator, pairs, beam_sizes=args.beam_sizes, limit=args.limit)
        data = ({"source": str(args.source), "reference": str(args.reference)} if files else
                {"split": split})
        metrics.update({"checkpoint": (str(args.checkpoint) if args.pretrained is None else
                                       f"convs2s.pretrained({args.pretrained!r})"),
                        **data,
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
    name = shown(str(args.source)) if files else split
    print(f"{name} {translator.src_lang}->{translator.trg_lang}: {metrics['sentences']} "
          f"sentences, perplexity {metrics['perplexity']:.2f}")
    for beam in args.beam_sizes:
        m = metrics[f"beam{beam}"]
        print(f"  beam {beam}: sacreBLEU {m['sacrebleu']:.2f}  chrF {m['chrf']:.2f}  tutorial "
              f"BLEU {m['tutorial_bleu']:.2f}  ({m['sentences_per_s']:.1f} sentences/s)")
    if old is not None:
        was = old.get("split") or old.get("source")
        replaced = f", replacing the metrics it held ({old.get('checkpoint')}, {was}, " \
                   f"{old.get('date')})"
    else:
        replaced = ""
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
