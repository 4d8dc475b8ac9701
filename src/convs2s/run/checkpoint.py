"""What a checkpoint is: :class:`Checkpoint` reads, builds and writes them.

A checkpoint is one ``torch.save`` file (``format`` ``convs2s-checkpoint``, ``version`` 1) of
tensors, numbers, strings, bytes, lists and dicts (nothing names a convs2s module, so moving one
never breaks a file):

- ``model_class`` (one of :data:`MODEL_CLASSES`; none means ConvS2S), ``model_config`` (its
  keyword arguments), ``model`` (the weights), ``src_vocab``/``trg_vocab`` and the text pipeline
  (``src_lang``, ``trg_lang``, ``tokenizer``: :class:`~convs2s.data.subword.TextPipeline`; none
  means German to English, word-level, lower-cased): what it takes to translate;
- a training run's ``preset``, ``data`` (a fingerprint of the pairs), ``run_id`` and
  ``train_state`` (optimizer, counters, random-number states, history), to resume exactly;
- a final model's ``choices`` (averaged epochs, length penalty: :mod:`~convs2s.run.final_choices`).

Every reader goes through :meth:`Checkpoint.load` and :mod:`convs2s.run.checkpoint_guard` (a file
may come from elsewhere). Files are written atomically (a temporary file, then a rename): an
interruption leaves the previous checkpoint intact, never a half-written one.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from convs2s.data import Vocab
from convs2s.data.subword import TextPipeline
from convs2s.model.convs2s import ConvS2S
from convs2s.model.rnn import RNNAttentionSeq2Seq
from convs2s.model.variants import VariantConvS2S
from convs2s.run import checkpoint_guard
from convs2s.run.checkpoint_guard import CheckpointError
from convs2s.system.atomic_files import atomic_write

__all__ = ["FORMAT", "MODEL_CLASSES", "VERSION", "Checkpoint", "CheckpointError",
           "copy_checkpoint", "load_checkpoint", "save_checkpoint", "vocab_to_dict"]

FORMAT = "convs2s-checkpoint"
VERSION = 1

#: The model classes a checkpoint may name in ``model_class`` (none named: ConvS2S).
MODEL_CLASSES: dict[str, type[nn.Module]] = {
    cls.__name__: cls for cls in (ConvS2S, RNNAttentionSeq2Seq, VariantConvS2S)
}

# The entries Checkpoint knows; any other is kept as it is (``extra``) and written back.
# ("tokenizers" was written beside "tokenizer" before; the guard checks that they agree.)
_KNOWN = {"format", "version", "model_class", "model_config", "model", "src_vocab",
          "trg_vocab", "src_lang", "trg_lang", "tokenizer", "tokenizers", "preset", "data",
          "run_id", "train_state", "choices"}


def vocab_to_dict(vocab: Vocab) -> dict:
    return {"itos": list(vocab.itos), "specials": list(vocab.specials)}


@dataclass
class Checkpoint:
    """A checkpoint's contents, checked (:meth:`load`, :meth:`from_dict`), or to save (the
    constructor, :meth:`from_model`): build the model, translate, resume."""

    model_config: dict
    state_dict: dict[str, torch.Tensor]
    src_vocab: Vocab
    trg_vocab: Vocab
    pipeline: TextPipeline
    model_class: str = "ConvS2S"
    preset: dict | None = None
    data: dict | None = None  # {"train": {"pairs": n, "sha256": h}, "valid": {...}}
    run_id: str | None = None
    train_state: dict | None = None
    choices: dict | None = None  # final.pt: averaged epochs and length penalty
    extra: dict = field(default_factory=dict)
    path: Path | None = None

    @classmethod
    def load(cls, path: str | os.PathLike,
             map_location: str | torch.device | None = "cpu") -> Checkpoint:
        """Read and check the checkpoint file ``path`` (else :class:`CheckpointError`, one line
        naming the file and what is wrong). Its tensors are checked through a mapping of the
        file, then copied to ``map_location``: changing them never changes the file, and
        overwriting the file never changes them."""
        _check_path(path)
        ckpt = cls.from_dict(checkpoint_guard.read(path, FORMAT, VERSION), path=path)
        device = torch.device(map_location if map_location is not None else "cpu")
        moved: dict[tuple[int, int], torch.UntypedStorage] = {}
        return replace(ckpt, **{
            name: checkpoint_guard.copied(getattr(ckpt, name), device, moved)
            for name in ("state_dict", "train_state", "choices", "preset", "data", "extra")})

    @classmethod
    def from_dict(cls, data: dict, path: str | os.PathLike | None = None) -> Checkpoint:
        """A checkpoint's raw dictionary, checked (:func:`convs2s.run.checkpoint_guard.
        check_dict`)."""
        where = Path(path) if path is not None else None
        try:
            parts = checkpoint_guard.check_dict(data, MODEL_CLASSES)
        except ValueError as e:
            raise checkpoint_guard.unusable(where, e) from e
        return cls(**parts, extra={k: v for k, v in data.items() if k not in _KNOWN},
                   path=where)

    @classmethod
    def from_model(cls, model: nn.Module, src_vocab: Vocab, trg_vocab: Vocab,
                   pipeline: TextPipeline | None = None, **fields) -> Checkpoint:
        """A checkpoint of ``model`` (a class of :data:`MODEL_CLASSES`), ready to save;
        ``pipeline`` defaults to German to English, word-level."""
        name = type(model).__name__
        if name not in MODEL_CLASSES:
            raise ValueError(f"a checkpoint holds one of {sorted(MODEL_CLASSES)}, not a {name}.")
        return cls(model_config=dict(model.config), state_dict=model.state_dict(),
                   src_vocab=src_vocab, trg_vocab=trg_vocab,
                   pipeline=pipeline if pipeline is not None else TextPipeline.word(),
                   model_class=name, **fields)

    @property
    def history(self) -> list[dict]:
        """The training run's per-epoch rows (none without a train state)."""
        return list((self.train_state or {}).get("history", []))

    @property
    def length_penalty(self) -> float:
        """The beam length penalty chosen on validation (final.pt), else fairseq's 1.0."""
        return float((self.choices or {}).get("length_penalty", 1.0))

    @property
    def step(self) -> int | None:
        return (self.train_state or {}).get("step")

    @property
    def epoch(self) -> int | None:
        return (self.train_state or {}).get("epoch")

    def build_model(self, device: Any = "cpu") -> nn.Module:
        """The model, its weights loaded, in eval mode, on ``device``."""
        model = MODEL_CLASSES[self.model_class](**self.model_config)
        model.load_state_dict(self.state_dict)
        return model.to(device).eval()

    def resumable(self) -> dict:
        """The train state (``CheckpointError`` if this checkpoint has none to resume from)."""
        state = self.train_state
        if not state or not all(k in state for k in ("optimizer", "rng", "step", "history")):
            raise CheckpointError(f"{self.path or 'the checkpoint'} holds no complete training "
                                  "state, so it cannot be resumed. Start a new --out folder.")
        return state

    def to_dict(self) -> dict:
        """What :meth:`save` writes (and :meth:`from_dict` reads back)."""
        out: dict[str, Any] = {"model_class": self.model_class,
                               "model_config": dict(self.model_config),
                               "model": self.state_dict,
                               "src_vocab": vocab_to_dict(self.src_vocab),
                               "trg_vocab": vocab_to_dict(self.trg_vocab),
                               **self.pipeline.record()}
        out.update({key: getattr(self, key) for key in ("preset", "data", "run_id",
                                                        "train_state", "choices")
                    if getattr(self, key) is not None})
        return {**out, **self.extra}

    def save(self, path: str | os.PathLike) -> Path:
        """Write this checkpoint to ``path`` atomically (temp file, then rename)."""
        return save_checkpoint(path, self.to_dict())


def _check_path(path) -> None:
    """``TypeError`` (one line) for what is not a file's path: None (a run whose preset writes
    no final.pt has ``final_path`` None), a train() result, a model."""
    if path is None:
        raise TypeError("no checkpoint path (None): a preset that writes no final.pt (quick, "
                        "cpu, gpu) leaves train()'s result.final_path None; pass "
                        "result.best_path, or a checkpoint file's path.")
    if not isinstance(path, str | os.PathLike):
        hint = (": pass its .final_path or .best_path" if hasattr(path, "best_path") else "")
        raise TypeError(f"a checkpoint file's path (str or Path) is needed, not "
                        f"{type(path).__name__}{hint}.")


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """A checkpoint's entries as a dictionary, checked by :meth:`Checkpoint.load`."""
    return Checkpoint.load(path, map_location).to_dict()


def save_checkpoint(path: str | os.PathLike, payload: dict[str, Any]) -> Path:
    """Write ``payload`` (plus format tags) to ``path`` atomically (temp file, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(path, lambda f: _torch_save({"format": FORMAT, "version": VERSION,
                                                     **payload}, f))


def _torch_save(data: dict, f) -> None:
    """``torch.save``, except that a failed write (a full disk) raises its OSError (ENOSPC),
    not the RuntimeError ("unexpected pos") torch raises on top of it."""
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
