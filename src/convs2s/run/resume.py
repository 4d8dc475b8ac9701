"""Resuming a training run from its ``last.pt``: exactly where it stopped, or a clear refusal.

The weights, the optimizer, the random-number states and the position in the epoch come back,
so a resumed run draws what the uninterrupted one would have. Refused: a checkpoint trained with
other settings, data, direction or tokenizer (only the run's length may change), or a training
state that is not what a run writes (a ``last.pt`` may come from elsewhere).
"""

from __future__ import annotations

import math
import numbers
import os
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from convs2s.data import Vocab
from convs2s.data.subword import TextPipeline
from convs2s.run.checkpoint import Checkpoint, CheckpointError, copy_checkpoint
from convs2s.run.final_choices import SNAPSHOT_NAME
from convs2s.run.presets import FIELDS_ADDED_LATER, Preset
from convs2s.system.arguments import brief

__all__ = ["check_compatible", "check_same_run", "check_train_state", "reconcile_best",
           "restore", "rng_state", "set_rng_state"]

#: What a resumed run may change: its length and its name.
MAY_CHANGE = ("name", "epochs", "max_steps", "max_minutes")

#: Model options added after checkpoints were first written, with the value those were built with.
MODEL_OPTIONS_ADDED_LATER = {"share_input_output_embed": False}


def rng_state() -> dict:
    """The random-number states a step draws from (torch, Python, and CUDA's if present)."""
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def restore(ckpt: Checkpoint, *, preset: Preset, data_record: dict, pipeline: TextPipeline,
            model: torch.nn.Module, optimizer: torch.optim.Optimizer, src_vocab: Vocab,
            trg_vocab: Vocab) -> dict:
    """Continue the run in ``ckpt``: check it is this run (settings, data, text, model), load
    its weights, optimizer and random-number states; returns its train state (the rest)."""
    train_state = ckpt.resumable()
    settings = {**preset.as_dict(), "data": data_record,
                **{name: getattr(preset, name) for name in FIELDS_ADDED_LATER}}
    check_same_run(ckpt, settings, ckpt.path, ignore=MAY_CHANGE, defaults=FIELDS_ADDED_LATER)
    check_same_text(pipeline, preset, ckpt.path)
    check_compatible(ckpt, model.config, src_vocab, trg_vocab, ckpt.path)
    model.load_state_dict(ckpt.state_dict)  # Checkpoint.load checked them
    load_optimizer_state(optimizer, train_state["optimizer"], ckpt.path)
    try:
        set_rng_state(train_state["rng"])
    except (RuntimeError, TypeError, ValueError, KeyError, IndexError) as e:
        raise _unusable(ckpt.path, "its random-number state is malformed", e) from None
    return {k: v for k, v in train_state.items() if k not in ("optimizer", "rng")}


def _unusable(path: Path | None, what: str, e: BaseException | None = None) -> CheckpointError:
    """One line: ``path`` cannot be resumed because of ``what`` (and the error ``e``)."""
    first = (str(e).splitlines() or [""])[0][:200] if e is not None else ""
    cause = f" ({type(e).__name__}: {first})" if e is not None else ""
    return CheckpointError(f"{path or 'the checkpoint'} cannot be resumed: {what}{cause}. "
                           "Resume from a last.pt that convs2s wrote, or start a new --out "
                           "folder.")


def load_optimizer_state(optimizer: torch.optim.Optimizer, stored: object,
                         path: Path | None) -> None:
    """Load a checkpoint's optimizer state into ``optimizer``, checked: every state tensor has
    its parameter's shape (or is a scalar: Adam's step); the hyperparameters stay the preset's
    but the learning rate (the schedule sets it every step; the history row of an epoch resumed
    at its validation reads the checkpoint's)."""
    settings = [{k: v for k, v in g.items() if k not in ("params", "lr")}
                for g in optimizer.param_groups]
    try:
        optimizer.load_state_dict(stored)
    except (RuntimeError, NotImplementedError, TypeError, ValueError, KeyError,
            IndexError, AttributeError) as e:
        raise _unusable(path, "its optimizer state does not fit the model", e) from None
    params = {id(p) for g in optimizer.param_groups for p in g["params"]}
    for group, preset in zip(optimizer.param_groups, settings, strict=True):
        group.update(preset)
        if not _amount(group.get("lr")):
            raise _unusable(path, f"its optimizer's learning rate {brief(group.get('lr'))} "
                            "is not a number >= 0")
    for p, state in optimizer.state.items():
        if id(p) not in params or not isinstance(state, dict):
            raise _unusable(path, "its optimizer state names parameters the model lacks")
        for name, value in state.items():
            if value is None or _number(value) and math.isfinite(value):
                continue
            if not isinstance(value, torch.Tensor) or value.is_meta or value.dim() and (
                    value.shape != p.shape or not value.is_floating_point()):
                shape = tuple(value.shape) if isinstance(value, torch.Tensor) else value
                raise _unusable(path, f"its optimizer state {brief(name)} {brief(shape)} "
                                f"does not fit a parameter of shape {tuple(p.shape)}")


def _number(x: object) -> bool:
    return isinstance(x, numbers.Real) and not isinstance(x, bool)


def _count(x: object) -> bool:
    return isinstance(x, numbers.Integral) and not isinstance(x, bool) and x >= 0


def _amount(x: object) -> bool:
    return _number(x) and 0 <= x < math.inf


def check_train_state(stored: dict, path: Path | None = None) -> None:
    """One ``CheckpointError`` line unless a stored train state's fields are what a run writes:
    whole counts and finite amounts >= 0, one history row per finished epoch, snapshot names
    ``epochNN.pt`` only (a run removes old ones by name). A field missing keeps its default."""
    def refuse(what: str) -> CheckpointError:
        return _unusable(path, f"its train_state {what}")

    for key in ("step", "epoch", "batch_in_epoch", "bad_epochs", "ep_tokens"):
        if key in stored and not _count(stored[key]):
            raise refuse(f"{key} {brief(stored[key])} is not a whole number >= 0")
    for key in ("seconds", "ep_loss", "final_reserve"):
        if key in stored and not _amount(stored[key]):
            raise refuse(f"{key} {brief(stored[key])} is not a finite number >= 0")
    if "lr_scale" in stored and not (_amount(stored["lr_scale"]) and stored["lr_scale"] > 0):
        raise refuse(f"lr_scale {brief(stored['lr_scale'])} is not a finite number > 0")
    best = stored.get("best_valid_loss", math.inf)
    if not _number(best) or math.isnan(best):
        raise refuse(f"best_valid_loss {brief(best)} is not a number")
    history = stored.get("history", [])
    if not isinstance(history, list) or len(history) != stored.get("epoch", 0):
        raise refuse("history is not a list of one row per finished epoch")
    numbers_ = ("train_loss", "valid_loss", "valid_ppl", "lr", "seconds", "tokens_per_s")
    for i, row in enumerate(history, 1):
        if not (isinstance(row, dict) and row.get("epoch") == i and "valid_loss" in row
                and _count(row.get("step")) and row["step"] <= stored.get("step", 0)
                and all(_number(row[k]) and math.isfinite(row[k]) for k in numbers_ if k in row)):
            raise refuse(f"history row {i} is not the record of epoch {i} (its epoch, step and "
                         "finite losses)")
    snapshots = stored.get("snapshots", [])
    if not isinstance(snapshots, list) or not all(
            isinstance(n, str) and SNAPSHOT_NAME.fullmatch(n) for n in snapshots):
        raise refuse(f"snapshots {brief(snapshots)} are not a list of snapshot names "
                     "(epochNN.pt)")
    costs = stored.get("final_costs")
    if costs is not None and not (isinstance(costs, dict) and all(
            _amount(costs.get(k)) for k in ("greedy", "beam"))):
        raise refuse(f"final_costs {brief(costs)} are not seconds (greedy, beam)")
    if stored.get("final_costs_epoch") is not None and not _count(stored["final_costs_epoch"]):
        raise refuse(f"final_costs_epoch {brief(stored['final_costs_epoch'])} is not an epoch")


def check_same_text(pipeline: TextPipeline, preset: Preset, path: Path, fix: str = (
        "Resume with the settings it was trained with (--src, --trg, --tokenizer, "
        "--vocab-size, --joint-vocab), or start a new --out folder.")) -> None:
    """Refuse to resume a run trained in another direction or with another tokenizer (``fix``:
    what the refusal says to do)."""
    recorded = pipeline.settings_dict()
    wanted = {"src_lang": preset.src_lang, "trg_lang": preset.trg_lang, "kind": preset.tokenizer}
    wanted.update({"lower": preset.lower} if preset.tokenizer == "word"
                  else preset.subword_settings().as_dict())
    diffs = [f"{k}: checkpoint {recorded.get(k)!r}, now {v!r}"
             for k, v in wanted.items() if recorded.get(k) != v]
    if diffs:
        raise CheckpointError(
            f"{path} was trained with other settings or data (direction or tokenizer: "
            + "; ".join(diffs) + "). " + fix)


def reconcile_best(history: list[dict], best_valid_loss: float, step: int,
                   batch_in_epoch: int, last_path: Path, best_path: Path,
                   log: Callable[[str], None] = print) -> int | None:
    """Make ``best.pt`` the checkpoint the history (of ``last.pt``, at ``step``) calls best,
    after a kill between the two saves; returns ``best.pt``'s step (None: there is none)."""
    row = next((r for r in history if r["valid_loss"] == best_valid_loss), None)
    found = Checkpoint.load(best_path).step if best_path.exists() else None
    if row is None and found is None or row is not None and found == row["step"]:
        return found
    if row is not None and step == row["step"] and batch_in_epoch == 0:
        copy_checkpoint(last_path, best_path)  # last.pt is that epoch's end: best's twin
        log(f"best.pt was behind last.pt (stopped between the two saves): copied "
            f"last.pt (epoch {row['epoch']}) to best.pt")
        return row["step"]
    wanted = "none" if row is None else f"epoch {row['epoch']}, step {row['step']}"
    raise CheckpointError(
        f"{best_path} does not match the history in {last_path} (best.pt: "
        f"{'missing' if found is None else f'step {found}'}; the history's best: {wanted}) "
        "and cannot be rebuilt from it. Put back this run's best.pt, or start a new "
        "--out folder.")


def check_compatible(ckpt: Checkpoint | dict, model_config: dict, src_vocab: Vocab,
                     trg_vocab: Vocab, path: str | os.PathLike = "checkpoint") -> None:
    """:class:`CheckpointError` unless the checkpoint fits this model config and vocabularies
    (an option added to the model later counts as its default in checkpoints made before)."""
    ckpt = ckpt if isinstance(ckpt, Checkpoint) else Checkpoint.from_dict(ckpt, path=path)
    recorded = {**MODEL_OPTIONS_ADDED_LATER, **ckpt.model_config}
    diffs = [f"{k}: checkpoint {recorded.get(k)!r}, now {v!r}"
             for k, v in model_config.items() if recorded.get(k) != v]
    if diffs:
        raise CheckpointError(f"{path} was trained with a different model configuration ("
                              + "; ".join(diffs) + "). Resume with the preset it was trained "
                              "with, or start a new --out folder.")
    for side, had, vocab in (("src_vocab", ckpt.src_vocab, src_vocab),
                             ("trg_vocab", ckpt.trg_vocab, trg_vocab)):
        if list(had.itos) != list(vocab.itos):
            raise CheckpointError(f"{path} was trained with a different {side} ({len(had)} "
                                  f"tokens; the data now gives {len(vocab)}). Resume on the "
                                  "same data and preset, or start a new --out folder.")


def check_same_run(ckpt: Checkpoint | dict, settings: dict,
                   path: str | os.PathLike = "checkpoint", *, ignore: tuple[str, ...] = (),
                   defaults: dict | None = None) -> None:
    """:class:`CheckpointError` unless the checkpoint was trained with ``settings`` (its
    ``preset``'s names and ``data``, the fingerprint of its pairs). Names in ``ignore`` and
    names it did not record are not compared, but ``defaults``: a preset records those only
    where they differ (``presets.FIELDS_ADDED_LATER``)."""
    ckpt = ckpt if isinstance(ckpt, Checkpoint) else Checkpoint.from_dict(ckpt, path=path)
    recorded = {**(defaults or {}), **ckpt.preset} if ckpt.preset is not None else {}
    if ckpt.data is not None:
        recorded["data"] = ckpt.data
    diffs = [f"{k}: checkpoint {_show(k, recorded[k])}, now {_show(k, v)}"
             for k, v in settings.items() if k not in ignore and k in recorded
             and recorded[k] != v]
    if diffs:
        raise CheckpointError(
            f"{path} was trained with other settings or data (" + "; ".join(diffs) + "). "
            "Resume with the preset and data it was trained with, or start a new --out folder.")


def _show(name: str, value: Any) -> str:
    if name == "data" and isinstance(value, dict):  # {"train": {"pairs": n, "sha256": h}, ...}
        return ", ".join(f"{split} {v['pairs']} pairs (sha256 {v['sha256'][:12]})"
                         for split, v in value.items())
    return repr(value)
