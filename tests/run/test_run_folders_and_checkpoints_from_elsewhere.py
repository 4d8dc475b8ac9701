"""Training runs and the benchmark scripts around them: one run per folder, snapshots of one
run, safe loads, devices checked before work, one-line errors."""

from __future__ import annotations

import importlib
import json
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch
from signal_support import default_signals
from test_every_direction import TINY, corpus  # noqa: F401 (the made-up corpus fixture)

from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.presets import Preset
from convs2s.system.folder_locks import LOCK_NAME, FolderInUse, folder_lock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def made_up(corpus, monkeypatch):  # noqa: F811
    """The made-up corpus as the data folder (CONVS2S_DATA_DIR)."""
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(corpus))
    return corpus


def _benchmark(name: str, monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    return importlib.import_module(name)


def _one_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


class _Holder:
    """Another process holding ``folder`` as a run does (its lock), until closed."""

    def __init__(self, folder: Path):
        code = textwrap.dedent(f"""
            import sys
            from convs2s.system.folder_locks import folder_lock
            with folder_lock({str(folder)!r}):
                print("held", flush=True)
                sys.stdin.readline()
        """)
        self.proc = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, text=True)
        assert self.proc.stdout.readline().strip() == "held"  # waits for the condition

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=120)


def _lock_is_free(folder: Path) -> bool:
    code = ("import sys\nfrom convs2s.system.folder_locks import folder_lock, FolderInUse\n"
            f"try:\n    with folder_lock({str(folder)!r}): pass\nexcept FolderInUse: sys.exit(3)\n")
    return subprocess.run([sys.executable, "-c", code], timeout=120).returncode == 0


# -- two runs into one --out -------------------------------------------------------------------


def test_a_second_training_into_a_held_folder_is_refused_in_one_line(
        made_up, tmp_path, capsys, monkeypatch):
    out = tmp_path / "race"
    out.mkdir()
    holder = _Holder(out)
    try:
        monkeypatch.setitem(train_mod.PRESETS, "tiny", TINY)
        code = train_mod.main(["--preset", "tiny", "--out", str(out), "--no-progress"])
        assert code == 1
        line = _one_line(capsys)
        assert "is in use by another run (process" in line and "another --out" in line
        assert sorted(p.name for p in out.iterdir()) == [LOCK_NAME]  # nothing written
    finally:
        holder.close()


def test_a_training_run_holds_its_folder_until_it_ends(made_up, tmp_path):
    out, seen = tmp_path / "run", []

    def probe(row, model):  # during the run, another process cannot take the folder
        seen.append(_lock_is_free(out))

    train_mod.train(TINY, out, progress=False, log=lambda *_: None, on_epoch_end=probe)
    assert seen == [False]
    assert _lock_is_free(out)  # and the lock died with the run


def test_the_lock_is_reentrant_within_a_process_and_refuses_others(tmp_path):
    with folder_lock(tmp_path), folder_lock(tmp_path):
        assert not _lock_is_free(tmp_path)
    assert _lock_is_free(tmp_path)
    holder = _Holder(tmp_path)
    try:
        with pytest.raises(FolderInUse, match="in use by another run"):
            with folder_lock(tmp_path):
                pass
    finally:
        holder.close()


def test_quality_refuses_a_held_folder_and_deletes_nothing(
        made_up, tmp_path, monkeypatch, capsys):
    quality = _benchmark("quality", monkeypatch)
    monkeypatch.setitem(train_mod.PRESETS, "tiny", TINY)
    out = tmp_path / "run"
    out.mkdir()
    (out / "last.pt").write_bytes(b"the other run's")
    holder = _Holder(out)
    try:
        code = quality.main(["--preset", "tiny", "--out", str(out), "--overwrite",
                             "--device", "cpu"])
        assert code == 1 and "in use by another run" in _one_line(capsys)
        assert (out / "last.pt").read_bytes() == b"the other run's"
    finally:
        holder.close()


def test_a_folder_this_run_made_is_removed_with_its_lock_when_the_run_fails(
        tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path / "no_data"))
    monkeypatch.setenv("CONVS2S_DATA_URL", (tmp_path / "no_mirror").as_uri())
    out = tmp_path / "new" / "run"
    assert train_mod.main(["--preset", "quick", "--out", str(out), "--no-progress"]) == 1
    capsys.readouterr()
    assert not (tmp_path / "new").exists()


# -- snapshots are checkpoints of one run, loaded safely ---------------------------------------


def _quality_run(quality, run: Path, monkeypatch, *extra, epochs=2, seed=7):
    monkeypatch.setitem(train_mod.PRESETS, "tiny",
                        Preset(**{**TINY.__dict__, "epochs": epochs, "seed": seed}))
    argv = ["--preset", "tiny", "--tokenizer", "subword", "--out", str(run), "--device", "cpu",
            "--beam-sizes", "1", *extra]
    monkeypatch.setattr(sys, "argv", ["benchmarks/quality.py", *argv])
    assert quality.main(argv) == 0


def test_choose_never_unpickles_code_from_a_snapshot(
        made_up, tmp_path, monkeypatch, capsys):
    quality, choose = _benchmark("quality", monkeypatch), _benchmark("choose", monkeypatch)
    run = tmp_path / "run"
    _quality_run(quality, run, monkeypatch, "--average-last", "3", "--no-curve")
    marker = tmp_path / "pwned"

    class Evil:
        def __reduce__(self):
            return (Path.touch, (marker,))

    torch.save({"format": "convs2s-checkpoint", "version": 1, "row": Evil()},
               run / "snapshots" / "epoch01.pt")
    capsys.readouterr()
    assert choose.main([str(run), "--device", "cpu"]) == 2
    line = _one_line(capsys)
    assert "epoch01.pt is not a convs2s checkpoint: it holds Python objects" in line
    assert "weights_only=False" not in line and "set to False" not in line  # never that advice
    assert not marker.exists()


def test_snapshots_of_another_run_are_refused(
        made_up, tmp_path, monkeypatch, capsys):
    quality, choose = _benchmark("quality", monkeypatch), _benchmark("choose", monkeypatch)
    first, second = tmp_path / "first", tmp_path / "second"
    _quality_run(quality, first, monkeypatch, "--average-last", "3", "--no-curve")
    _quality_run(quality, second, monkeypatch, "--average-last", "3", "--no-curve", seed=8)
    foreign = first / "snapshots" / "epoch02.pt"
    (second / "snapshots" / "epoch02.pt").write_bytes(foreign.read_bytes())
    capsys.readouterr()
    assert choose.main([str(second), "--device", "cpu"]) == 2
    assert "epoch02.pt belongs to another run than" in _one_line(capsys)


def test_overwrite_removes_what_the_run_made_and_keep_snapshots_works_without_curve(
        made_up, tmp_path, monkeypatch):
    quality = _benchmark("quality", monkeypatch)
    run = tmp_path / "run"
    _quality_run(quality, run, monkeypatch, "--average-last", "3", "--no-curve", epochs=3)
    assert sorted(p.name for p in (run / "snapshots").iterdir()) == [
        "epoch01.pt", "epoch02.pt", "epoch03.pt"]
    (run / "averaged.pt").write_bytes((run / "best.pt").read_bytes())
    (run / "notes.txt").write_text("mine")  # not the run's: kept
    _quality_run(quality, run, monkeypatch, "--overwrite", "--no-curve", epochs=1)
    assert not (run / "snapshots").exists() and not (run / "averaged.pt").exists()
    assert (run / "notes.txt").read_text() == "mine"
    ids = {Checkpoint.load(run / n).run_id for n in ("best.pt", "last.pt")}
    assert len(ids) == 1 and None not in ids


# -- a device that is not there, before any work -----------------------------------------------


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_convs2s_device_cuda_without_cuda_is_refused_before_loading_data(
        tmp_path, monkeypatch, capsys):
    loaded = []
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: loaded.append(1))
    monkeypatch.setenv("CONVS2S_DEVICE", "cuda")
    out = tmp_path / "run"
    assert train_mod.main(["--preset", "quick", "--out", str(out), "--no-progress"]) == 1
    line = _one_line(capsys)
    assert "CONVS2S_DEVICE='cuda'" in line and "CUDA is not available" in line
    assert not loaded and not out.exists()


# -- benchmark scripts' tracebacks -------------------------------------------------------------


def test_quality_refuses_beam_size_zero_before_training(tmp_path, monkeypatch, capsys):
    quality = _benchmark("quality", monkeypatch)
    monkeypatch.setattr(quality, "train", lambda *a, **k: pytest.fail("trained"))
    with pytest.raises(SystemExit) as e:
        quality.main(["--preset", "quick", "--beam-sizes", "0", "--out", str(tmp_path / "r")])
    assert e.value.code == 2 and "--beam-sizes: must be at least 1" in _one_line(capsys)


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
@pytest.mark.parametrize("script", ["choose", "quality"])
def test_benchmarks_refuse_a_missing_device_in_one_line(script, tmp_path, monkeypatch, capsys):
    module = _benchmark(script, monkeypatch)
    argv = ([str(tmp_path)] if script == "choose" else ["--out", str(tmp_path / "r")])
    with pytest.raises(SystemExit) as e:
        module.main([*argv, "--device", "cuda"])
    assert e.value.code == 2 and "CUDA is not available" in _one_line(capsys)


def test_sigterm_to_quality_is_one_line_and_exit_143(tmp_path):
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {str(ROOT / 'tests')!r})
        sys.path.insert(0, {str(ROOT / 'tests' / 'run')!r})
        sys.path.insert(0, {str(ROOT / 'benchmarks')!r})
        import quality
        from convs2s.run import train as train_mod
        from conftest import TINY_PAIRS
        from test_every_direction import TINY
        data = {{"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}}
        quality.load_multi30k = lambda *a, **k: data
        train_mod.PRESETS["tiny"] = TINY.__class__(**{{**TINY.__dict__, "epochs": 1000}})
        real = train_mod.next_token_loss
        def loss(*a, **k):
            print("training", flush=True)
            return real(*a, **k)
        train_mod.next_token_loss = loss
        sys.exit(quality.run_main(lambda: quality.main([  # as its __main__ does
            "--preset", "tiny", "--out", {str(tmp_path / 'run')!r}, "--device", "cpu"])))
    """)
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    while "training" not in proc.stdout.readline():  # wait for a training step to run
        assert proc.poll() is None, proc.stderr.read()
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err
    assert "Traceback" not in err and "stopped by SIGTERM" in err


def test_choose_json_report_still_written(made_up, tmp_path, monkeypatch):
    """choose.py end to end after the changes: a report with both choices."""
    quality, choose = _benchmark("quality", monkeypatch), _benchmark("choose", monkeypatch)
    run = tmp_path / "run"
    _quality_run(quality, run, monkeypatch, "--average-last", "3", "--no-curve")
    report = tmp_path / "c.json"
    monkeypatch.setattr(sys, "argv", ["benchmarks/choose.py", str(run)])
    assert choose.main([str(run), "--device", "cpu", "--json", str(report)]) == 0
    assert json.loads(report.read_text())["chosen_k"] in (1, 2)
