"""The course's reference measurements, shipped with the package (made for notebooks 05 to 07).

Notebook 05 compares a learner's training run with the course's own runs of the same preset,
and shows two side-by-side measurements (words against pieces; optimizers and initialisations);
notebook 06 compares the learner's scores with the reference runs'; notebook 07 draws the length
sweep of ConvS2S against the recurrent baseline (:mod:`convs2s.course.length_sweep`). Those
figures are the JSON reports of ``benchmarks/`` (``benchmarks/results/``, in the course's
repository); the files the
notebooks read are copied into ``convs2s/course/results/`` so that the comparisons work wherever
the package is installed, on Colab too, with no repository around it.
``python -m tools.ship_results`` copies them; a test checks that the copies equal the reports.
"""

from __future__ import annotations

import fnmatch
import json
from pathlib import Path

__all__ = ["RESULTS_DIR", "SHIPPED", "result", "results"]

#: Where the copies are (package data).
RESULTS_DIR = Path(__file__).resolve().parent / "results"
#: The reports the notebooks read, as shell patterns over benchmarks/results/.
SHIPPED = ("quality_*.json", "word_vs_subword_de_en.json", "train_choices.json",
           "length_sweep_*.json", "settings_tried_*.json", "truecasing_*.json")


def results(pattern: str = "*.json") -> list[dict]:
    """Every shipped report whose file name matches ``pattern``, in file-name order."""
    files = sorted(p for p in RESULTS_DIR.glob("*.json") if fnmatch.fnmatch(p.name, pattern))
    return [json.loads(p.read_text(encoding="utf-8")) for p in files]


def result(name: str) -> dict | None:
    """The shipped report ``name`` ("train_choices.json"), or None if the package has none."""
    path = RESULTS_DIR / name
    return json.loads(path.read_text(encoding="utf-8")) if path.is_file() else None
