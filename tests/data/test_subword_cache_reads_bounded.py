"""A cached subword model is read only if it is a regular file of a model's size: a cache file
replaced by a link to a larger file (a 6 GB sparse one was read whole: an uncaught MemoryError)
or by a FIFO is ignored with a warning and the model learned again, and what the link pointed to
is left as it was."""

from __future__ import annotations

import os

import pytest

from convs2s.data import subword
from convs2s.data.subword import SubwordSettings, train_subword

LINES = ["Ein Mann fährt mit dem Fahrrad.", "Zwei Hunde spielen im Schnee.",
         "Eine Frau liest ein Buch.", "Kinder laufen über die Wiese."]
SETTINGS = SubwordSettings(vocab_size=60)


def _cached(tmp_path):
    good = train_subword(LINES, SETTINGS, cache=tmp_path)
    (path,) = tmp_path.glob("*.model")
    return good, path


def test_a_cached_model_that_links_to_a_huge_file_is_not_read(tmp_path):
    good, path = _cached(tmp_path)
    huge = tmp_path / "elsewhere" / "huge"
    huge.parent.mkdir()
    size = subword.MAX_MODEL_BYTES + 1  # sparse (no disk), one byte more than a model may have
    with open(huge, "wb") as f:
        f.truncate(size)
    path.unlink()
    path.symlink_to(huge)
    with pytest.warns(UserWarning, match=r"unreadable cached subword model .* is over "
                                         rf"{subword.MAX_MODEL_BYTES:,} bytes"):
        again = train_subword(LINES, SETTINGS, cache=tmp_path)
    assert again.model == good.model
    assert huge.stat().st_size == size  # left as it was
    assert not path.is_symlink() and path.read_bytes() == good.model  # the cache is whole again


def test_a_cached_model_that_is_a_fifo_is_learned_again_without_waiting(tmp_path):
    good, path = _cached(tmp_path)
    path.unlink()
    os.mkfifo(path)  # no writer: reading it would wait forever
    again = train_subword(LINES, SETTINGS, cache=tmp_path)
    assert again.model == good.model and path.read_bytes() == good.model
