"""Checkpoints that survive interruptions and can translate on their own.

A checkpoint is one ``torch.save`` file holding:

- ``model_config`` (the keyword arguments of :class:`convs2s.ConvS2S`) and ``model`` (weights),
- both vocabularies (``src_vocab``/``trg_vocab``: token lists and specials) and the tokenizer
  settings, so :meth:`convs2s.Translator.from_checkpoint` needs nothing else,
- ``preset`` (the training settings) and ``train_state`` (optimizer, step, epoch, position in the
  epoch, random-number states, history), so ``--resume`` continues exactly where it stopped.

Files are written to a temporary file in the same folder and renamed, so an interruption while
saving leaves the previous checkpoint intact, never a half-written one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import torch

from convs2s.data import Vocab

FORMAT = "convs2s-checkpoint"
VERSION = 1


class CheckpointError(RuntimeError):
    """A checkpoint is unreadable, or does not fit the model or data it is loaded into."""


def vocab_to_dict(vocab: Vocab) -> dict:
    return {"itos": list(vocab.itos), "specials": list(vocab.specials)}


def vocab_from_dict(d: dict) -> Vocab:
    return Vocab(d["itos"], d["specials"])


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus format tags) to ``path`` atomically (temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = {"format": FORMAT, "version": VERSION, **payload}
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(fd)
    try:
        torch.save(data, tmp)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_checkpoint(path: str | os.PathLike, map_location="cpu") -> dict[str, Any]:
    """Read a checkpoint, with a clear :class:`CheckpointError` for anything that is not one."""
    path = Path(path)
    if not path.is_file():
        raise CheckpointError(
            f"No checkpoint at {path}. Train one first (python -m convs2s.train --preset quick "
            f"--out {path.parent}) or pass the path of an existing best.pt / last.pt."
        )
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except Exception as e:  # truncated zip, wrong file type, pickle refused, ...
        raise CheckpointError(
            f"{path} is not a readable convs2s checkpoint ({type(e).__name__}: {e}). It may be "
            "truncated or corrupted: delete it and train again, or use the other checkpoint "
            "(best.pt / last.pt) in the same folder."
        ) from e
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise CheckpointError(f"{path} is a torch file but not a convs2s checkpoint.")
    if data.get("version") != VERSION:
        raise CheckpointError(
            f"{path} is checkpoint format version {data.get('version')}; this convs2s reads "
            f"version {VERSION}."
        )
    missing = {"model_config", "model", "src_vocab", "trg_vocab"} - set(data)
    if missing:
        raise CheckpointError(f"{path} lacks {sorted(missing)}; it is incomplete.")
    return data


def check_compatible(data: dict, model_config: dict, src_vocab: Vocab, trg_vocab: Vocab,
                     path: str | os.PathLike = "checkpoint") -> None:
    """Raise :class:`CheckpointError` unless the checkpoint fits this model config and vocabs."""
    diffs = [
        f"{k}: checkpoint {data['model_config'].get(k)!r}, now {v!r}"
        for k, v in model_config.items()
        if data["model_config"].get(k) != v
    ]
    if diffs:
        raise CheckpointError(
            f"{path} was trained with a different model configuration ("
            + "; ".join(diffs)
            + "). Resume with the preset it was trained with, or start a new --out folder."
        )
    for side, vocab in (("src_vocab", src_vocab), ("trg_vocab", trg_vocab)):
        if data[side]["itos"] != list(vocab.itos):
            raise CheckpointError(
                f"{path} was trained with a different {side} ({len(data[side]['itos'])} tokens; "
                f"the data now gives {len(vocab)}). Resume on the same data and preset, or start "
                "a new --out folder."
            )
