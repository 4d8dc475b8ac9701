"""Notebook 05's attention snapshots (convs2s.course.watching_attention): recorded after every
epoch through training's on_epoch_end hook, into the run's folder, so the run layer and its
checkpoints know nothing of them; a resumed run keeps the epochs before it; runs that stored
them in their checkpoints still show theirs."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from conftest import TINY_PAIRS

from convs2s.course import analysis, watching_attention
from convs2s.model import ConvS2SConfig
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.presets import Preset

TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=2,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=4,
    patience=100, label_smoothing=0.0, seed=7,
)
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}


def _run(out, preset=TINY, **kw):
    return watching_attention.train(preset, out, data=DATA, progress=False,
                                    log=lambda *_: None, **kw)


def test_each_epoch_records_the_watched_sentences_attention_and_the_widget_draws_it(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    out = tmp_path / "run"
    result = _run(out)
    history, watched = result.history, watching_attention.watched_sentence(out)
    epochs = analysis.attention_by_epoch(history)
    assert [e for e, _ in epochs] == [1, 2, 3, 4]
    src, trg = watched["src"], watched["trg"]
    assert trg[-1] == "<eos>" and len(src) == len(TINY_PAIRS[0][0].split()) + 1  # "läuft ."
    for _, maps in epochs:
        assert maps.shape == (TINY.model.dec_layers, len(trg), len(src))
        torch.testing.assert_close(maps.sum(-1), torch.ones(maps.shape[:2]), atol=1e-3, rtol=0)
    assert not torch.equal(epochs[0][1], epochs[-1][1])  # attention changes as it learns
    fig = analysis.plot_attention_epoch(history, watched, 0)
    assert "epoch 1 of 4" in fig._suptitle.get_text()
    fig = analysis.plot_attention_epoch(history, watched, 3, fig=fig)  # redrawn in place
    assert "epoch 4 of 4" in fig._suptitle.get_text() and len(fig.axes) >= TINY.model.dec_layers
    with pytest.raises(ValueError, match="index must be from 0 to 3"):
        analysis.plot_attention_epoch(history, watched, 4)
    # the run layer stored none of it: its checkpoints hold the run, the folder the record
    ckpt = Checkpoint.load(out / "last.pt")
    assert "watched" not in ckpt.train_state
    assert not any("attention" in row for row in ckpt.history)
    assert watching_attention.with_attention(ckpt.history, out) == history


def test_a_resumed_run_keeps_the_epochs_before_it_and_the_hook_still_runs(tmp_path):
    out = tmp_path / "run"
    _run(out, TINY.replace(epochs=2))
    seen = []
    result = _run(out, resume=True, on_epoch_end=lambda row, model: seen.append(row["epoch"]))
    assert seen == [3, 4]  # the caller's own hook, after the watching
    assert [e for e, _ in analysis.attention_by_epoch(result.history)] == [1, 2, 3, 4]
    record = json.loads((out / watching_attention.RECORD).read_text(encoding="utf-8"))
    assert [(e["epoch"], e["step"]) for e in record["epochs"]] == [
        (row["epoch"], row["step"]) for row in result.history]


def test_a_run_that_stored_its_snapshots_in_its_checkpoint_still_shows_them(tmp_path):
    """What training wrote before the snapshots moved here: each row's attention and the
    sentence in train_state["watched"]."""
    from convs2s.run.train import train

    out = tmp_path / "old"
    train(TINY.replace(epochs=1), out, data=DATA, progress=False, log=lambda *_: None)
    ckpt = Checkpoint.load(out / "last.pt")
    watched = {"src": ["ein", "hund"], "trg": ["a", "dog", "<eos>"]}
    rows = [{**ckpt.history[0], "attention": [[[0.25, 0.75]] * 3] * 2}]
    dataclasses.replace(ckpt, train_state={**ckpt.train_state, "history": rows,
                                           "watched": watched}).save(out / "last.pt")
    assert watching_attention.watched_sentence(out) == watched
    assert watching_attention.with_attention(Checkpoint.load(out / "last.pt").history,
                                             out) == rows
    assert analysis.attention_by_epoch(rows)[0][1].shape == (2, 3, 2)


def test_a_record_that_is_not_one_is_refused_in_one_line_and_replaced_by_training(tmp_path):
    out = tmp_path / "run"
    out.mkdir()
    (out / watching_attention.RECORD).write_text("[1, 2", encoding="utf-8")
    with pytest.raises(ValueError, match="is not an attention record"):
        watching_attention.watched_sentence(out)
    result = _run(out, TINY.replace(epochs=1))
    assert len(analysis.attention_by_epoch(result.history)) == 1


def test_the_run_layer_knows_nothing_of_the_snapshots():
    from pathlib import Path

    import convs2s.run

    named = [p.name for p in Path(convs2s.run.__file__).parent.glob("*.py")
             if any(w in p.read_text(encoding="utf-8")
                    for w in ("watched", "attention_by_epoch", "watching_attention"))]
    assert not named
