"""Issue 64, reliability's sixth round (items 5 and 7; item 1 is
tests/site_and_tools/test_site_cache_poisoning.py): bad input is one line that says what is
wrong and how to fix it (a command: exit 2, no traceback; the Python API: ``ValueError``),
refused before any work, and nothing is made that was not asked for.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib
import io
import json
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from convs2s.data import Vocab
from convs2s.model import ConvS2S
from convs2s.run import compiled_decoding
from convs2s.run import pretrained as shipped_models
from convs2s.run import train as train_mod
from convs2s.run import translate_cli as translate
from convs2s.run.presets import PRESETS
from convs2s.run.pretrained import PretrainedError
from convs2s.system import signals
from convs2s.system.arguments import whole_number_arg
from convs2s.system.compiling import check_mode

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"
SCRIPTS = sorted(p.stem for p in BENCHMARKS.glob("*.py") if p.name != "common.py")
HUGE = "x" * 10**6


def _one_line(err: str) -> bool:
    return err.count("\n") == 1 and "Traceback" not in err


@pytest.fixture
def benchmark(monkeypatch, tmp_path):
    """benchmark(name) -> benchmarks/<name>.py as a module, with no data to load (a benchmark
    that starts its work stops at once) and no child process to start."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tmp_path / "no data here"))

    def started(*args, **kwargs):
        raise AssertionError("the benchmark started a child process: it did not refuse first")

    import subprocess

    # matplotlib's own child process, not the benchmark's: on a new machine its first import
    # builds the font cache by running fc-list
    import matplotlib.pyplot  # noqa: F401

    monkeypatch.setattr(subprocess, "Popen", started)
    monkeypatch.setattr(subprocess, "run", started)

    def load(name: str):
        monkeypatch.setattr(sys, "argv", [f"benchmarks/{name}.py"])
        return importlib.import_module(name)

    return load


# --------------------------------------------------------------------------------------------
# item 5: the benchmarks
# --------------------------------------------------------------------------------------------


def test_a_benchmark_given_an_unknown_shipped_model_says_so_in_one_line_and_exits_2(
        benchmark, capsys):
    common, alpha_grid = benchmark("common"), benchmark("alpha_grid")
    try:  # as `sys.exit(run_main(main))` runs it: the parser's refusal exits 2 too
        code = common.run_main(lambda: alpha_grid.main(["--pretrained", "fr-en"]))
    except SystemExit as stop:
        code = stop.code
    err = capsys.readouterr().err
    assert code == 2 and _one_line(err) and "fr-en" in err and "de-en" in err, err


def test_run_main_turns_the_packages_errors_into_one_line_and_exit_2(benchmark, capsys):
    from convs2s.data import DataError
    from convs2s.run.checkpoint import CheckpointError

    common = benchmark("common")
    for error in (PretrainedError("no shipped model for 'fr-en'"), DataError("no data"),
                  CheckpointError("x.pt is not a checkpoint"), ValueError("--x must be > 0")):
        def main(error=error):
            raise error

        assert common.run_main(main) == 2, error
        err = capsys.readouterr().err
        assert _one_line(err) and str(error) in err, err


@pytest.mark.parametrize("where", ["a folder", "in a missing folder", "inside a file"])
@pytest.mark.parametrize("script", SCRIPTS)
def test_every_benchmark_refuses_a_json_path_it_cannot_write_before_any_work(
        benchmark, tmp_path, capsys, script, where):
    module = benchmark(script)
    (tmp_path / "a file").write_text("mine\n")
    path = {"a folder": tmp_path, "in a missing folder": tmp_path / "missing" / "r.json",
            "inside a file": tmp_path / "a file" / "r.json"}[where]
    with pytest.raises(SystemExit) as stop:
        module.main(["--json", str(path)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and _one_line(err) and "--json" in err, err
    assert ".tmp" not in err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a file"], "it made something"


def test_a_report_that_cannot_be_written_names_the_report_never_a_temporary_file(
        benchmark, tmp_path, capsys):
    common = benchmark("common")
    report = tmp_path / "r.json"
    report.mkdir()  # made after the check, while the benchmark measured
    code = common.run_main(lambda: common.write_report(report, {"x": 1}))
    err = capsys.readouterr().err
    assert code != 0 and _one_line(err) and str(report) in err and ".tmp" not in err, err
    assert list(report.iterdir()) == [] and list(tmp_path.iterdir()) == [report]


def test_the_decoding_benchmark_refuses_a_device_that_is_not_one_in_one_line(benchmark,
                                                                              capsys):
    decoding = benchmark("decoding")
    with pytest.raises(SystemExit) as stop:
        decoding.main(["--device", "xyz"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and _one_line(err) and "xyz" in err and "--device" in err, err


@pytest.mark.parametrize("value", ["-5", "0", "1.5"])
def test_the_speed_benchmark_takes_only_a_positive_output_length(benchmark, capsys, value):
    speed = benchmark("speed")
    with pytest.raises(SystemExit) as stop:
        speed.main(["--out-len", value])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and _one_line(err) and "--out-len" in err, err


def test_choose_stopped_by_sigterm_says_so_and_exits_143_like_the_other_benchmarks(
        benchmark, tmp_path, monkeypatch, capsys):
    common, choose = benchmark("common"), benchmark("choose")
    (tmp_path / "best.pt").write_bytes(b"")

    def terminated(*args, **kwargs):
        raise signals.Terminated("SIGTERM")

    monkeypatch.setattr(choose, "choose", terminated)
    code = common.run_main(lambda: choose.main([str(tmp_path), "--device", "cpu"]))
    err = capsys.readouterr().err
    assert code == 143 and _one_line(err) and "stopped by SIGTERM" in err, err


# --------------------------------------------------------------------------------------------
# item 7: compile modes
# --------------------------------------------------------------------------------------------

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]


def _tiny_model() -> ConvS2S:
    vocab = Vocab(SPECIALS + [f"w{i}" for i in range(8)], SPECIALS)
    torch.manual_seed(0)
    return ConvS2S(len(vocab), len(vocab), emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1,
                   src_pad_idx=1, trg_pad_idx=1, max_positions=32).eval()


@pytest.fixture
def no_compiling(monkeypatch):
    def reached(*args, **kwargs):
        raise AssertionError("compiling started: the mode was not refused first")

    monkeypatch.setattr(compiled_decoding, "_compiled_steps", reached)
    monkeypatch.setattr(compiled_decoding, "check_compiler", reached)


def test_a_huge_compile_mode_is_refused_in_a_short_line(no_compiling):
    src = torch.tensor([[4, 5, 3]])
    for call in (lambda: compiled_decoding.compiled_greedy_decode(
                     _tiny_model(), src, mode=HUGE, max_len=3, bos_idx=2, eos_idx=3),
                 lambda: PRESETS["quick"].replace(compile=HUGE),
                 lambda: check_mode(HUGE)):
        with pytest.raises(ValueError) as e:
            call()
        message = str(e.value)
        assert "compile" in message and len(message) < 300 and "\n" not in message, message[:400]


@pytest.mark.parametrize("mode", [np.array(["default"]), np.str_("default"), ["default"]],
                         ids=["a numpy array", "a numpy str", "a list"])
def test_a_compile_mode_that_is_not_a_plain_str_is_refused_at_once(no_compiling, mode):
    src = torch.tensor([[4, 5, 3]])
    for call in (lambda: compiled_decoding.compiled_greedy_decode(
                     _tiny_model(), src, mode=mode, max_len=3, bos_idx=2, eos_idx=3),
                 lambda: PRESETS["quick"].replace(compile=mode),
                 lambda: check_mode(mode)):
        with pytest.raises(ValueError, match="compile must be None or one of"):
            call()


# --------------------------------------------------------------------------------------------
# item 7: a dangling --out symbolic link
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("below", [False, True], ids=["the link itself", "a folder in it"])
def test_train_refuses_a_dangling_out_link_and_makes_nothing(tmp_path, capsys, below):
    link = tmp_path / "runs"
    link.symlink_to(tmp_path / "nowhere" / "runs")
    out = link / "run1" if below else link
    with pytest.raises(SystemExit) as stop:
        train_mod.main(["--preset", "quick", "--out", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and _one_line(err) and "symbolic link" in err, err
    assert not (tmp_path / "nowhere").exists() and link.is_symlink()


def test_the_site_refuses_a_dangling_out_link_before_building(tmp_path, monkeypatch, capsys):
    from tools import site

    def started(*args, **kwargs):
        raise AssertionError("the build started: --out was not refused first")

    monkeypatch.setattr(site, "write_assets", started)
    link = tmp_path / "site"
    link.symlink_to(tmp_path / "nowhere")
    assert "symbolic link" in (site._out_problem(link) or "")
    assert site.main(["--out", str(link)]) == 2
    err = capsys.readouterr().err
    assert _one_line(err) and "symbolic link" in err, err
    assert not (tmp_path / "nowhere").exists() and link.is_symlink()


def test_the_other_commands_that_make_an_output_folder_refuse_a_dangling_link(
        benchmark, tmp_path, capsys):
    from convs2s.course import diagrams
    from tools import screenshots

    link = tmp_path / "images"
    link.symlink_to(tmp_path / "nowhere" / "images")
    assert "symbolic link" in (diagrams._usable_folder(link) or "")
    assert "symbolic link" in (screenshots._out_problem(link) or "")
    assert "symbolic link" in (screenshots._out_problem(link / "png") or "")
    quality = benchmark("quality")
    with pytest.raises(SystemExit) as stop:
        quality.main(["--preset", "quick", "--out", str(link)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and _one_line(err) and "symbolic link" in err, err
    assert not (tmp_path / "nowhere").exists() and link.is_symlink()


def test_the_training_api_refuses_a_dangling_out_link(tmp_path):
    link = tmp_path / "run"
    link.symlink_to(tmp_path / "nowhere")
    with pytest.raises(ValueError, match="symbolic link"):
        train_mod.train("quick", link)
    assert not (tmp_path / "nowhere").exists() and link.is_symlink()


def test_the_site_refuses_a_record_that_is_a_folder_before_building(tmp_path, monkeypatch,
                                                                    capsys):
    from tools import site

    def started(*args, **kwargs):
        raise AssertionError("the build started: --record was not refused first")

    monkeypatch.setattr(site, "build", started)
    folder = tmp_path / "record"
    folder.mkdir()
    assert site.main(["--out", str(tmp_path / "site"), "--record", str(folder)]) == 2
    err = capsys.readouterr().err
    assert _one_line(err) and "--record" in err and "folder" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["record"]


# --------------------------------------------------------------------------------------------
# item 7: the shipped models' manifest and files
# --------------------------------------------------------------------------------------------


def _models(tmp_path, entries: dict, files: dict[str, bytes]) -> Path:
    models = tmp_path / "models"
    models.mkdir()
    for name, data in files.items():
        (models / name).write_bytes(data)
    (models / "manifest.json").write_text(json.dumps({"models": entries}), encoding="utf-8")
    return models


@pytest.mark.parametrize("name", ["de\x00en.pt", "de-\udce4n.pt", "de\x1b[31men.pt"],
                         ids=["NUL", "a lone surrogate", "an escape"])
def test_a_manifest_file_name_that_cannot_be_printed_is_echoed_escaped(tmp_path, name):
    models = _models(tmp_path, {"de-en": {"file": name, "sha256": "0" * 64}}, {})
    with pytest.raises(PretrainedError) as e:
        shipped_models.pretrained_path("de-en", models)
    message = str(e.value)
    message.encode("ascii")  # printable anywhere: no NUL, no surrogate, no escape left raw
    assert "\n" not in message and ascii(name) in message and "reinstall" in message, message


def test_a_damaged_shipped_model_says_to_reinstall_not_to_train_again(tmp_path):
    truncated = (shipped_models.MODELS_DIR / "de-en.pt").read_bytes()[:1 << 20]
    models = _models(tmp_path, {"de-en": {"file": "de-en.pt", "sha256": hashlib.sha256(
        truncated).hexdigest()}}, {"de-en.pt": truncated})
    with pytest.raises(PretrainedError) as e:
        shipped_models.pretrained("de-en", device="cpu", models_dir=models)
    message = str(e.value)
    assert "\n" not in message and "reinstall" in message.lower(), message
    assert "train again" not in message and "delete it" not in message, message


def test_a_manifest_entry_naming_the_other_directions_model_is_refused(tmp_path):
    en_de = shipped_models.MODELS_DIR / "en-de.pt"
    models = _models(tmp_path, {"de-en": {"file": "en-de.pt", "sha256": hashlib.sha256(
        en_de.read_bytes()).hexdigest()}}, {"en-de.pt": en_de.read_bytes()})
    with pytest.raises(PretrainedError) as e:
        shipped_models.pretrained("de-en", device="cpu", models_dir=models)
    message = str(e.value)
    assert "\n" not in message and "en-de" in message and "de-en" in message, message
    assert "reinstall" in message.lower(), message


# --------------------------------------------------------------------------------------------
# item 7: whole numbers on the command line
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["1_0", "\uff16", "\u0661", "٣", " 1_000 "],
                         ids=["underscore", "full-width 6", "arabic-indic 1", "arabic-indic 3",
                              "spaced underscore"])
def test_the_whole_number_argument_takes_only_ascii_digits(text):
    with pytest.raises(argparse.ArgumentTypeError, match="not a whole number"):
        whole_number_arg(text)


def test_train_refuses_layers_written_with_an_underscore_in_one_line(tmp_path, capsys):
    with pytest.raises(SystemExit) as stop:
        train_mod.main(["--preset", "quick", "--out", str(tmp_path / "r"), "--layers", "1_0"])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and _one_line(err) and "--layers" in err, err
    assert not (tmp_path / "r").exists()


def test_a_whole_number_of_thousands_of_digits_is_too_large_not_not_a_number():
    with pytest.raises(argparse.ArgumentTypeError) as e:
        whole_number_arg("9" * 5000)
    assert "too large" in str(e.value) and "not a whole number" not in str(e.value)
    assert len(str(e.value)) < 200
    assert whole_number_arg("12") == 12 and whole_number_arg("+3") == 3


# --------------------------------------------------------------------------------------------
# item 7: a NUL byte on standard input
# --------------------------------------------------------------------------------------------


def test_one_nul_byte_on_stdin_concerns_its_line_only_and_every_line_is_translated(
        monkeypatch, capsys):
    from convs2s.run.pretrained import pretrained

    stdin = "Ein Hund läuft.\nZwei Hun\x00de.\nEine Katze schläft.\n".encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = translate.main(["--pretrained", "de-en", "--beam-size", "1"])
    captured = capsys.readouterr()
    # the README: "the other lines are translated"; the NUL line is made plain text as every
    # sentence is (convs2s.data.plain_text drops a NUL, as Translator.translate does)
    expected = pretrained("de-en", device="cpu").translate(
        ["Ein Hund läuft.", "Zwei Hunde.", "Eine Katze schläft."], beam_size=1)
    assert (code, captured.err) == (0, "") and captured.out.splitlines() == expected, captured


def test_a_file_with_a_line_of_nothing_but_a_nul_byte_fails_that_line_only(tmp_path, capsys):
    path = tmp_path / "in.de"
    path.write_bytes(b"Ein Hund l\xc3\xa4uft.\n\x00\nEine Katze.\n")
    code = translate.main(["--pretrained", "de-en", "--beam-size", "1", "--input", str(path)])
    captured = capsys.readouterr()
    out = captured.out.split("\n")
    assert code == 1 and out[0] and out[1] == "" and out[2], captured
    assert "error: line 2: Nothing to translate" in captured.err, captured.err
    assert "1 of 3 lines" in captured.err and "line 1:" not in captured.err, captured.err


def test_utf16_input_is_still_refused_whole(monkeypatch, capsys):
    stdin = "Ein Hund läuft.\nEine Katze.\n".encode("utf-16-le")
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    code = translate.main(["--pretrained", "de-en", "--beam-size", "1"])
    captured = capsys.readouterr()
    assert code == 1 and captured.out == "" and "UTF-16LE" in captured.err
    assert _one_line(captured.err)
