"""The site's build cache (tools/site/build_cache.py): an entry is used only for the same key,
code and libraries, and only while its files are what it stored; a stopped store leaves nothing."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from tools.site import build_cache


@pytest.fixture(autouse=True)
def cache_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CONVS2S_SITE_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _maker(files, calls):
    def make():
        calls.append(1)
        return dict(files)
    return make


def test_a_second_build_with_the_same_key_makes_nothing_and_gets_the_same_bytes():
    calls = []
    files = {"a.bin": b"\x00\x01" * 100, "empty": b""}
    assert build_cache.cached("k", {"x": 1}, _maker(files, calls)) == files
    assert build_cache.cached("k", {"x": 1}, _maker(files, calls)) == files
    assert len(calls) == 1


def test_another_key_kind_or_code_makes_it_again(monkeypatch):
    calls = []
    build_cache.cached("k", {"x": 1}, _maker({"a": b"1"}, calls))
    assert build_cache.cached("k", {"x": 2}, _maker({"a": b"2"}, calls)) == {"a": b"2"}
    assert build_cache.cached("j", {"x": 1}, _maker({"a": b"3"}, calls)) == {"a": b"3"}
    monkeypatch.setattr(build_cache, "code_digest", lambda: "other code")
    assert build_cache.cached("k", {"x": 1}, _maker({"a": b"4"}, calls)) == {"a": b"4"}
    assert len(calls) == 4


def test_the_code_digest_follows_the_packages_files(tmp_path, monkeypatch):
    import convs2s

    before = build_cache.code_digest()
    assert before == build_cache.code_digest()
    fake = tmp_path / "pkg"
    fake.mkdir()
    (fake / "__init__.py").write_text("")
    monkeypatch.setattr(convs2s, "__file__", str(fake / "__init__.py"))
    assert build_cache.code_digest() != before


def test_an_entry_whose_file_changed_is_not_used_but_made_again_and_replaced(cache_dir):
    calls = []
    build_cache.cached("k", {"x": 1}, _maker({"a": b"right"}, calls))
    (entry,) = [p for p in cache_dir.iterdir()]
    (entry / "a").write_bytes(b"wrong")
    assert build_cache.cached("k", {"x": 1}, _maker({"a": b"right"}, calls)) == {"a": b"right"}
    assert (entry / "a").read_bytes() == b"right"
    assert len(calls) == 2
    assert [p.name for p in cache_dir.iterdir()] == [entry.name], "nothing else left behind"


def test_a_make_that_fails_stores_nothing(cache_dir):
    def make():
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        build_cache.cached("k", {"x": 1}, make)
    assert not cache_dir.exists() or list(cache_dir.iterdir()) == []


def test_a_store_stopped_midway_leaves_no_half_entry(cache_dir, monkeypatch):
    calls = []
    real = build_cache.Path.write_bytes

    def stopped(self, data):
        if self.name == "b":
            raise KeyboardInterrupt  # a signal between two files
        return real(self, data)

    with monkeypatch.context() as patched, pytest.raises(KeyboardInterrupt):
        patched.setattr(build_cache.Path, "write_bytes", stopped)
        build_cache.cached("k", {"x": 1}, _maker({"a": b"1", "b": b"2"}, calls))
    assert list(cache_dir.iterdir()) == []
    build_cache.cached("k", {"x": 1}, _maker({"a": b"1", "b": b"2"}, calls))
    assert len(calls) == 2


def test_builds_storing_the_same_entry_at_once_leave_one_whole_entry(cache_dir):
    barrier = threading.Barrier(8)
    results = []

    def make():
        barrier.wait(timeout=60)  # all have missed the cache before any stores
        return {"a": b"x" * 10_000, "b": b"y"}

    threads = [threading.Thread(target=lambda: results.append(
        build_cache.cached("k", {"x": 1}, make))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [{"a": b"x" * 10_000, "b": b"y"}] * 8
    (entry,) = list(cache_dir.iterdir())
    assert sorted(p.name for p in entry.iterdir()) == ["a", "b", build_cache.INDEX]


def test_a_broken_entry_another_build_moves_away_first_leaves_no_folder_behind(
        cache_dir, monkeypatch):
    # Two builds find the same broken entry and both replace it: the second's move fails
    # because the first has moved it already. (A CI run once found an empty ``.old`` folder
    # left beside the entry by this race, in the test below.)
    calls = []
    build_cache.cached("k", {"x": 1}, _maker({"a": b"right"}, calls))
    (entry,) = list(cache_dir.iterdir())
    (entry / "a").write_bytes(b"wrong")
    real = build_cache.Path.rename

    def moved_first(self, target):
        if self == entry and Path(target).parent.name.endswith(".old"):
            real(entry, cache_dir / "elsewhere")  # the other build's move, just before ours
            raise FileNotFoundError(str(entry))
        return real(self, target)

    with monkeypatch.context() as patched:
        patched.setattr(build_cache.Path, "rename", moved_first)
        assert build_cache.cached("k", {"x": 1}, _maker({"a": b"right"}, calls)) == {
            "a": b"right"}
    assert sorted(p.name for p in cache_dir.iterdir()) == ["elsewhere"], "nothing of ours left"


def test_builds_storing_and_replacing_the_same_entry_at_once_leave_one_whole_entry(cache_dir):
    # Many rounds of 8 builds at once, each round's entry first broken, so that some of each
    # round's builds replace it while others store or read it.
    calls = []
    build_cache.cached("k", {"x": 1}, _maker({"a": b"right"}, calls))
    (entry,) = list(cache_dir.iterdir())
    for _ in range(20):
        (entry / "a").write_bytes(b"wrong")
        barrier = threading.Barrier(8)
        results = []

        def make(barrier=barrier):
            barrier.wait(timeout=60)  # all have read the broken entry before any stores
            return {"a": b"right"}

        def build(results=results, make=make):
            results.append(build_cache.cached("k", {"x": 1}, make))

        threads = [threading.Thread(target=build) for _ in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert results == [{"a": b"right"}] * 8
        assert [p.name for p in cache_dir.iterdir()] == [entry.name], "one entry, nothing else"
        assert (entry / "a").read_bytes() == b"right"


@pytest.mark.parametrize("name", ["../up", "a/b", "", build_cache.INDEX, ".."])
def test_a_file_name_that_is_not_plain_is_refused(name):
    with pytest.raises(ValueError, match="plain file name"):
        build_cache.cached("k", {"x": 1}, lambda: {name: b"1"})
