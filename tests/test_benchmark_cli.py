"""Benchmarks follow the package's rules (issue 25): one-line errors, no traceback on Ctrl-C or
SIGTERM, JSON written atomically through convs2s.fileio."""

from __future__ import annotations

import ast
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p for p in BENCHMARKS.glob("*.py") if p.name != "common.py")


@pytest.fixture
def common(monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    import common

    return common


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_every_benchmark_runs_its_main_through_run_main(script):
    tree = ast.parse(script.read_text(encoding="utf-8"))
    guard = [n for n in tree.body if isinstance(n, ast.If) and "__main__" in ast.unparse(n.test)]
    assert guard and "sys.exit(run_main(main))" in ast.unparse(guard[0]), script.name


@pytest.mark.parametrize("script", SCRIPTS, ids=lambda p: p.name)
def test_no_benchmark_writes_files_by_hand(script):
    text = script.read_text(encoding="utf-8")
    for forbidden in ("json.dump(", "torch.save(", "os.replace("):
        assert forbidden not in text, f"{script.name}: {forbidden} (use convs2s.fileio)"


@pytest.mark.parametrize("error, code, words", [
    (KeyboardInterrupt(), 130, "interrupted"),
    (ValueError("--x must be positive"), 1, "error: --x must be positive"),
    (FileNotFoundError(2, "No such file or directory", "runs/x"), 1, "error: "),
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
                            stderr=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "measuring"  # the condition: it is measuring
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 143
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "stopped by SIGTERM" in err
