"""The bounds of every size a caller chooses, in one place, and arguments cut short in messages.

The commands' argument types (``--beam-size``, ``--batch-size``, ``--vocab-size``) and the
package's functions (``Translator.translate(beam_size=...)``, ``beam_search``, ``read_lines``,
``SubwordSettings``) check a size with the same :func:`check_size` and the same bounds, so that
no call asks for unbounded work: ``beam_size=10**6`` is refused in one line instead of growing
until the kernel kills the process.
"""

from __future__ import annotations

import numbers
import re

__all__ = ["MAX_BATCH_SIZE", "MAX_BEAM_SIZE", "MAX_LINE_BYTES", "MAX_VOCAB_SIZE", "brief",
           "check_size", "cut", "shown"]

#: The largest beam (beam search keeps this many hypotheses per sentence and step).
MAX_BEAM_SIZE = 1000
#: The most sentences translated together (held in memory together).
MAX_BATCH_SIZE = 10_000
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


def check_size(value, name: str, most: int, *, least: int = 1, why: str = "") -> int:
    """``value`` as an int if it is a whole number from ``least`` to ``most`` (a bool is not),
    else ``ValueError`` (one line; ``why`` is added when it is too large)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < least:
        wanted = "a positive integer" if least == 1 else f"a whole number >= {least}"
        raise ValueError(f"{name} must be {wanted}, got {brief(value)}.")
    if value > most:
        raise ValueError(f"{name}={brief(value)} is too large: at most {most:,}{why}.")
    return int(value)


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
