"""Subword regularisation (``--subword-sampling ALPHA``, issue 62): while training, every
training pair is segmented afresh at random each epoch (sentencepiece's sampling: BPE-dropout
for a BPE vocabulary, the unigram lattice with ``nbest_size=-1`` for a unigram one), seeded by
the run's seed and the epoch; validation, the final choices and translation keep the best
segmentation. Off (0, the default) is today's run exactly; the word tokenizer, or an alpha out
of range, is refused in one line."""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys

import pytest
import torch
from conftest import TINY_PAIRS, recording_training_batches

from convs2s.data import TranslationDataset, make_loader
from convs2s.data.subword import SubwordSettings, TextPipeline, seeded_sampling
from convs2s.model import ConvS2SConfig
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.distributed import Distributed
from convs2s.run.prepare import prepare_data
from convs2s.run.presets import PRESETS, Preset

TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=2,
    patience=100, label_smoothing=0.1, seed=7, vocab_size=100,
)
SUBWORD = TINY.replace(tokenizer="subword")
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}


@pytest.fixture(autouse=True)
def _own_cache(tmp_path, monkeypatch):
    """Subword models learned here stay in this test's folder."""
    monkeypatch.setenv("CONVS2S_CACHE_DIR", str(tmp_path / "cache"))


def _train(out, preset, **kw):
    return train_mod.train(preset, out, data=DATA, progress=False, log=lambda *_: None, **kw)


def _trainer(tmp_path, preset) -> train_mod.Trainer:
    return train_mod.Trainer(preset, tmp_path / "run", DATA, Distributed(torch.device("cpu")),
                             progress=False, log=lambda *_: None)


def _recorded_run(out, preset, monkeypatch):
    """Train ``preset``; returns the batches of each epoch's steps and of its validation."""
    with recording_training_batches(monkeypatch) as (steps, valid):
        result = _train(out, preset)
    ends = [0] + [row["step"] for row in result.history]
    return [steps[a:b] for a, b in zip(ends, ends[1:], strict=False)], valid, result


def _rows(batches) -> list[tuple[int, ...]]:
    """Every example of the batches, as its token ids without padding (source, then target)."""
    rows = []
    for src, trg in batches:
        for s, t in zip(src.tolist(), trg.tolist(), strict=True):
            rows.append(tuple(i for i in s if i != 1) + (-1,) + tuple(i for i in t if i != 1))
    return sorted(rows)


def test_off_is_todays_batches_and_todays_record(tmp_path, monkeypatch):
    """``subword_sampling`` 0: the steps see exactly the batches the loader made before the
    switch existed (the training pairs tokenized once, the best way), nothing is sampled, and
    the preset records no ``subword_sampling`` (a checkpoint as before)."""
    assert SUBWORD.subword_sampling == 0 and "subword_sampling" not in SUBWORD.as_dict()

    def never(*_a, **_k):
        raise AssertionError("sampled with subword_sampling 0")

    monkeypatch.setattr(TextPipeline, "sample", never)
    epochs, _, result = _recorded_run(tmp_path / "off", SUBWORD, monkeypatch)
    # today's batches: prepare_data's dataset through make_loader, as the trainer made them
    train_ds, *_ = prepare_data(SUBWORD, DATA)
    loader = make_loader(train_ds, max_tokens=SUBWORD.max_tokens, shuffle=True, seed=SUBWORD.seed)
    assert len(epochs) == 2
    for epoch, seen in enumerate(epochs):
        loader.batch_sampler.set_epoch(epoch)
        today = list(loader)
        assert len(seen) == len(today)
        for (s, t), (s0, t0) in zip(seen, today, strict=True):
            assert torch.equal(s, s0) and torch.equal(t, t0)
    assert "subword_sampling" not in Checkpoint.load(result.last_path).preset


def test_on_the_training_segmentations_change_each_epoch_and_validations_do_not(
        tmp_path, monkeypatch):
    """``subword_sampling`` 0.2: the steps of epoch 1 and epoch 2 see other segmentations of
    the same pairs (each one decodes back to its text); validation sees the best segmentation,
    the same every epoch; the record names the method."""
    preset = SUBWORD.replace(subword_sampling=0.2)
    epochs, valid, result = _recorded_run(tmp_path / "on", preset, monkeypatch)
    assert len(epochs) == 2 and _rows(epochs[0]) != _rows(epochs[1])
    assert len(valid) == 2 and _rows(valid[0]) == _rows(valid[1])
    # validation is the best segmentation: what the pipeline's tokenizers give
    ckpt = Checkpoint.load(result.last_path)
    assert ckpt.preset["subword_sampling"] == 0.2
    pipeline, src_vocab, trg_vocab = ckpt.pipeline, ckpt.src_vocab, ckpt.trg_vocab
    best_valid = TranslationDataset(DATA["valid"], pipeline.src_tokenizer,
                                    pipeline.trg_tokenizer, src_vocab, trg_vocab, max_len=32)
    assert _rows(valid[0]) == _rows((s[None], t[None]) for s, t in zip(
        best_valid.src, best_valid.trg, strict=True))

    # the trainer's dataset, epoch by epoch: other pieces, the same texts; validation's untouched
    trainer = _trainer(tmp_path, preset)
    train_ds, valid_ds = trainer.loader.dataset, trainer.valid_loader.dataset
    best = [(list(s), list(t)) for s, t in zip(train_ds._first[0], train_ds._first[1],
                                                strict=True)]
    valid_before = [x.clone() for x in valid_ds.src + valid_ds.trg]
    by_epoch = []
    for epoch in (0, 1):
        trainer.sample_segmentations(epoch)
        by_epoch.append([(s.tolist(), t.tolist()) for s, t in zip(train_ds.src, train_ds.trg,
                                                                   strict=True)])
        assert trainer.loader.batch_sampler.lengths[:, 0].tolist() == train_ds.src_lengths
        for (s, t), (text_s, text_t) in zip(by_epoch[-1], train_ds.pairs, strict=True):
            assert pipeline.src_tokenizer.decode(src_vocab.decode(s)) == text_s
            assert pipeline.detokenize(trg_vocab.decode(t)) == text_t
    assert by_epoch[0] != by_epoch[1] and by_epoch[0] != best
    assert all(torch.equal(a, b) for a, b in zip(valid_before, valid_ds.src + valid_ds.trg,
                                                 strict=True))


@pytest.mark.parametrize("model_type", ["bpe", "unigram"])
def test_the_same_seed_gives_the_same_segmentations(model_type):
    """Seeded sampling is reproducible in one process, whatever was sampled before on this
    thread (BPE-dropout and the unigram lattice alike); another seed, or another epoch, gives
    others. (A new process draws others for the same seed: the tests below.)"""
    pipeline = TextPipeline.learn(DATA["train"], settings=SubwordSettings(
        vocab_size=100, model_type=model_type), cache=False)
    pairs = DATA["train"]
    first = pipeline.sample(pairs, 0.2, (7, 0))
    for s, _ in pairs:  # unseeded draws in this thread change nothing
        pipeline.src_tokenizer.sample(s, 0.2)
    assert pipeline.sample(pairs, 0.2, (7, 0)) == first
    assert pipeline.sample(pairs, 0.2, (7, 1)) != first
    assert pipeline.sample(pairs, 0.2, (8, 0)) != first
    best = [(pipeline.src_tokenizer(s), pipeline.trg_tokenizer(t)) for s, t in pairs]
    assert first != best
    assert [("".join(s), "".join(t)) for s, t in first] == [("".join(s), "".join(t))
                                                             for s, t in best]
    with pytest.raises(ZeroDivisionError):  # the work's own error comes back
        seeded_sampling(1, lambda: 1 / 0)
    with pytest.raises(ValueError, match="needs a subword pipeline"):
        TextPipeline.word().sample(pairs, 0.1, 0)


def test_a_resumed_run_samples_what_the_uninterrupted_one_did(tmp_path):
    """Stopped inside epoch 2 and resumed: the same segmentations, so the same weights and
    history as the run never stopped (the draws depend on the seed and the epoch only)."""
    preset = SUBWORD.replace(subword_sampling=0.1)
    full = _train(tmp_path / "full", preset)
    per_epoch = full.history[0]["step"]
    part = _train(tmp_path / "part", dataclasses.replace(preset, max_steps=per_epoch + 1))
    assert part.stopped == "max_steps"
    resumed = _train(tmp_path / "part", preset, resume=True)
    assert resumed.steps == full.steps
    assert [r["valid_loss"] for r in resumed.history] == [r["valid_loss"] for r in full.history]
    a, b = (Checkpoint.load(p / "last.pt") for p in (tmp_path / "full", tmp_path / "part"))
    for name, weights in a.state_dict.items():
        assert torch.equal(weights, b.state_dict[name]), name


def test_the_word_tokenizer_or_an_alpha_out_of_range_is_refused_in_one_line(tmp_path, capsys):
    """With words (the quick preset's), or an alpha that is not a number from 0 to 1: one line
    naming the flag, exit 2, no run folder; a Preset refuses the same."""
    capsys.readouterr()
    for extra in (["--subword-sampling", "0.1"],
                  ["--tokenizer", "word", "--subword-sampling", "0.2"],
                  *(["--tokenizer", "subword", "--subword-sampling", v]
                    for v in ("-0.1", "1.5", "nan", "inf", "half", ""))):
        with pytest.raises(SystemExit) as e:
            train_mod.main(["--preset", "quick", "--out", str(tmp_path / "bad"), *extra])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert "--subword-sampling" in err and err.count("\n") <= 2, err
    assert not (tmp_path / "bad").exists()
    with pytest.raises(ValueError, match="needs the subword tokenizer"):
        TINY.replace(subword_sampling=0.1)
    for bad in (-0.1, 1.5, float("nan"), float("inf"), True, "0.1"):
        with pytest.raises(ValueError, match="subword_sampling must be a number from 0"):
            SUBWORD.replace(subword_sampling=bad)
    assert TINY.replace(subword_sampling=0).as_dict() == TINY.as_dict()
    assert SUBWORD.replace(subword_sampling=1).subword_sampling == 1


def test_the_train_command_samples_on_the_quick_preset_and_resume_keeps_it(
        tmp_path, monkeypatch, capsys):
    """``--tokenizer subword --subword-sampling 0.1`` on the quick preset (made tiny here): one
    epoch and a final.pt, the alpha in every checkpoint; ``--resume`` continues with the same
    alpha and refuses another (or none); ``--help`` names the flag."""
    monkeypatch.setitem(PRESETS, "quick", dataclasses.replace(TINY, epochs=1, average_last=2,
                                                              final_pairs=4))
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: DATA)
    out = tmp_path / "run"
    base = ["--preset", "quick", "--no-progress", "--tokenizer", "subword", "--out", str(out)]
    assert train_mod.main([*base, "--subword-sampling", "0.1"]) == 0
    assert "subword sampling (alpha 0.1)" in capsys.readouterr().out
    last = Checkpoint.load(out / "last.pt")
    assert last.preset["subword_sampling"] == 0.1 and len(last.train_state["history"]) == 1
    assert Checkpoint.load(out / "final.pt").preset["subword_sampling"] == 0.1
    assert Preset.from_dict(last.preset).subword_sampling == 0.1
    for other in ([], ["--subword-sampling", "0.2"]):
        assert train_mod.main([*base, "--resume", "--epochs", "2", *other]) == 1
        err = capsys.readouterr().err
        assert "subword_sampling: checkpoint 0.1, now" in err and err.count("\n") == 1, err
    assert train_mod.main([*base, "--resume", "--epochs", "2", "--subword-sampling", "0.1"]) == 0
    assert len(Checkpoint.load(out / "last.pt").train_state["history"]) == 2
    with pytest.raises(SystemExit):
        train_mod.main(["--help"])
    assert "--subword-sampling ALPHA" in capsys.readouterr().out


RESUME_IN_A_NEW_PROCESS = """
import json, sys
from pathlib import Path
import torch
torch.set_num_threads(int(sys.argv[3]))  # the test's: the same sums in the same order
from convs2s.run import train as train_mod
from convs2s.run.presets import Preset
spec = json.loads(Path(sys.argv[2]).read_text())
data = {split: [tuple(pair) for pair in pairs] for split, pairs in spec["data"].items()}
train_mod.train(Preset.from_dict(spec["preset"]), Path(sys.argv[1]), data=data, progress=False,
                log=lambda *_: None, resume=True)
"""


def test_a_run_resumed_in_a_new_process_trains_on_the_segmentations_it_stopped_in(tmp_path):
    """sentencepiece draws other pieces for the same seed in a new process. So a ``last.pt``
    written inside a sampled epoch keeps that epoch's segmentations, and a run resumed from it
    in a new process ends with the weights and history of the run never stopped (a run that
    sampled again would see some pairs twice and others never)."""
    preset = SUBWORD.replace(subword_sampling=0.1)
    full = _train(tmp_path / "full", preset)
    per_epoch = full.history[0]["step"]
    _train(tmp_path / "part", dataclasses.replace(preset, max_steps=per_epoch + 1))
    stored = Checkpoint.load(tmp_path / "part" / "last.pt").train_state["segmentation"]
    assert stored["epoch"] == 1 and len(stored["src_lengths"]) == len(DATA["train"])
    spec = tmp_path / "spec.json"
    spec.write_text(json.dumps({"preset": preset.as_dict(), "data": DATA}))
    done = subprocess.run([sys.executable, "-c", RESUME_IN_A_NEW_PROCESS,
                           str(tmp_path / "part"), str(spec), str(torch.get_num_threads())],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    a, b = (Checkpoint.load(p / "last.pt") for p in (tmp_path / "full", tmp_path / "part"))
    assert [r["valid_loss"] for r in b.train_state["history"]] == [
        r["valid_loss"] for r in full.history]
    for name, weights in a.state_dict.items():
        assert torch.equal(weights, b.state_dict[name]), name
    assert "segmentation" not in b.train_state  # written at the epoch's end: none to keep


def test_a_stored_segmentation_that_does_not_fit_the_pairs_is_refused_in_one_line(tmp_path):
    """A ``last.pt`` whose stored segmentation has an id past the vocabulary, or a length per
    pair too few, is refused with one line naming the segmentation; nothing is trained. One
    stored for no epoch (not a whole number) is not put back: the epoch is sampled again."""
    preset = SUBWORD.replace(subword_sampling=0.1)
    _train(tmp_path / "run", dataclasses.replace(preset, max_steps=1))
    last = tmp_path / "run" / "last.pt"
    good = Checkpoint.load(last)
    vocab_size = len(good.src_vocab)
    for broken in ({"src": good.train_state["segmentation"]["src"] * 0 + vocab_size},
                   {"trg_lengths": good.train_state["segmentation"]["trg_lengths"][1:].clone()}):
        ckpt = Checkpoint.load(last)
        ckpt.train_state["segmentation"].update(broken)
        bad = tmp_path / "bad"
        bad.mkdir(exist_ok=True)
        ckpt.save(bad / "last.pt")
        with pytest.raises(CheckpointError, match="segmentation it stored for epoch 1") as e:
            _train(bad, preset, resume=True)
        assert "\n" not in str(e.value)
        assert Checkpoint.load(bad / "last.pt").step == 1
    # one stored for no epoch this run is in: not put back, the epoch sampled again
    ckpt = Checkpoint.load(last)
    ckpt.train_state["segmentation"]["epoch"] = torch.tensor([0, 0])
    ckpt.save(bad / "last.pt")
    assert _train(bad, preset, resume=True).steps > 1
