"""Continued training (issue 62): ``--init-from CHECKPOINT`` starts a new run from another
checkpoint's weights, vocabularies and text pipeline, with a fresh optimizer, warm-up, schedule
and history. A checkpoint of another direction or architecture, a missing file or a folder is
refused in one line with no run folder left; ``--resume`` keeps the flag and refuses a change.

The made-up four-language corpus of the distillation tests stands in for Multi30k."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from test_distilled_and_extra_sources import TINY, _main, corpus  # noqa: F401 (a fixture)

from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint


@pytest.fixture
def start(corpus, tmp_path) -> Path:  # noqa: F811 (the fixture imported above)
    """A tiny de→en run of two epochs: its best.pt, the checkpoint to continue from."""
    result = train_mod.train(TINY.replace(epochs=2), tmp_path / "start", data=corpus,
                             progress=False, log=lambda *_: None)
    return result.best_path


def test_a_continued_run_starts_from_the_checkpoints_weights_and_vocabularies(
        corpus, start, tmp_path, capsys):  # noqa: F811
    """At a learning rate too small to move a weight, a continued run ends its first epoch
    with the checkpoint's weights, where a run from random weights does not; it has the
    checkpoint's vocabularies and tokenizer, its own fresh history, a dropout of its own, and
    its record names where it started."""
    init = Checkpoint.load(start)
    tiny_rate = ["--lr", "1e-9", "--warmup-steps", "1", "--dropout", "0.2"]
    assert _main(corpus, tmp_path / "cont", "--init-from", str(start), *tiny_rate) == 0
    assert "continued training: the weights, vocabularies and text pipeline of" in (
        capsys.readouterr().out)
    assert _main(corpus, tmp_path / "fresh", *tiny_rate) == 0
    cont = Checkpoint.load(tmp_path / "cont" / "last.pt")
    fresh = Checkpoint.load(tmp_path / "fresh" / "last.pt")
    for name, weight in init.state_dict.items():
        torch.testing.assert_close(cont.state_dict[name], weight, rtol=0, atol=1e-6)
    assert any(not torch.allclose(fresh.state_dict[n], w, atol=1e-3)
               for n, w in init.state_dict.items())
    assert cont.src_vocab.itos == init.src_vocab.itos
    assert cont.trg_vocab.itos == init.trg_vocab.itos
    assert cont.pipeline.src_tokenizer.model == init.pipeline.src_tokenizer.model
    # a fresh count: one epoch's steps, as many as the start's first epoch took
    assert [r["epoch"] for r in cont.history] == [1]
    assert cont.step == init.history[0]["step"] < init.step
    assert cont.model_config["dropout"] == 0.2 and init.model_config["dropout"] == 0.1
    assert cont.preset["init_from"] == str(start.resolve())
    # its first validation is the checkpoint's model's, not a random one's
    assert cont.history[0]["valid_loss"] == pytest.approx(init.history[-1]["valid_loss"],
                                                          abs=1e-4)
    assert abs(fresh.history[0]["valid_loss"] - init.history[-1]["valid_loss"]) > 0.05


def test_a_checkpoint_that_does_not_fit_is_refused_in_one_line(
        corpus, start, tmp_path, capsys):  # noqa: F811
    """Another direction, another architecture, a file that is no checkpoint: exit 1 and one
    line saying what differs; a missing file or a folder: exit 2 before any data loads. No run
    folder is left behind."""
    junk = tmp_path / "junk.pt"
    junk.write_bytes(b"not a checkpoint")
    for flags, code, message in (
            (["--src", "en", "--trg", "de"], 1,
             "--init-from needs a checkpoint of the run's direction and tokenizer"),
            (["--hid-dim", "24"], 1, "is another architecture (hid_dim: checkpoint 16, now 24)"),
            (["--vocab-size", "60"], 1, "vocab_size: checkpoint 80, now 60")):
        capsys.readouterr()
        assert _main(corpus, tmp_path / "run", "--init-from", str(start), *flags) == code
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / "run").exists()
    for path, code, message in ((junk, 1, str(junk)), (tmp_path / "none.pt", 2, "no such file"),
                                (tmp_path, 2, "a folder")):
        capsys.readouterr()
        assert _main(corpus, tmp_path / "run", "--init-from", str(path)) == code
        err = capsys.readouterr().err
        assert message in err and err.count("\n") <= 2, err
        assert not (tmp_path / "run").exists()


def test_resume_keeps_init_from_and_refuses_a_change_in_one_line(
        corpus, start, tmp_path, capsys):  # noqa: F811
    """A continued run resumes from its own last.pt (the flag given again); without the flag,
    refused in one line, nothing trained."""
    out = tmp_path / "cont"
    assert _main(corpus, out, "--init-from", str(start)) == 0
    capsys.readouterr()
    assert _main(corpus, out, "--resume", "--epochs", "2") == 1
    err = capsys.readouterr().err
    assert f"init_from: checkpoint '{start.resolve()}', now None" in err
    assert err.count("\n") == 1, err
    assert len(Checkpoint.load(out / "last.pt").history) == 1
    assert _main(corpus, out, "--resume", "--epochs", "2", "--init-from", str(start)) == 0
    assert [r["epoch"] for r in Checkpoint.load(out / "last.pt").history] == [1, 2]


def test_the_help_names_the_switch(capsys):
    with pytest.raises(SystemExit):
        train_mod.main(["--help"])
    assert "--init-from CHECKPOINT" in capsys.readouterr().out
