"""benchmarks/compiled_step.py: the GPU table behind its model FLOP utilisation, and bad sizes
refused in one line. (A run compiles a preset's model, minutes on a CPU; its step is the
trainer's, which tests/run/test_compiled_training.py compiles and checks.)"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def bench(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import compiled_step

    return compiled_step


def test_the_peak_is_the_named_gpus_and_none_for_an_unknown_one(bench):
    assert bench.peak_tflops("NVIDIA H100 80GB HBM3") == 989.0  # SXM
    assert bench.peak_tflops("NVIDIA H100 PCIe") == 756.0  # not the SXM part's
    assert bench.peak_tflops("NVIDIA H200") == 989.0
    assert bench.peak_tflops("Tesla T4") == 65.0
    assert bench.peak_tflops("NVIDIA L40S") == 362.0  # not the L4's
    assert bench.peak_tflops("NVIDIA GeForce GTX 1080") is None
    assert bench.peak_tflops("") is None  # a CPU


@pytest.mark.parametrize("args, words", [
    (["--steps", "0"], "--steps must be at least 1"),
    (["--compile", "fast"], "invalid choice"),
])
def test_bad_arguments_are_refused_in_one_line(args, words):
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "compiled_step.py"), *args],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and words in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
