"""What the site's build computes slowly, kept on disk from one build to the next.

Two parts of ``make site`` take most of its time and depend on few inputs: the shipped models'
ONNX export (``translator.py``, seconds per direction) and the flipbooks' frames rendered with
matplotlib (``flipbooks.py``). A test run builds the site several times, in several processes
(``make site``, the tests' ``built`` fixture in each test worker, the tests that build in a
child process); each of these builds finds what an earlier one made here.

An entry is found by a key: a JSON-able dict that names every input of what is stored (the
model's sha256, the notebook's JSON, the data file's bytes...) together with
:func:`code_digest` (every ``.py`` and ``.json`` file of the ``convs2s`` package and of
``tools/site``) and
the versions of the libraries that make it. Change any of them and the key changes, so nothing
is ever served stale; an entry whose files do not hash to what its index says is not used (it
is made again and replaced).

An entry is data, never trusted: whoever can write the cache's folder can rewrite an entry's
files and its index alike. So an entry is used only where its index records the very key it was
looked up by (an entry copied to another key's place is not), names only plain file names (no
file outside the entry is ever read), and passes the caller's own ``check`` of what it holds
(``flipbooks.py``: frame names that are plain file names, PNG frames, the page's data as JSON;
the page's script is made from that data by the build, never taken from the cache); any other
entry is made again and replaced.

Where: ``CONVS2S_SITE_CACHE``, else ``build/cache/site`` in the repository (ignored by git, as
``build/site`` is). Each entry is a folder named by the key's sha256 holding its files and
``index.json`` (the key, and each file's sha256); it is written in a temporary folder beside it
and renamed into place, so a build stopped midway leaves no half entry (and removes its
temporary folder). Nothing here deletes a file it did not write.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import json
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
INDEX = "index.json"
#: The libraries whose output is stored: a new version may export or draw other bytes.
LIBRARIES = ("torch", "onnx", "onnxscript", "matplotlib", "numpy", "pillow")
#: The largest index and cached file read back (the largest stored file, an ONNX graph's
#: weights, is some tens of MB).
MAX_INDEX_BYTES = 1 << 20
MAX_FILE_BYTES = 1 << 30


def folder() -> Path:
    """The cache's folder (not made until something is stored)."""
    chosen = os.environ.get("CONVS2S_SITE_CACHE")
    return Path(chosen) if chosen else ROOT / "build" / "cache" / "site"


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def code_digest() -> str:
    """sha256 over every ``.py`` and ``.json`` file of the imported ``convs2s`` package and of
    ``tools/site`` (their paths and bytes: the shipped models' manifest, which holds each
    model's sha256, among them), and the libraries' versions: part of every key."""
    import convs2s

    h = hashlib.sha256()
    for base in (Path(convs2s.__file__).resolve().parent, Path(__file__).resolve().parent):
        for path in sorted(p for p in base.rglob("*") if p.suffix in (".py", ".json")):
            h.update(path.relative_to(base).as_posix().encode("utf-8") + b"\0")
            h.update(_sha256(path.read_bytes()).encode("ascii"))
    for name in LIBRARIES:
        try:
            version = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            version = "-"
        h.update(f"{name}=={version}\0".encode())
    return h.hexdigest()


def _key_text(key: dict) -> str:
    """The key as one text: what names its entry, and what the entry's index records."""
    return json.dumps({**key, "code": code_digest()}, sort_keys=True, ensure_ascii=True)


def _read(entry: Path, key_text: str) -> dict[str, bytes] | None:
    """The entry's files, or None where it is missing, incomplete, stored under another key,
    names a file that is not a plain name in it, or does not match its index."""
    from convs2s.system.local_files import json_value, read_small

    try:  # regular files only, of bounded size: a link to /dev/zero is not read for ever
        index = json_value(read_small(entry / INDEX, MAX_INDEX_BYTES, "cache index"))
        listed = index["files"]
        if index.get("key") != key_text or not isinstance(listed, dict) or not all(
                plain_name(name) and isinstance(digest, str) for name, digest in listed.items()):
            return None
        files = {name: read_small(entry / name, MAX_FILE_BYTES, "cached file")
                 for name in listed}
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    if any(_sha256(data) != listed[name] for name, data in files.items()):
        return None
    return files


def plain_name(name) -> bool:
    """Whether ``name`` is a plain file name: a non-empty str with no folder in it (no ``/`` or
    ``\\``, not ``.`` or ``..``), no NUL and no other control character, not absolute, and
    not the cache's own index. What a name read from the cache must be before it is used."""
    return (isinstance(name, str) and bool(name) and name not in (".", "..", INDEX)
            and "/" not in name and "\\" not in name and name.isprintable()
            and Path(name).name == name and not Path(name).is_absolute())


def cached(kind: str, key: dict, make: Callable[[], dict[str, bytes]],
           check: Callable[[dict[str, bytes]], object] | None = None) -> dict[str, bytes]:
    """``make()``'s files (``{name: bytes}``, plain file names), from the cache when an earlier
    build stored them under ``kind`` and ``key``, else made now and stored.

    ``check(files)``, where given, says whether an entry holds what ``make`` makes: an entry it
    refuses (returns false, or raises ``ValueError``, ``KeyError`` or ``TypeError``) is not
    used but made again and replaced, as a damaged one is."""
    key_text = _key_text({"kind": kind, **key})
    entry = folder() / _sha256(key_text.encode("utf-8"))
    found = _read(entry, key_text)
    if found is not None and (check is None or _passes(check, found)):
        return found
    files = make()
    bad = [name for name in files if not plain_name(name)]
    if bad:
        raise ValueError(f"build_cache: {bad[0]!r} is not a plain file name")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".tmp", dir=entry.parent))
    except OSError:
        return files  # a cache that cannot be written costs time, nothing else
    old = None  # where a broken or refused entry is moved before it is removed
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        (tmp / INDEX).write_text(json.dumps({"kind": kind, "key": key_text, "files": {
            name: _sha256(data) for name, data in files.items()}}, indent=1), encoding="utf-8")
        if entry.is_symlink() or entry.exists() and not entry.is_dir():
            return files  # not a folder this cache made: left alone, and not used
        # Other builds may store or replace the same entry at any moment between these steps
        # (each step is one rename, so each finds a whole entry or none); whatever they do,
        # every folder made here is removed below and one whole entry is left in place.
        if entry.exists():
            current = _read(entry, key_text)
            if current is None or check is not None and not _passes(check, current):
                old = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".old",
                                            dir=entry.parent))
                entry.rename(old / "entry")  # broken or refused: replaced
        tmp.rename(entry)
    except OSError:
        pass  # another build stored the same entry first, or the disk is full: use ours
    finally:
        for made in (tmp, old):
            if made is not None and made.exists():
                shutil.rmtree(made, ignore_errors=True)
    return files


def _passes(check: Callable[[dict[str, bytes]], object], files: dict[str, bytes]) -> bool:
    """Whether ``check`` accepts an entry's files (a ``ValueError``, ``KeyError`` or
    ``TypeError`` it raises is a no)."""
    try:
        return bool(check(files))
    except (ValueError, KeyError, TypeError):
        return False
