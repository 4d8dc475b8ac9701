"""Sequence-level knowledge distillation's data (Kim & Rush, 2016; issue 62): a teacher's
beam-search translations of Multi30k's training sources, one target sentence a line, for
``python -m convs2s.train --distilled FILE``::

    python -m convs2s.run.distill --teacher runs/de_en/final.pt --out runs/distilled.de-en.en

The direction is the teacher's (its checkpoint records it), the sources are the whole training
split in it (``--data-dir``, default ``CONVS2S_DATA_DIR``), and line i of FILE is the teacher's
translation of source i. Beam search (``--beam-size``, default 5) ranks with the teacher's own
length penalty: the one a ``final.pt`` records, chosen on validation, else 1.0 (fairseq's). The
sources are translated ``--batch-size`` at a time, sorted by length so that a batch's sentences
end together (this command's choice, for speed). A source the teacher cannot translate (too long
for it, or none of its words known) and an empty translation keep the reference as their line,
and the closing line counts them.

Resumable, and nothing half-written: the translations go batch by batch to ``FILE.partial``,
whose first line records the teacher (its sha256), the sources and the settings. Ctrl-C,
SIGTERM or a crash keep what it holds, and the same command continues from it (a whole batch
at a time, so the result is the uninterrupted run's); one made by another teacher, on other
sources or with other settings is refused in one line. At the end FILE is written atomically
and the progress file removed. An existing FILE is never overwritten. Mistakes are one line and
exit status 2 (arguments, files) or 1.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from pathlib import Path

from convs2s.system import arguments
from convs2s.system.atomic_files import atomic_write, cannot_write_in, write_text_atomic
from convs2s.system.signals import StopSignals, exit_status, how_stopped, import_command, say

if __name__ == "__main__":
    # `python -m convs2s.run.distill`: this module, torch and all, is imported again as the
    # command's first step (the imports below never run here), so that Ctrl-C or SIGTERM while
    # torch loads stops it in one line, exit 130 or 143, as later (convs2s/train.py's way)
    sys.exit(import_command("convs2s.run.distill")())

from convs2s.data import DataError, load_multi30k  # noqa: E402 (torch: see above)
from convs2s.run.checkpoint import Checkpoint, CheckpointError  # noqa: E402
from convs2s.run.translate_cli import device_arg, one_line  # noqa: E402
from convs2s.run.translator import Translator  # noqa: E402

__all__ = ["PROGRESS_SUFFIX", "WRITTEN_BY", "distill", "main", "progress_path"]

#: The progress file beside FILE: ``FILE.partial``.
PROGRESS_SUFFIX = ".partial"
#: The first line of a progress file names this command.
WRITTEN_BY = "convs2s.run.distill"
#: What a progress file's first line records that a resume must match (the teacher's path may
#: change: its sha256 may not).
_MATCHED = ("teacher_sha256", "direction", "sources", "sources_sha256", "beam_size",
            "length_penalty", "batch_size")


def progress_path(out: str | os.PathLike) -> Path:
    """Where the translations of an unfinished run wait: ``FILE.partial``."""
    out = Path(out)
    return out.with_name(out.name + PROGRESS_SUFFIX)


def _sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def _sha256_lines(lines: list[str]) -> str:
    return hashlib.sha256(json.dumps(lines, ensure_ascii=False).encode("utf-8")).hexdigest()


def _order(translator: Translator, sources: list[str]) -> tuple[list[int], list[list[str]]]:
    """The sources the teacher can translate, shortest first (ties in order), with their
    tokens; the others keep their reference."""
    tokens: dict[int, list[str]] = {}
    for i, sentence in enumerate(sources):
        try:
            tokens[i] = translator.source_tokens(sentence)
        except ValueError:  # empty, too long for the teacher, no word it knows
            pass
    order = sorted(tokens, key=lambda i: (len(tokens[i]), i))
    return order, [tokens[i] for i in order]


def _resume_from(path: Path, header: dict, batch_size: int, total: int) -> list[str]:
    """The translations a progress file holds, cut to whole batches (the file too), after its
    first line is checked against ``header``; ``ValueError`` (one line) for a file that is
    not one, or is another run's."""
    raw = path.read_bytes()
    first, _, body = raw.partition(b"\n")
    try:
        recorded = json.loads(first.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        recorded = None
    if not isinstance(recorded, dict) or recorded.get("written_by") != WRITTEN_BY:
        raise ValueError(f"{path} is not a progress file of python -m {WRITTEN_BY}; remove it "
                         "(or choose another --out) and run again.")
    diffs = [f"{k}: there {recorded.get(k)!r}, now {header[k]!r}" for k in _MATCHED
             if recorded.get(k) != header[k]]
    if diffs:
        raise ValueError(f"{path} holds the translations of another teacher, sources or "
                         f"settings ({'; '.join(diffs)}); run the command that began it, or "
                         "remove it to start again.")
    lines = body.split(b"\n")[:-1]  # complete lines only: a crash may cut the last one
    done = len(lines) if len(lines) >= total else len(lines) // batch_size * batch_size
    translations = []
    for lineno, line in enumerate(lines[:done], start=2):  # every line read before any cut
        try:
            translations.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            raise ValueError(f"{path} is not UTF-8 text (line {lineno}: byte "
                             f"{line[e.start:e.start + 1]!r} at column {e.start + 1}), so it is "
                             "not what this command wrote; remove it to start again.") from None
    keep = len(first) + 1 + sum(len(line) + 1 for line in lines[:done])
    with open(path, "r+b") as f:
        f.truncate(keep)
    return translations


def distill(translator: Translator, sources: list[str], references: list[str], out: Path, *,
            header: dict, beam_size: int = 5, batch_size: int = 64,
            log=say) -> tuple[int, int]:
    """Translate ``sources`` into ``out`` (one line each, the reference where the teacher gives
    none), through ``out``'s progress file (see the module's docstring); returns
    ``(translated, kept references)``. ``header``: what the progress file records."""
    from tqdm.auto import tqdm  # the progress bar (on a terminal only)

    order, tokens = _order(translator, sources)
    partial = progress_path(out)
    header = {"written_by": WRITTEN_BY, **header, "sources": len(sources),
              "sources_sha256": _sha256_lines(sources), "beam_size": beam_size,
              "length_penalty": translator.length_penalty, "batch_size": batch_size}
    if partial.exists():
        done = _resume_from(partial, header, batch_size, len(order))
        log(f"continuing from {partial}: {len(done):,} of {len(order):,} translations there")
    else:
        write_text_atomic(partial, json.dumps(header, ensure_ascii=False) + "\n")
        done = []
    bar = tqdm(total=len(order), initial=len(done), unit="sentence", disable=None,
               file=sys.stderr, desc="distilling")
    with StopSignals() as signals, open(partial, "ab") as f:
        for start in range(len(done), len(order), batch_size):
            batch = tokens[start:start + batch_size]
            outputs = translator.translate_token_lists(batch, beam_size=beam_size,
                                                       batch_size=len(batch))
            lines = [one_line(translator.detokenize(t)).strip() for t in outputs]
            with signals.deferred():  # a batch is written whole, or not at all
                f.write("".join(f"{line}\n" for line in lines).encode("utf-8"))
                f.flush()
                os.fsync(f.fileno())
            done += lines
            bar.update(len(batch))
    bar.close()
    result = list(references)
    for i, line in zip(order, done, strict=True):
        if line:
            result[i] = line
    translated = sum(1 for line in done if line)
    text = "".join(f"{line}\n" for line in result).encode("utf-8")
    atomic_write(out, lambda f: f.write(text))
    partial.unlink()
    return translated, len(sources) - translated


def _out_file(text: str) -> Path:
    """argparse ``type`` for ``--out``: a file that does not exist yet, in a folder that does."""
    path = arguments.expanded(text)
    if not text.strip() or path.is_dir():
        raise argparse.ArgumentTypeError(f"{arguments.brief(text)} is a folder; give the file "
                                         "to write (e.g. runs/distilled.de-en.en)")
    if path.exists() or path.is_symlink():
        raise argparse.ArgumentTypeError(f"{arguments.brief(text)} already exists; this command "
                                         "never overwrites a file: remove it, or choose another")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"the folder {arguments.brief(str(path.parent))} does "
                                         "not exist; make it first")
    why = cannot_write_in(path.parent)  # writable, before hours of translation
    if why:
        raise argparse.ArgumentTypeError(f"cannot write into {arguments.brief(str(path.parent))} "
                                         f"({why}); choose another folder")
    return path


def _teacher_file(text: str) -> Path:
    path = arguments.expanded(text)
    if path.is_dir():
        inside = next((path / n for n in ("final.pt", "best.pt") if (path / n).is_file()), None)
        raise argparse.ArgumentTypeError(
            f"{arguments.brief(text)} is a folder, not a checkpoint file" +
            (f": did you mean {arguments.brief(str(inside))}?" if inside else
             " (give a best.pt or final.pt of a training run)"))
    if not path.is_file():
        raise argparse.ArgumentTypeError(f"{arguments.brief(text)}: no such checkpoint file "
                                         "(a best.pt or final.pt of a training run)")
    return path


def make_parser() -> arguments.OneLineParser:
    parser = arguments.OneLineParser(
        prog=f"python -m {WRITTEN_BY}",
        description="Sequence-level knowledge distillation (Kim & Rush, 2016): translate "
        "Multi30k's training sources with a teacher checkpoint (beam search, its own length "
        "penalty), one line per training pair, for python -m convs2s.train --distilled FILE. "
        "Interrupted, the same command continues from FILE.partial.")
    parser.add_argument("--teacher", required=True, type=_teacher_file,
                        help="the teacher checkpoint (final.pt, best.pt); its direction is used")
    parser.add_argument("--out", required=True, type=_out_file,
                        help="the file to write (not there yet)")
    parser.add_argument("--data-dir", type=arguments.data_folder_arg,
                        help="Multi30k folder (default: CONVS2S_DATA_DIR)")
    parser.add_argument("--beam-size", type=arguments.bounded_int_arg(arguments.MAX_BEAM_SIZE),
                        default=5, help="beam search's hypotheses per sentence (default 5)")
    parser.add_argument("--batch-size", type=arguments.bounded_int_arg(
        arguments.MAX_BATCH_SIZE), default=64, help="sentences translated together (default "
        "64); a resumed run keeps its own")
    parser.add_argument("--device", type=device_arg, help="cpu, cuda, cuda:N or mps "
                        "(default: the best available)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = make_parser().parse_args(argv)
    try:
        with StopSignals():  # SIGTERM as Ctrl-C: the progress file is kept, and said so
            return _run(args)
    except KeyboardInterrupt as e:
        partial = progress_path(args.out)
        kept = (f"; the translations so far are kept in {partial}: run the same command again "
                "to continue") if partial.exists() else ""
        say(f"{how_stopped(e)}{kept}.")
        return exit_status(e)
    except (CheckpointError, DataError, ValueError, RuntimeError, OSError) as e:
        say("error: " + arguments.cut(" ".join(str(e).split())))
        return 1
    except MemoryError:
        say(f"error: out of memory while translating; use a smaller --batch-size (a progress "
            f"file records its settings: remove {progress_path(args.out)} first).")
        return 1


def _run(args: argparse.Namespace) -> int:
    start = time.monotonic()
    ckpt = Checkpoint.load(args.teacher)
    translator = Translator.from_checkpoint(ckpt, device=args.device)
    src, trg = translator.src_lang, translator.trg_lang
    pairs = load_multi30k(args.data_dir, src=src, trg=trg)["train"]
    say(f"distilling the {len(pairs):,} {src} sources of the {src}->{trg} training split with "
        f"{arguments.shown(str(args.teacher))} (beam {args.beam_size}, length penalty "
        f"{translator.length_penalty:g})")
    header = {"teacher": str(args.teacher), "teacher_sha256": _sha256_file(args.teacher),
              "direction": f"{src}-{trg}"}
    translated, kept = distill(translator, [s for s, _ in pairs], [t for _, t in pairs],
                               args.out, header=header, beam_size=args.beam_size,
                               batch_size=args.batch_size)
    why = (f"; {kept:,} kept their reference (the teacher could not translate the source, "
           "or gave an empty translation)") if kept else ""
    say(f"wrote {arguments.shown(str(args.out))}: {len(pairs):,} lines, {translated:,} the "
        f"teacher's{why}; {time.monotonic() - start:.0f} s")
    return 0

