"""A run folder or a checkpoint may come from someone else (a shared run, a download): what it
holds is data, checked before use, never an instruction to act on the file system. And a
folder a killed run left behind is taken up again by the next run in it.

Runs are tiny (a made-up corpus, a 1-layer model); a kill (SIGKILL) is a real one, in a child.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import TINY_PAIRS
from signal_support import default_signals, wait_until_blocked

from convs2s.model import ConvS2SConfig
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.presets import PRESETS, Preset
from convs2s.run.train import train
from convs2s.system.folder_locks import LOCK_NAME

TESTS = Path(__file__).resolve().parents[1]
TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=1, patience=100,
    label_smoothing=0.0, seed=7, average_last=3,
)
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}


def _run(out, preset=TINY, **kw):
    return train(preset, out, data=DATA, progress=False, log=lambda *_: None, **kw)


@pytest.fixture(scope="module")
def one_epoch(tmp_path_factory) -> Path:
    """A finished one-epoch run (last.pt, best.pt, final.pt, snapshots/epoch01.pt)."""
    out = tmp_path_factory.mktemp("finished") / "run"
    _run(out)
    return out


def _copy(run: Path, to: Path, change=None) -> Path:
    """A copy of ``run`` whose last.pt went through ``change(checkpoint dictionary)``."""
    shutil.copytree(run, to)
    if change is not None:
        data = torch.load(to / "last.pt", weights_only=True)
        change(data)
        torch.save(data, to / "last.pt")
    return to


@pytest.fixture
def cli(monkeypatch):
    """The train CLI on the tiny corpus (``--preset tiny``)."""
    monkeypatch.setitem(PRESETS, "tiny", TINY)
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: DATA)
    return lambda *args: train_mod.main(["--preset", "tiny", "--no-progress", *map(str, args)])


def _one_error_line(capsys) -> str:
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


# -- what last.pt names is never deleted outside the run's snapshots/ -------------------------


def test_resume_never_deletes_files_a_last_pt_names_outside_its_snapshots(
        one_epoch, tmp_path, cli, capsys):
    outside, beside = tmp_path / "outside.txt", tmp_path / "beside.txt"
    for victim in (outside, beside):
        victim.write_text("not the run's")

    def name_them(data):  # the oldest names are the ones a run drops after its next epoch
        data["train_state"]["snapshots"] = [str(outside), "../../beside.txt", "x", "epoch01.pt"]

    run = _copy(one_epoch, tmp_path / "run", name_them)
    assert cli("--out", run, "--resume", "--epochs", "3") == 1
    assert "snapshots" in _one_error_line(capsys)
    assert outside.read_text() == beside.read_text() == "not the run's"


# -- a malformed train state is one line, not a traceback ------------------------------------


def _set(key, value):
    return lambda data: data["train_state"].__setitem__(key, value)


def _wrong_shape_adam_state(data):
    data["train_state"]["optimizer"]["state"][0]["exp_avg"] = torch.zeros(3)


def _state_of_no_parameter(data):
    state = data["train_state"]["optimizer"]["state"]
    state[len(state) + 5] = dict(state[0])


def _string_learning_rate(data):
    data["train_state"]["optimizer"]["param_groups"][0]["lr"] = "fast"


MALFORMED = {
    "history rows without their fields": (_set("history", [{"foo": 1}]), "history row 1"),
    "a string history": (_set("history", "abc"), "history"),
    "a string step": (_set("step", "6"), "step '6'"),
    "a float batch position": (_set("batch_in_epoch", 1e9), "batch_in_epoch"),
    "a batch position past the epoch": (_set("batch_in_epoch", 10**9), "past the"),
    "NaN seconds": (_set("seconds", float("nan")), "seconds nan"),
    "a short torch RNG state": (_set("rng", {"torch": torch.zeros(3, dtype=torch.uint8),
                                             "python": (1, 2)}), "random-number state"),
    "a string RNG state": (_set("rng", "x"), "random-number state"),
    "an optimizer state of the wrong shape": (_wrong_shape_adam_state, "'exp_avg' (3,)"),
    "an optimizer without parameter groups": (
        _set("optimizer", {"state": {}, "param_groups": []}), "optimizer state"),
    "an optimizer state of no parameter": (_state_of_no_parameter, "parameters the model lacks"),
    "a string learning rate": (_string_learning_rate, "learning rate 'fast'"),
}


@pytest.mark.parametrize("case", MALFORMED)
def test_resume_refuses_a_malformed_train_state_in_one_line(
        case, one_epoch, tmp_path, cli, capsys):
    change, said = MALFORMED[case]
    run = _copy(one_epoch, tmp_path / "run", change)
    assert cli("--out", run, "--resume", "--epochs", "2") == 1
    line = _one_error_line(capsys)
    assert f"{run / 'last.pt'} cannot be resumed" in line and said in line, line


def test_resume_from_meta_device_weights_is_one_line(one_epoch, tmp_path, cli, capsys):
    def shapes_only(data):
        data["model"] = {k: torch.empty(v.shape, device="meta") for k, v in data["model"].items()}

    run = _copy(one_epoch, tmp_path / "run", shapes_only)
    assert cli("--out", run, "--resume", "--epochs", "2") == 1
    line = _one_error_line(capsys)
    assert str(run / "last.pt") in line and "meta" in line


def test_resume_takes_the_optimizer_settings_from_the_preset_not_the_checkpoint(
        one_epoch, tmp_path):
    def odd_settings(data):  # what would make the first update fail (or differ)
        group = data["train_state"]["optimizer"]["param_groups"][0]
        group.update(eps="tiny", betas=(5.0, "y"), weight_decay=-3.0)

    run = _copy(one_epoch, tmp_path / "run", odd_settings)
    two = dataclasses.replace(TINY, epochs=2)
    resumed = _run(run, two, resume=True)
    full = _run(tmp_path / "full", two)
    for key, value in full.model.state_dict().items():
        torch.testing.assert_close(resumed.model.state_dict()[key], value, rtol=0, atol=0)


def test_the_train_state_of_a_run_passes_its_own_check(one_epoch):
    stored = Checkpoint.load(one_epoch / "last.pt").train_state
    state = train_mod.TrainState.from_dict(stored, one_epoch / "last.pt")
    assert state.history == stored["history"] and state.snapshots == ["epoch01.pt"]
    with pytest.raises(CheckpointError, match="lr_scale 0 is not a finite number > 0"):
        train_mod.TrainState.from_dict({**stored, "lr_scale": 0})


# -- a killed run's folder is taken up by the next run -----------------------------------------

KILL_SCRIPT = """
import os, signal, sys
from pathlib import Path
sys.path.insert(0, {tests!r})
from conftest import TINY_PAIRS
from convs2s.run.presets import Preset
from convs2s.run.train import train
real_replace = os.replace

def replace(src, dst, *a, **k):  # SIGKILL when the file {name!r} is about to be in place
    if Path(dst).name == {name!r}:
        os.kill(os.getpid(), signal.SIGKILL)
    return real_replace(src, dst, *a, **k)

os.replace = replace
data = {{"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}}
train(Preset.from_dict({preset!r}), {out!r}, data=data, progress=False)
"""


def _killed_at(out: Path, name: str, preset: Preset) -> None:
    """Train ``preset`` into ``out`` in a child killed (SIGKILL) as ``name`` is written."""
    script = KILL_SCRIPT.format(tests=str(TESTS), name=name, out=str(out),
                                preset=json.loads(json.dumps(preset.as_dict())))
    proc = subprocess.run([sys.executable, "-c", textwrap.dedent(script)], capture_output=True,
                          text=True, timeout=300, env=dict(os.environ, OMP_NUM_THREADS="1"))
    assert proc.returncode == -signal.SIGKILL, proc.stdout + proc.stderr


def test_a_run_killed_writing_its_first_last_pt_leaves_a_folder_a_new_run_takes(tmp_path):
    out = tmp_path / "run"
    _killed_at(out, "last.pt", TINY)
    left = sorted(p.name for p in out.iterdir())
    assert left[0] == LOCK_NAME and len(left) == 2 and left[1].startswith(".last.pt.")
    with pytest.raises(CheckpointError, match="holds no last.pt to resume from"):
        _run(out, resume=True)
    _run(out)  # a folder with only the lock and a killed write's temporary file is empty
    assert sorted(p.name for p in out.iterdir()) == [
        LOCK_NAME, "best.pt", "final.pt", "last.pt", "snapshots"]


def test_a_snapshot_lost_to_a_kill_after_its_last_pt_is_written_again_at_resume(tmp_path):
    out, two = tmp_path / "run", dataclasses.replace(TINY, epochs=2)
    _killed_at(out, "epoch02.pt", two)
    assert Checkpoint.load(out / "last.pt").epoch == 2  # the epoch's last.pt came first
    temps = [p.name for p in (out / "snapshots").iterdir() if p.name.startswith(".")]
    assert len(temps) == 1 and temps[0].startswith(".epoch02.pt.")
    _run(out, two, resume=True)  # the run is complete: it makes final.pt, nothing more
    assert sorted(p.name for p in (out / "snapshots").iterdir()) == ["epoch01.pt", "epoch02.pt"]
    snapshot = Checkpoint.load(out / "snapshots" / "epoch02.pt")
    last = Checkpoint.load(out / "last.pt")
    assert snapshot.extra["row"] == last.history[-1] and snapshot.run_id == last.run_id
    for key, value in last.state_dict.items():
        torch.testing.assert_close(snapshot.state_dict[key], value, rtol=0, atol=0)
    averages = Checkpoint.load(out / "final.pt").choices["averages"]
    assert [r["k"] for r in averages] == [1, 2] and averages[1]["epochs"] == [1, 2]


def test_temporary_files_of_killed_writes_are_removed_and_nothing_else(
        one_epoch, tmp_path):
    run = _copy(one_epoch, tmp_path / "run")
    killed = [run / ".final.pt.k9x2m1ab.tmp", run / ".last.pt.q0w8e7rt.tmp",
              run / "snapshots" / ".epoch07.pt.a1b2c3d4.tmp"]
    kept = [run / ".final.pt.keep", run / "final.pt.tmp", run / "snapshots" / "epoch07.pt.tmp",
            run / "snapshots" / ".notes.txt.a1b2c3d4.tmp",
            run / "snapshots" / ".epoch07.pt.short.tmp", run / ".final.pt.a1b2c3d4.txt"]
    for path in killed + kept:
        path.write_bytes(b"")
    _run(run, dataclasses.replace(TINY, epochs=2), resume=True)
    assert [p for p in killed if p.exists()] == []
    assert [p for p in kept if not p.exists()] == []


def test_a_new_run_refuses_a_snapshots_folder_that_is_a_link(tmp_path):
    out, elsewhere = tmp_path / "run", tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "epoch01.pt").write_bytes(b"someone's")
    out.mkdir()
    (out / "snapshots").symlink_to(elsewhere)
    with pytest.raises(CheckpointError, match="snapshots is not a folder"):
        _run(out)
    assert (elsewhere / "epoch01.pt").read_bytes() == b"someone's"


# -- final.pt averages only the epochs its run recorded ----------------------------------------


def test_final_pt_averages_only_snapshots_of_epochs_in_the_history(tmp_path):
    out, two = tmp_path / "run", dataclasses.replace(TINY, epochs=2)
    _run(out, two)
    # epoch 3's snapshot, written just before a kill that left last.pt at epoch 2 (the order of
    # an older convs2s): weights the run's history never recorded
    snap = torch.load(out / "snapshots" / "epoch02.pt", weights_only=True)
    snap["row"] = {**snap["row"], "epoch": 3, "step": snap["row"]["step"] + 6}
    snap["model"] = {k: v + 1 if v.is_floating_point() else v for k, v in snap["model"].items()}
    torch.save(snap, out / "snapshots" / "epoch03.pt")
    lines = []
    train(two, out, data=DATA, progress=False, log=lines.append, resume=True)
    averages = Checkpoint.load(out / "final.pt").choices["averages"]
    assert [r["k"] for r in averages] == [1, 2] and averages[1]["epochs"] == [1, 2]
    assert any("left out the snapshot of epoch 3" in line for line in lines)


# -- odd arguments and environments ------------------------------------------------------------


def test_an_empty_out_is_refused_not_the_current_folder(tmp_path, monkeypatch, cli, capsys):
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as e:
        cli("--out", "")
    assert e.value.code == 2 and "--out: expected a folder" in _one_error_line(capsys)
    with pytest.raises(ValueError, match="out_dir .--out. is empty"):
        _run("")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("env, said", [
    ({"WORLD_SIZE": "abc"}, "WORLD_SIZE='abc' is not a whole number >= 1"),
    ({"WORLD_SIZE": "0"}, "WORLD_SIZE='0' is not a whole number >= 1"),
    ({"WORLD_SIZE": "2", "RANK": "2"}, "RANK=2 is not below WORLD_SIZE=2"),
    ({"RANK": "1"}, "RANK=1 is not below WORLD_SIZE=1"),
    ({"RANK": "-1"}, "RANK='-1' is not a whole number >= 0"),
    ({"LOCAL_RANK": "x"}, "LOCAL_RANK='x' is not a whole number >= 0"),
])
def test_torchrun_variables_that_cannot_be_are_refused_in_one_line(
        env, said, tmp_path, monkeypatch, cli, capsys):
    for name in ("WORLD_SIZE", "RANK", "LOCAL_RANK"):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)

    def rendezvous(*a, **k):  # would wait forever for processes that never come
        raise AssertionError("a process group was started")

    monkeypatch.setattr(torch.distributed, "init_process_group", rendezvous)
    assert cli("--out", tmp_path / "run") == 1
    assert said in _one_error_line(capsys)
    assert not (tmp_path / "run").exists()


LOADING_SCRIPT = """
import sys, time
sys.path.insert(0, {tests!r})
from conftest import TINY_PAIRS
from convs2s.run import train as train_mod

def load(*a, **k):  # data that takes its time: a download, a first tokenization
    print("loading", flush=True)
    time.sleep(300)

train_mod.load_multi30k = load
sys.exit(train_mod.main(["--preset", "quick", "--out", {out!r}, "--no-progress"]))
"""


@pytest.mark.parametrize("sig, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_while_the_data_loads_stops_in_one_line_and_removes_the_new_folder(
        sig, code, tmp_path):
    out = tmp_path / "new" / "run"
    script = textwrap.dedent(LOADING_SCRIPT.format(tests=str(TESTS), out=str(out)))
    proc = subprocess.Popen([sys.executable, "-c", script], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=default_signals,
                            env=dict(os.environ, OMP_NUM_THREADS="1"))
    try:
        deadline = time.monotonic() + 240
        while proc.stdout.readline().strip() != "loading":
            assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        assert (out / LOCK_NAME).exists()
        wait_until_blocked(proc.pid, "nanosleep", 240)  # in the sleep, not on its way to it
        proc.send_signal(sig)
        stdout, stderr = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == code, stdout + stderr
    assert "Traceback" not in stderr and "before training started" in stdout, stdout + stderr
    assert not (tmp_path / "new").exists()


@pytest.mark.parametrize("kind", ["text", "truncated"])
def test_resume_from_a_last_pt_that_is_no_checkpoint_says_what_to_do(kind, tmp_path):
    """With --resume there is no file to pass: the line says the folder's last.pt is not one a
    run wrote, and what to do instead (not the loader's advice to pass another file)."""
    import convs2s.run as run_package

    out = tmp_path / "run"
    out.mkdir()
    shipped = Path(run_package.__file__).parent / "models" / "de-en.pt"
    content = b"my notes\n" if kind == "text" else shipped.read_bytes()[:100_000]
    (out / "last.pt").write_bytes(content)
    with pytest.raises(CheckpointError) as raised:
        _run(out, resume=True)
    said = str(raised.value)
    assert said.startswith(f"--resume cannot continue from {out / 'last.pt'}: ") and \
        "another --out" in said and "Pass a" not in said and "It may be" not in said, said
    assert (out / "last.pt").read_bytes() == content
