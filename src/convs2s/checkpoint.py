"""Checkpoints that survive interruptions and can translate on their own.

A checkpoint is one ``torch.save`` file holding:

- ``model_config`` (the keyword arguments of :class:`convs2s.ConvS2S`) and ``model`` (weights),
- both vocabularies (``src_vocab``/``trg_vocab``: token lists and specials) and the tokenizer
  settings, so :meth:`convs2s.Translator.from_checkpoint` needs nothing else,
- ``preset`` (the training settings) and ``train_state`` (optimizer, step, epoch, position in the
  epoch, random-number states, history), so ``--resume`` continues exactly where it stopped.

Files are written with :func:`convs2s.fileio.atomic_write` (a temporary file in the same folder,
then a rename), so an interruption while saving leaves the previous checkpoint intact, never a
half-written one; a new file gets the mode the user's umask gives (not ``mkstemp``'s 0600).
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from convs2s.data import Vocab
from convs2s.fileio import atomic_write

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
    return atomic_write(path, lambda f: _torch_save(data, f))


def _torch_save(data: dict, f) -> None:
    """``torch.save``, except that a failed write (a full disk) raises its OSError (ENOSPC),
    not the RuntimeError ("unexpected pos", "iostream error") torch raises on top of it."""
    try:
        torch.save(data, f)
    except RuntimeError as e:
        cause = e.__context__
        while cause is not None and not isinstance(cause, OSError):
            cause = cause.__context__
        if cause is None:
            raise
        raise cause from e


def copy_checkpoint(source: str | os.PathLike, target: str | os.PathLike) -> Path:
    """Copy the checkpoint file ``source`` to ``target`` atomically (byte for byte)."""
    with open(source, "rb") as src:
        return atomic_write(target, lambda f: shutil.copyfileobj(src, f))


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


# ConvS2S arguments that older checkpoints do not record, with the value they were trained with
MODEL_OPTIONS_ADDED_LATER = {"share_input_output_embed": False}


def check_compatible(data: dict, model_config: dict, src_vocab: Vocab, trg_vocab: Vocab,
                     path: str | os.PathLike = "checkpoint") -> None:
    """Raise :class:`CheckpointError` unless the checkpoint fits this model config and vocabs.

    Options added to the model later count as their default in checkpoints made before them."""
    recorded = {**MODEL_OPTIONS_ADDED_LATER, **data["model_config"]}
    diffs = [
        f"{k}: checkpoint {recorded.get(k)!r}, now {v!r}"
        for k, v in model_config.items()
        if recorded.get(k) != v
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


def check_same_run(data: dict, settings: dict, path: str | os.PathLike = "checkpoint", *,
                   ignore: tuple[str, ...] = ()) -> None:
    """Raise :class:`CheckpointError` unless the checkpoint was trained with ``settings``.

    ``settings`` maps the names recorded in the checkpoint's ``preset`` (plus ``data``, the
    fingerprint of the pairs it trained on) to the values requested now. Names in ``ignore``, and
    names the checkpoint did not record (an older format), are not compared.
    """
    recorded = dict(data.get("preset") or {})
    if data.get("data") is not None:
        recorded["data"] = data["data"]
    diffs = [
        f"{k}: checkpoint {_show(k, recorded[k])}, now {_show(k, v)}"
        for k, v in settings.items()
        if k not in ignore and k in recorded and recorded[k] != v
    ]
    if diffs:
        raise CheckpointError(
            f"{path} was trained with other settings or data (" + "; ".join(diffs) + "). "
            "Resume with the preset and data it was trained with, or start a new --out folder."
        )


def _show(name: str, value: Any) -> str:
    if name == "data" and isinstance(value, dict):  # {"train": {"pairs": n, "sha256": h}, ...}
        return ", ".join(f"{split} {v['pairs']} pairs (sha256 {v['sha256'][:12]})"
                         for split, v in value.items())
    return repr(value)
