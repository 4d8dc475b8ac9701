"""The project's default bands start at figures the course measured: each of
coursework/hidden/09.py's ``COURSE_BLEU`` is the test2016 beam-5 figure of its run in
benchmarks/RESULTS.md (French→English: notebook 09's stored full run; the other three, until
their full runs: the 30-minute runs), and the bands fall from it."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _hidden():
    spec = importlib.util.spec_from_file_location("hidden_09", ROOT / "coursework/hidden/09.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(starts: str) -> str:
    rows = [line for line in (ROOT / "benchmarks/RESULTS.md").read_text().splitlines()
            if line.startswith(starts)]
    assert len(rows) == 1, starts
    return rows[0]


def test_each_course_figure_is_the_measured_test2016_figure_of_its_run():
    figures = _hidden().COURSE_BLEU
    full = _row("| the project's budget, notebook 09's stored run: fr→en")
    assert figures["fr-en"] == float(re.search(r"test2016 sacreBLEU ([\d.]+)", full).group(1))
    short = _row("| `cpu_subword` preset (tied output embedding, final model), the other four")
    for direction, arrow in (("en-fr", "en→fr"), ("cs-en", "cs→en"), ("en-cs", "en→cs")):
        measured = re.search(rf"{arrow} [\d.]+ / \*\*([\d.]+)\*\*", short).group(1)
        assert figures[direction] == float(measured), direction
    assert set(figures) == {"fr-en", "en-fr", "cs-en", "en-cs"}


def test_full_marks_at_the_course_figure_and_fewer_points_below_it():
    hidden = _hidden()
    for direction, bands in hidden.DEFAULT_BANDS.items():
        lows = [b.floor for b in bands]
        shares = [b.share for b in bands]
        assert lows[0] == round(hidden.COURSE_BLEU[direction], 1) and shares[0] == 1.0
        assert lows == sorted(lows, reverse=True) and shares == sorted(shares, reverse=True)
