"""convs2s.system.local_files: a small file read whole is a regular file within its limit, and
its JSON within Python's depth; anything else is one line, read no further (``/dev/zero``, a
FIFO without a writer, a link to a huge sparse file)."""

from __future__ import annotations

import os

import pytest

from convs2s.system.local_files import FileRefused, json_value, read_small


def test_a_regular_file_within_its_limit_is_read_and_a_link_to_one_too(tmp_path):
    (tmp_path / "a.json").write_bytes(b'{"a": 1}')
    (tmp_path / "link.json").symlink_to(tmp_path / "a.json")
    assert read_small(tmp_path / "a.json", 8) == b'{"a": 1}'
    assert json_value(read_small(tmp_path / "link.json", 100)) == {"a": 1}


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "folder"])
def test_a_device_a_fifo_or_a_folder_is_refused_unread(tmp_path, kind):
    path = {"/dev/zero": "/dev/zero", "fifo": tmp_path / "pipe", "folder": tmp_path}[kind]
    if kind == "fifo":
        os.mkfifo(path)  # no writer: a plain open would wait for one forever
    with pytest.raises(FileRefused, match="is not a regular file") as e:
        read_small(path, 1 << 20, "notebook")
    assert "\n" not in str(e.value)


def test_a_file_over_the_limit_is_refused_before_it_is_read(tmp_path):
    sparse = tmp_path / "sparse"
    with open(sparse, "wb") as f:
        f.truncate(6 << 30)  # 6 GB that take no disk
    (tmp_path / "model").symlink_to(sparse)
    with pytest.raises(FileRefused, match=r"is over 1,024 bytes, more than a subword model"):
        read_small(tmp_path / "model", 1024, "subword model")


def test_json_nested_too_deeply_is_one_value_error():
    with pytest.raises(ValueError, match="nested too deeply"):
        json_value("[" * 100_000 + "]" * 100_000)
    with pytest.raises(ValueError):
        json_value(b"\xff not json")
