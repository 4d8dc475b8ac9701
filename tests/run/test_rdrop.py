"""R-Drop (``--rdrop WEIGHT``, issue 62): each batch twice in one pass, the mean of the two
losses plus WEIGHT times the two passes' symmetric KL over the real target positions. Its KL is
0 without dropout and positive with it; ``--rdrop 0`` is the trainer's loss as it was, to the
bit; the weight reaches the run, its checkpoints and ``--resume``; a value out of range is one
line and trains nothing."""

from __future__ import annotations

import dataclasses
import math
from contextlib import nullcontext

import pytest
import torch
import torch.nn.functional as F
from conftest import TINY_PAIRS

from convs2s.model import ConvS2S, ConvS2SConfig
from convs2s.model.loss import next_token_loss, rdrop_loss, sequence_loss, symmetric_kl
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint
from convs2s.run.presets import PRESETS, Preset

PAD = 0
VOCAB = 23

TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=1,
    patience=100, label_smoothing=0.1, seed=7, average_last=2, final_pairs=4,
)
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}


def _model(dropout: float) -> ConvS2S:
    torch.manual_seed(0)
    return ConvS2S(VOCAB, VOCAB, emb_dim=16, hid_dim=24, enc_layers=2, dec_layers=2,
                   dropout=dropout, max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD).train()


def _batch():
    g = torch.Generator().manual_seed(1)

    def padded(lengths):
        x = torch.full((len(lengths), max(lengths)), PAD)
        for b, n in enumerate(lengths):
            x[b, :n] = torch.randint(3, VOCAB, (n,), generator=g)
        return x

    return padded((7, 4, 6)), padded((5, 9, 3))


def _two_passes(model, src, trg):
    """The logits of the batch concatenated with itself, at every target position."""
    logits, _ = model(torch.cat([src, src]), torch.cat([trg, trg])[:, :-1])
    return logits  # logits = [2 * batch, trg_len, vocab]


def test_the_kl_term_is_zero_without_dropout():
    """Dropout 0: the two passes are the same function of the same batch, so they agree, and
    the R-Drop loss is the plain loss of one pass, whatever the weight."""
    model, (src, trg) = _model(0.0), _batch()
    logits = _two_passes(model, src, trg)
    real = trg[:, 1:] != PAD
    n = src.size(0)
    with torch.no_grad():
        kl = symmetric_kl(logits[:n][real], logits[n:][real])
    assert abs(kl.item()) < 1e-6
    torch.manual_seed(3)
    one_pass = next_token_loss(model, src, trg, PAD, 0.1)
    torch.manual_seed(3)
    rdrop = next_token_loss(model, src, trg, PAD, 0.1, rdrop=5.0)
    torch.testing.assert_close(rdrop, one_pass, rtol=0, atol=1e-5)


def test_the_kl_term_is_positive_with_dropout_and_is_the_papers():
    """Dropout 0.3: two masks, two distributions, a KL above 0 that the loss adds with its
    weight, and the same number as the paper's code computes (fairseq's R-Drop criterion:
    kl_div both ways, halved, here per real token)."""
    model, (src, trg) = _model(0.3), _batch()
    torch.manual_seed(5)
    logits = _two_passes(model, src, trg)
    trg_out = torch.cat([trg, trg])[:, 1:]
    n, real = src.size(0), trg[:, 1:] != PAD
    p, q = logits[:n][real], logits[n:][real]  # p = q = [n_real, vocab]
    kl = symmetric_kl(p, q)
    assert kl > 1e-4
    fairseq = (F.kl_div(F.log_softmax(p, -1), F.softmax(q, -1), reduction="sum")
               + F.kl_div(F.log_softmax(q, -1), F.softmax(p, -1), reduction="sum")) / 2
    torch.testing.assert_close(kl, fairseq / int(real.sum()), rtol=1e-5, atol=1e-7)
    # the mean of the two passes' cross-entropies, plus the weight times the KL
    ce = (sequence_loss(logits[:n], trg[:, 1:], PAD, 0.1)
          + sequence_loss(logits[n:], trg[:, 1:], PAD, 0.1)) / 2
    loss = rdrop_loss(logits, trg_out, PAD, 0.1, 0.7)
    torch.testing.assert_close(loss, ce + 0.7 * kl, rtol=1e-5, atol=1e-6)
    # the real positions only (what next_token_loss asks the model for) give the same loss
    kept = trg_out != PAD
    torch.testing.assert_close(rdrop_loss(logits[kept], trg_out[kept], PAD, 0.1, 0.7), loss,
                               rtol=1e-5, atol=1e-6)
    loss.backward()  # the gradients reach every weight
    assert all(w.grad is not None for w in model.parameters() if w.requires_grad)
    with pytest.raises(ValueError, match="a batch run twice"):
        rdrop_loss(logits[:3], trg_out[:3], PAD, 0.1, 0.7)


@pytest.mark.parametrize("dropout, static", [(0.3, False), (0.0, True)])
def test_the_compiled_steps_loss_is_the_eager_ones_with_rdrop(dropout, static):
    """compiled_loss (--compile's step; run eagerly here) gives R-Drop's loss as the eager step
    does: every target position through the output layer, padding ignored; with ``static``,
    the batch padded to CUDA graphs' shapes first, then doubled."""
    model, (src, trg) = _model(dropout), _batch()
    torch.manual_seed(4)
    eager = next_token_loss(model, src, trg, PAD, 0.1, rdrop=0.7)
    torch.manual_seed(4)
    compiled = train_mod.compiled_loss(model, src, trg, src_pad=PAD, trg_pad=PAD,
                                       label_smoothing=0.1, autocast=nullcontext(),
                                       max_positions=32, static=static, rdrop=0.7)
    torch.testing.assert_close(compiled, eager, rtol=1e-5, atol=1e-5)


def _loss_before_rdrop(model, src, trg, pad_idx, label_smoothing=0.0, autocast=None):
    """The trainer's loss as it was before R-Drop (next_token_loss at 7746717), verbatim."""
    trg_in, trg_out = trg[:, :-1], trg[:, 1:]
    real = trg_out != pad_idx  # real = [batch, trg_len]
    with autocast if autocast is not None else nullcontext():
        logits, _ = model(src, trg_in, output_mask=real)  # logits = [n_real, vocab]
    return sequence_loss(logits, trg_out[real], pad_idx, label_smoothing)


def test_rdrop_zero_is_todays_loss_and_todays_run_exactly(tmp_path, monkeypatch):
    """``rdrop`` 0: one pass and the loss as it was (the same bits, the same dropout draws), so
    a run trains the same weights as with the loss before R-Drop, and records the same preset
    (no rdrop field: a checkpoint as before)."""
    model, (src, trg) = _model(0.3), _batch()
    torch.manual_seed(9)
    now = next_token_loss(model, src, trg, PAD, 0.1, rdrop=0.0)
    torch.manual_seed(9)
    assert torch.equal(now, _loss_before_rdrop(model, src, trg, PAD, 0.1))

    preset = dataclasses.replace(TINY, average_last=0, epochs=2)
    assert preset.rdrop == 0 and "rdrop" not in preset.as_dict()

    def run(out):
        return train_mod.train(preset, out, data=DATA, progress=False, log=lambda *_: None)

    today = run(tmp_path / "today")
    asked = []

    def before(*args, rdrop=None, **kw):
        asked.append(rdrop)
        return _loss_before_rdrop(*args, **kw)

    monkeypatch.setattr(train_mod, "next_token_loss", before)
    old = run(tmp_path / "before")
    assert asked and set(asked) == {0}
    for key in ("train_loss", "valid_loss"):
        assert [r[key] for r in today.history] == [r[key] for r in old.history]
    a, b = (Checkpoint.load(p / "last.pt") for p in (tmp_path / "today", tmp_path / "before"))
    for name, weights in a.state_dict.items():
        assert torch.equal(weights, b.state_dict[name]), name
    assert "rdrop" not in a.preset


def test_the_train_command_trains_with_rdrop_and_resume_keeps_it(tmp_path, monkeypatch, capsys):
    """``--rdrop 1`` on the quick preset (made tiny here): one epoch, a final.pt, the weight in
    every checkpoint; ``--resume`` continues with the same weight and refuses another (or
    none); a run without R-Drop refuses to resume with it."""
    monkeypatch.setitem(PRESETS, "quick", TINY)
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: DATA)
    out = tmp_path / "run"
    base = ["--preset", "quick", "--no-progress"]
    assert train_mod.main([*base, "--out", str(out), "--rdrop", "1"]) == 0
    last = Checkpoint.load(out / "last.pt")
    assert last.preset["rdrop"] == 1.0 and len(last.train_state["history"]) == 1
    assert math.isfinite(last.train_state["history"][0]["train_loss"])
    assert Checkpoint.load(out / "final.pt").preset["rdrop"] == 1.0
    assert Preset.from_dict(last.preset).rdrop == 1.0
    capsys.readouterr()

    # resumed without --rdrop or with another weight: refused in one line, nothing trained
    for other in ([], ["--rdrop", "0.5"]):
        assert train_mod.main([*base, "--out", str(out), "--resume", "--epochs", "2",
                               *other]) == 1
        err = capsys.readouterr().err
        assert "rdrop: checkpoint 1.0, now" in err and err.count("\n") == 1, err
    assert len(Checkpoint.load(out / "last.pt").train_state["history"]) == 1
    assert train_mod.main([*base, "--out", str(out), "--resume", "--epochs", "2",
                           "--rdrop", "1"]) == 0
    assert len(Checkpoint.load(out / "last.pt").train_state["history"]) == 2

    # a run without R-Drop records no weight, and resumes only without one
    plain = tmp_path / "plain"
    assert train_mod.main([*base, "--out", str(plain)]) == 0
    assert "rdrop" not in Checkpoint.load(plain / "last.pt").preset
    capsys.readouterr()
    assert train_mod.main([*base, "--out", str(plain), "--resume", "--epochs", "2",
                           "--rdrop", "0.5"]) == 1
    assert "rdrop: checkpoint 0.0, now 0.5" in capsys.readouterr().err
    assert train_mod.main([*base, "--out", str(plain), "--resume", "--epochs", "2",
                           "--rdrop", "0"]) == 0


def test_a_weight_out_of_range_is_refused_in_one_line(tmp_path, capsys):
    """Negative, NaN, infinite, above 10 or not a number: one line naming the flag, exit 2,
    no run folder; a Preset refuses the same values."""
    capsys.readouterr()
    for value in ("-0.5", "nan", "inf", "10.5", "1e3", "half", ""):
        with pytest.raises(SystemExit) as e:
            train_mod.main(["--preset", "quick", "--out", str(tmp_path / "bad"),
                            "--rdrop", value])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "--rdrop" in err and err.count("\n") <= 2, err
    assert not (tmp_path / "bad").exists()
    for bad in (-0.5, float("nan"), float("inf"), 10.5, True, "1"):
        with pytest.raises(ValueError, match="rdrop must be a number from 0 to 10"):
            TINY.replace(rdrop=bad)
    assert TINY.replace(rdrop=10).rdrop == 10
    assert TINY.replace(rdrop=0).as_dict() == TINY.as_dict()
