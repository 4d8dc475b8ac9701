"""Reading a small local file whole (a manifest, a cached model, a notebook), bounded.

A path may name anything: ``/dev/zero`` (endless), a FIFO (a read waits for a writer that never
comes), a symbolic link to a sparse file of gigabytes, JSON nested a million deep.
:func:`read_small` reads only a regular file, and only if it is at most ``limit`` bytes (checked
before reading, and again while reading, for a file that grows); :func:`json_value` parses JSON
whose depth Python's recursion limit bounds, and says so in words. Each refusal is one line
(:class:`FileRefused`, a ``ValueError``) naming the file and what is wrong. :func:`not_text`
names a compressed file or an archive given where text is expected, from its first bytes.
"""

from __future__ import annotations

import json
import os
import stat
from typing import Any

__all__ = ["FileRefused", "json_value", "not_text", "read_small"]


class FileRefused(ValueError):
    """A file that is not read: not a regular file, or larger than its limit (one line)."""


def read_small(path: str | os.PathLike, limit: int, what: str = "file") -> bytes:
    """The bytes of the regular file ``path`` (a symbolic link to one counts), at most
    ``limit`` of them; :class:`FileRefused` for anything else (a device, a FIFO, a folder, a
    larger file), ``OSError`` if it cannot be opened or read. ``what`` names the file in the
    message ("notebook")."""
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    fd = os.open(path, flags)  # non-blocking: opening a FIFO does not wait for a writer
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise FileRefused(f"{path} is not a regular file (a device, a pipe or a folder), so "
                              f"it is not read as a {what}: pass the path of the {what} itself.")
        too_big = FileRefused(f"{path} is over {limit:,} bytes, more than a {what} has, so it "
                              f"is not read: pass the path of the {what} itself.")
        if st.st_size > limit:
            raise too_big
        with os.fdopen(os.dup(fd), "rb") as f:
            data = f.read(limit + 1)
        if len(data) > limit:  # it grew while we read
            raise too_big
        return data
    finally:
        os.close(fd)


def json_value(text: str | bytes, what: str = "JSON") -> Any:
    """``json.loads(text)``; ``ValueError`` (one line) for text that is not JSON, or JSON nested
    deeper than Python parses (a ``RecursionError`` in words)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError(f"its {what} is nested too deeply to read") from None


#: How files that are not text begin: what each is, and the command that unpacks it to text
#: (None: an archive, which holds files rather than one text; a PyTorch checkpoint is a zip).
_MAGIC = ((b"\x1f\x8b", "gzip-compressed", "gunzip -c"),
          (b"\xfd7zXZ\x00", "xz-compressed", "xz -dc"),
          (b"\x28\xb5\x2f\xfd", "zstd-compressed", "zstd -dc"),
          (b"PK\x03\x04", "a zip archive (a PyTorch checkpoint is one)", None))


def not_text(start: bytes) -> tuple[str, str | None] | None:
    """``(what it is, the command that unpacks it)`` if a file beginning with ``start`` (its
    first six bytes or more) is compressed or an archive, not text; else None. Each of these
    signatures holds control characters no sentence begins with (a zip's ``PK`` is followed by
    bytes 3 and 4), so no line of text is taken for one."""
    for magic, kind, unpack in _MAGIC:
        if start.startswith(magic):
            return kind, unpack
    return None
