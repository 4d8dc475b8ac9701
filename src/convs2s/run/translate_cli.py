"""The command line of ``python -m convs2s.translate`` (``convs2s-translate``): a
:class:`~convs2s.run.translator.Translator` over arguments or a document.
It translates sentences given as arguments, or a document line by line::

    python -m convs2s.translate --checkpoint runs/cpu/best.pt "Ein Mann fährt Fahrrad."
    python -m convs2s.translate --checkpoint runs/cpu/best.pt < in.de > out.en

One line in, one line out, in batches (each batch is written and flushed as soon as it is
translated). A line ends at ``\n``, ``\r\n`` or a lone ``\r`` (a classic Mac OS file). A line
that cannot be translated (empty, not UTF-8, too long) gets an empty output line and a warning
on stderr naming its line number; the other lines are translated anyway. A line longer than
:data:`MAX_LINE_BYTES` is not even held in memory (``--input /dev/zero`` is one endless line):
it is reported as soon as it passes the limit and the rest of it is skipped. Input that is
UTF-16 or UTF-32 (a byte order mark, or NUL bytes in a line that reads as such text) is refused
in one line that names the encoding and the ``iconv`` command that converts it, and a
compressed file (Multi30k's are gzip) or an archive (a checkpoint is a zip) in one line that says
what it is, before any line is translated; other NUL bytes
concern their line only, which is made plain text as every sentence is
(``convs2s.data.plain_text`` drops them, as ``Translator.translate`` does; a line of nothing
else gets an empty output line and an error), and the other lines are translated. Control
characters in a translation (a newline or an ANSI escape inside a vocabulary token) are written
as spaces, so that the output stays one line per input line.

Every mistake is one line on stderr and a non-zero exit status, never a traceback: a closed
stdin or stdout (``<&-``, ``>&-``) included. Ctrl-C stops with one line and status 130, SIGTERM
with one line and 143 (128 + the signal's number, what a shell reports for a killed process).
"""


from __future__ import annotations

import argparse
import io
import math
import os
import re
import shlex
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import BinaryIO, TextIO

import torch

from convs2s.data import LANGUAGE_NAMES
from convs2s.model.search import check_length_penalty
from convs2s.run.translator import Translator, check_sizes
from convs2s.system.arguments import (
    MAX_BATCH_SIZE,
    MAX_BEAM_SIZE,
    MAX_LINE_BYTES,
    OneLineParser,
    bounded_int_arg,
    check_size,
    whole_number_arg,
)
from convs2s.system.environment import check_device
from convs2s.system.local_files import not_text
from convs2s.system.signals import run_command, say

__all__ = ["LineTooLong", "MAX_BATCH_SIZE", "MAX_BEAM_SIZE", "MAX_LINE_BYTES", "NotUTF8",
           "OneLineParser", "bounded_int_arg", "main", "read_lines", "translate_lines",
           "whole_number_arg"]

# MAX_LINE_BYTES (1 MiB), MAX_BEAM_SIZE and MAX_BATCH_SIZE, the one-line parser and the whole
# number argument types: convs2s.system.arguments, the one place that bounds every size the
# command line and the package's functions take.

_CHUNK = 1 << 16  # bytes read at a time
_LINE_END = re.compile(rb"\r\n?|\n")
#: Byte order marks of encodings other than UTF-8 (UTF-32's first: UTF-16's is its prefix).
_BOMS = ((b"\xff\xfe\x00\x00", "UTF-32", "little-endian"),
         (b"\x00\x00\xfe\xff", "UTF-32", "big-endian"),
         (b"\xff\xfe", "UTF-16", "little-endian"), (b"\xfe\xff", "UTF-16", "big-endian"))


class NotUTF8(ValueError):
    """The input is UTF-16 or UTF-32 (a byte order mark, or NUL bytes), not UTF-8 text.

    ``encoding`` is what the bytes look like ("UTF-16"), ``iconv`` the name ``iconv -f`` needs
    for them ("UTF-16" with a byte order mark, "UTF-16LE" without; None: bytes that read as no
    text, whose NULs are to be removed), ``evidence`` what gave it away.
    """

    def __init__(self, encoding: str, iconv: str | None, evidence: str, *,
                 unpack: str | None = None, archive: bool = False):
        self.encoding, self.iconv, self.evidence = encoding, iconv, evidence
        self.unpack, self.archive = unpack, archive  # a compressed file, an archive
        super().__init__(self.message("the input"))

    def message(self, what: str, path: str | None = None) -> str:
        """One line: what the input ``what`` is, and the command that converts it."""
        q, pipe = shlex.quote, "| python -m convs2s.translate ..."
        if self.archive:  # its first bytes say so
            return f"{what} is {self.encoding}, not text: give a text file, one sentence a line"
        if self.unpack is not None:
            return (f"{what} is {self.encoding}, not UTF-8 text: decompress it first, e.g. "
                    f"{self.unpack} {q(path) if path else 'FILE'} {pipe}")
        if self.iconv is None:
            fix, nul = "remove the NUL bytes", "tr -d '\\000'"
            run = f"{nul} < FILE {pipe}" if path is None else \
                f"{nul} < {q(path)} > {q(path + '.txt')}"
        else:
            fix, iconv = "convert it", f"iconv -f {self.iconv} -t UTF-8"
            run = f"{iconv} FILE {pipe}" if path is None else \
                f"{iconv} {q(path)} > {q(path + '.utf8')}"
        return (f"{what} is {self.encoding} ({self.evidence}), not UTF-8 text: {fix} first, "
                f"e.g. {run}")


def _bom(start: bytes) -> NotUTF8 | None:
    for bom, encoding, order in _BOMS:
        if start.startswith(bom):
            return NotUTF8(encoding, encoding,
                           f"{order}: it starts with a {encoding} byte order mark")
    binary = not_text(start)
    if binary is not None:
        kind, unpack = binary
        return NotUTF8(kind, None, "its first bytes", unpack=unpack,
                       archive=unpack is None)
    return None


def _nul_bytes(line: bytes, offset: int, lineno: int) -> NotUTF8:
    """What a line holding NUL bytes (at byte ``offset`` of the input) looks like: in UTF-16,
    every ASCII character has a NUL byte beside it; in UTF-32, three. An encoding is named only
    if the line reads as text in it (a UTF-8 line with two NULs is not UTF-32)."""
    sample = line[:4096]
    where = [(offset + i) % 4 for i, byte in enumerate(sample) if byte == 0]
    share = len(where) / len(sample)
    evidence = f"line {lineno} holds NUL bytes"
    if share >= 0.6:  # UTF-32: little-endian puts the character first, then three NULs
        order = "LE" if where.count(0) < where.count(3) else "BE"
        if _reads_as(sample, offset, f"utf-32-{order.lower()}", 4):
            return NotUTF8(f"UTF-32{order}", f"UTF-32{order}",
                           f"{evidence}, as UTF-32 text does")
    elif share >= 0.2:  # UTF-16: little-endian puts the NUL after the character
        order = "LE" if sum(p % 2 for p in where) > len(where) / 2 else "BE"
        if _reads_as(sample, offset, f"utf-16-{order.lower()}", 2):
            return NotUTF8(f"UTF-16{order}", f"UTF-16{order}",
                           f"{evidence}, as UTF-16 text does")
    return NotUTF8("binary data, or text with NUL bytes", None,
                   f"{evidence}, which UTF-8 text does not have, and it reads as no UTF-16 or "
                   "UTF-32 text")


def _reads_as(sample: bytes, offset: int, codec: str, width: int) -> bool:
    """Whether ``sample`` (at byte ``offset`` of the input) decodes as text in ``codec``: at
    least one character, every one printable or a line break, none of them NUL."""
    start = -offset % width
    whole = sample[start:start + (len(sample) - start) // width * width]
    try:
        text = whole.decode(codec)
    except UnicodeDecodeError:
        return False
    return bool(text.strip("\r\n")) and all(c.isprintable() or c in "\t\r\n" for c in text)



class LineTooLong:
    """What :func:`read_lines` gives for a line longer than its limit (the rest is not read yet:
    it is skipped when the next line is asked for)."""

    def __init__(self, limit: int):
        self.limit = limit

    def __repr__(self) -> str:
        return f"LineTooLong(limit={self.limit})"


def read_lines(f: BinaryIO, max_bytes: int = MAX_LINE_BYTES) -> Iterator[bytes | LineTooLong]:
    """The lines of ``f`` (with their endings: ``\n``, ``\r\n`` or a lone ``\r``), holding at
    most ``max_bytes`` + 64 KiB bytes of the input at a time.

    A longer line (``/dev/zero`` is one endless line) is given as a :class:`LineTooLong` as soon
    as it passes the limit; when the next line is asked for, its rest is read and dropped in
    pieces of 64 KiB, so memory stays bounded however long it is. :class:`NotUTF8` is raised
    when the input starts with a UTF-16 or UTF-32 byte order mark, or a line holds NUL bytes
    as UTF-16 or UTF-32 text does; a line with other NUL bytes is given as it is (it concerns
    that line only: :func:`translate_lines` makes it plain text, which drops them). A text
    stream (``str`` lines) is read with its own line endings.
    """
    check_size(max_bytes, "max_bytes", MAX_LINE_BYTES)
    if isinstance(f, io.TextIOBase):
        yield from _read_text_lines(f, max_bytes)
        return
    read = getattr(f, "read1", None) or f.readline  # read1: what has come, without waiting
    buf, pos, offset, eof, lineno = b"", 0, 0, False, 0  # offset: where buf[pos] is in f
    while not eof and len(buf) < 6 and _LINE_END.search(buf) is None:  # a BOM or a magic
        chunk = read(_CHUNK)
        eof = not chunk
        buf += chunk
    wide = _bom(buf)
    if wide is not None:
        raise wide
    while True:
        end = _LINE_END.search(buf, pos)
        if end is not None and (end.end() < len(buf) or end.group() != b"\r" or eof):
            lineno += 1  # a whole line (a \r at the end of buf may be half of a \r\n)
            line = buf[pos:end.end()]
            if end.start() - pos > max_bytes:
                yield LineTooLong(max_bytes)
            else:
                _check_wide(line, offset, lineno)
                yield line
            offset += end.end() - pos
            pos = end.end()
            continue
        if end is None and len(buf) - pos > max_bytes:  # too long, and no end in sight
            lineno += 1
            yield LineTooLong(max_bytes)
            buf, pos, offset, eof = _skip_line(read, offset + len(buf) - pos)
            continue
        if eof:
            if pos < len(buf):  # the last line, without an ending
                lineno += 1
                line = buf[pos:]
                _check_wide(line, offset, lineno)
                yield line
            return
        chunk = read(_CHUNK)
        eof = not chunk
        buf, pos = buf[pos:] + chunk, 0


def _check_wide(line: bytes, offset: int, lineno: int) -> None:
    """:class:`NotUTF8` if ``line`` holds NUL bytes as UTF-16 or UTF-32 text does (the whole
    input is in that encoding); other NUL bytes concern their line only."""
    if b"\x00" in line:
        wide = _nul_bytes(line, offset, lineno)
        if wide.iconv is not None:
            raise wide


def _skip_line(read, offset: int) -> tuple[bytes, int, int, bool]:
    """Read and drop the rest of a line, 64 KiB at a time: ``(what follows it, 0, its offset,
    end of input)``."""
    while True:
        chunk = read(_CHUNK)
        if not chunk:
            return b"", 0, offset, True
        end = _LINE_END.search(chunk)
        if end is None:
            offset += len(chunk)
            continue
        rest = chunk[end.end():]
        offset += end.end()
        if end.group() == b"\r" and not rest:  # a \r at the end of a chunk: is \n next?
            rest = read(_CHUNK)
            if not rest:
                return b"", 0, offset, True
            if rest.startswith(b"\n"):
                rest, offset = rest[1:], offset + 1
        return rest, 0, offset, False


def _read_text_lines(f: TextIO, max_bytes: int) -> Iterator[str | LineTooLong]:
    """:func:`read_lines` for a text stream (its own newline handling): at most ``max_bytes
    + 1`` characters of a line are held."""
    lineno = 0
    while True:
        line = f.readline(max_bytes + 1)
        if not line:
            return
        lineno += 1
        if len(line) <= max_bytes or line.endswith("\n"):
            yield line  # NUL characters concern their line only (plain_text drops them)
            continue
        yield LineTooLong(max_bytes)
        while line and not line.endswith("\n"):  # the rest of the line, a piece at a time
            line = f.readline(1 << 16)


def _reading(lines: Iterable, what: str, path: str | None = None) -> Iterator:
    """``lines``, with a read error said in words (not "[Errno 9] Bad file descriptor"), and
    input that is not UTF-8 named (``what``: "standard input" or the file ``path``)."""
    try:
        yield from lines
    except OSError as e:
        raise OSError(f"cannot read {what} ({e.strerror or e})") from e
    except NotUTF8 as e:
        raise ValueError(e.message(what, path)) from None


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
    check_sizes(beam_size=beam_size, batch_size=batch_size)
    check_size(max_line_bytes, "max_line_bytes", MAX_LINE_BYTES)
    length_penalty = translator.length_penalty_for(length_penalty)
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
                todo.append((i, translator.source_tokens(text)))
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
                outputs[i] = one_line(translator.detokenize(tokens))
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


#: C0 and C1 control characters (newline, carriage return, the ESC of ANSI colour codes, ...),
#: DEL, and Unicode's line and paragraph separators: each becomes a space in an output line.
_CONTROLS = dict.fromkeys([*range(0x20), *range(0x7F, 0xA0), 0x2028, 0x2029], " ")


def one_line(text: str) -> str:
    """``text`` with every control character, line break included, written as a space."""
    return text.translate(_CONTROLS)


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


def add_model_choice(parser: argparse.ArgumentParser) -> None:
    """The model a command uses: ``--checkpoint FILE`` or ``--pretrained DIRECTION`` (a model
    shipped with the package), exactly one (translate and evaluate)."""
    model = parser.add_mutually_exclusive_group(required=True)
    model.add_argument("--checkpoint", type=Path, help="a checkpoint file (best.pt, final.pt)")
    model.add_argument("--pretrained", metavar="DIRECTION",
                       help="a model shipped with the package: de-en or en-de "
                       "(convs2s.pretrained)")


def chosen_translator(args: argparse.Namespace) -> Translator:
    """The translator for :func:`add_model_choice`'s arguments, on ``args.device``."""
    if args.pretrained is not None:
        from convs2s.run.pretrained import pretrained

        return pretrained(args.pretrained, device=args.device)
    return Translator.from_checkpoint(args.checkpoint, device=args.device)


def main(argv: list[str] | None = None) -> int:
    return run_command(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = OneLineParser(
        prog="python -m convs2s.translate",
        description="Translate sentences from the model's source language into its target "
        "language (German to English for word-level checkpoints trained before checkpoints "
        "recorded their languages): the sentences given as arguments, "
        "or else every line of --input (default: stdin), one output line per input line.")
    add_model_choice(parser)
    parser.add_argument("sentences", nargs="*", help="source sentences (none: read lines)")
    parser.add_argument("--input", "-i", help="a UTF-8 text file, one sentence per line "
                        "('-' or none: stdin)")
    parser.add_argument("--beam-size", type=bounded_int_arg(MAX_BEAM_SIZE), default=5,
                        help=f"hypotheses kept per sentence, 1 to {MAX_BEAM_SIZE} (default 5)")
    parser.add_argument("--batch-size", type=bounded_int_arg(MAX_BATCH_SIZE), default=64,
                        help="sentences translated (and written) together, 1 to "
                        f"{MAX_BATCH_SIZE:,} (default 64)")
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
        translator = chosen_translator(args)
        if args.sentences:
            lines: Iterable[bytes | str | LineTooLong] = args.sentences
        elif source is not None:
            lines = _reading(read_lines(source), args.input, args.input)
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
