"""The argument checks every layer shares, in one place: the bounds of every size a caller
chooses, the options of a model or a probe, the commands' argument types, and arguments cut
short in messages.

- Sizes of work a call asks for: the commands' argument types (``--beam-size``,
  ``--batch-size``, ``--vocab-size``: :func:`bounded_int_arg`) and the package's functions
  (``Translator.translate(beam_size=...)``, ``beam_search``, ``read_lines``,
  ``SubwordSettings``) check a size with the same :func:`check_size` and the same bounds, so
  that no call asks for unbounded work: ``beam_size=10**6`` is refused in one line ("beam_size
  must be a positive integer, got 0.") instead of growing until the kernel kills the process.
- Options of a constructor or a probe (the model classes, the course's stacks and probes):
  :func:`check_whole`, :func:`check_bool`, :func:`check_fraction`, :func:`check_choice` and
  :func:`check_token_id` refuse a wrong type before anything is built (Python would take
  "False" for true, and a string dropout would fail deep inside torch), in one line that reads
  alike everywhere: "option=value must be ...".
- The commands: :class:`OneLineParser` (an error is one line) and the argument types
  :func:`whole_number_arg` and :func:`bounded_int_arg` (ASCII digits only: "1_0" and a
  full-width "６" are not numbers here), :func:`folder_arg` (an output folder: never through
  a symbolic link to nothing, :func:`dangling_link`).

A value of the wrong type raises :class:`WrongType`, which is a ``TypeError`` and a
``ValueError``: a caller that catches either catches it.
"""

from __future__ import annotations

import argparse
import numbers
import operator
import os
import re
from pathlib import Path

__all__ = ["MAX_BATCH_SIZE", "MAX_BEAM_SIZE", "MAX_LINE_BYTES", "MAX_SENTENCES",
           "MAX_VOCAB_SIZE", "OneLineParser", "WrongType", "bounded_int_arg", "brief",
           "check_bool", "check_choice", "check_fraction", "check_size", "check_token_id",
           "check_whole", "cut", "dangling_link", "dangling_link_problem", "folder_arg", "shown",
           "whole_number_arg"]

#: The largest beam (beam search keeps this many hypotheses per sentence and step).
MAX_BEAM_SIZE = 1000
#: The most sentences translated together (held in memory together).
MAX_BATCH_SIZE = 10_000
#: The most sentences one call of ``Translator.translate`` takes (they, their tokens and their
#: translations are held in memory until it returns; a file of any length streams through
#: ``python -m convs2s.translate``).
MAX_SENTENCES = 100_000
#: The longest input line read (1 MiB): far more than any sentence a model with a few hundred
#: positions can take, and a bound on the memory one line can use.
MAX_LINE_BYTES = 1 << 20
#: The most tokens a vocabulary may hold (a checkpoint's ``src_vocab_size`` too).
MAX_VOCAB_SIZE = 1_000_000


def brief(value, limit: int = 60) -> str:
    """``repr(value)``, cut to about ``limit`` characters (a message never echoes a huge one)."""
    try:
        text = repr(value)
    except Exception:  # a repr that fails
        text = f"<{type(value).__name__}>"
    return text if len(text) <= limit else f"{text[:limit - 20]}... ({len(text):,} characters)"


class WrongType(TypeError, ValueError):
    """An argument of the wrong type (one line): a ``TypeError``, and a ``ValueError`` too, so
    that code which catches the ``ValueError`` of a bad value catches it as well."""


def _is_whole(value) -> bool:
    """An int or another integer type (NumPy's, a one-element integer tensor: what
    ``operator.index`` takes), not a bool (True is not the number 1 here)."""
    if isinstance(value, bool):
        return False
    try:
        operator.index(value)
    except TypeError:
        return False
    return True


def _whole_number(least: int) -> str:
    return "a positive integer" if least == 1 else f"a whole number >= {least}"


# -- sizes of work ------------------------------------------------------------------------------


def check_size(value, name: str, most: int, *, least: int = 1, why: str = "") -> int:
    """``value`` as an int if it is a whole number from ``least`` to ``most`` (a bool is not),
    else one line (``why`` is added when it is too large): :class:`WrongType` for another type,
    ``ValueError`` for a number out of bounds."""
    if not _is_whole(value):
        raise WrongType(f"{name} must be {_whole_number(least)}, got {brief(value)}.")
    if value < least:
        raise ValueError(f"{name} must be {_whole_number(least)}, got {brief(value)}.")
    if value > most:
        raise ValueError(f"{name}={brief(value)} is too large: at most {most:,}{why}.")
    return operator.index(value)


# -- options --------------------------------------------------------------------------------------


def check_whole(value, name: str, *, least: int = 1) -> int:
    """``value`` as an int if it is a whole number >= ``least`` (an int or NumPy's, not a bool,
    not 8.0): :class:`WrongType` for another type, ``ValueError`` for a smaller number."""
    if not _is_whole(value):
        raise WrongType(f"{name}={brief(value)} must be {_whole_number(least)} (an int), not a "
                        f"{type(value).__name__}.")
    if value < least:
        raise ValueError(f"{name}={brief(value)} must be {_whole_number(least)}.")
    return operator.index(value)


def check_bool(value, name: str) -> bool:
    """``value`` if it is True or False; :class:`WrongType` for anything else (the strings
    "False" and "no" are true in Python, 0 and 1 are ambiguous)."""
    if not isinstance(value, bool):
        raise WrongType(f"{name}={brief(value)} must be True or False (a bool), not a "
                        f"{type(value).__name__}.")
    return value


def check_fraction(value, name: str) -> float:
    """``value`` as a float if it is a number in [0, 1) (a dropout); :class:`WrongType` for
    another type (a bool is not a number here), ``ValueError`` for a number outside (NaN
    included)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise WrongType(f"{name}={brief(value)} must be a number in [0, 1), not a "
                        f"{type(value).__name__}.")
    if not 0.0 <= value < 1.0:
        raise ValueError(f"{name}={brief(value)} must be in [0, 1).")
    return float(value)


def check_choice(value, name: str, choices: tuple):
    """``value`` if it is one of ``choices``; ``ValueError`` naming them otherwise."""
    if not any(value is c or isinstance(value, str) and value == c for c in choices):
        raise ValueError(f"{name}={brief(value)} is not known; choose one of {choices}.")
    return value


def check_token_id(value, name: str, vocab_size: int | None = None) -> int:
    """``value`` as an int if it is an id of a vocabulary of ``vocab_size`` tokens
    (``0 <= value < vocab_size``; without a size, ``0 <= value``); :class:`WrongType` for
    another type, ``ValueError`` for another number."""
    if not _is_whole(value):
        raise WrongType(f"{name}={brief(value)} must be a token id (an int), not a "
                        f"{type(value).__name__}.")
    if vocab_size is None and value < 0:
        raise ValueError(f"{name}={value} is not a token id (an id is 0 or more).")
    if vocab_size is not None and not 0 <= value < vocab_size:
        raise ValueError(f"{name}={value} is not a token id below {vocab_size}.")
    return operator.index(value)


# -- the commands -------------------------------------------------------------------------------


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line (no usage block; a huge argument cut
    short), exit status 2."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: error: {cut(message)} (see --help)\n")


#: A whole number as a command line takes it: ASCII digits, an optional sign, spaces around
#: (not ``int()``'s "1_0" or a full-width "６", which a reader would not take for 10 and 6).
_WHOLE = re.compile(r"[ \t]*([+-]?)([0-9]+)[ \t]*")


def whole_number_arg(text: str) -> int:
    """argparse ``type``: a whole number >= 1 written in ASCII digits (0, negatives, fractions,
    underscores and other scripts' digits are refused; one of more digits than Python reads,
    4,300, is "too large", not "not a whole number")."""
    found = _WHOLE.fullmatch(text)
    if found is None:
        raise argparse.ArgumentTypeError(f"{brief(text)} is not a whole number (write it in "
                                         "the digits 0-9, e.g. 10)")
    sign, digits = found.groups()
    try:
        value = int(sign + digits)
    except ValueError:  # more digits than int() reads
        if sign == "-":
            raise argparse.ArgumentTypeError(f"must be at least 1, got a negative number of "
                                             f"{len(digits):,} digits") from None
        raise argparse.ArgumentTypeError(f"a number of {len(digits):,} digits is too large"
                                         ) from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {brief(value)}")
    return value


def dangling_link(path: str | os.PathLike) -> Path | None:
    """The first of ``path`` and the folders above it (as written, ``a/b/c``: ``a/b/c``,
    ``a/b``, ``a``) that is a symbolic link to nothing that exists, or None. A folder made
    there would be made at the link's target (or refused with a misleading "file exists"):
    a command that makes its output folder refuses such a path first."""
    path = Path(path)
    for p in (path, *path.parents):
        if p.is_symlink() and not p.exists():
            return p
    return None


def dangling_link_problem(path: str | os.PathLike, option: str, fix: str = "make that "
                          "folder first, or remove the link, or give another folder"
                          ) -> str | None:
    """One line refusing ``path`` given as ``option`` ("--out") if :func:`dangling_link`
    finds a link to nothing in it, saying ``fix``; else None."""
    link = dangling_link(path)
    if link is None:
        return None
    try:
        target = os.readlink(link)
    except OSError:  # removed meanwhile
        target = "?"
    where = "" if link == Path(path) else f" (in {shown(str(path))})"
    return (f"{option} {shown(str(link))}{where} is a symbolic link to "
            f"{shown(str(target))}, which does not exist: {fix}").lstrip()


def folder_arg(option: str):
    """argparse ``type`` for an output folder a command makes (``option``, "--out"): not an
    empty name, and not a path through a symbolic link to nothing (:func:`dangling_link`)."""

    def parse(text: str) -> Path:
        if not text.strip():
            raise argparse.ArgumentTypeError("expected a folder, not an empty name")
        problem = dangling_link_problem(text, option)
        if problem:
            raise argparse.ArgumentTypeError(problem.removeprefix(f"{option} "))
        return Path(text)

    return parse


def expanded(text: str) -> Path:
    """``Path(text)`` with a leading ``~`` or ``~user`` expanded, as a shell would; a ``~user``
    that names no user (the shell leaves it as it is) is one argparse line, not a traceback."""
    try:
        return Path(text).expanduser()
    except RuntimeError:  # "Could not determine home directory."
        raise argparse.ArgumentTypeError(
            f"{brief(text)}: {brief(text.split('/')[0], 30)} names no user's home folder on "
            "this machine; write the path without it") from None


def data_folder_arg(text: str) -> Path:
    """argparse ``type`` of ``--data-dir``: a folder that exists. A missing one is most often a
    typo, and offline the download into it would fail with a message about the network; to
    download into a new folder, make it first."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a folder, not an empty name")
    path = expanded(text)
    if not path.exists():
        raise argparse.ArgumentTypeError(
            f"{brief(text)} does not exist: give the folder that holds the Multi30k files, or "
            "make it first (mkdir) to have them downloaded into it")
    if not path.is_dir():
        raise argparse.ArgumentTypeError(f"{brief(text)} is a file, not a folder: give the "
                                         "folder that holds the Multi30k files")
    return path


def bounded_int_arg(limit: int):
    """argparse ``type``: a whole number from 1 to ``limit`` (:func:`check_size`'s bounds, what
    the package's functions check too)."""

    def parse(text: str) -> int:
        value = whole_number_arg(text)
        if value > limit:
            raise argparse.ArgumentTypeError(f"must be at most {limit:,}, got {brief(value)}")
        return value

    return parse


# -- messages -------------------------------------------------------------------------------------


def shown(text: str) -> str:
    """``text`` as any output stream can write it: the bytes of a name that is not UTF-8
    (which Python keeps as lone surrogates, "l\\udce4ufe") written as escapes ("l\\xe4ufe")."""
    try:
        return text.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate that stands for no byte
        return text.encode("utf-8", "backslashreplace").decode("utf-8")


_LONG_WORD = re.compile(r"\S{201,}")


def cut(message: str) -> str:
    """``message`` for one line of output: every run of more than 200 non-space characters (an
    argument pasted whole, a path of 100,000 characters) cut to its first 100 and its length,
    and any bytes that are not UTF-8 :func:`shown` as escapes."""
    return _LONG_WORD.sub(lambda m: f"{m.group()[:100]}... ({len(m.group()):,} characters)",
                          shown(message))
