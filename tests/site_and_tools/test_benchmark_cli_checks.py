"""The benchmarks check what a user types before any work, in one line naming the option; Ctrl-C
or SIGTERM while one loads torch is one line too; and quality.py's --overwrite deletes only a
run it made itself."""

from __future__ import annotations

import importlib
import os
from pathlib import Path

import pytest
from signal_support import run_while_torch_loads

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def no_data(tmp_path, monkeypatch):
    """No Multi30k anywhere: a benchmark that goes on to read it fails at once (and a test that
    expects a refusal before any work sees that it did not come)."""
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path / "no_data"))
    monkeypatch.setenv("CONVS2S_DATA_URL", (tmp_path / "no_mirror").as_uri())


def _script(name, monkeypatch):
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module(name)


def _refused(module, argv, capsys) -> str:
    """``module.main(argv)`` refuses in one line, exit status 2, before any work: the line."""
    with pytest.raises(SystemExit) as stop:
        module.main(argv)
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert (stop.value.code, len(lines)) == (2, 1), err
    assert "Traceback" not in err
    return lines[0]


# -- whole numbers, refused when the arguments are read ------------------------------------------


@pytest.mark.parametrize("script, argv, option", [
    ("padding_ratio", ["--batch-size", "0"], "--batch-size"),
    ("length_sweep", ["--beam", "0"], "--beam"),
    ("length_sweep", ["--decode-batches", "4", "0"], "--decode-batches"),
    ("length_sweep", ["--warmup", "-1"], "--warmup"),
    ("length_sweep", ["--repeats", "0"], "--repeats"),
    ("length_sweep", ["--tokens", "-8"], "--tokens"),
    ("length_sweep", ["--vocab", "1.5"], "--vocab"),
    ("length_sweep", ["--lengths", "4", "x"], "--lengths"),
    ("memory", ["--steps", "0"], "--steps"),
    ("memory", ["--steps", "-1"], "--steps"),
    ("speed", ["--warmup", "-1"], "--warmup"),
    ("speed", ["--warmup", "x"], "--warmup"),
    ("alpha_grid", ["--pretrained", "de-en", "--beam", "0"], "--beam"),
    ("browser_translator", ["--sentences", "0"], "--sentences"),
    ("browser_translator", ["--repeat", "0"], "--repeat"),
    ("browser_translator", ["--speed-sentences", "0"], "--speed-sentences"),
    ("browser_translator", ["--typing-ms", "-1"], "--typing-ms"),
], ids=lambda v: " ".join(v) if isinstance(v, list) else str(v))
def test_a_count_out_of_bounds_is_refused_in_one_line_naming_the_option(
        script, argv, option, no_data, monkeypatch, capsys):
    module = _script(script, monkeypatch)
    fast = (["--preset", "quick", "--lengths", "4", "--tokens", "8", "--repeats", "1",
             "--warmup", "1", "--vocab", "40"] if script == "length_sweep" else [])
    line = _refused(module, [*fast, *argv, "--device", "cpu"], capsys)
    assert f"argument {option}:" in line, line


@pytest.mark.skipif(not os.environ.get("CONVS2S_DATA_DIR"), reason="needs Multi30k's files")
def test_padding_ratio_with_every_pair_dropped_is_one_line(monkeypatch, capsys):
    """A --max-len no pair fits in leaves nothing to batch: one line naming the option (it was a
    ZeroDivisionError after the data had loaded)."""
    line = _refused(_script("padding_ratio", monkeypatch), ["--max-len", "3"], capsys)
    assert "--max-len 3" in line and "give a larger --max-len" in line, line


@pytest.mark.parametrize("text, value", [("0", 0), ("3", 3), (" 0 ", 0)])
def test_a_count_from_zero_takes_zero(text, value, monkeypatch):
    assert _script("common", monkeypatch).count_arg(text) == value


@pytest.mark.parametrize("text, words", [("-1", "at least 0"), ("1.5", "not a whole number"),
                                         ("1_0", "not a whole number")])
def test_a_count_from_zero_refuses_the_rest(text, words, monkeypatch):
    import argparse

    with pytest.raises(argparse.ArgumentTypeError, match=words):
        _script("common", monkeypatch).count_arg(text)


def test_length_sweep_refuses_a_vocabulary_of_only_special_ids(no_data, monkeypatch, capsys):
    """Random ids are drawn from 4 up: --vocab 4 left none (torch's "random_ from 4 to 4"
    traceback after the models were built)."""
    module = _script("length_sweep", monkeypatch)
    line = _refused(module, ["--preset", "quick", "--lengths", "4", "--tokens", "8",
                             "--vocab", "4", "--device", "cpu"], capsys)
    assert "--vocab" in line and "at least 5" in line, line


# -- candidates.py --runs ---------------------------------------------------------------------


@pytest.mark.parametrize("where", ["file", "below a file"])
def test_candidates_refuses_a_file_as_runs_in_one_line(where, tmp_path, monkeypatch, capsys):
    candidates = _script("candidates", monkeypatch)
    file = tmp_path / "runs.txt"
    file.write_text("mine")
    runs = file if where == "file" else file / "sub"
    line = _refused(candidates, ["--runs", str(runs), "--minutes", "5"], capsys)
    assert "--runs" in line and str(runs) in line and "File exists" not in line, line
    assert file.read_text() == "mine"


# -- alpha_grid.py: every model checked before the first is scored --------------------------------


def _tiny_checkpoint(path, src="de", trg="en"):
    """A one-layer word model of ``src``→``trg``, saved at ``path`` (random weights)."""
    import torch

    from convs2s.data import Vocab
    from convs2s.data.subword import TextPipeline
    from convs2s.model import ConvS2S
    from convs2s.run.checkpoint import Checkpoint

    specials = ["<unk>", "<pad>", "<bos>", "<eos>"]
    vocab = Vocab(specials + ["ein", "hund", "a", "dog", "."], specials)
    torch.manual_seed(0)
    model = ConvS2S(len(vocab), len(vocab), emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1,
                    src_pad_idx=vocab.pad_idx, trg_pad_idx=vocab.pad_idx,
                    max_positions=64).eval()
    Checkpoint.from_model(model, vocab, vocab, TextPipeline.word(src, trg)).save(path)
    return path


@pytest.mark.parametrize("second, words", [
    ("missing", "missing.pt"),
    ("not a checkpoint", "notes.pt"),
    ("other direction", "translates en-de, the first model de-en"),
])
def test_alpha_grid_checks_every_checkpoint_before_scoring_the_first(
        second, words, tmp_path, monkeypatch, capsys):
    """The second --checkpoint (missing, not a checkpoint, another direction) was found out
    only after the first model had been scored, minutes later; now before any decoding."""
    alpha_grid = _script("alpha_grid", monkeypatch)
    monkeypatch.setattr(alpha_grid, "load_multi30k",
                        lambda *a, **k: pytest.fail("read the data before checking the models"))
    monkeypatch.setattr(alpha_grid, "score_alphas",
                        lambda *a, **k: pytest.fail("scored a model before checking the rest"))
    first = _tiny_checkpoint(tmp_path / "a.pt")
    other = {"missing": tmp_path / "missing.pt",
             "not a checkpoint": tmp_path / "notes.pt",
             "other direction": tmp_path / "b.pt"}[second]
    if second == "not a checkpoint":
        other.write_text("not weights")
    elif second == "other direction":
        _tiny_checkpoint(other, src="en", trg="de")
    line = _refused(alpha_grid, ["--checkpoint", str(first), "--checkpoint", str(other),
                                 "--alphas", "1"], capsys)
    assert words in line, line


# -- quality.py --overwrite deletes only its own runs ---------------------------------------------


class _Stop(Exception):
    """The stand-in for training stops the script here (no model to score)."""


@pytest.fixture
def quality(monkeypatch):
    """benchmarks/quality.py with a stand-in for training: it records the run folder's files
    and writes a run's checkpoints (``writes``), then stops the script with :class:`_Stop`."""
    module = _script("quality", monkeypatch)
    monkeypatch.setattr(module, "load_multi30k", lambda *a, **k: {})
    seen: list[set[str]] = []

    def train(preset, out, **kwargs):
        seen.append({p.relative_to(out).as_posix() for p in out.rglob("*")})
        for name in train.writes:
            (out / name).parent.mkdir(exist_ok=True)
            (out / name).write_text("a checkpoint")
        raise _Stop

    train.writes = ["best.pt", "last.pt", "snapshots/epoch01.pt"]
    monkeypatch.setattr(module, "train", train)

    def run(*args):
        return module.main(["--preset", "quick", "--device", "cpu", *args])

    run.module, run.seen, run.train = module, seen, train
    return run


def test_overwrite_refuses_a_run_this_script_did_not_make(quality, tmp_path, capsys):
    """A run python -m convs2s.train (or the user) put in --out was deleted by --overwrite;
    now it is kept, and the refusal says which folder and what to do."""
    out = tmp_path / "theirs"
    (out / "snapshots").mkdir(parents=True)
    for name in ("best.pt", "last.pt", "final.pt", "snapshots/epoch01.pt"):
        (out / name).write_text("theirs")
    assert quality("--out", str(out), "--overwrite") == 2
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    assert str(out) in lines[0] and "another --out" in lines[0]
    assert "delete those files yourself" in lines[0]
    assert not quality.seen, "trained"
    for name in ("best.pt", "last.pt", "final.pt", "snapshots/epoch01.pt"):
        assert (out / name).read_text() == "theirs"
    assert not (out / quality.module.MARKER).exists()


def test_overwrite_still_deletes_a_run_this_script_made(quality, tmp_path):
    out = tmp_path / "mine"
    with pytest.raises(_Stop):
        quality("--out", str(out))  # made here: marked before training
    assert (out / quality.module.MARKER).is_file()
    assert (out / "last.pt").is_file() and (out / "snapshots" / "epoch01.pt").is_file()
    (out / "notes.txt").write_text("the user's")
    quality.train.writes = []
    with pytest.raises(_Stop):
        quality("--out", str(out), "--overwrite")
    assert quality.seen[-1] >= {quality.module.MARKER, "notes.txt"}
    assert not quality.seen[-1] & {"best.pt", "last.pt", "snapshots", "snapshots/epoch01.pt"}
    assert (out / "notes.txt").read_text() == "the user's"


def test_an_empty_folder_is_marked_and_one_holding_other_files_is_not(quality, tmp_path):
    quality.train.writes = ["last.pt"]
    empty, other = tmp_path / "empty", tmp_path / "other"
    empty.mkdir()
    other.mkdir()
    (other / "notes.txt").write_text("the user's")
    for out in (empty, other):
        with pytest.raises(_Stop):
            quality("--out", str(out))
    assert (empty / quality.module.MARKER).is_file()
    assert not (other / quality.module.MARKER).exists()


def test_a_run_that_trained_nothing_leaves_no_marker_behind(quality, tmp_path):
    quality.train.writes = []
    made, empty = tmp_path / "new" / "run", tmp_path / "empty"
    empty.mkdir()
    for out in (made, empty):
        with pytest.raises(_Stop):
            quality("--out", str(out))
    assert not (tmp_path / "new").exists()  # the folders it made, removed
    assert sorted(p.name for p in empty.iterdir()) in ([], [".convs2s.lock"])


def test_remove_run_refuses_a_folder_without_the_marker(quality, tmp_path):
    (tmp_path / "last.pt").write_text("theirs")
    with pytest.raises(ValueError, match="deletes only a run this script made"):
        quality.module.remove_run(tmp_path)
    assert (tmp_path / "last.pt").read_text() == "theirs"


# -- Ctrl-C or SIGTERM while a benchmark loads torch ---------------------------------------------

#: The benchmarks a user runs by hand most often; every one that loads torch at its top is
#: checked with SIGTERM below.
BY_HAND = ["quality", "pretrained", "candidates", "alpha_grid"]
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.name != "common.py")


@pytest.mark.parametrize("script, sig", [
    *[(s, "SIGINT") for s in BY_HAND], *[(s, "SIGTERM") for s in SCRIPTS]])
def test_a_signal_while_a_benchmark_loads_torch_is_one_line(script, sig, tmp_path):
    """It was a traceback of 10-40 lines for Ctrl-C, and exit 143 with no line for SIGTERM:
    the script loaded torch at its top, and run_main loaded it before its StopSignals. A
    benchmark that loads no torch before its --help simply prints it."""
    done = run_while_torch_loads(tmp_path, sig, str(BENCHMARKS / f"{script}.py"), "--help")
    if done.returncode == 0 and script not in BY_HAND:
        assert "usage:" in done.stdout and not done.stderr, done.stderr
        return
    status, said = (130, "interrupted") if sig == "SIGINT" else (143, "stopped by SIGTERM")
    lines = done.stderr.splitlines()  # "(NAME.py)" where run_main loads it
    assert lines in ([f"{said}."], [f"{said} ({script}.py)."]), done.stderr
    assert (done.returncode, done.stdout) == (status, ""), done.stderr


@pytest.mark.parametrize("minutes", ["-1", "0", "nan"])
def test_word_vs_subword_checks_its_minutes_before_starting_two_runs(minutes, no_data,
                                                                      monkeypatch, capsys):
    """Checked once, here: each of its two training runs refused it with a line of its own."""
    line = _refused(_script("word_vs_subword", monkeypatch), ["--minutes", minutes], capsys)
    assert "--minutes must be a number of minutes above 0" in line, line
