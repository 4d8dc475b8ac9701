"""Where the paper's speed claim holds (notebook 07): ConvS2S against the matched attentional GRU
over sentence length, at a fixed budget of target tokens per training batch.

The course's measurements are the JSON reports of ``benchmarks/length_sweep.py``, one per device
(``length_sweep_<device>.json``), shipped with the package (:mod:`convs2s.course.reference`) so
that the notebook draws them wherever the package is installed. A record holds the device, its
threads, the date, the machine it ran on (``"machine"``: CPU model, cores, and how busy other
processes kept it meanwhile) and one row per sentence length: ``{"length", "sentences",
"convs2s", "rnn", "ratio"}`` (training target tokens/s of each model, the median over timed
steps, and ConvS2S / RNN), with every timed step's rate (``"convs2s_steps"``, ``"rnn_steps"``)
where the record has them, so that their spread can be shown.

- :func:`records` reads every shipped record; :func:`label` names its device, threads and date,
  :func:`machine_line` the machine and its load (:func:`machine`, :class:`Watch` measure them);
- :func:`first_length_at` finds the shortest length at which ConvS2S trains at least a given
  multiple of the RNN's tokens/s, :func:`crossover` the shortest from which on ConvS2S is the
  faster at every longer length; :func:`summary_lines`, :func:`not_measured_lines` and
  :func:`compare` put a record, a missing device and a learner's prediction into words;
- the sentences notebook 07 composes from measured values, never from the stored run's:
  :func:`reading_lines` (what a record shows), :func:`near_length_lines` (the record around a
  data set's sentence length), :func:`setup_differences` and :func:`live_lines` (a run on this
  machine against a record), :func:`multi30k_lines` (training on real batches against the
  record) and :func:`gap_lines` (section 6's timings at two batch sizes);
- :func:`plot` draws each record: both models' tokens/s and their ratio against length, with
  the spread over timed steps;
- :func:`measure` runs a small version of the sweep on this machine, as a record of the same
  shape (the benchmark's steps: :func:`convs2s.course.baselines.train_side_by_side`).
"""

from __future__ import annotations

import copy
import datetime
import operator
import os
import platform
import statistics
import time
from collections.abc import Sequence

import torch
from torch import nn

from convs2s.course import reference

__all__ = ["DEVICE_TYPES", "EVEN", "PATTERN", "Watch", "compare", "cpu_name", "crossover",
           "first_length_at", "gap_lines", "label", "live_lines", "machine", "machine_line",
           "measure", "multi30k_lines", "near_length_lines", "not_measured_lines", "plot",
           "reading_lines", "records", "setup_differences", "spread", "summary_lines",
           "training_rows", "trend"]

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


#: How close to 1x a ratio of two speeds counts as "about even" (0.1: within 10%).
EVEN = 0.1
#: How many times its slowest length a model's fastest may be and still "change little".
LITTLE = 1.25
#: Other processes' mean use of the machine (in cores) below which it counts as quiet.
QUIET_CORES = 0.1


def cpu_name() -> str:
    """The CPU's model name (Linux: ``/proc/cpuinfo``), else what :mod:`platform` knows."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def _all_busy_seconds() -> float | None:
    """CPU seconds every process has used since boot (Linux ``/proc/stat``); None elsewhere."""
    try:
        with open("/proc/stat", encoding="ascii") as f:
            fields = f.readline().split()
        values = [int(v) for v in fields[1:9]]  # user nice system idle iowait irq softirq steal
    except (OSError, ValueError):
        return None
    if not fields or fields[0] != "cpu" or len(values) < 5:
        return None
    return (sum(values) - values[3] - values[4]) / os.sysconf("SC_CLK_TCK")


def _own_seconds() -> float:
    times = os.times()
    return times.user + times.system  # every thread of this process


def _load() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


class Watch:
    """How busy other processes keep the machine while something is measured: make one just
    before, call :meth:`stop` just after. Timings on a shared machine move with what else runs,
    so every record says it: the CPU time all processes used (``/proc/stat``) less this
    process's own, over the wall time, in cores (0 on a quiet machine, about 1 while another
    program holds a core). Linux only: elsewhere ``others_cores`` is None."""

    def __init__(self):
        self._load = _load()
        self._busy, self._own = _all_busy_seconds(), _own_seconds()
        self._start = time.perf_counter()

    def stop(self) -> dict:
        """``{"seconds", "others_cores", "load_before"}``: the wall time, other processes' mean
        use of the CPU in cores, and the 1-minute load average when the watch started."""
        seconds = time.perf_counter() - self._start
        busy, others = _all_busy_seconds(), None
        if busy is not None and self._busy is not None and seconds > 0:
            others = max(0.0, (busy - self._busy - (_own_seconds() - self._own)) / seconds)
        return {"seconds": round(seconds, 3),
                "others_cores": None if others is None else round(others, 2),
                "load_before": self._load}


def machine(device="cpu") -> dict:
    """The machine a measurement runs on: the CPU's model, its cores, how many of them this
    process may use (``taskset``), PyTorch's threads, and the device (:func:`machine_line`
    words it; add a :class:`Watch`'s ``stop()`` for its load)."""
    import torch

    from convs2s.system import environment

    try:
        allowed = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        allowed = os.cpu_count()
    return {"cpu": cpu_name(), "cores": os.cpu_count(), "cores_allowed": allowed,
            "threads": torch.get_num_threads(), "device": environment.describe_device(device)}


def machine_line(info: dict | None) -> str:
    """A machine in words (:func:`machine` plus a :class:`Watch`'s figures), e.g. ``"AMD EPYC,
    2 cores (1 of them for this run), 1 thread; shared: other processes kept 0.97 of its 2
    cores busy on average while it ran"``; a record without one says so."""
    if not info:
        return "machine not recorded"
    parts = []
    device = str(info.get("device") or "")
    if device and not device.startswith("CPU"):
        parts.append(f"{device}, on a host with")
    cpu = str(info.get("cpu") or "an unknown CPU")
    cores, allowed = info.get("cores"), info.get("cores_allowed")
    if cores:
        cpu += f", {cores} core{'s' if cores != 1 else ''}"
        if allowed and allowed != cores:
            cpu += f" ({allowed} of them for this run)"
    parts.append(cpu)
    threads = info.get("threads")
    head = " ".join(parts) + (f", {threads} thread{'s' if threads != 1 else ''}" if threads
                              else "")
    others = info.get("others_cores")
    if others is None:  # an older record: what its note says, or that it is not known
        return f"{head}; {info.get('note') or 'how busy the machine was is not recorded'}"
    if others < QUIET_CORES:
        load = f"quiet: other processes used {others:.2f} cores on average while it ran"
    else:
        of = f" of its {cores}" if cores else ""
        load = (f"shared: other processes kept {others:.2f}{of} cores busy on average while it "
                "ran")
    note = f" ({info['note']})" if info.get("note") else ""
    return f"{head}; {load}{note}"


def spread(row: dict, name: str) -> tuple[float, float] | None:
    """The lowest and highest rate of ``name`` ("convs2s", "rnn") over a row's timed steps;
    None when the record kept only the median."""
    steps = row.get(f"{name}_steps")
    return (min(steps), max(steps)) if steps else None


def ratio_spread(row: dict) -> tuple[float, float] | None:
    """The lowest and highest ConvS2S / RNN ratio over a row's timed steps, step by step (the
    two models take turns on the same batch); None without the steps."""
    conv, rnn = row.get("convs2s_steps"), row.get("rnn_steps")
    if not conv or not rnn or len(conv) != len(rnn):
        return None
    ratios = [c / r for c, r in zip(conv, rnn, strict=True)]
    return min(ratios), max(ratios)


def trend(values: Sequence[float], ranges: Sequence[tuple[float, float] | None] | None = None,
          shown: str = "{:,.0f}") -> str:
    """How a series goes, judged as it is shown: ``"rises at every step"``, ``"falls at every
    step"``, ``"rises overall, not at every step"``, ``"falls overall, not at every step"``,
    ``"stays level"`` or ``"goes up and down"``. Two neighbours count as level when they are
    equal as ``shown`` formats them, or when their ``ranges`` (the spread over timed steps)
    overlap: a difference inside the noise is not a step."""
    def level(i: int, j: int) -> bool:
        if shown.format(values[i]) == shown.format(values[j]):
            return True
        if ranges is not None and ranges[i] is not None and ranges[j] is not None:
            (lo_i, hi_i), (lo_j, hi_j) = ranges[i], ranges[j]
            return lo_i <= hi_j and lo_j <= hi_i
        return False

    if len(values) < 2:
        return "is measured at one point only"
    steps = [0 if level(i, i + 1) else (1 if values[i + 1] > values[i] else -1)
             for i in range(len(values) - 1)]
    if all(step == 0 for step in steps):
        return "stays level"
    if all(step == 1 for step in steps):
        return "rises at every step"
    if all(step == -1 for step in steps):
        return "falls at every step"
    if not level(0, len(values) - 1):
        return ("rises" if values[-1] > values[0] else "falls") + " overall, not at every step"
    return "goes up and down"


def _even(ratio: float) -> str:
    """ConvS2S / RNN in words: about even within :data:`EVEN`, else which model is faster."""
    if abs(ratio - 1) <= EVEN:
        return "about even"
    return "ConvS2S faster" if ratio > 1 else "the RNN faster"


def crossover(record: dict) -> int | None:
    """The shortest length of the record from which on ConvS2S trains faster (ratio > 1) at
    every longer length (the benchmark's ``training_crossover``); None if it is not faster
    at the longest."""
    found = None
    for row in reversed(training_rows(record)):
        if row["ratio"] > 1.0:
            found = row["length"]
        else:
            break
    return found


def first_length_at(record: dict, factor: float = 1.5) -> int | None:
    """The shortest length of the record at which ConvS2S trains at least ``factor`` times the
    RNN's target tokens/s; None if it does at no length measured."""
    return next((row["length"] for row in training_rows(record) if row["ratio"] >= factor),
                None)


def _rate(row: dict, name: str) -> str:
    span = spread(row, name)
    text = f"{row[name]:7,.0f}"
    return text + (f" ({span[0]:,.0f}-{span[1]:,.0f})" if span else "")


def summary_lines(record: dict, factor: float = 1.5) -> list[str]:
    """The record in words: its device, the machine and how busy it was, one line per length
    (each rate the median, with the lowest and highest of the timed steps where the record has
    them), and where ConvS2S first reaches ``factor`` times the RNN's rate."""
    lines = [f"{label(record)}:", f"  machine: {machine_line(record.get('machine'))}"]
    tokens, repeats = record.get("tokens_per_batch"), record.get("repeats")
    params, vocab = record.get("parameters") or {}, record.get("vocab")
    with_steps = any(spread(row, "convs2s") for row in training_rows(record))
    each = ("median (lowest-highest) of {} timed training steps" if with_steps else
            "median of {} timed training steps (their spread was not kept in this record)")
    setup = [f"{tokens:,} target tokens per batch" if tokens else "",
             f"ConvS2S {params['convs2s']:,} vs RNN {params['rnn']:,} parameters"
             if {"convs2s", "rnn"} <= set(params) else "",
             f"vocabularies of {vocab:,}" if vocab else "",
             each.format(repeats) if repeats else ""]
    if any(setup):
        lines.append("  " + "; ".join(part for part in setup if part))
    for row in training_rows(record):
        sentences = f", {row['sentences']:>4} sentences" if "sentences" in row else ""
        ratios = ratio_spread(row)
        ratio = f"ratio {row['ratio']:.2f}x" + (f" ({ratios[0]:.2f}-{ratios[1]:.2f} step by step)"
                                                if ratios else "")
        lines.append(f"  {row['length']:>4} tokens{sentences}: ConvS2S {_rate(row, 'convs2s')}"
                     f"  RNN {_rate(row, 'rnn')} target tokens/s  {ratio}")
    first = first_length_at(record, factor)
    lengths = [row["length"] for row in training_rows(record)]
    lines.append(f"  ConvS2S first trains at least {factor:g}x the RNN's tokens/s at {first} tokens"
                 if first is not None else
                 f"  ConvS2S trains at least {factor:g}x the RNN's tokens/s at no length "
                 f"from {lengths[0]} to {lengths[-1]}")
    return lines


def reading_lines(record: dict, factor: float = 1.5) -> list[str]:
    """What a record shows, in words composed from its values: how each model's rate goes with
    the length (judged beyond the spread of its timed steps, :func:`trend`), the ratio at the
    shortest and longest lengths, the crossover (:func:`crossover`) and the first length at
    ``factor``."""
    rows = training_rows(record)
    lines = []
    for name, title in (("convs2s", "ConvS2S"), ("rnn", "The RNN")):
        values = [row[name] for row in rows]
        low, high = min(values), max(values)
        change = (f"its fastest length {high / low:.2f} times its slowest: "
                  + ("it changes little with the length" if high / low <= LITTLE else
                     "it changes with the length"))
        lines.append(f"{title}: {values[0]:,.0f} target tokens/s at {rows[0]['length']} tokens, "
                     f"{values[-1]:,.0f} at {rows[-1]['length']} ({change}; over the lengths "
                     f"it {trend(values, [spread(row, name) for row in rows])}).")
    first_row, last_row = rows[0], rows[-1]
    ends = (f"ConvS2S / RNN: {first_row['ratio']:.2f}x at {first_row['length']} tokens "
            f"({_even(first_row['ratio'])}), {last_row['ratio']:.2f}x at {last_row['length']} "
            f"({_even(last_row['ratio'])}).")
    lines.append(ends)
    cross, first = crossover(record), first_length_at(record, factor)
    if cross is None:
        lines.append(f"ConvS2S is not the faster at the longest length measured "
                     f"({last_row['length']} tokens): no crossover in this record.")
    elif cross == first_row["length"]:
        lines.append(f"ConvS2S is the faster at every length measured, from {cross} tokens on "
                     "(no crossover inside the record).")
    else:
        lines.append(f"The crossover: ConvS2S is the faster at every length from {cross} tokens "
                     "on, and not at every shorter one.")
    lines.append(f"It first trains at least {factor:g}x the RNN's tokens/s at {first} tokens."
                 if first is not None else
                 f"It reaches {factor:g}x the RNN's tokens/s at no length measured.")
    return lines


def _around(record: dict, length: float) -> list[dict]:
    """The record's rows around ``length``: the two that bracket it, or the one it equals, or
    the nearest end of the record."""
    rows = training_rows(record)
    same = [row for row in rows if row["length"] == length]
    if same:
        return same
    below = [row for row in rows if row["length"] < length]
    above = [row for row in rows if row["length"] > length]
    return ([below[-1]] if below else []) + ([above[0]] if above else [])


def _ratios_at(rows: list[dict]) -> str:
    words = [_even(row["ratio"]) for row in rows]
    values = " and ".join(f"{row['ratio']:.2f}x at {row['length']}" for row in rows)
    if len(set(words)) == 1:
        verdict = words[0] + (" at both" if len(rows) > 1 else "")
    else:
        verdict = ", ".join(f"{w} at {row['length']}" for w, row in zip(words, rows, strict=True))
    return f"{values} tokens: {verdict} ('about even': within {EVEN:.0%} of 1x)"


def near_length_lines(record: dict, length: float, what: str, factor: float = 1.5) -> list[str]:
    """Where ``what`` (e.g. "Multi30k's captions"), of mean ``length``, sits on the record: the
    ratios at the record's lengths around it, judged about even or not, and how that length
    stands to the crossover and to the first length at ``factor``."""
    rows = training_rows(record)
    around = _around(record, length)
    if len(around) == 2:
        where = f"between the record's {around[0]['length']} and {around[1]['length']} tokens"
    elif around[0]["length"] == length:
        where = f"at the record's {length:g} tokens"
    elif length < rows[0]["length"]:
        where = f"shorter than the record's shortest length, {rows[0]['length']} tokens"
    else:
        where = f"longer than the record's longest length, {rows[-1]['length']} tokens"
    lines = [f"{what}, {length:.1f} target positions on average, lie {where}; there ConvS2S / "
             f"RNN is {_ratios_at(around)}."]
    cross, first = crossover(record), first_length_at(record, factor)
    if cross is None:
        stand = "The record has no crossover (ConvS2S is not the faster at its longest length)"
    elif length >= cross:
        stand = f"That is at or past the record's crossover ({cross} tokens)"
    else:
        stand = f"That is short of the record's crossover ({cross} tokens)"
    if first is None:
        stand += f", and the record reaches {factor:g}x at no length."
    elif length >= first:
        stand += f", and at or past the {first} tokens where it first reaches {factor:g}x."
    else:
        stand += f", and short of the {first} tokens where it first reaches {factor:g}x."
    return lines + [stand]


def setup_differences(ours: dict, record: dict) -> list[str]:
    """How two sweeps' setups differ, each a phrase ("512 target tokens per batch here, 4,096 in
    the record"): the batch budget, the models' size, PyTorch's threads, the CPU, and how busy
    other processes kept the machine; every one of them moves the crossover."""
    out = []
    tokens = ours.get("tokens_per_batch"), record.get("tokens_per_batch")
    if None not in tokens and tokens[0] != tokens[1]:
        out.append(f"{tokens[0]:,} target tokens per batch here, {tokens[1]:,} in the record")
    size = [(r.get("parameters") or {}).get("convs2s") for r in (ours, record)]
    if None not in size and size[0] != size[1]:
        out.append(f"models of {size[0] / 1e6:.2f} M parameters here (ConvS2S), "
                   f"{size[1] / 1e6:.2f} M in the record")
    mine, theirs = ours.get("machine") or {}, record.get("machine") or {}
    threads = ours.get("threads"), record.get("threads")
    if None not in threads and threads[0] != threads[1]:
        out.append(f"{threads[0]} thread{'s' if threads[0] != 1 else ''} here, {threads[1]} in "
                   "the record")
    cpus = mine.get("cpu"), theirs.get("cpu")
    if None not in cpus and cpus[0] != cpus[1]:
        out.append(f"the CPU: {cpus[0]} here, {cpus[1]} in the record")
    elif ours.get("device") != record.get("device") and ours.get("device") and \
            record.get("device"):
        out.append(f"the device: {ours['device']} here, {record['device']} in the record")
    busy = mine.get("others_cores"), theirs.get("others_cores")
    if None not in busy and abs(busy[0] - busy[1]) >= QUIET_CORES:
        out.append(f"other processes' use of the machine: {busy[0]:.2f} cores here, "
                   f"{busy[1]:.2f} in the record")
    return out


def live_lines(ours: dict, record: dict, factor: float = 1.5) -> list[str]:
    """A sweep of this machine (:func:`measure`) against a record, composed from both: the
    ratio at each length both measured, where each first reaches ``factor`` among those
    lengths, and how their setups differ (:func:`setup_differences`)."""
    theirs = {row["length"]: row for row in training_rows(record)}
    common = [row for row in training_rows(ours) if row["length"] in theirs]
    if not common:
        return ["none of the lengths measured here is in the record: nothing to compare."]
    lines = []
    for row in common:
        other = theirs[row["length"]]
        lines.append(f"at {row['length']} tokens: ConvS2S / RNN {row['ratio']:.2f}x here "
                     f"({_even(row['ratio'])}), {other['ratio']:.2f}x in the record "
                     f"({_even(other['ratio'])})")
    lengths = [row["length"] for row in common]

    def first(rows):
        return next((row["length"] for row in rows if row["ratio"] >= factor), None)

    here, there = first(common), first([theirs[n] for n in lengths])
    said = {None: f"at none of {', '.join(map(str, lengths))} tokens"}
    lines.append(f"{factor:g}x first reached, of these lengths: here "
                 f"{said.get(here, f'at {here} tokens')}, in the record "
                 f"{said.get(there, f'at {there} tokens')}"
                 + (" (the same)" if here == there else " (not the same)"))
    differences = setup_differences(ours, record)
    lines.append("the two setups differ in: " + "; ".join(differences) if differences else
                 "the two setups match in batch budget, model size, threads, CPU and load")
    return lines


def multi30k_lines(speed_ratio: float, record: dict, caption_length: float) -> list[str]:
    """Training on Multi30k's own batches (notebook 07, section 7: ConvS2S / RNN target
    tokens/s) against the record at the lengths around the mean caption: within :data:`EVEN`
    of the record's ratios there, above them, or below."""
    around = _around(record, caption_length)
    ratios = [row["ratio"] for row in around]
    at = " and ".join(f"{row['ratio']:.2f}x at {row['length']}" for row in around)
    if min(ratios) - EVEN <= speed_ratio <= max(ratios) + EVEN:
        verdict = f"close to the record there (within {EVEN:g} of its ratios)"
    elif speed_ratio > max(ratios):
        verdict = "higher than the record there: ConvS2S did better on these batches"
    else:
        verdict = "lower than the record there: the RNN did better on these batches"
    return [f"on Multi30k's batches ConvS2S trained {speed_ratio:.2f}x the RNN's target "
            f"tokens/s ({_even(speed_ratio)}); the record around the mean caption "
            f"({caption_length:.1f} target positions): {at} tokens; this run is {verdict}."]


def gap_lines(ratios: dict, batches: tuple[int, int] = (1, 64)) -> list[str]:
    """Section 6 of notebook 07 in words: ``ratios[batch, part]`` is the GRU's time over
    ConvS2S's for ``part`` ("encoder", "decoder"), e.g. at the longest length. For each part,
    which model is faster with each batch, by how much (as shown, one decimal), and whether the
    gap between them shrinks, grows or stays the same from the small batch to the large."""
    lines = []
    small, large = batches
    parts = list(dict.fromkeys(part for (_, part) in ratios))
    for part in parts:
        r_small, r_large = ratios[small, part], ratios[large, part]

        def said(r: float) -> str:
            if f"{r:.1f}" == "1.0":
                return "both about as fast (1.0x)"
            return (f"ConvS2S {r:.1f}x as fast" if r > 1 else f"the GRU {1 / r:.1f}x as fast")

        gap_small, gap_large = (max(r, 1 / r) for r in (r_small, r_large))
        leader_small, leader_large = (r > 1 for r in (r_small, r_large))
        if leader_small != leader_large and "1.0" not in (f"{gap_small:.1f}",
                                                         f"{gap_large:.1f}"):
            change = "the faster model changes"
        elif f"{gap_small:.1f}" == f"{gap_large:.1f}":
            change = "the gap stays the same"
        else:
            change = "the gap " + ("shrinks" if gap_large < gap_small else "grows")
        sentences = ["one sentence" if small == 1 else f"{small} sentences", f"{large} sentences"]
        lines.append(f"{part}: {said(r_small)} with {sentences[0]}, {said(r_large)} with "
                     f"{sentences[1]}: {change} with the batch")
    return lines


def not_measured_lines(found: Sequence[dict]) -> list[str]:
    """One line for each device type of :data:`DEVICE_TYPES` that no record covers."""
    have = {r.get("device_type") for r in found}
    return [f"{name}: not yet measured" for kind, name in DEVICE_TYPES.items() if kind not in have]


def compare(prediction, found: Sequence[dict], factor: float = 1.5) -> list[str]:
    """A learner's predicted crossover (a length, or None) against each record, one line each."""
    if prediction is None:
        return ["no prediction checked yet: write yours into crossover_prediction (Exercise 5), "
                "run its check, then run this cell again"]
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
    / RNN with lines at 1x and ``factor``, against sentence length (log-2 axis), each point the
    median with bars from the lowest to the highest timed step where the record has them (the
    ratio's step by step); each row titled with its device (:func:`label`). ``mark``: (length,
    text) drawn as a dotted line on every panel, e.g. a data set's mean sentence length.
    ``fig``: a Figure to draw into (cleared), else a new one. Returns the Figure."""
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
        top = 0.0
        for name, style, color, title in (("convs2s", "o-", "C0", "ConvS2S"),
                                          ("rnn", "s-", "C3", "GRU + attention")):
            values = [row[name] for row in table]
            spans = [spread(row, name) or (row[name], row[name]) for row in table]
            ax_rate.errorbar(lengths, values, yerr=[[v - lo for v, (lo, _) in zip(values, spans,
                                                                                   strict=True)],
                                                    [hi - v for v, (_, hi) in zip(values, spans,
                                                                                  strict=True)]],
                             fmt=style, color=color, capsize=3, label=title)
            top = max(top, *(hi for _, hi in spans))
        ax_rate.set_ylim(0, 1.15 * top)
        ax_rate.set_ylabel("training target tokens/s")
        ax_rate.set_title(f"{label(record)}\nboth models", fontsize=10)
        ratios = [row["ratio"] for row in table]
        ratio_spans = [ratio_spread(row) or (row["ratio"], row["ratio"]) for row in table]
        ax_ratio.errorbar(lengths, ratios,
                          yerr=[[r - lo for r, (lo, _) in zip(ratios, ratio_spans, strict=True)],
                                [hi - r for r, (_, hi) in zip(ratios, ratio_spans, strict=True)]],
                          fmt="o-", color="C2", capsize=3, label="ConvS2S / RNN")
        ax_ratio.axhline(1.0, color="grey", linewidth=1, label="1x: equally fast")
        ax_ratio.axhline(factor, color="C1", linestyle="--", linewidth=1, label=f"{factor:g}x")
        ax_ratio.set_ylim(0, 1.1 * max(factor, *(hi for _, hi in ratio_spans)))
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
    bars = ("; bars: lowest to highest timed step"
            if any(spread(row, "convs2s") for r in found for row in training_rows(r)) else "")
    fig.suptitle(f"Training speed against sentence length: ConvS2S and the matched GRU{budget}"
                 f"{bars}", fontsize=11)
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
    models taking turns (every step's rate kept, for the spread). Copies of the models are
    trained: theirs stay as they are.

    Returns a record of the shipped records' shape (device, threads, date, the machine and how
    busy other processes kept it meanwhile, tokens per batch, ``training`` rows), which
    :func:`summary_lines` and :func:`plot` read."""
    from convs2s.course.baselines import train_side_by_side
    from convs2s.system import environment

    if repeats < 1 or warmup < 0 or not lengths or min(lengths) < 1 or tokens < max(lengths):
        raise ValueError(f"need repeats >= 1, warmup >= 0 and 1 <= every length <= tokens; got "
                         f"repeats={repeats}, warmup={warmup}, lengths={list(lengths)}, "
                         f"tokens={tokens}.")
    device = torch.device(device)
    models = {"convs2s": copy.deepcopy(conv), "rnn": copy.deepcopy(rnn)}
    g = torch.Generator().manual_seed(seed)
    watch = Watch()
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
                     "ratio": medians["convs2s"] / medians["rnn"],
                     **{f"{name}_steps": values for name, values in rates.items()}})
    params = {name: sum(p.numel() for p in model.parameters()) for name, model in models.items()}
    return {"benchmark": "length_sweep", "device": environment.describe_device(device),
            "device_type": device.type, "threads": torch.get_num_threads(),
            "date": datetime.date.today().isoformat(), "parameters": params,
            "machine": {**machine(device), **watch.stop()},
            "tokens_per_batch": tokens, "repeats": repeats, "training": rows}
