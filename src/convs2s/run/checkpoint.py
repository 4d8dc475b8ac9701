"""One place that knows a checkpoint: :class:`Checkpoint` reads, validates and writes them.

A checkpoint is one ``torch.save`` file holding:

- ``model_class`` (one of :data:`MODEL_CLASSES`; none means ConvS2S), ``model_config`` (its
  keyword arguments) and ``model`` (the weights),
- both vocabularies (``src_vocab``/``trg_vocab``: token lists and specials) and the text
  pipeline (``src_lang``, ``trg_lang``, ``tokenizer``: :class:`convs2s.data.subword.TextPipeline`),
  so that a checkpoint translates on its own,
- for a training run: ``preset`` (the settings), ``data`` (a fingerprint of the pairs),
  ``run_id`` (which run wrote it) and ``train_state`` (optimizer, step, epoch, position in the
  epoch, random-number states, history), so ``--resume`` continues exactly where it stopped.

Every reader goes through :meth:`Checkpoint.load`: translate, evaluate, resume, the baselines,
the benchmarks and the notebooks. It loads with ``weights_only=True`` (a checkpoint is data; a
pickle that could run code is refused) and checks once that the parts belong together: the
vocabularies are well formed and of the sizes the model was built for, the weights are finite
and have the shapes the configuration gives (checked on PyTorch's ``meta`` device, so a
malformed configuration allocates nothing), and a subword pipeline's pieces are the
vocabularies. Anything wrong is one :class:`CheckpointError` line naming the file and the fix.

Files are written with :func:`convs2s.system.atomic_files.atomic_write` (a temporary file in the same folder,
then a rename), so an interruption while saving leaves the previous checkpoint intact, never a
half-written one; a new file gets the mode the user's umask gives (not ``mkstemp``'s 0600).
"""

from __future__ import annotations

import os
import pickle
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from convs2s.data import Vocab
from convs2s.data.subword import TextPipeline
from convs2s.model.convs2s import ConvS2S
from convs2s.model.rnn import RNNAttentionSeq2Seq
from convs2s.model.variants import VariantConvS2S
from convs2s.system.atomic_files import atomic_write

FORMAT = "convs2s-checkpoint"
VERSION = 1

#: The model classes a checkpoint may name in ``model_class`` (none named: ConvS2S).
MODEL_CLASSES: dict[str, type[nn.Module]] = {
    cls.__name__: cls for cls in (ConvS2S, RNNAttentionSeq2Seq, VariantConvS2S)
}

# ConvS2S arguments that older checkpoints do not record, with the value they were trained with
MODEL_OPTIONS_ADDED_LATER = {"share_input_output_embed": False}

# The entries Checkpoint knows; any other entry is kept as it is (``extra``) and written back.
_KNOWN = {"format", "version", "model_class", "model_config", "model", "src_vocab",
          "trg_vocab", "src_lang", "trg_lang", "tokenizer", "tokenizers", "preset", "data",
          "run_id", "train_state", "choices"}


class CheckpointError(RuntimeError):
    """A checkpoint is unreadable, or does not fit the model or data it is loaded into."""


# --------------------------------------------------------------------------------------------
# The parts
# --------------------------------------------------------------------------------------------


def vocab_to_dict(vocab: Vocab) -> dict:
    return {"itos": list(vocab.itos), "specials": list(vocab.specials)}


def vocab_from_dict(part: Any, side: str = "vocab") -> Vocab:
    """The :class:`Vocab` a checkpoint stores as ``{"itos": [...], "specials": [...]}``.

    Anything else raises ``ValueError`` saying what is wrong (never a ``KeyError``).
    """
    if not isinstance(part, dict):
        raise ValueError(f"its {side} is a {type(part).__name__}, not a vocabulary "
                         "({'itos': [...], 'specials': [...]}).")
    for key in ("itos", "specials"):
        value = part.get(key)
        if not isinstance(value, (list, tuple)) or not all(isinstance(t, str) for t in value):
            raise ValueError(f"its {side} has no list of token strings under {key!r}.")
    try:
        return Vocab(part["itos"], part["specials"])
    except ValueError as e:
        raise ValueError(f"its {side} is malformed: {e}") from e


def check_parts(model_config: dict, weights: dict, src_vocab: Vocab, trg_vocab: Vocab) -> None:
    """Raise ``ValueError`` unless a model config, its weights and two vocabularies fit.

    Checks that the vocabulary sizes and padding ids are those the model was built with, and
    that every weight is finite (a diverged training run saves NaN weights, which translate
    into nonsense such as "On on on on ...").
    """
    for side, vocab in (("src", src_vocab), ("trg", trg_vocab)):
        size, pad = model_config.get(f"{side}_vocab_size"), model_config.get(f"{side}_pad_idx")
        if size != len(vocab):
            raise ValueError(
                f"the model was built for a {side}_vocab of {size} tokens, but its {side}_vocab "
                f"has {len(vocab)}: the parts do not belong together."
            )
        if pad is not None and pad != vocab.pad_idx:
            raise ValueError(f"the model pads the {side} with id {pad}, but its {side}_vocab "
                             f"pads with id {vocab.pad_idx}.")
    not_tensors = [k for k, v in weights.items() if not isinstance(v, torch.Tensor)]
    if not_tensors:
        raise ValueError(f"its weights {not_tensors[:3]} are not tensors.")
    bad = [k for k, v in weights.items()
           if v.is_floating_point() and not bool(torch.isfinite(v).all())]
    if bad:
        shown = ", ".join(bad[:3]) + (f" and {len(bad) - 3} more" if len(bad) > 3 else "")
        raise ValueError(
            f"{len(bad)} of its weight tensors hold NaN or infinite values ({shown}): training "
            "diverged. Use an earlier checkpoint, or train again with a lower learning rate."
        )


def check_pipeline(pipeline: TextPipeline, src_vocab: Vocab, trg_vocab: Vocab) -> None:
    """``ValueError`` unless a subword pipeline's models give exactly these vocabularies."""
    if pipeline.kind != "subword":
        return
    for side, vocab, tok in (("src", src_vocab, pipeline.src_tokenizer),
                             ("trg", trg_vocab, pipeline.trg_tokenizer)):
        if list(vocab.itos) != list(tok.pieces):
            raise ValueError(f"its {side}_vocab ({len(vocab)} tokens) is not the pieces of its "
                             f"{side} subword model ({len(tok.pieces)}): the parts do not belong "
                             "together.")


def model_class(name: Any) -> type[nn.Module]:
    """The class a checkpoint's ``model_class`` names; ``ValueError`` for any other name."""
    if not isinstance(name, str) or name not in MODEL_CLASSES:
        raise ValueError(f"its model_class {name!r} is not one of {sorted(MODEL_CLASSES)}.")
    return MODEL_CLASSES[name]


def check_shapes(cls: type[nn.Module], model_config: dict, weights: dict) -> None:
    """``ValueError`` unless ``cls(**model_config)`` has exactly these weights' names and shapes.

    The model is built on PyTorch's ``meta`` device, which allocates no memory: a configuration
    that asks for a huge model is refused before anything is allocated.
    """
    try:
        with torch.device("meta"):
            shell = cls(**model_config)
    except (TypeError, ValueError) as e:
        raise ValueError(f"its model_config does not fit the model: {e}") from e
    expected = {k: tuple(v.shape) for k, v in shell.state_dict().items()}
    got = {k: tuple(v.shape) for k, v in weights.items()}
    problems = [f"missing {k}" for k in expected if k not in got]
    problems += [f"unexpected {k}" for k in got if k not in expected]
    problems += [f"{k} is {list(got[k])}, the config gives {list(shape)}"
                 for k, shape in expected.items() if k in got and got[k] != shape]
    if problems:
        more = f" and {len(problems) - 3} more" if len(problems) > 3 else ""
        raise ValueError("its weights do not fit its model_config: "
                         + "; ".join(problems[:3]) + more + ".")


# --------------------------------------------------------------------------------------------
# The one type
# --------------------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    """A checkpoint's contents, validated: build the model, translate, resume, save.

    Read one with :meth:`load` (a file) or :meth:`from_dict`; make one for saving with the
    constructor (:meth:`from_model` for a trained model and its vocabularies).
    """

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
    choices: dict | None = None  # final.pt: averaged epochs and length penalty (convs2s.run.final_choices)
    extra: dict = field(default_factory=dict)
    path: Path | None = None

    # -- reading -------------------------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike, map_location: Any = "cpu") -> Checkpoint:
        """Read and validate the checkpoint file ``path`` (``weights_only=True``).

        :class:`CheckpointError` (one line naming the file and the fix) for a missing file, a
        folder, a file that is not a checkpoint, or parts that do not belong together.
        """
        return cls.from_dict(_read(path, map_location), path=path)

    @classmethod
    def from_dict(cls, data: dict, path: str | os.PathLike | None = None) -> Checkpoint:
        """Validate a loaded checkpoint dictionary (see :meth:`load`)."""
        where = Path(path) if path is not None else None
        try:
            return cls._from_dict(data, where)
        except ValueError as e:
            raise CheckpointError(
                f"{where or 'the checkpoint'} cannot be used: {e} Use the other checkpoint "
                "(best.pt / last.pt) in its folder, or train again."
            ) from e

    @classmethod
    def _from_dict(cls, data: dict, path: Path | None) -> Checkpoint:
        if not isinstance(data, dict):
            raise ValueError(f"it holds a {type(data).__name__}, not a checkpoint dictionary.")
        missing = {"model_config", "model", "src_vocab", "trg_vocab"} - set(data)
        if missing:
            raise ValueError(f"it lacks {sorted(missing)}; it is incomplete.")
        name = data.get("model_class", "ConvS2S")
        cls_ = model_class(name)
        src_vocab = vocab_from_dict(data["src_vocab"], "src_vocab")
        trg_vocab = vocab_from_dict(data["trg_vocab"], "trg_vocab")
        model_config, weights = data["model_config"], data["model"]
        if not isinstance(model_config, dict) or not isinstance(weights, dict):
            raise ValueError("its model_config or model is not a dictionary.")
        check_parts(model_config, weights, src_vocab, trg_vocab)
        check_shapes(cls_, model_config, weights)
        pipeline = TextPipeline.from_checkpoint(data)
        check_pipeline(pipeline, src_vocab, trg_vocab)
        for key, kind in (("preset", dict), ("data", dict), ("train_state", dict),
                          ("run_id", str), ("choices", dict)):
            if data.get(key) is not None and not isinstance(data[key], kind):
                raise ValueError(f"its {key} is a {type(data[key]).__name__}, not a "
                                 f"{kind.__name__}.")
        if data.get("choices") is not None:
            alpha = data["choices"].get("length_penalty")
            if isinstance(alpha, bool) or not isinstance(alpha, (int, float)) or \
                    not 0 <= alpha <= 10:
                raise ValueError(f"its recorded length penalty {alpha!r} is not a number from "
                                 "0 to 10.")
        return cls(model_config=dict(model_config), state_dict=weights, src_vocab=src_vocab,
                   trg_vocab=trg_vocab, pipeline=pipeline, model_class=name,
                   preset=data.get("preset"), data=data.get("data"), run_id=data.get("run_id"),
                   train_state=data.get("train_state"), choices=data.get("choices"),
                   extra={k: v for k, v in data.items() if k not in _KNOWN}, path=path)

    @classmethod
    def from_model(cls, model: nn.Module, src_vocab: Vocab, trg_vocab: Vocab,
                   pipeline: TextPipeline | None = None, **fields) -> Checkpoint:
        """A checkpoint of ``model`` (any class of :data:`MODEL_CLASSES`), ready to save.

        ``pipeline`` defaults to German to English, word-level; ``fields``: ``preset``,
        ``data``, ``run_id``, ``train_state``, ``extra``."""
        name = type(model).__name__
        model_class(name)  # a class a checkpoint can name, or ValueError
        return cls(model_config=dict(model.config), state_dict=model.state_dict(),
                   src_vocab=src_vocab, trg_vocab=trg_vocab,
                   pipeline=pipeline if pipeline is not None else TextPipeline.word(),
                   model_class=name, **fields)

    # -- using ---------------------------------------------------------------------------------
    @property
    def history(self) -> list[dict]:
        """The training run's per-epoch rows (empty for a checkpoint without a train state)."""
        return list((self.train_state or {}).get("history", []))

    @property
    def length_penalty(self) -> float:
        """The beam length penalty chosen on validation for this model (final.pt), else 1.0
        (fairseq's default)."""
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

    # -- writing -------------------------------------------------------------------------------
    def to_dict(self) -> dict:
        """What :meth:`save` writes (and :meth:`from_dict` reads back)."""
        out: dict[str, Any] = {"model_class": self.model_class,
                               "model_config": dict(self.model_config),
                               "model": self.state_dict,
                               "src_vocab": vocab_to_dict(self.src_vocab),
                               "trg_vocab": vocab_to_dict(self.trg_vocab)}
        if self.pipeline.kind == "word":  # what convs2s read before tokenizer was recorded
            out["tokenizers"] = {"src_lang": self.pipeline.src_lang,
                                 "trg_lang": self.pipeline.trg_lang,
                                 "lower": self.pipeline.lower}
        out.update(self.pipeline.record())  # src_lang, trg_lang, tokenizer (+ subword models)
        for key in ("preset", "data", "run_id", "train_state", "choices"):
            if getattr(self, key) is not None:
                out[key] = getattr(self, key)
        out.update(self.extra)
        return out

    def save(self, path: str | os.PathLike) -> Path:
        """Write this checkpoint to ``path`` atomically (temp file, then rename)."""
        return save_checkpoint(path, self.to_dict())


# --------------------------------------------------------------------------------------------
# Files
# --------------------------------------------------------------------------------------------


def _read(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The raw dictionary of a checkpoint file, with format and version checked."""
    path = Path(path)
    if path.is_dir():
        hint = next((f" Did you mean {path / n}?" for n in ("best.pt", "final.pt", "last.pt")
                     if (path / n).is_file()), "")
        raise CheckpointError(f"{path} is a folder, not a checkpoint file.{hint}")
    if path.exists() and not path.is_file():
        raise CheckpointError(f"{path} is not a file; pass the path of a checkpoint (best.pt, "
                              "final.pt or last.pt in a run's folder).")
    if not path.is_file():
        raise CheckpointError(
            f"No checkpoint at {path}. Train one first (python -m convs2s.train --preset quick "
            f"--out {path.parent}) or pass the path of an existing best.pt / last.pt."
        )
    try:
        data = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as e:  # what a safe load refuses: never retry it unsafely
        raise CheckpointError(
            f"{path} is not a convs2s checkpoint: it holds Python objects that a safe load "
            "(weights_only=True) refuses, and convs2s never loads a file that could run code. "
            "Use a checkpoint that convs2s.run.train wrote."
        ) from e
    except Exception as e:  # truncated zip, wrong file type, ...
        raise CheckpointError(
            f"{path} is not a readable convs2s checkpoint ({type(e).__name__}). It may be "
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
    return data


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """A checkpoint's entries as a dictionary, validated by :meth:`Checkpoint.load`."""
    return Checkpoint.load(path, map_location).to_dict()


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


# --------------------------------------------------------------------------------------------
# Resuming: does a checkpoint fit the run asked for?
# --------------------------------------------------------------------------------------------


def check_compatible(ckpt: Checkpoint | dict, model_config: dict, src_vocab: Vocab,
                     trg_vocab: Vocab, path: str | os.PathLike = "checkpoint") -> None:
    """Raise :class:`CheckpointError` unless the checkpoint fits this model config and vocabs.

    Options added to the model later count as their default in checkpoints made before them."""
    ckpt = _as_checkpoint(ckpt)
    recorded = {**MODEL_OPTIONS_ADDED_LATER, **ckpt.model_config}
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
    for side, had, vocab in (("src_vocab", ckpt.src_vocab, src_vocab),
                             ("trg_vocab", ckpt.trg_vocab, trg_vocab)):
        if list(had.itos) != list(vocab.itos):
            raise CheckpointError(
                f"{path} was trained with a different {side} ({len(had)} tokens; "
                f"the data now gives {len(vocab)}). Resume on the same data and preset, or start "
                "a new --out folder."
            )


def check_same_run(ckpt: Checkpoint | dict, settings: dict,
                   path: str | os.PathLike = "checkpoint", *, ignore: tuple[str, ...] = ()) -> None:
    """Raise :class:`CheckpointError` unless the checkpoint was trained with ``settings``.

    ``settings`` maps the names recorded in the checkpoint's ``preset`` (plus ``data``, the
    fingerprint of the pairs it trained on) to the values requested now. Names in ``ignore``, and
    names the checkpoint did not record (an older format), are not compared.
    """
    ckpt = _as_checkpoint(ckpt)
    recorded = dict(ckpt.preset or {})
    if ckpt.data is not None:
        recorded["data"] = ckpt.data
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


def _as_checkpoint(ckpt: Checkpoint | dict) -> Checkpoint:
    return ckpt if isinstance(ckpt, Checkpoint) else Checkpoint.from_dict(ckpt)


def _show(name: str, value: Any) -> str:
    if name == "data" and isinstance(value, dict):  # {"train": {"pairs": n, "sha256": h}, ...}
        return ", ".join(f"{split} {v['pairs']} pairs (sha256 {v['sha256'][:12]})"
                         for split, v in value.items())
    return repr(value)
