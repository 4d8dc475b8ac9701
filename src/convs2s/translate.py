"""Translate with a trained checkpoint: ``Translator`` and the ``python -m convs2s.translate`` CLI.

    >>> t = Translator.from_checkpoint("runs/cpu/best.pt")        # doctest: +SKIP
    >>> t.translate("Ein Mann fährt Fahrrad.")                     # doctest: +SKIP
    'A man rides a bike.'

The checkpoint says which languages and which text pipeline the model was trained with
(:class:`convs2s.subword.TextPipeline`): a word-level model (the course's original, trained on
lower-cased spaCy tokens) outputs lower-cased tokens, which :func:`detokenize` joins back into
a sentence (no space before punctuation, a capital first letter); a subword model outputs
sentencepiece pieces of cased text, decoded back into the exact cased sentence. Either way the
text is what the standard, cased sacreBLEU score sees. A checkpoint written before checkpoints
recorded this is German to English, word-level.

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
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, TextIO

import torch

from convs2s.checkpoint import Checkpoint, CheckpointError, check_parts, check_pipeline
from convs2s.config import check_device
from convs2s.data import LANGUAGE_NAMES, Vocab, check_length, detokenize
from convs2s.decode import beam_search, beam_search_alphas, check_length_penalty, greedy_decode
from convs2s.model import ConvS2S
from convs2s.stopping import Terminated, run_command, say
from convs2s.subword import TextPipeline

__all__ = ["CheckpointError", "LineTooLong", "MAX_LINE_BYTES", "Terminated", "Translation",
           "Translator", "check_device", "detokenize", "main", "read_lines", "translate_lines"]

#: The longest input line the command line reads (1 MiB): far more than any sentence a model
#: with a few hundred positions can take, and a bound on the memory one line can use.
MAX_LINE_BYTES = 1 << 20


def _positive_int(value, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}.")
    return value


@dataclass
class Translation:
    source_tokens: list[str]
    tokens: list[str]
    text: str
    attention: torch.Tensor  # [dec_layers, len(tokens), len(source_tokens)]


class Translator:
    """A model, its vocabularies and its text pipeline, ready to translate sentences.

    ``pipeline`` (:class:`convs2s.subword.TextPipeline`) gives the languages, the tokenizers
    and the detokenizer; without it, ``src_lang``/``trg_lang``/``lower`` make a word-level one.
    """

    def __init__(self, model: ConvS2S, src_vocab: Vocab, trg_vocab: Vocab, *,
                 src_lang: str = "de", trg_lang: str = "en", lower: bool = True, device=None,
                 pipeline: TextPipeline | None = None):
        """``ValueError`` if the vocabularies do not fit the model or the pipeline, or a weight
        is not finite."""
        check_parts(model.config, model.state_dict(), src_vocab, trg_vocab)
        if pipeline is None:
            pipeline = TextPipeline.word(src_lang, trg_lang, lower=lower)
        check_pipeline(pipeline, src_vocab, trg_vocab)
        if device is None:
            device = next(model.parameters()).device
        self.device = check_device(device)
        self.model = model.to(self.device).eval()
        self.src_vocab, self.trg_vocab = src_vocab, trg_vocab
        self.pipeline = pipeline
        self.src_lang, self.trg_lang = pipeline.src_lang, pipeline.trg_lang
        self.src_tokenizer = pipeline.src_tokenizer
        self.trg_tokenizer = pipeline.trg_tokenizer
        self.max_positions = model.config["max_positions"]
        #: beam search's length penalty when a call gives none: the one chosen on validation
        #: for a final.pt (:mod:`convs2s.final`), else 1.0 (fairseq's default)
        self.length_penalty = 1.0

    def detokenize(self, tokens: Sequence[str]) -> str:
        """Output tokens as a sentence (a subword model: the exact cased text)."""
        return self.pipeline.detokenize(tokens)

    @classmethod
    def from_checkpoint(cls, checkpoint: str | os.PathLike | Checkpoint,
                        device=None) -> Translator:
        """A translator for a checkpoint file (or a loaded :class:`Checkpoint`).

        Raises :class:`convs2s.checkpoint.CheckpointError` (one line naming the file and the
        problem) for a file that is not a checkpoint, or whose parts do not belong together
        (see :meth:`Checkpoint.load`); ``ValueError`` for a device this machine does not have.
        """
        device = check_device(device)
        ckpt = checkpoint if isinstance(checkpoint, Checkpoint) else Checkpoint.load(checkpoint)
        translator = cls(ckpt.build_model(), ckpt.src_vocab, ckpt.trg_vocab,
                         pipeline=ckpt.pipeline, device=device)
        translator.length_penalty = ckpt.length_penalty  # the recorded choice, if any
        return translator

    # -- input checks --------------------------------------------------------------------------
    def _tokens(self, sentence) -> list[str]:
        if not isinstance(sentence, str):
            name = LANGUAGE_NAMES.get(self.src_lang, self.src_lang)
            raise TypeError(f"translate() takes a {name} sentence (str) or a list of them, not "
                            f"{type(sentence).__name__}.")
        try:  # a lone surrogate: sentencepiece fails with a C++ cast error, spaCy's output too
            sentence.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ValueError(
                f"Cannot translate text that is not valid Unicode: character {e.start + 1} is "
                f"{sentence[e.start]!r}, a lone surrogate (half of a UTF-16 pair, or a byte that "
                "was not UTF-8, decoded with errors='surrogateescape'). Fix the text's encoding."
            ) from None
        if not sentence.strip():
            raise ValueError("Cannot translate an empty or whitespace-only sentence.")
        tokens = self.src_tokenizer(sentence)
        check_length(tokens, self.max_positions, what="source sentence")
        return tokens

    def _batch(self, token_lists: list[list[str]]) -> torch.Tensor:
        ids = [torch.tensor(self.src_vocab.encode(t), dtype=torch.long) for t in token_lists]
        src = torch.nn.utils.rnn.pad_sequence(ids, batch_first=True,
                                              padding_value=self.src_vocab.pad_idx)
        return src.to(self.device)  # src = [batch, src_len]

    def _max_len(self, max_len: int | None) -> int:
        return self.max_positions if max_len is None else max_len

    def _alpha(self, length_penalty: float | None) -> float:
        """The length penalty a call asks for, else the translator's (checked: 0 to 10)."""
        return check_length_penalty(self.length_penalty if length_penalty is None
                                    else length_penalty)

    # -- translation ---------------------------------------------------------------------------
    def translate_tokens(self, sentences: Sequence[str], *, beam_size: int = 5,
                         max_len: int | None = None, batch_size: int = 64,
                         length_penalty: float | None = None) -> list[list[str]]:
        """Output token lists for a list of sentences (what the tutorial BLEU compares).

        ``batch_size`` sentences are decoded together; ``ValueError`` if it or ``beam_size``
        is not a positive integer, or a sentence is empty, too long or not valid Unicode (a lone
        surrogate). ``length_penalty``: beam search's exponent, 0 to 10 (None: the translator's
        own, :attr:`length_penalty`; see
        :func:`convs2s.decode.beam_search`; greedy decoding ignores it, but it is checked all
        the same).
        """
        _positive_int(batch_size, "batch_size")
        _positive_int(beam_size, "beam_size")
        length_penalty = self._alpha(length_penalty)
        token_lists = [self._tokens(s) for s in sentences]
        return self.translate_token_lists(token_lists, beam_size=beam_size, max_len=max_len,
                                          batch_size=batch_size, length_penalty=length_penalty)

    def translate_token_lists(self, token_lists: Sequence[list[str]], *, beam_size: int = 5,
                              max_len: int | None = None, batch_size: int = 64,
                              length_penalty: float | None = None) -> list[list[str]]:
        """:meth:`translate_tokens` for sentences already tokenized (and length-checked)."""
        _positive_int(batch_size, "batch_size")
        _positive_int(beam_size, "beam_size")
        length_penalty = self._alpha(length_penalty)
        out: list[list[str]] = []
        v = self.trg_vocab
        kw = dict(max_len=self._max_len(max_len), bos_idx=v.bos_idx, eos_idx=v.eos_idx,
                  pad_idx=v.pad_idx)
        for i in range(0, len(token_lists), batch_size):
            src = self._batch(token_lists[i: i + batch_size])
            if beam_size == 1:
                ids = greedy_decode(self.model, src, **kw)
            else:
                ids = beam_search(self.model, src, beam_size=beam_size,
                                  length_penalty=length_penalty, **kw)
            out.extend(v.decode(x) for x in ids)
        return out

    def translate_tokens_alphas(self, sentences: Sequence[str], alphas, *, beam_size: int = 5,
                                max_len: int | None = None,
                                batch_size: int = 64) -> list[list[list[str]]]:
        """:meth:`translate_tokens` with beam search at every length penalty in ``alphas``: one
        list of outputs per α, in that order, from one search (α only re-ranks the finished
        hypotheses; :func:`convs2s.decode.beam_search_alphas`)."""
        token_lists = [self._tokens(s) for s in sentences]
        return self.translate_token_lists_alphas(token_lists, alphas, beam_size=beam_size,
                                                 max_len=max_len, batch_size=batch_size)

    def translate_token_lists_alphas(self, token_lists: Sequence[list[str]], alphas, *,
                                     beam_size: int = 5, max_len: int | None = None,
                                     batch_size: int = 64) -> list[list[list[str]]]:
        """:meth:`translate_token_lists` with beam search for every length penalty in
        ``alphas`` (one list of outputs per α, in that order), from one search per batch
        (:func:`convs2s.decode.beam_search_alphas`)."""
        _positive_int(batch_size, "batch_size")
        _positive_int(beam_size, "beam_size")
        alphas = [check_length_penalty(a) for a in alphas]
        out: list[list[list[str]]] = [[] for _ in alphas]
        v = self.trg_vocab
        for i in range(0, len(token_lists), batch_size):
            src = self._batch(token_lists[i: i + batch_size])
            per_alpha = beam_search_alphas(self.model, src, alphas=alphas, beam_size=beam_size,
                                           max_len=self._max_len(max_len), bos_idx=v.bos_idx,
                                           eos_idx=v.eos_idx, pad_idx=v.pad_idx)
            for j, ids in enumerate(per_alpha):
                out[j].extend(v.decode(x) for x in ids)
        return out

    def translate(self, sentences: str | Sequence[str], *, beam_size: int = 5,
                  max_len: int | None = None, length_penalty: float | None = None):
        """Translate one sentence (-> str) or a list of sentences (-> list of str)."""
        single = isinstance(sentences, str)
        if not single and not isinstance(sentences, (list, tuple)):
            raise TypeError(f"translate() takes a str or a list of str, not "
                            f"{type(sentences).__name__}.")
        batch = [sentences] if single else list(sentences)
        tokens = self.translate_tokens(batch, beam_size=beam_size, max_len=max_len,
                                       length_penalty=length_penalty)
        texts = [self.detokenize(t) for t in tokens]
        return texts[0] if single else texts

    def translate_with_attention(self, sentence: str, *, max_len: int | None = None) -> Translation:
        """Greedy translation of one sentence with every decoder layer's attention, for plots."""
        tokens = self._tokens(sentence)
        v = self.trg_vocab
        ids, attn = greedy_decode(self.model, self._batch([tokens]), max_len=self._max_len(max_len),
                                  bos_idx=v.bos_idx, eos_idx=v.eos_idx, pad_idx=v.pad_idx,
                                  return_attention=True)
        out = v.decode(ids[0])
        return Translation(tokens, out, self.detokenize(out), attn[0])


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


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
    _positive_int(max_bytes, "max_bytes")
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
    _positive_int(batch_size, "batch_size")
    _positive_int(beam_size, "beam_size")
    _positive_int(max_line_bytes, "max_line_bytes")
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
    (:func:`convs2s.decode.check_length_penalty` says why)."""
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
