"""A run folder whose name is not UTF-8 (bytes of another encoding, which Python keeps as lone
surrogates) trains, and its checkpoints read back: an intact file is never called corrupted,
and a read that fails for a reason other than the file's bytes says that reason."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
import torch
from test_every_direction import TINY, corpus  # noqa: F401 (the made-up corpus fixture)

from convs2s.data import Vocab
from convs2s.model import ConvS2S
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint, CheckpointError

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]
VOCAB = Vocab(SPECIALS + [f"w{i}" for i in range(8)], SPECIALS)


def _latin1_folder(parent: Path) -> Path:
    """``parent/läufe`` named in Latin-1 (the byte 0xe4), not UTF-8."""
    folder = Path(os.fsdecode(os.fsencode(parent) + b"/l\xe4ufe"))
    try:
        folder.mkdir()
    except (OSError, UnicodeError):  # a file system that takes UTF-8 names only
        pytest.skip("this file system refuses names that are not UTF-8")
    return folder


def _small_checkpoint(path: Path) -> Path:
    model = ConvS2S(len(VOCAB), len(VOCAB), emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1,
                    src_pad_idx=VOCAB.pad_idx, trg_pad_idx=VOCAB.pad_idx, max_positions=8)
    return Checkpoint.from_model(model, VOCAB, VOCAB).save(path)


def test_a_checkpoint_in_a_folder_named_in_another_encoding_reads_back(tmp_path):
    path = _small_checkpoint(_latin1_folder(tmp_path) / "best.pt")
    ckpt = Checkpoint.load(path)
    assert ckpt.model_config["max_positions"] == 8


def test_training_into_a_folder_named_in_another_encoding_succeeds(
        corpus, tmp_path, monkeypatch, capsys):  # noqa: F811
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(corpus))
    monkeypatch.setitem(train_mod.PRESETS, "tiny", TINY)
    out = _latin1_folder(tmp_path) / "run"
    code = train_mod.main(["--preset", "tiny", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert code == 0 and "corrupted" not in err, err
    for name in ("best.pt", "last.pt"):
        Checkpoint.load(out / name)


@pytest.mark.parametrize("failure", [OSError(errno.EIO, os.strerror(errno.EIO)), MemoryError()],
                         ids=["input/output error", "out of memory"])
def test_a_read_that_fails_for_another_reason_than_the_bytes_is_not_called_corrupted(
        tmp_path, monkeypatch, failure):
    path = _small_checkpoint(tmp_path / "best.pt")

    def failing_load(*args, **kwargs):
        raise failure

    monkeypatch.setattr(torch, "load", failing_load)
    with pytest.raises(CheckpointError) as e:
        Checkpoint.load(path)
    message = str(e.value)
    assert "corrupted" not in message and "delete" not in message, message
    assert message.startswith(f"{path} cannot be read: ") and "\n" not in message
