"""convs2s.pretrained: a shipped model is one call away, checked against its manifest; and
tools/export_pretrained.py, which writes it from a run's final.pt (float16 weights, no training
state). On a tiny made-up model; the shipped one is checked in tests/run/test_shipped_model.py."""

from __future__ import annotations

import json

import pytest
import torch

from convs2s.course import analysis
from convs2s.data import Vocab
from convs2s.model import ConvS2S
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.pretrained import PretrainedError, available, pretrained, pretrained_checkpoint
from convs2s.run.translator import Translator
from tools import export_pretrained

SPECIALS = ["<unk>", "<pad>", "<bos>", "<eos>"]
VOCAB = Vocab(SPECIALS + ["ein", "hund", "a", "dog", "."], SPECIALS)


def _run(tmp_path):
    """A run folder with final.pt (choices recorded) and last.pt (a history), as training
    leaves one."""
    torch.manual_seed(0)
    model = ConvS2S(len(VOCAB), len(VOCAB), emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1,
                    src_pad_idx=VOCAB.pad_idx, trg_pad_idx=VOCAB.pad_idx,
                    max_positions=16).eval()
    run = tmp_path / "run"
    run.mkdir()
    history = [{"epoch": e, "valid_loss": 3.0 - e / 10, "train_loss": 3.5} for e in (1, 2, 3)]
    Checkpoint.from_model(model, VOCAB, VOCAB, run_id="r1",
                          train_state={"history": history, "seconds": 5400.0, "step": 30,
                                       "epoch": 3}).save(run / "last.pt")
    final = Checkpoint.from_model(model, VOCAB, VOCAB, run_id="r1")
    final.choices = {"length_penalty": 1.5, "weights": "average of the last 2 epochs"}
    final.save(run / "final.pt")
    return run, model


@pytest.fixture
def shipped(tmp_path):
    run, model = _run(tmp_path)
    models = tmp_path / "models"
    entry = export_pretrained.export(run, "de-en", "a test machine", "python -m convs2s.train",
                                     {"test2016": {"beam5": 1.0}}, models_dir=models)
    return models, entry, model


def test_export_writes_float16_weights_and_the_manifest_records_how_it_came_to_be(shipped):
    models, entry, model = shipped
    ckpt = Checkpoint.load(models / "de-en.pt")
    assert {t.dtype for t in ckpt.state_dict.values()} == {torch.float16}
    assert ckpt.train_state is None and ckpt.choices["length_penalty"] == 1.5
    manifest = json.loads((models / "manifest.json").read_text())
    assert manifest["models"]["de-en"] == entry
    assert entry["training"]["epochs"] == 3 and entry["training"]["best_epoch"] == 3
    assert entry["training"]["hours"] == 1.5 and entry["training"]["machine"] == "a test machine"
    assert entry["parameters"] == sum(p.numel() for p in model.parameters())
    assert entry["scores"] == {"test2016": {"beam5": 1.0}}
    assert available(models) == ["de-en"]


def test_a_continued_run_records_the_shipped_model_it_started_from(shipped, tmp_path):
    """A run continued from the shipped file (``--init-from``, the preset's init_from) replaces
    it; the new record names the file it started from by sha256, with how that one was trained,
    read before the file was replaced. A run from random weights records no start."""
    models, entry, _ = shipped
    assert "continued_from" not in entry["training"]
    run = tmp_path / "run"
    final = Checkpoint.load(run / "final.pt")
    final.preset = {"name": "tiny", "init_from": str(models / "de-en.pt")}
    final.save(run / "final.pt")
    new = export_pretrained.export(run, "de-en", "another machine", "python -m convs2s.train "
                                   "--init-from", models_dir=models)
    assert new["training"]["continued_from"] == {
        "file": "de-en.pt", "sha256": entry["sha256"], "command": "python -m convs2s.train",
        "machine": "a test machine", "epochs": 3, "hours": 1.5}
    # the shipped file's preset names that file, not the folder it lay in here
    assert Checkpoint.load(models / "de-en.pt").preset == {"name": "tiny", "init_from": "de-en.pt"}
    # the same run trained on and shipped again: its start stays the first model, though the
    # file it named is now this run's own earlier export
    again = export_pretrained.export(run, "de-en", "another machine", "python -m convs2s.train "
                                     "--init-from --resume", models_dir=models)
    assert again["training"]["continued_from"] == new["training"]["continued_from"]
    row = analysis.shipped_models_table({"de-en": new}).splitlines()[2]
    assert ("3 epochs, 1.5 h, on another machine; continued from a model of 3 epochs (1.5 h on "
            "a test machine)") in row


def test_pretrained_is_a_ready_translator_in_float32_with_the_recorded_penalty(shipped):
    models, _, model = shipped
    t = pretrained("de-en", device="cpu", models_dir=models)
    assert isinstance(t, Translator) and t.length_penalty == 1.5
    assert {p.dtype for p in t.model.parameters()} == {torch.float32}
    # the float16 weights, read back into float32, are the trained ones to float16's precision
    for name, w in model.state_dict().items():
        torch.testing.assert_close(t.model.state_dict()[name], w, atol=1e-3, rtol=1e-3)
    assert isinstance(t.translate("ein hund ."), str)


def test_a_damaged_or_missing_file_or_an_unknown_direction_is_one_line(shipped):
    models, _, _ = shipped
    data = bytearray((models / "de-en.pt").read_bytes())
    data[len(data) // 2] ^= 0xFF
    (models / "de-en.pt").write_bytes(bytes(data))
    with pytest.raises(PretrainedError, match="is damaged .*reinstall") as e:
        pretrained_checkpoint("de-en", models)
    assert "\n" not in str(e.value)
    (models / "de-en.pt").unlink()
    with pytest.raises(PretrainedError, match="is missing: reinstall"):
        pretrained("de-en", models_dir=models)
    with pytest.raises(PretrainedError, match="no shipped model for 'xx-yy': the package has "
                                              "de-en"):
        pretrained("xx-yy", models_dir=models)
    (models / "manifest.json").unlink()
    with pytest.raises(PretrainedError, match="has no shipped models"):
        available(models)


def test_a_refused_or_failed_export_leaves_the_shipped_model_and_its_entry_as_they_were(
        shipped, tmp_path, monkeypatch):
    """Too large a model, or a failure while its entry is built, changes nothing: the shipped
    file, its manifest entry and the folder's contents are the ones before."""
    models, entry, _ = shipped
    before = {p.name: p.read_bytes() for p in models.iterdir()}
    run = tmp_path / "run"
    monkeypatch.setattr(export_pretrained, "MAX_BYTES", 100)
    with pytest.raises(ValueError, match="more than the 100 a shipped model may.*is unchanged"):
        export_pretrained.export(run, "de-en", "m", "c", models_dir=models)
    assert {p.name: p.read_bytes() for p in models.iterdir()} == before
    monkeypatch.undo()

    def broken(*args):
        raise OSError("interrupted")
    monkeypatch.setattr(export_pretrained, "training_record", broken)
    with pytest.raises(OSError, match="interrupted"):
        export_pretrained.export(run, "de-en", "m", "c", models_dir=models)
    assert {p.name: p.read_bytes() for p in models.iterdir()} == before
    assert pretrained_checkpoint("de-en", models) is not None


def test_export_refuses_the_wrong_direction(tmp_path):
    run, _ = _run(tmp_path)
    with pytest.raises(ValueError, match="translates de to en, not en-de"):
        export_pretrained.export(run, "en-de", "m", "c", models_dir=tmp_path / "models")
    assert not (tmp_path / "models" / "en-de.pt").exists()


def test_the_export_cli_says_what_is_wrong_in_one_line(tmp_path, capsys):
    code = export_pretrained.main(["--run", str(tmp_path / "nothing"), "--direction", "de-en",
                                   "--machine", "m", "--command", "c"])
    err = capsys.readouterr().err
    assert code == 2 and err.startswith("error: ") and err.count("\n") == 1, err


def test_the_translate_command_takes_a_shipped_model_and_refuses_a_wrong_one_in_one_line(
        capsys):
    from convs2s.run import translate_cli as translate

    assert translate.main(["--pretrained", "xx-yy", "Hallo."]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1 and "xx-yy" in err or \
        "no shipped models" in err, err
    with pytest.raises(SystemExit) as e:
        translate.main(["--pretrained", "de-en", "--checkpoint", "x.pt", "Hallo."])
    assert e.value.code == 2
    err = capsys.readouterr().err
    assert "not allowed with argument" in err and err.count("\n") == 1, err


def test_notebook_06_studies_the_learners_run_if_there_is_one_else_the_shipped_model(
        shipped, tmp_path, monkeypatch):
    """Never a quick model trained on the spot: the learner's own run of notebook 05 for this
    mode, said so; else the shipped model, said so (also when only a quick run exists and the
    notebook runs in full mode)."""
    from convs2s.course import analysis

    models, _, model = shipped
    monkeypatch.delenv("CONVS2S_CHECKPOINT", raising=False)
    runs = tmp_path / "runs"
    got = analysis.studied_model(False, root=runs, models_dir=models)
    assert not got.own and got.path == models / "de-en.pt" and got.epochs == 3
    assert got.summary.startswith("no run of notebook 05 here: the course's trained model")
    assert "3 epochs, 1.5 h, on a test machine" in got.summary
    # a quick run does not stand in for a full one
    quick = runs / "05_quick_subword"
    quick.mkdir(parents=True)
    Checkpoint.from_model(model, VOCAB, VOCAB, train_state={
        "history": [{"epoch": 1, "valid_loss": 5.0}], "step": 3, "epoch": 1}).save(
        quick / "best.pt")
    assert not analysis.studied_model(False, root=runs, models_dir=models).own
    mine = analysis.studied_model(True, root=runs, models_dir=models)
    assert mine.own and mine.path == quick / "best.pt" and mine.epochs == 1
    assert mine.summary.startswith("your run of notebook 05: ") and "(1 epoch)" in mine.summary
    # final.pt keeps best.pt's history (best at epoch 1), but averages epochs 1-3: 3 epochs
    Checkpoint.from_model(model, VOCAB, VOCAB, train_state={
        "history": [{"epoch": 1, "valid_loss": 5.0}], "step": 3, "epoch": 1},
        choices={"k": 3, "epochs": [1, 2, 3], "length_penalty": 1.0}).save(quick / "final.pt")
    final = analysis.studied_model(True, root=runs, models_dir=models)
    assert final.path == quick / "final.pt" and final.epochs == 3 and "(3 epochs)" in final.summary


def test_the_evaluate_command_takes_a_shipped_model_and_refuses_a_wrong_one_in_one_line(
        capsys, tmp_path, monkeypatch):
    from convs2s.run import evaluate

    monkeypatch.chdir(tmp_path)
    assert evaluate.main(["--pretrained", "xx-yy"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1, err
    assert list(tmp_path.iterdir()) == [], "nothing written"


def test_tied_weights_stay_one_tensor_in_float16():
    """The tied output layer and token embedding are one tensor in the float16 copy, also
    after averaging: the shipped file holds them once (4 MB less for the de-en model)."""
    shared = torch.randn(6, 4)
    half = export_pretrained.float16_weights({"embed": shared, "out": shared,
                                              "other": torch.randn(6, 4),
                                              "steps": torch.tensor(3)})
    assert half["embed"] is half["out"] and half["embed"].dtype == torch.float16
    # as final_choices leaves them: two equal tensors, each the average of its name's snapshots
    averaged = export_pretrained.float16_weights({"embed": shared.clone(), "out": shared.clone()})
    assert averaged["embed"] is averaged["out"]
    assert half["other"] is not half["embed"] and half["steps"].dtype == torch.int64


@pytest.mark.parametrize("command", ["evaluate", "translate"])
def test_the_commands_help_names_every_shipped_direction(command, capsys):
    """``--pretrained DIRECTION``'s help lists what ``convs2s.pretrained`` can load, no less."""
    import importlib

    module = importlib.import_module(f"convs2s.{command}")
    with pytest.raises(SystemExit) as e:
        module.main(["--help"])
    assert e.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())
    assert available(), "the package ships no model"
    for direction in available():
        assert direction in shown.split("--pretrained DIRECTION", 1)[-1], direction
