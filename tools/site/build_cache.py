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


def _entry(key: dict) -> Path:
    text = json.dumps({**key, "code": code_digest()}, sort_keys=True, ensure_ascii=True)
    return folder() / _sha256(text.encode("utf-8"))


def _read(entry: Path) -> dict[str, bytes] | None:
    """The entry's files, or None where it is missing, incomplete or does not match its index."""
    try:
        index = json.loads((entry / INDEX).read_text(encoding="utf-8"))
        files = {name: (entry / name).read_bytes() for name in index["files"]}
    except (OSError, ValueError, KeyError, TypeError):
        return None
    if any(_sha256(data) != index["files"][name] for name, data in files.items()):
        return None
    return files


def _safe(name: str) -> bool:
    return bool(name) and name not in (".", "..", INDEX) and "/" not in name and "\0" not in name


def cached(kind: str, key: dict, make: Callable[[], dict[str, bytes]]) -> dict[str, bytes]:
    """``make()``'s files (``{name: bytes}``, plain file names), from the cache when an earlier
    build stored them under ``kind`` and ``key``, else made now and stored."""
    entry = _entry({"kind": kind, **key})
    found = _read(entry)
    if found is not None:
        return found
    files = make()
    bad = [name for name in files if not _safe(name)]
    if bad:
        raise ValueError(f"build_cache: {bad[0]!r} is not a plain file name")
    try:
        entry.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".tmp", dir=entry.parent))
    except OSError:
        return files  # a cache that cannot be written costs time, nothing else
    try:
        for name, data in files.items():
            (tmp / name).write_bytes(data)
        (tmp / INDEX).write_text(json.dumps({"kind": kind, "files": {
            name: _sha256(data) for name, data in files.items()}}, indent=1), encoding="utf-8")
        if entry.exists() and _read(entry) is None:  # a broken entry of ours: replaced
            old = Path(tempfile.mkdtemp(prefix=f".{entry.name}.", suffix=".old",
                                        dir=entry.parent))
            entry.rename(old / "entry")
            shutil.rmtree(old, ignore_errors=True)
        tmp.rename(entry)
    except OSError:
        pass  # another build stored the same entry first, or the disk is full: use ours
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return files
