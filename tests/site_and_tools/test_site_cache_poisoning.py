"""A site-cache entry is data the build checks, never a path or code it obeys (issue 64, item 1).

Whoever can write the cache's folder can rewrite an entry's files *and* its ``index.json`` so
that they agree with each other. Such an entry must never make the build write outside the
site (a frame named ``/abs/path``, ``../up``, ``a/b``) or stage code into a page (a cached
script with ``alert(...)``): names read from the cache must be plain file names, the page's
script is made from data, never taken from the cache, and an entry that does not hold what its
key says (another key's entry, an index naming files outside its entry, frames that are not
PNGs) is made again and replaced, not used.
"""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from convs2s.course import widgets as declarations
from tools.site import build_cache, flipbooks

WIDGET = "attention-by-epoch"
NOTEBOOK = flipbooks.NOTEBOOKS[WIDGET]
PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 32  # what a frame starts with, and some bytes


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVS2S_SITE_CACHE", str(tmp_path / "cache"))
    flipbooks._made.cache_clear()
    yield tmp_path / "cache"
    flipbooks._made.cache_clear()


@pytest.fixture
def renders(monkeypatch):
    """Notebook 05's flipbook made in no time: one frame, the notebook's control as declared;
    the list counts how many times the frames were rendered (a cache miss)."""
    calls = []

    def epoch_frames(data):
        calls.append(1)
        return [flipbooks.Frame(1, "05_epoch_01.png", "alt", "epoch 1", PNG)]

    control = declarations.declared(WIDGET).controls[0].given(value=1, min=1, max=1, step=1)
    monkeypatch.setattr(flipbooks, "epoch_frames", epoch_frames)
    monkeypatch.setattr(flipbooks, "saved_controls", lambda nb, widget: {"epoch": control})
    return calls


def _stage(out: Path) -> dict:
    flipbooks._made.cache_clear()  # a new build process: only the disk cache is shared
    return flipbooks.stage(out, {NOTEBOOK: {"cells": []}})


def _entry(cache_dir: Path) -> Path:
    (entry,) = [p for p in cache_dir.iterdir() if not p.name.startswith(".")]
    return entry


def _poison(entry: Path, name: str, data: bytes) -> None:
    """Write ``data`` as the entry's file ``name`` and make its index agree with it: what
    anyone who can write the cache can do."""
    index = json.loads((entry / build_cache.INDEX).read_text(encoding="utf-8"))
    (entry / name).write_bytes(data)
    index["files"][name] = hashlib.sha256(data).hexdigest()
    (entry / build_cache.INDEX).write_text(json.dumps(index), encoding="utf-8")


@pytest.mark.parametrize("bad", ["{outside}", "../escaped.png", "sub/dir.png", "",
                                 "nul\0.png", "..", "back\\slash.png"],
                         ids=["absolute", "dot-dot", "separator", "empty", "NUL", "..",
                              "backslash"])
def test_a_cached_frame_name_that_is_not_a_plain_file_name_writes_nothing_outside_the_site(
        cache_dir, tmp_path, renders, bad):
    out = tmp_path / "site"
    _stage(out)
    outside = tmp_path / "outside.png"
    frames = json.loads((_entry(cache_dir) / "frames.json").read_text(encoding="utf-8"))
    frames[0]["file"] = bad.format(outside=outside)
    _poison(_entry(cache_dir), "frames.json", json.dumps(frames).encode("utf-8"))
    shutil.rmtree(out)
    _stage(out)
    assert not outside.exists() and not (tmp_path / "escaped.png").exists()
    assert sorted(p.name for p in out.iterdir()) == ["05_epoch_01.png", f"{WIDGET}.js"]
    assert len(renders) == 2, "the poisoned entry was used, not made again"
    assert json.loads((_entry(cache_dir) / "frames.json").read_text())[0]["file"] == \
        "05_epoch_01.png", "the poisoned entry was not replaced"


def test_a_cached_script_is_never_staged_into_the_page(cache_dir, tmp_path, renders):
    out = tmp_path / "site"
    _stage(out)
    made = (out / f"{WIDGET}.js").read_bytes()
    entry = _entry(cache_dir)
    index = json.loads((entry / build_cache.INDEX).read_text(encoding="utf-8"))
    for name in index["files"]:  # whatever holds the page's script or its data
        if not name.endswith(".png") and name != "frames.json":
            _poison(entry, name, b"alert(document.cookie);\n")
    _stage(out)
    staged = (out / f"{WIDGET}.js").read_bytes()
    assert b"alert(" not in staged and staged == made
    # the page's script is one assignment of JSON data, made by the build
    first, second = staged.decode("utf-8").splitlines()
    assert first == "window.convs2sFlipbooks = window.convs2sFlipbooks || {};"
    head = f"window.convs2sFlipbooks[{json.dumps(WIDGET)}] = "
    assert second.startswith(head) and second.endswith(";")
    assert json.loads(second[len(head):-1])["frames"][0]["text"] == "epoch 1"


def test_a_cached_frame_that_is_not_a_png_is_made_again(cache_dir, tmp_path, renders):
    out = tmp_path / "site"
    _stage(out)
    _poison(_entry(cache_dir), "frame-0.png", b"<svg onload=alert(1)>")
    _stage(out)
    assert (out / "05_epoch_01.png").read_bytes() == PNG and len(renders) == 2


def test_a_cache_index_naming_a_file_outside_its_entry_is_not_read(cache_dir, tmp_path):
    calls = []

    def make():
        calls.append(1)
        return {"a": b"right"}

    build_cache.cached("k", {"x": 1}, make)
    secret = tmp_path / "secret"
    secret.write_bytes(b"outside the cache")
    entry = _entry(cache_dir)
    index = json.loads((entry / build_cache.INDEX).read_text(encoding="utf-8"))
    index["files"] = {f"../../{secret.name}": hashlib.sha256(secret.read_bytes()).hexdigest()}
    (entry / build_cache.INDEX).write_text(json.dumps(index), encoding="utf-8")
    assert build_cache.cached("k", {"x": 1}, make) == {"a": b"right"} and len(calls) == 2


def test_an_entry_stored_under_another_key_is_made_again_not_used(cache_dir):
    build_cache.cached("k", {"x": 1}, lambda: {"a": b"for x=1"})
    calls = []

    def make():
        calls.append(1)
        return {"a": b"for x=2"}

    build_cache.cached("k", {"x": 2}, make)
    one, two = sorted(cache_dir.iterdir(), key=lambda p: (p / "a").read_bytes())
    shutil.rmtree(two)
    shutil.copytree(one, two)  # x=1's entry, whole and self-consistent, at x=2's place
    assert build_cache.cached("k", {"x": 2}, make) == {"a": b"for x=2"} and len(calls) == 2
    assert (two / "a").read_bytes() == b"for x=2"
