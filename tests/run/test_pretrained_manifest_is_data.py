"""The shipped models' manifest is read as data: a manifest that is not a regular file of a
manifest's size, JSON nested too deeply, or an entry that is not an object (a string, null, a
list) is one ``PretrainedError`` line, never a raw ValueError, TypeError or RecursionError."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys

import pytest

from convs2s.run.pretrained import PretrainedError, available, pretrained_path, record


def _manifest(tmp_path, text: str):
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    (models / "manifest.json").write_text(text, encoding="utf-8")
    return models


@pytest.mark.parametrize("entry", ["de-en.pt", None, ["de-en.pt"], 3],
                         ids=["a string", "null", "a list", "a number"])
def test_a_manifest_entry_that_is_not_an_object_is_one_pretrained_error(tmp_path, entry):
    models = _manifest(tmp_path, json.dumps({"models": {"de-en": entry}}))
    for call in (lambda: record("de-en", models), lambda: pretrained_path("de-en", models),
                 lambda: available(models)):
        with pytest.raises(PretrainedError, match="is not a manifest of models") as e:
            call()
        assert "\n" not in str(e.value)


def test_deeply_nested_json_is_one_pretrained_error(tmp_path):
    deep = '{"models": {"de-en": ' + "[" * 100_000 + "]" * 100_000 + "}}"
    models = _manifest(tmp_path, deep)
    with pytest.raises(PretrainedError, match="nested too deeply"):
        record("de-en", models)


@pytest.mark.parametrize("file", [["de-en.pt"], "../../../etc/passwd", ""],
                         ids=["a list", "a path out of the folder", "empty"])
def test_a_file_name_that_is_not_a_plain_name_is_one_pretrained_error(tmp_path, file):
    models = _manifest(tmp_path, json.dumps({"models": {"de-en": {"file": file}}}))
    with pytest.raises(PretrainedError, match="names no file"):
        pretrained_path("de-en", models)


_AVAILABLE = """
import sys
from convs2s.run.pretrained import PretrainedError, available
try:
    available(sys.argv[1])
except PretrainedError as e:
    print(e)
"""


def _bounded_memory() -> None:  # in the child: a read of /dev/zero fails at 2 GB, not at 22
    resource.setrlimit(resource.RLIMIT_AS, (2 << 30, 2 << 30))


@pytest.mark.parametrize("kind", ["/dev/zero", "fifo", "huge"])
def test_a_manifest_that_is_no_regular_file_or_too_large_is_refused_unread(tmp_path, kind):
    models = tmp_path / "models"
    models.mkdir()
    path = models / "manifest.json"
    if kind == "/dev/zero":
        path.symlink_to("/dev/zero")
    elif kind == "fifo":
        os.mkfifo(path)  # no writer: a plain read would wait forever
    else:
        with open(path, "wb") as f:
            f.truncate(64 << 20)  # sparse
    # in a child process, whose memory is bounded and which fails the test if it hangs
    proc = subprocess.Popen([sys.executable, "-c", _AVAILABLE, str(models)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=_bounded_memory)
    try:
        out, err = proc.communicate(timeout=120)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        pytest.fail("reading the manifest hangs")
    assert proc.returncode == 0 and err == "", err[-500:]
    assert out.count("\n") == 1 and "einstall" in out, out
    assert ("not a regular file" if kind != "huge" else "is over 1,048,576 bytes") in out, out
