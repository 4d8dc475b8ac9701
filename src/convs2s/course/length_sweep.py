"""Where the paper's speed claim holds (notebook 07): ConvS2S against the matched attentional GRU
over sentence length, at a fixed budget of target tokens per training batch.

The course's measurements are the JSON reports of ``benchmarks/length_sweep.py``, one per device
(``length_sweep_<device>.json``), shipped with the package (:mod:`convs2s.course.reference`) so
that the notebook draws them wherever the package is installed. A record holds the device, its
threads, the date and one row per sentence length: ``{"length", "sentences", "convs2s", "rnn",
"ratio"}`` (training target tokens/s of each model and ConvS2S / RNN).

- :func:`records` reads every shipped record; :func:`label` names its device, threads and date;
- :func:`first_length_at` finds the shortest length at which ConvS2S trains at least a given
  multiple of the RNN's tokens/s; :func:`summary_lines`, :func:`not_measured_lines` and
  :func:`compare` put a record, a missing device and a learner's prediction into words;
- :func:`plot` draws each record: both models' tokens/s and their ratio against length;
- :func:`measure` runs a small version of the sweep on this machine, as a record of the same
  shape (the benchmark's steps: :func:`convs2s.course.baselines.train_side_by_side`).
"""

from __future__ import annotations

import copy
import datetime
import operator
import statistics
from collections.abc import Sequence

import torch
from torch import nn

from convs2s.course import reference

__all__ = ["DEVICE_TYPES", "PATTERN", "compare", "first_length_at", "label", "measure",
           "not_measured_lines", "plot", "records", "summary_lines", "training_rows"]

#: The shipped records' file names (``length_sweep_cpu.json``, ``length_sweep_gpu_h100.json``).
PATTERN = "length_sweep_*.json"
#: The device types a sweep is wanted for, and how the notebook names them.
DEVICE_TYPES = {"cpu": "CPU", "cuda": "GPU (CUDA)"}
_ROW_KEYS = ("length", "convs2s", "rnn", "ratio")


def training_rows(record: dict) -> list[dict]:
    """The record's training rows in increasing length; ValueError when it has none, or a row
    lacks one of length, convs2s, rnn, ratio (or holds a rate that is not positive)."""
    rows = record.get("training") if isinstance(record, dict) else None
    if not rows:
        raise ValueError("the record has no training rows (a length_sweep report has "
                         "'training': [{'length', 'convs2s', 'rnn', 'ratio'}, ...]).")
    for row in rows:
        missing = [key for key in _ROW_KEYS if key not in row]
        if missing:
            raise ValueError(f"a training row lacks {', '.join(missing)}: {sorted(row)}")
        if not (row["convs2s"] > 0 and row["rnn"] > 0 and row["length"] >= 1):
            raise ValueError(f"a training row holds a length or rate that is not positive: "
                             f"{row}")
    return sorted(rows, key=lambda row: row["length"])


def records(pattern: str = PATTERN) -> list[dict]:
    """Every shipped length-sweep record (file-name order), each with at least one training
    row; a file of another benchmark that matches ``pattern`` is left out."""
    found = [r for r in reference.results(pattern) if r.get("benchmark") == "length_sweep"]
    for record in found:
        training_rows(record)
    return found


def label(record: dict) -> str:
    """Where and when a record was measured: ``"CPU, 2 cores (x86_64), 2 threads,
    2026-11-27"``."""
    parts = [str(record.get("device") or record.get("device_type") or "unknown device")]
    threads = record.get("threads")
    if threads:
        parts.append(f"{threads} thread{'s' if threads != 1 else ''}")
    if record.get("date"):
        parts.append(str(record["date"]))
    return ", ".join(parts)


def first_length_at(record: dict, factor: float = 1.5) -> int | None:
    """The shortest length of the record at which ConvS2S trains at least ``factor`` times the
    RNN's target tokens/s; None if it does at no length measured."""
    return next((row["length"] for row in training_rows(record) if row["ratio"] >= factor),
                None)


def summary_lines(record: dict, factor: float = 1.5) -> list[str]:
    """The record in words: its device, one line per length, and where ConvS2S first reaches
    ``factor`` times the RNN's rate."""
    lines = [f"{label(record)}:"]
    tokens, repeats = record.get("tokens_per_batch"), record.get("repeats")
    params, vocab = record.get("parameters") or {}, record.get("vocab")
    setup = [f"{tokens:,} target tokens per batch" if tokens else "",
             f"ConvS2S {params['convs2s']:,} vs RNN {params['rnn']:,} parameters"
             if {"convs2s", "rnn"} <= set(params) else "",
             f"vocabularies of {vocab:,}" if vocab else "",
             f"median of {repeats} timed training steps" if repeats else ""]
    if any(setup):
        lines.append("  " + "; ".join(part for part in setup if part))
    for row in training_rows(record):
        sentences = f", {row['sentences']:>4} sentences" if "sentences" in row else ""
        lines.append(f"  {row['length']:>4} tokens{sentences}: ConvS2S {row['convs2s']:7,.0f}"
                     f"  RNN {row['rnn']:7,.0f} target tokens/s  ratio {row['ratio']:.2f}x")
    first = first_length_at(record, factor)
    lengths = [row["length"] for row in training_rows(record)]
    lines.append(f"  ConvS2S first trains at least {factor:g}x the RNN's tokens/s at {first} tokens"
                 if first is not None else
                 f"  ConvS2S trains at least {factor:g}x the RNN's tokens/s at no length "
                 f"from {lengths[0]} to {lengths[-1]}")
    return lines


def not_measured_lines(found: Sequence[dict]) -> list[str]:
    """One line for each device type of :data:`DEVICE_TYPES` that no record covers."""
    have = {r.get("device_type") for r in found}
    return [f"{name}: not yet measured" for kind, name in DEVICE_TYPES.items() if kind not in have]


def compare(prediction, found: Sequence[dict], factor: float = 1.5) -> list[str]:
    """A learner's predicted crossover (a length, or None) against each record, one line each."""
    if prediction is None:
        return ["no prediction: crossover_prediction is None (Exercise 5)"]
    try:
        if isinstance(prediction, bool):
            raise TypeError
        prediction = operator.index(prediction)  # an int, a NumPy integer
    except TypeError:
        return [f"the prediction should be a whole number of tokens (an int), got a "
                f"{type(prediction).__name__}"]
    lines = []
    for record in found:
        first = first_length_at(record, factor)
        by_length = {row["length"]: row["ratio"] for row in training_rows(record)}
        at_yours = (f"; at {prediction} tokens the ratio is {by_length[prediction]:.2f}x"
                    if prediction in by_length else "")
        if first is None:
            verdict = f"ConvS2S reaches {factor:g}x at no length measured{at_yours}"
        elif first == prediction:
            verdict = f"ConvS2S first reaches {factor:g}x at {first} tokens, as you predicted"
        else:
            than = "longer" if first > prediction else "shorter"
            verdict = (f"ConvS2S first reaches {factor:g}x at {first} tokens "
                       f"({by_length[first]:.2f}x), a {than} length than you predicted"
                       f"{at_yours}")
        lines.append(f"{label(record)}: you predicted {prediction} tokens; {verdict}")
    return lines


def plot(found: Sequence[dict], *, factor: float = 1.5, mark: tuple[float, str] | None = None,
         fig=None):
    """Each record in a row of two panels: training target tokens/s of both models, and ConvS2S
    / RNN with lines at 1x and ``factor``, against sentence length (log-2 axis); each row titled
    with its device (:func:`label`). ``mark``: (length, text) drawn as a dotted line on every
    panel, e.g. a data set's mean sentence length. ``fig``: a Figure to draw into (cleared),
    else a new one. Returns the Figure."""
    if not found:
        raise ValueError("no length-sweep record to draw.")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FixedLocator, NullFormatter, NullLocator

    rows = len(found)
    if fig is None:
        fig = plt.figure(figsize=(10, 3.6 * rows), dpi=100)
    fig.clear()
    axes = fig.subplots(rows, 2, squeeze=False)
    for (ax_rate, ax_ratio), record in zip(axes, found, strict=True):
        table = training_rows(record)
        lengths = [row["length"] for row in table]
        ax_rate.plot(lengths, [row["convs2s"] for row in table], "o-", color="C0",
                     label="ConvS2S")
        ax_rate.plot(lengths, [row["rnn"] for row in table], "s-", color="C3",
                     label="GRU + attention")
        ax_rate.set_ylim(0, 1.15 * max(max(row["convs2s"], row["rnn"]) for row in table))
        ax_rate.set_ylabel("training target tokens/s")
        ax_rate.set_title(f"{label(record)}\nboth models", fontsize=10)
        ax_ratio.plot(lengths, [row["ratio"] for row in table], "o-", color="C2",
                      label="ConvS2S / RNN")
        ax_ratio.axhline(1.0, color="grey", linewidth=1, label="1x: equally fast")
        ax_ratio.axhline(factor, color="C1", linestyle="--", linewidth=1, label=f"{factor:g}x")
        ax_ratio.set_ylim(0, 1.1 * max(factor, *(row["ratio"] for row in table)))
        ax_ratio.set_ylabel("ConvS2S / RNN (tokens/s)")
        ax_ratio.set_title(f"{label(record)}\nratio", fontsize=10)
        for ax in (ax_rate, ax_ratio):
            ax.set_xscale("log", base=2)
            ax.xaxis.set_major_locator(FixedLocator(lengths))
            ax.set_xticklabels([str(n) for n in lengths])
            ax.xaxis.set_minor_locator(NullLocator())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel("sentence length n (tokens)")
            if mark is not None:
                ax.axvline(mark[0], color="black", linestyle=":", linewidth=1, label=mark[1])
            ax.legend(fontsize=9)
    tokens = {r.get("tokens_per_batch") for r in found} - {None}
    budget = f", {', '.join(f'{t:,}' for t in sorted(tokens))} target tokens per batch" \
        if tokens else ""
    fig.suptitle(f"Training speed against sentence length: ConvS2S and the matched GRU{budget}",
                 fontsize=11)
    fig.tight_layout()
    return fig


def _batch(n_sentences: int, length: int, src_vocab_size: int, trg_vocab_size: int,
           generator: torch.Generator, bos_idx: int, first_id: int) -> tuple:
    """(src, trg) of random ids: ``src = [n_sentences, length]``, ``trg = [n_sentences, length
    + 1]`` with ``bos_idx`` first; no padding."""
    src = torch.randint(first_id, src_vocab_size, (n_sentences, length), generator=generator)
    trg = torch.randint(first_id, trg_vocab_size, (n_sentences, length + 1), generator=generator)
    trg[:, 0] = bos_idx
    return src, trg


def measure(conv: nn.Module, rnn: nn.Module, lengths: Sequence[int], *, tokens: int,
            src_vocab_size: int, trg_vocab_size: int, repeats: int = 3, warmup: int = 1,
            device: torch.device | str = "cpu", pad_idx: int = 1, bos_idx: int = 2,
            first_id: int = 4, seed: int = 0) -> dict:
    """The sweep of ``benchmarks/length_sweep.py``, small, on this machine: for each length n,
    batches of ``tokens // n`` sentences of random ids (no padding), ``warmup`` untimed training
    steps, then the median target tokens/s of ``repeats`` timed steps of each model, the two
    models taking turns. Copies of the models are trained: theirs stay as they are.

    Returns a record of the shipped records' shape (device, threads, date, tokens per batch,
    ``training`` rows), which :func:`summary_lines` and :func:`plot` read."""
    from convs2s.course.baselines import train_side_by_side
    from convs2s.system import environment

    if repeats < 1 or warmup < 0 or not lengths or min(lengths) < 1 or tokens < max(lengths):
        raise ValueError(f"need repeats >= 1, warmup >= 0 and 1 <= every length <= tokens; got "
                         f"repeats={repeats}, warmup={warmup}, lengths={list(lengths)}, "
                         f"tokens={tokens}.")
    device = torch.device(device)
    models = {"convs2s": copy.deepcopy(conv), "rnn": copy.deepcopy(rnn)}
    g = torch.Generator().manual_seed(seed)
    rows = []
    for length in lengths:
        n_sentences = max(1, tokens // length)
        batches = [_batch(n_sentences, length, src_vocab_size, trg_vocab_size, g, bos_idx,
                          first_id) for _ in range(warmup + repeats)]
        if warmup:
            train_side_by_side(models, batches[:warmup], steps=warmup, pad_idx=pad_idx,
                               device=device)
        rates: dict[str, list[float]] = {name: [] for name in models}
        for batch in batches[warmup:]:
            logs = train_side_by_side(models, [batch], steps=1, pad_idx=pad_idx, device=device,
                                      warmup_steps=1)
            for name, run in logs.items():
                rates[name].append(run.tokens / run.seconds)
        medians = {name: statistics.median(values) for name, values in rates.items()}
        rows.append({"length": length, "sentences": n_sentences, **medians,
                     "ratio": medians["convs2s"] / medians["rnn"]})
    params = {name: sum(p.numel() for p in model.parameters()) for name, model in models.items()}
    return {"benchmark": "length_sweep", "device": environment.describe_device(device),
            "device_type": device.type, "threads": torch.get_num_threads(),
            "date": datetime.date.today().isoformat(), "parameters": params,
            "tokens_per_batch": tokens, "repeats": repeats, "training": rows}
