"""Notebook 07 as a reader meets it (issues 63 and 65): its comparison with Exercise 5 shows the
prediction the reader's own check accepted, never the folded solution's, so the stored output
is what a reader who has predicted nothing sees; every cell that times something names the
machine it ran on; the timing sentences are printed from the run's values, not written into
the markdown."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from convs2s.course import checks
from convs2s.course.checks import nb07

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = next((ROOT / "notebooks").glob("07_*.ipynb"))


def _cells():
    nb = json.loads(NOTEBOOK.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        source = cell["source"] if isinstance(cell["source"], str) else "".join(cell["source"])
        text = "".join(o.get("text", "") if isinstance(o.get("text", ""), str)
                       else "".join(o["text"]) for o in cell.get("outputs", []))
        yield cell, source, text


def test_the_comparison_reads_the_prediction_a_check_accepted(capsys):
    nb07._checked["prediction"] = None
    assert nb07.checked_crossover_prediction() is None
    assert checks.speed_crossover(32) is True
    assert nb07.checked_crossover_prediction() == 32
    with pytest.raises(AssertionError):  # a refused answer leaves the accepted one
        checks.speed_crossover(50)
    assert nb07.checked_crossover_prediction() == 32
    nb07._checked["prediction"] = None
    capsys.readouterr()


def test_the_stored_comparison_is_what_a_reader_who_predicted_nothing_sees():
    cells = list(_cells())
    solution = [src for cell, src, _ in cells
                if cell["metadata"].get("convs2s", {}).get("exercise") == "speed_crossover"
                and cell["metadata"]["convs2s"].get("role") == "solution"]
    assert len(solution) == 1 and "crossover_prediction = " in solution[0]
    assert "checks.speed_crossover(" not in solution[0], \
        "the solution calls no check: the comparison is of the reader's own checked prediction"
    comparison = [(src, out) for _, src, out in cells if "length_sweep.compare(" in src]
    assert len(comparison) == 1
    src, out = comparison[0]
    assert "checked_crossover_prediction()" in src
    assert "you predicted" not in out
    if out:
        assert out.startswith("no prediction checked yet")


def test_every_timing_cell_names_the_machine():
    timing = [(src, out) for _, src, out in _cells()
              if re.search(r"length_sweep\.Watch\(\)|length_sweep\.measure\(", src)]
    assert len(timing) == 4  # section 6, the live sweep, section 7's training, decoding
    for src, out in timing:
        assert "machine_line(" in src or "summary_lines(live" in src
        if out:  # stored outputs: the machine and its load named
            assert re.search(r"machine: .*(quiet|shared|not recorded)", out), out[:300]


def test_the_markdown_states_no_measured_ratio_as_fact():
    """The sentences that interpret timings are printed by the code from the run's values; the
    markdown says what to look at, never which way this run came out."""
    stale = ("the gap shrinks", "Multi30k sits near the crossover", "sit near that crossover",
             "3 layers of width 3", "about even at Multi30k's", "a CPU with 2 cores running 2",
             "the record bears out")
    for cell, src, _ in _cells():
        if cell["cell_type"] == "markdown":
            for phrase in stale:
                assert phrase not in src, phrase
