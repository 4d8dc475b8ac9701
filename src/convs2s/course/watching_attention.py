"""Watching attention learn (notebook 05): after every epoch of a training run, every decoder
layer's attention on one validation sentence under teacher forcing.

Training knows nothing of it. :func:`train` is :func:`convs2s.run.train.train` with a
:class:`WatchAttention` as its ``on_epoch_end`` hook, which writes each finished epoch's maps
into the run's folder (``attention_by_epoch.json``, so that a resumed run keeps the epochs
before it), and returns the run's result with each history row's ``"attention"``: what
:func:`convs2s.course.analysis.attention_by_epoch` and
:func:`~convs2s.course.analysis.plot_attention_epoch` read, with the sentence's tokens from
:func:`watched_sentence`.

Runs trained before this module stored the maps in their checkpoints themselves (each history
row's ``"attention"``, the tokens in ``train_state["watched"]``); :func:`with_attention` and
:func:`watched_sentence` read those too.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import torch

from convs2s.data import load_multi30k
from convs2s.model.convs2s import ConvS2S
from convs2s.run import train as training
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.prepare import select_pairs
from convs2s.run.presets import Preset, get_preset
from convs2s.system.atomic_files import write_text_atomic
from convs2s.system.local_files import FileRefused, json_value, read_small

__all__ = ["RECORD", "WatchAttention", "train", "watched_pair", "watched_sentence",
           "with_attention"]

#: The file in a run's folder that holds the watched sentence and each epoch's attention.
RECORD = "attention_by_epoch.json"
_MAX_RECORD_BYTES = 256 << 20  # far above a long run's (a few MB)


def watched_pair(preset: Preset, data: dict) -> tuple[str, str] | None:
    """The sentence pair watched: the first validation pair of the run, the first the final
    choices score too (None if the preset scores none)."""
    valid = select_pairs(preset, data)[1][:preset.final_pairs]
    return tuple(valid[0]) if valid else None


class WatchAttention:
    """``on_epoch_end`` hook of :func:`convs2s.run.train.train`: the attention of every decoder
    layer on ``pair`` (source, reference) after each epoch, written into ``folder/RECORD``.

    An eval-mode forward pass under teacher forcing: it draws no random numbers, so a resumed
    run stays exact. The vocabularies and text pipeline are read once from the run's
    ``last.pt`` (written for the epoch before the hook is called)."""

    def __init__(self, folder: str | os.PathLike, pair: tuple[str, str] | None):
        self.folder, self.pair = Path(folder), pair
        self._parts: Checkpoint | None = None

    def __call__(self, row: dict, model: ConvS2S) -> None:
        if self.pair is None:
            return
        sentence, maps = self.attention(model)
        try:
            record = _read(self.folder) or {}
        except ValueError:  # not a record this wrote: a new one replaces it
            record = {}
        epochs = [e for e in record.get("epochs", []) if e["epoch"] < row["epoch"]]
        epochs.append({"epoch": row["epoch"], "step": row["step"], "attention": maps})
        write_text_atomic(self.folder / RECORD,
                          json.dumps({"sentence": sentence, "epochs": epochs}))

    @torch.no_grad()
    def attention(self, model: ConvS2S) -> tuple[dict, list]:
        """The watched sentence's tokens (``{"src": [...], "trg": [..., "<eos>"]}``) and the
        model's attention on it, ``[layers][trg tokens][src tokens]`` (rounded)."""
        if self._parts is None:
            self._parts = Checkpoint.load(self.folder / "last.pt")
        parts = self._parts
        src_text, trg_text = self.pair
        room = parts.model_config["max_positions"] - 1  # as the data: trg in <bos> ... <eos>
        src_tokens = parts.pipeline.src_tokenizer(src_text)[:room]
        trg_tokens = parts.pipeline.trg_tokenizer(trg_text)[:room]
        device = next(model.parameters()).device
        src = torch.tensor([parts.src_vocab.encode(src_tokens)], device=device)
        trg = torch.tensor([parts.trg_vocab.encode(trg_tokens, add_bos_eos=True)],
                           device=device)
        was_training = model.training
        model.eval()
        _, attention = model(src, trg[:, :-1])  # [1, layers, len(trg_tokens) + 1, src_len]
        model.train(was_training)
        # rows: the tokens the decoder outputs (the reference's, then <eos>); columns: source
        sentence = {"src": list(src_tokens), "trg": [*trg_tokens, "<eos>"]}
        return sentence, [[[round(float(x), 4) for x in r] for r in layer]
                          for layer in attention[0].cpu()]


def train(preset: Preset | str, out_dir: str | os.PathLike, *,
          data: dict | str | os.PathLike | None = None,
          on_epoch_end: Callable[[dict, ConvS2S], None] | None = None,
          **kwargs) -> training.TrainResult:
    """:func:`convs2s.run.train.train` (the same arguments), watching attention learn: the
    result's history rows carry each epoch's ``"attention"`` (see the module's docstring).
    ``on_epoch_end``, if given, is called after the watching."""
    preset = get_preset(preset) if isinstance(preset, str) else preset
    if not isinstance(data, dict):
        data = load_multi30k(data, src=preset.src_lang, trg=preset.trg_lang)
    watch = WatchAttention(out_dir, watched_pair(preset, data))

    def hook(row: dict, model: ConvS2S) -> None:
        watch(row, model)
        if on_epoch_end is not None:
            on_epoch_end(row, model)

    result = training.train(preset, out_dir, data=data, on_epoch_end=hook, **kwargs)
    result.history = with_attention(result.history, out_dir)
    return result


def with_attention(history: list[dict], folder: str | os.PathLike) -> list[dict]:
    """``history`` (a run's rows) with each epoch's ``"attention"`` from ``folder``'s record,
    where it holds that epoch of this run (the same step); rows that carry theirs (an older
    checkpoint's) keep it."""
    record = _read(Path(folder)) or {}
    maps = {(e["epoch"], e["step"]): e["attention"] for e in record.get("epochs", [])}
    return [row if row.get("attention") or (row.get("epoch"), row.get("step")) not in maps
            else {**row, "attention": maps[row["epoch"], row["step"]]} for row in history]


def watched_sentence(folder: str | os.PathLike) -> dict | None:
    """The watched sentence's tokens, ``{"src": [...], "trg": [...]}``, of the run in
    ``folder`` (from its record, or an older run's ``last.pt``); None if it watched none."""
    record = _read(Path(folder))
    if record is not None:
        return record.get("sentence")
    last = Path(folder) / "last.pt"
    if not last.exists():
        return None
    return (Checkpoint.load(last).train_state or {}).get("watched")


def _read(folder: Path) -> dict | None:
    """The record in ``folder`` (None if there is none); ``ValueError`` (one line) for one that
    is not what :class:`WatchAttention` writes."""
    path = folder / RECORD
    if not path.exists():
        return None
    try:
        record = json_value(read_small(path, _MAX_RECORD_BYTES, "attention record"))
    except FileRefused:
        raise
    except ValueError:  # not JSON
        record = None
    epochs = record.get("epochs") if isinstance(record, dict) else None
    if not isinstance(epochs, list) or not all(
            isinstance(e, dict) and {"epoch", "step", "attention"} <= set(e) for e in epochs):
        raise ValueError(f"{path} is not an attention record (its sentence and epochs): remove "
                         "it, and the next epoch writes a new one.")
    return record
