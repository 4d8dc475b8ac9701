"""Benchmarks follow the package's rules: one-line errors, no traceback on Ctrl-C or
SIGTERM, JSON written atomically through convs2s.system.atomic_files."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from signal_support import default_signals

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "common.py")


@pytest.fixture
def common(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import common

    return common


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_runs_its_main_through_run_main(script):
    """Directly, or (a benchmark that loads torch at its top) through ``run_script``, which
    imports the script under StopSignals first and then runs its main through run_main."""
    tree = ast.parse(script.read_text(encoding="utf-8"))
    guard = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert len(guard) == 1, script.name
    code = ast.unparse(guard[0])
    assert ("sys.exit(run_main(main))" in code
            or f"sys.exit(run_script('{script.stem}'))" in code), script.name


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_benchmark_writes_files_by_hand(script):
    text = script.read_text(encoding="utf-8")
    for forbidden in ("json.dump(", "torch.save(", "os.replace("):
        assert forbidden not in text, (f"{script.name}: {forbidden} "
                                       "(use convs2s.system.atomic_files)")


@pytest.mark.parametrize("error, code, words", [
    (KeyboardInterrupt(), 130, "interrupted"),
    (ValueError("--x must be positive"), 2, "error: --x must be positive"),
    (FileNotFoundError(2, "No such file or directory", "runs/x"), 2, "error: "),
    (OSError(28, "No space left on device"), 1, "error: No space left on device"),
])
def test_run_main_turns_errors_into_one_line(common, capsys, error, code, words):
    def main():
        raise error

    assert common.run_main(main) == code
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and words in err and "Traceback" not in err


def test_run_main_passes_exit_codes_through(common):
    assert common.run_main(lambda: 2) == 2 and common.run_main(lambda: None) == 0


def test_a_real_sigterm_to_a_benchmark_is_one_line_and_exit_143():
    script = textwrap.dedent(f"""
        import sys, time
        sys.path.insert(0, {str(BENCHMARKS)!r})
        from common import run_main
        def main():
            print("measuring", flush=True)
            while True:
                time.sleep(0.05)
        sys.exit(run_main(main))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    try:
        assert proc.stdout.readline().strip() == "measuring"  # the condition: it is measuring
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 143
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "stopped by SIGTERM" in err


def test_train_step_benchmark_profiles_and_compares_the_three_steps(tmp_path):
    """A tiny run of benchmarks/train_step.py on synthetic padded batches: the three steps
    timed, the ratios and the profiles written, and the step that skips padding's output layer
    counts less arithmetic; the figures themselves are for a quiet machine, not for a test."""
    out = tmp_path / "step.json"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "train_step.py"), "--preset", "quick_subword",
         "--batches", "synthetic", "--steps", "2", "--profile-steps", "1", "--vocab", "50",
         "--src-len", "5", "--trg-len", "6", "--pad-share", "0.5", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    import json

    report = json.loads(out.read_text())
    assert set(report["median_ms"]) == {"before", "matmul", "now"}
    assert set(report["ratio_over_before"]) == {"matmul", "now"}
    assert all(r > 0 for r in report["ratio_over_before"].values())
    assert "now / before step time" in proc.stdout
    assert 0 < report["padding_share"] < 0.5
    gflop = report["step_gflop"]
    assert gflop["now"] < gflop["matmul"] == gflop["before"]
    assert report["profile"]["before"] and report["profile"]["now"]
    ops = {r["op"] for r in report["profile"]["before"]}  # the patched path really ran conv1d
    assert any("convolution" in op for op in ops), ops


def test_train_step_benchmark_refuses_bad_sizes_in_one_line():
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "train_step.py"), "--steps", "0"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and "--steps must be at least 1" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_length_sweep_measures_both_models_at_every_length_and_batch(tmp_path):
    """A tiny run of benchmarks/length_sweep.py: every length trained and decoded (batch 1 and
    the full budget, greedy and beam) by both models, ratios and the crossover written; the
    figures themselves are for a quiet machine, not for a test."""
    import json

    out = tmp_path / "sweep.json"
    proc = subprocess.run(
        [sys.executable, str(BENCHMARKS / "length_sweep.py"), "--preset", "quick", "--lengths",
         "4", "8", "--tokens", "32", "--repeats", "1", "--warmup", "1", "--vocab", "40",
         "--beam", "2", "--json", str(out)],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(out.read_text())
    assert [r["length"] for r in report["training"]] == [4, 8]
    assert [r["sentences"] for r in report["training"]] == [8, 4]
    assert {(r["length"], r["sentences"], r["beam"]) for r in report["decoding"]} == {
        (4, 1, 1), (4, 1, 2), (4, 8, 1), (4, 8, 2), (8, 1, 1), (8, 1, 2), (8, 4, 1), (8, 4, 2)}
    for row in report["training"] + report["decoding"]:
        assert row["convs2s"] > 0 and row["rnn"] > 0
        assert abs(row["ratio"] - row["convs2s"] / row["rnn"]) < 1e-9
    assert report["device"] and report["threads"] >= 1 and report["command"]


def test_length_sweep_crossover_is_where_convs2s_stays_faster(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import length_sweep

    rows = [{"length": n, "ratio": r} for n, r in [(8, 0.5), (16, 1.2), (32, 0.9), (64, 1.5),
                                                   (128, 2.0)]]
    assert length_sweep.crossover(rows) == 64
    assert length_sweep.crossover(rows[:3]) is None
    assert length_sweep.crossover([{"length": 8, "ratio": 3.0}]) == 8


def test_length_sweep_refuses_a_budget_below_the_longest_length():
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "length_sweep.py"), "--lengths",
                           "8", "64", "--tokens", "32"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and "--tokens at least the longest length" in proc.stderr
    assert "Traceback" not in proc.stderr


#: The tools' command lines (python -m ...), each given an option it does not have.
TOOLS = ["tools.badges", "tools.coursework", "tools.export_pretrained", "tools.screenshots",
         "tools.site_screenshots", "tools.strip_solutions", "tools.time_estimate", "tools.site",
         "tools.site.flipbook_data"]


@pytest.mark.parametrize("command", [
    *[["-m", tool, "--no-such-option"] for tool in TOOLS],
    [str(BENCHMARKS / "decoding.py"), "--batch", "0"],
    [str(BENCHMARKS / "decoding.py"), "--repeats", "0"],
    [str(BENCHMARKS / "subword_choice.py"), "--vocab-size", "0"],
], ids=lambda c: " ".join(Path(a).name for a in c[:3]))
def test_a_mistyped_argument_is_one_line_exit_2(command):
    """A tool's unknown option was argparse's usage block and error (two to four lines); a
    benchmark's batch, repeats or vocabulary of 0 a traceback from deep inside. Now one line
    each, exit status 2, before any work."""
    done = subprocess.run([sys.executable, *command], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    lines = done.stderr.strip().splitlines()
    assert (done.returncode, len(lines)) == (2, 1), done.stderr
    assert "error:" in lines[0] and "Traceback" not in done.stderr
