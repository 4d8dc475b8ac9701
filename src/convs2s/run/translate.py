"""The ``python -m convs2s.translate`` command line (``convs2s-translate``): a :class:`~convs2s.run.translator.Translator` over
arguments or a document.
The command line translates sentences given as arguments, or a document line by line::

    python -m convs2s.translate --checkpoint runs/cpu/best.pt "Ein Mann fährt Fahrrad."
    python -m convs2s.translate --checkpoint runs/cpu/best.pt < in.de > out.en

One line in, one line out, in batches (each batch is written and flushed as soon as it is
translated). A line that cannot be translated (empty, not UTF-8, too long) gets an empty output
line and a warning on stderr naming its line number; the other lines are translated anyway. A
line longer than :data:`MAX_LINE_BYTES` is not even held in memory (``--input /dev/zero`` is one
endless line): it is reported as soon as it passes the limit and the rest of it is skipped.

Every mistake is one line on stderr and a non-zero exit status, never a traceback: a closed
stdin or stdout (``<&-``, ``>&-``) included. Ctrl-C stops with one line and status 130, SIGTERM
with one line and 143 (128 + the signal's number, what a shell reports for a killed process).
"""


from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

import torch

from convs2s.data import LANGUAGE_NAMES
from convs2s.model.search import (
    check_length_penalty,
)
from convs2s.run.translator import Translator, positive_int
from convs2s.system.environment import check_device
from convs2s.system.signals import run_command, say

__all__ = ["LineTooLong", "MAX_LINE_BYTES", "main", "read_lines", "translate_lines"]

#: The longest input line the command line reads (1 MiB): far more than any sentence a model
#: with a few hundred positions can take, and a bound on the memory one line can use.
MAX_LINE_BYTES = 1 << 20




class LineTooLong:
    """What :func:`read_lines` gives for a line longer than its limit (the rest is not read yet:
    it is skipped when the next line is asked for)."""

    def __init__(self, limit: int):
        self.limit = limit

    def __repr__(self) -> str:
        return f"LineTooLong(limit={self.limit})"


def read_lines(f: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | LineTooLong]:
    """The lines of ``f`` (with their endings), holding at most ``max_bytes + 1`` bytes of one.

    A longer line (``/dev/zero`` is one endless line) is given as a :class:`LineTooLong` as soon
    as it passes the limit; when the next line is asked for, its rest is read and dropped in
    pieces of 64 KiB, so memory stays bounded however long it is.
    """
    positive_int(max_bytes, "max_bytes")
    while True:
        line = f.readline(max_bytes + 1)
        if not line:
            return
        newline = "\n" if isinstance(line, str) else b"\n"
        if len(line) <= max_bytes or line.endswith(newline):
            yield line
            continue
        yield LineTooLong(max_bytes)
        while line and not line.endswith(newline):  # the rest of the line, a piece at a time
            line = f.readline(1 << 16)


def _reading(lines: Iterable, what: str) -> Iterator:
    """``lines``, with a read error said in words (not "[Errno 9] Bad file descriptor")."""
    try:
        yield from lines
    except OSError as e:
        raise OSError(f"cannot read {what} ({e.strerror or e})") from e


def _too_long(limit: int, unread: bool) -> ValueError:
    return ValueError(f"longer than {limit} bytes, so not one sentence (is the input one "
                      f"sentence per line?); skipped it{' unread' if unread else ''}.")


def _line_text(lineno: int, line: bytes | str | LineTooLong,
               max_bytes: int = MAX_LINE_BYTES) -> str:
    """One input line as text, without its line ending; ``ValueError`` if it is not UTF-8 or
    longer than ``max_bytes``."""
    if isinstance(line, LineTooLong):
        raise _too_long(line.limit, unread=True)
    if isinstance(line, bytes):
        line = line.removesuffix(b"\n").removesuffix(b"\r")
        if len(line) > max_bytes:
            raise _too_long(max_bytes, unread=False)
        if lineno == 1:
            line = line.removeprefix(b"\xef\xbb\xbf")  # a byte order mark is not text
        try:
            return line.decode("utf-8")
        except UnicodeDecodeError as e:
            raise ValueError(f"not valid UTF-8 (byte {line[e.start:e.start + 1]!r} at column "
                             f"{e.start + 1}: {e.reason})") from e
    try:  # a command-line argument: Python keeps undecodable bytes as lone surrogates
        size = len(line.encode("utf-8"))
    except UnicodeEncodeError as e:
        raise ValueError(f"not valid UTF-8 (at character {e.start + 1})") from e
    if size > max_bytes:
        raise _too_long(max_bytes, unread=False)
    return line


def translate_lines(translator: Translator, lines: Iterable[bytes | str | LineTooLong],
                    out: TextIO, err: TextIO, *, beam_size: int = 5, batch_size: int = 64,
                    length_penalty: float | None = None,
                    max_line_bytes: int = MAX_LINE_BYTES) -> tuple[int, list]:
    """Translate ``lines`` (bytes or str, e.g. from :func:`read_lines`) to ``out``, one output
    line per input line.

    Lines are read and translated ``batch_size`` at a time; each batch's translations are
    written and flushed before the next batch is read, so a long document streams. A line that
    is empty gets an empty output line and a warning on ``err``; one that cannot be translated
    (not UTF-8, not valid Unicode, too long for the model or over ``max_line_bytes``) gets an
    empty output line and an error on ``err`` naming its line number, and the other lines are
    translated anyway. A :class:`LineTooLong` is reported at once (its batch is translated
    early), before :func:`read_lines` skips the rest of it.

    Returns ``(number of lines, [(line number, problem), ...] for the lines not translated)``.
    """
    positive_int(batch_size, "batch_size")
    positive_int(beam_size, "beam_size")
    positive_int(max_line_bytes, "max_line_bytes")
    length_penalty = translator._alpha(length_penalty)
    failed: list[tuple[int, str]] = []
    n = 0

    def flush(batch: list[tuple[int, bytes | str | LineTooLong]]) -> None:
        outputs = [""] * len(batch)
        todo: list[tuple[int, list[str]]] = []  # (position in batch, tokens)
        for i, (lineno, line) in enumerate(batch):
            try:
                text = _line_text(lineno, line, max_line_bytes)
                if not text.strip():
                    print(f"warning: line {lineno} is empty; wrote an empty line.", file=err)
                    continue
                todo.append((i, translator._tokens(text)))
            except ValueError as e:
                failed.append((lineno, str(e)))
                print(f"error: line {lineno}: {e} Wrote an empty line.", file=err)
        try:
            results = translator.translate_token_lists([t for _, t in todo], beam_size=beam_size,
                                                       batch_size=batch_size,
                                                       length_penalty=length_penalty)
        except (RuntimeError, ValueError):  # find the line(s) at fault, translate the rest
            results = []
            for i, tokens in todo:
                try:
                    results += translator.translate_token_lists(
                        [tokens], beam_size=beam_size, length_penalty=length_penalty)
                except (RuntimeError, ValueError) as e:
                    lineno = batch[i][0]
                    failed.append((lineno, str(e)))
                    print(f"error: line {lineno}: {e} Wrote an empty line.", file=err)
                    results.append(None)
        for (i, _), tokens in zip(todo, results, strict=True):
            if tokens is not None:
                outputs[i] = translator.detokenize(tokens)
        try:
            out.write("".join(f"{o}\n" for o in outputs))
            out.flush()
        except BrokenPipeError:  # the reader went away (| head): the caller stops quietly
            raise
        except OSError as e:  # a full disk, a stdout opened read-only
            raise OSError(f"cannot write the translations ({e.strerror or e})") from e
        err.flush()

    batch: list[tuple[int, bytes | str | LineTooLong]] = []
    for n, line in enumerate(lines, start=1):
        batch.append((n, line))
        if len(batch) == batch_size or isinstance(line, LineTooLong):
            flush(batch)
            batch = []
    if batch:
        flush(batch)
    return n, failed


def positive_int_arg(text: str) -> int:
    """argparse ``type``: a whole number >= 1 (0, negatives and fractions are refused)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def length_penalty_arg(text: str) -> float:
    """argparse ``type``: beam search's length-penalty exponent, 0 to 10
    (:func:`convs2s.model.search.check_length_penalty` says why)."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not a finite number")
    try:
        return check_length_penalty(value)
    except ValueError as e:  # "length_penalty must be between 0 and 10, not ...: why"
        raise argparse.ArgumentTypeError(str(e).removeprefix("length_penalty ")) from None


def device_arg(text: str) -> torch.device:
    """argparse ``type``: a device this machine has (see :func:`check_device`)."""
    try:
        return check_device(text)
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _quiet_broken_pipe() -> None:
    """The reader of stdout went away (``| head``) or stdout fails (a full disk): stop without
    a second error at exit, when Python would flush stdout again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass


class _Nowhere:
    """A text stream that drops what is written to it (for a closed stderr)."""

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass


def main(argv: list[str] | None = None) -> int:
    return run_command(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = OneLineParser(
        prog="python -m convs2s.translate",
        description="Translate sentences from the checkpoint's source language into its target "
        "language (German to English for word-level checkpoints trained before checkpoints "
        "recorded their languages): the sentences given as arguments, "
        "or else every line of --input (default: stdin), one output line per input line.")
    parser.add_argument("--checkpoint", required=True, type=Path)
    parser.add_argument("sentences", nargs="*", help="source sentences (none: read lines)")
    parser.add_argument("--input", "-i", help="a UTF-8 text file, one sentence per line "
                        "('-' or none: stdin)")
    parser.add_argument("--beam-size", type=positive_int_arg, default=5)
    parser.add_argument("--batch-size", type=positive_int_arg, default=64,
                        help="sentences translated (and written) together (default 64)")
    parser.add_argument("--length-penalty", type=length_penalty_arg, default=None,
                        help="beam search ranks finished outputs by (sum of log p) / "
                        "length ** this, 0 to 10 (default: the one a final.pt records, chosen "
                        "on validation; else 1.0, fairseq's)")
    parser.add_argument("--device", type=device_arg, help="cpu, cuda, cuda:N or mps "
                        "(default: the best available)")
    args = parser.parse_args(argv)
    if args.sentences and args.input is not None:
        parser.error("give sentences as arguments or --input, not both.")
    if sys.stdout is None:  # started with >&-
        say("error: standard output is closed (>&-), so the translations have nowhere to go; "
            "redirect it to a file (> out.txt) instead.")
        return 1
    from_stdin = not args.sentences and args.input in (None, "-")
    if from_stdin and sys.stdin is None:  # started with <&-
        say("error: standard input is closed (<&-), so there is nothing to read; give "
            "sentences as arguments, --input FILE, or pipe the text in (< in.txt).")
        return 1
    source = None
    if not args.sentences and not from_stdin:
        try:
            source = open(args.input, "rb")  # noqa: SIM115 (closed below)
        except OSError as e:
            parser.error(f"cannot read --input {args.input}: {e.strerror}.")
    err = sys.stderr if sys.stderr is not None else _Nowhere()
    try:
        translator = Translator.from_checkpoint(args.checkpoint, device=args.device)
        if args.sentences:
            lines: Iterable[bytes | str | LineTooLong] = args.sentences
        elif source is not None:
            lines = _reading(read_lines(source), args.input)
        else:
            if sys.stdin.isatty():
                name = LANGUAGE_NAMES.get(translator.src_lang, translator.src_lang)
                say(f"Reading {name} sentences from stdin, one per line (end with Ctrl-D).")
            lines = _reading(read_lines(getattr(sys.stdin, "buffer", sys.stdin)),
                             "standard input")
        n, failed = translate_lines(translator, lines, sys.stdout, err,
                                    beam_size=args.beam_size, batch_size=args.batch_size,
                                    length_penalty=args.length_penalty)
    except (ValueError, TypeError, RuntimeError, OSError) as e:
        if not isinstance(e, BrokenPipeError):
            say(f"error: {e}")
        try:  # what is still buffered for stdout must not fail again at exit
            sys.stdout.flush()
        except (OSError, ValueError):
            _quiet_broken_pipe()
        return 1
    except MemoryError:
        say("error: out of memory while translating; use a smaller --batch-size or --beam-size.")
        return 1
    finally:
        if source is not None:
            source.close()
    if failed:
        numbers = ", ".join(str(lineno) for lineno, _ in failed[:10])
        more = f" and {len(failed) - 10} more" if len(failed) > 10 else ""
        say(f"error: {len(failed)} of {n} lines could not be translated (line {numbers}{more}); "
            "each got an empty output line.")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
