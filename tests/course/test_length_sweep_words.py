"""Notebook 07's sentences about timings are composed from the measured values (issue 65): each
function of convs2s.course.length_sweep that words a measurement is fed the shipped record's
values, values that say the opposite, and the edge cases (equal values, values inside the
spread, lengths outside the record)."""

from __future__ import annotations

import pytest

from convs2s.course import length_sweep


def record(ratios, lengths=(8, 16, 32, 64), conv=None, rnn=None, steps=None, **extra) -> dict:
    """A record with the given ratios: ConvS2S at ``conv`` (default 1,000 every length) and the
    RNN at conv / ratio, or the given ``rnn`` rates; ``steps`` adds each row's timed steps."""
    conv = conv or [1000.0] * len(ratios)
    rnn = rnn or [c / r for c, r in zip(conv, ratios, strict=True)]
    rows = []
    for i, n in enumerate(lengths):
        row = {"length": n, "sentences": 1024 // n, "convs2s": conv[i], "rnn": rnn[i],
               "ratio": conv[i] / rnn[i]}
        if steps:
            row.update(steps[i])
        rows.append(row)
    return {"benchmark": "length_sweep", "device": "CPU, 2 cores (x86_64)", "device_type": "cpu",
            "threads": 2, "date": "2030-01-02", "tokens_per_batch": 4096, "repeats": 3,
            "training": rows, **extra}


# --- the machine ---------------------------------------------------------------------------

def test_machine_line_says_quiet_shared_or_not_recorded():
    base = {"cpu": "AMD EPYC", "cores": 2, "cores_allowed": 2, "threads": 2,
            "device": "CPU, 2 cores (x86_64)"}
    assert length_sweep.machine_line({**base, "others_cores": 0.03}) == (
        "AMD EPYC, 2 cores, 2 threads; quiet: other processes used 0.03 cores on average "
        "while it ran")
    busy = length_sweep.machine_line({**base, "cores_allowed": 1, "threads": 1,
                                      "others_cores": 0.97})
    assert busy == ("AMD EPYC, 2 cores (1 of them for this run), 1 thread; shared: other "
                    "processes kept 0.97 of its 2 cores busy on average while it ran")
    # the edge: exactly at the threshold counts as shared
    assert "shared" in length_sweep.machine_line({**base, "others_cores":
                                                  length_sweep.QUIET_CORES})
    assert length_sweep.machine_line({**base, "others_cores": None}) == (
        "AMD EPYC, 2 cores, 2 threads; how busy the machine was is not recorded")
    assert length_sweep.machine_line({**base, "others_cores": None, "note": "from elsewhere"}) \
        == "AMD EPYC, 2 cores, 2 threads; from elsewhere"
    assert length_sweep.machine_line(None) == "machine not recorded"
    gpu = length_sweep.machine_line({**base, "device": "NVIDIA H200 (CUDA 12.8)",
                                     "others_cores": 0.0})
    assert gpu.startswith("NVIDIA H200 (CUDA 12.8), on a host with AMD EPYC, 2 cores")
    assert length_sweep.machine_line({**base, "others_cores": 0.0, "note": "a note"}).endswith(
        "(a note)")


def test_a_watch_measures_this_machine():
    watch = length_sweep.Watch()
    info = {**length_sweep.machine("cpu"), **watch.stop()}
    assert info["cores"] >= 1 and 1 <= info["cores_allowed"] <= info["cores"]
    assert info["threads"] >= 1 and info["seconds"] >= 0 and info["cpu"]
    assert info["others_cores"] is None or info["others_cores"] >= 0
    assert length_sweep.machine_line(info).startswith(info["cpu"])


def test_the_shipped_records_name_their_machine_and_their_spread_or_its_absence():
    for found in length_sweep.records():
        m = found.get("machine")
        assert m and m.get("cpu") and m.get("cores") and m.get("threads") == found["threads"], \
            "a shipped record names its CPU, its cores and its threads"
        assert m.get("others_cores") is not None or m.get("note"), \
            "a shipped record says how busy the machine was, or where what it says comes from"
        line = length_sweep.summary_lines(found)[1]
        assert line == f"  machine: {length_sweep.machine_line(m)}" and m["cpu"] in line
        rows = length_sweep.training_rows(found)
        if all(f"{name}_steps" in row for row in rows for name in ("convs2s", "rnn")):
            for row in rows:
                for name in ("convs2s", "rnn"):
                    steps = row[f"{name}_steps"]
                    assert len(steps) == found["repeats"]
                    assert min(steps) <= row[name] <= max(steps)
        else:  # an older record kept only the medians: its summary says so
            assert "their spread was not kept in this record" in \
                length_sweep.summary_lines(found)[2]


# --- spread and trend ----------------------------------------------------------------------

def test_spread_and_ratio_spread():
    row = {"convs2s": 10.0, "rnn": 5.0, "ratio": 2.0, "convs2s_steps": [9.0, 10.0, 12.0],
           "rnn_steps": [6.0, 5.0, 4.0]}
    assert length_sweep.spread(row, "convs2s") == (9.0, 12.0)
    assert length_sweep.ratio_spread(row) == (1.5, 3.0)
    assert length_sweep.spread({"convs2s": 1.0}, "convs2s") is None
    assert length_sweep.ratio_spread({"convs2s_steps": [1.0], "rnn_steps": [1.0, 2.0]}) is None


@pytest.mark.parametrize("values, ranges, said", [
    ([1, 2, 3], None, "rises at every step"),
    ([3, 2, 1], None, "falls at every step"),
    ([2, 2, 2], None, "stays level"),
    ([20, 24, 20], None, "goes up and down"),
    ([1, 1, 3], None, "rises overall, not at every step"),  # a level step: not "every step"
    ([3, 1, 2], None, "falls overall, not at every step"),
    ([1000.2, 1000.4], None, "stays level"),  # equal as shown (whole numbers)
    ([1, 2, 3], [(0, 5), (0, 5), (0, 5)], "stays level"),  # inside the spread: no step
    ([1, 2, 9], [(0.5, 1.5), (1, 5), (8, 10)], "rises overall, not at every step"),
    ([5], None, "is measured at one point only"),
])
def test_trend_judges_what_is_shown(values, ranges, said):
    assert length_sweep.trend(values, ranges) == said


# --- what a record shows -------------------------------------------------------------------

def test_reading_lines_on_the_shipped_record_follow_its_values():
    for found in length_sweep.records():
        rows = length_sweep.training_rows(found)
        lines = length_sweep.reading_lines(found, 1.5)
        text = "\n".join(lines)
        assert f"{rows[0]['ratio']:.2f}x at {rows[0]['length']} tokens" in text
        assert f"{rows[-1]['ratio']:.2f}x at {rows[-1]['length']}" in text
        cross = length_sweep.crossover(found)
        assert (f"from {cross} tokens on" in text) if cross else "no crossover" in text


def test_reading_lines_say_the_opposite_for_opposite_values():
    rising = record([0.9, 1.3, 1.8, 3.0], conv=[1000.0, 1000.0, 1010.0, 1020.0])
    lines = length_sweep.reading_lines(rising, 1.5)
    assert lines[0].startswith("ConvS2S: 1,000 target tokens/s at 8 tokens, 1,020 at 64")
    assert "changes little with the length" in lines[0]
    assert "it falls at every step" in lines[1]  # the RNN
    assert lines[2] == ("ConvS2S / RNN: 0.90x at 8 tokens (about even), 3.00x at 64 "
                        "(ConvS2S faster).")
    assert lines[3] == ("The crossover: ConvS2S is the faster at every length from 16 tokens "
                        "on, and not at every shorter one.")
    assert lines[4] == "It first trains at least 1.5x the RNN's tokens/s at 32 tokens."
    # the RNN ahead everywhere: no crossover, no 1.5x, ConvS2S's rate changing a lot
    behind = record([0.5, 0.6, 0.7, 0.8], conv=[500.0, 800.0, 1200.0, 2000.0])
    lines = length_sweep.reading_lines(behind, 1.5)
    assert "it changes with the length" in lines[0] and "rises at every step" in lines[0]
    assert "(the RNN faster)" in lines[2]
    assert lines[3].endswith("no crossover in this record.")
    assert lines[4] == "It reaches 1.5x the RNN's tokens/s at no length measured."
    # faster everywhere: the crossover is not inside the record
    ahead = record([1.2, 1.3, 1.6, 2.0])
    assert "at every length measured" in length_sweep.reading_lines(ahead)[3]
    # equal rates at every length: level, about even (exactly 1x)
    even = record([1.0, 1.0, 1.0, 1.0])
    lines = length_sweep.reading_lines(even)
    assert "stays level" in lines[0] and "stays level" in lines[1]
    assert "1.00x at 8 tokens (about even)" in lines[2]
    assert "no crossover" in lines[3]


def test_crossover_is_where_convs2s_stays_faster():
    assert length_sweep.crossover(record([0.5, 1.2, 0.9, 1.5])) == 64
    assert length_sweep.crossover(record([0.5, 1.2, 1.1, 0.9])) is None
    assert length_sweep.crossover(record([1.0, 1.0, 1.0, 1.01])) == 64  # 1.0 is not faster


# --- a data set's length on the record ------------------------------------------------------

def test_near_length_lines_on_the_shipped_record():
    for found in length_sweep.records():
        rows = length_sweep.training_rows(found)
        lines = length_sweep.near_length_lines(found, 14.1, "Multi30k's captions")
        below = [r for r in rows if r["length"] < 14.1][-1]
        above = [r for r in rows if r["length"] > 14.1][0]
        assert (f"between the record's {below['length']} and {above['length']} tokens"
                in lines[0])
        assert f"{below['ratio']:.2f}x at {below['length']}" in lines[0]


def test_near_length_lines_judge_even_or_not_and_the_crossover():
    near_even = record([0.95, 1.05, 1.6, 3.0])
    lines = length_sweep.near_length_lines(near_even, 12.0, "captions")
    assert lines[0] == ("captions, 12.0 target positions on average, lie between the record's 8 "
                        "and 16 tokens; there ConvS2S / RNN is 0.95x at 8 and 1.05x at 16 "
                        "tokens: about even at both ('about even': within 10% of 1x).")
    assert lines[1] == ("That is short of the record's crossover (16 tokens), and short of the "
                        "32 tokens where it first reaches 1.5x.")
    # the contrary: ConvS2S well ahead at the captions' length, past the crossover and 1.5x
    ahead = record([1.8, 2.5, 3.0, 4.0])
    lines = length_sweep.near_length_lines(ahead, 12.0, "captions")
    assert "ConvS2S faster at both" in lines[0]
    assert lines[1] == ("That is at or past the record's crossover (8 tokens), and at or past "
                        "the 8 tokens where it first reaches 1.5x.")
    # mixed verdicts, the RNN ahead, a length equal to a row, lengths outside the record
    mixed = record([0.7, 1.0, 1.3, 1.4])
    assert "the RNN faster at 8, about even at 16" in length_sweep.near_length_lines(
        mixed, 12.0, "x")[0]
    assert "at the record's 16 tokens" in length_sweep.near_length_lines(mixed, 16, "x")[0]
    assert "reaches 1.5x at no length" in length_sweep.near_length_lines(mixed, 16, "x")[1]
    assert "shorter than the record's shortest length, 8 tokens" in \
        length_sweep.near_length_lines(mixed, 5.0, "x")[0]
    assert "longer than the record's longest length, 64 tokens" in \
        length_sweep.near_length_lines(mixed, 90.0, "x")[0]
    none = record([0.7, 0.8, 0.9, 0.95])
    assert length_sweep.near_length_lines(none, 12.0, "x")[1].startswith(
        "The record has no crossover")


# --- a run of this machine against the record ------------------------------------------------

def _live(ratios, lengths=(16, 64), tokens=512, params=480_000, threads=2, others=0.9):
    out = record(ratios, lengths=lengths)
    out.update(tokens_per_batch=tokens, parameters={"convs2s": params, "rnn": params},
               threads=threads, machine={"cpu": "AMD EPYC", "others_cores": others})
    return out


def test_live_lines_compare_the_readers_run_with_the_record():
    stored = record([0.99, 1.09, 1.26, 1.67], lengths=(8, 16, 32, 64))
    stored.update(parameters={"convs2s": 10_238_592, "rnn": 10_265_544}, threads=1,
                  machine={"cpu": "AMD EPYC", "others_cores": 0.97})
    # the run: 3.10x at 16 tokens against the record's 1.09x
    lines = length_sweep.live_lines(_live([3.10, 3.5]), stored, 1.5)
    assert lines[0] == ("at 16 tokens: ConvS2S / RNN 3.10x here (ConvS2S faster), 1.09x in the "
                        "record (about even)")
    assert lines[2] == ("1.5x first reached, of these lengths: here at 16 tokens, in the record "
                        "at 64 tokens (not the same)")
    assert lines[3] == ("the two setups differ in: 512 target tokens per batch here, 4,096 in "
                        "the record; models of 0.48 M parameters here (ConvS2S), 10.24 M in the "
                        "record; 2 threads here, 1 in the record")
    # the contrary: the same verdicts, the same setup
    same = _live([1.05, 1.7], tokens=4096, params=10_238_592, threads=1, others=0.97)
    lines = length_sweep.live_lines(same, stored, 1.5)
    assert lines[0].endswith("1.05x here (about even), 1.09x in the record (about even)")
    assert lines[2].endswith("here at 64 tokens, in the record at 64 tokens (the same)")
    assert lines[3] == ("the two setups match in batch budget, model size, threads, CPU and "
                        "load")
    # neither reaches it; a quiet machine against a busy record; no common length
    lines = length_sweep.live_lines(_live([1.0, 1.1], others=0.0), record([1.0, 1.0, 1.0, 1.2],
                                    lengths=(8, 16, 32, 64)), 1.5)
    assert "here at none of 16, 64 tokens, in the record at none of 16, 64 tokens (the same)" \
        in lines[2]
    assert length_sweep.live_lines(_live([1.0], lengths=(128,)), stored) == [
        "none of the lengths measured here is in the record: nothing to compare."]


def test_setup_differences_name_cpu_and_load():
    ours = {"machine": {"cpu": "Intel Xeon", "others_cores": 0.0}, "threads": 2}
    theirs = {"machine": {"cpu": "AMD EPYC", "others_cores": 1.0}, "threads": 2}
    assert length_sweep.setup_differences(ours, theirs) == [
        "the CPU: Intel Xeon here, AMD EPYC in the record",
        "other processes' use of the machine: 0.00 cores here, 1.00 in the record"]
    assert length_sweep.setup_differences(theirs, theirs) == []


# --- training on Multi30k against the record ------------------------------------------------

@pytest.mark.parametrize("speed, verdict", [
    (1.07, "close to the record there"),      # the run (1.07x) against 0.99x / 1.09x
    (1.06, "close to the record there"),      # the stored run
    (0.90, "close to the record there"),      # within EVEN below the lower: still close
    (0.85, "lower than the record there"),
    (1.60, "higher than the record there"),
    (0.50, "lower than the record there"),
])
def test_multi30k_lines(speed, verdict):
    stored = record([0.99, 1.09, 1.26, 1.67])
    line = length_sweep.multi30k_lines(speed, stored, 14.1)[0]
    assert f"ConvS2S trained {speed:.2f}x" in line and verdict in line
    assert "0.99x at 8 and 1.09x at 16 tokens" in line


# --- section 6: one sentence against 64 -----------------------------------------------------

def test_gap_lines_read_the_readers_ratios():
    stored = {(1, "encoder"): 2.5, (1, "decoder"): 4.1, (64, "encoder"): 1.0,
              (64, "decoder"): 2.3}
    assert length_sweep.gap_lines(stored) == [
        "encoder: ConvS2S 2.5x as fast with one sentence, both about as fast (1.0x) with 64 "
        "sentences: the gap shrinks with the batch",
        "decoder: ConvS2S 4.1x as fast with one sentence, ConvS2S 2.3x as fast with 64 "
        "sentences: the gap shrinks with the batch"]
    # the run: the decoder's gap grew, 3.3x -> 5.9x
    grew = length_sweep.gap_lines({(1, "decoder"): 3.3, (64, "decoder"): 5.9})
    assert grew == ["decoder: ConvS2S 3.3x as fast with one sentence, ConvS2S 5.9x as fast "
                    "with 64 sentences: the gap grows with the batch"]
    # equal as shown, the GRU ahead, the faster model changing
    assert "the gap stays the same" in length_sweep.gap_lines(
        {(1, "encoder"): 2.31, (64, "encoder"): 2.34})[0]
    assert "the GRU 2.0x as fast with 64 sentences: the gap grows" in length_sweep.gap_lines(
        {(1, "encoder"): 1 / 1.5, (64, "encoder"): 0.5})[0]
    assert "the faster model changes" in length_sweep.gap_lines(
        {(1, "encoder"): 2.0, (64, "encoder"): 0.5})[0]
