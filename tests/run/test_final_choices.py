"""The final model of a training run: snapshots, averaging and the length penalty,
both chosen on validation, written as final.pt; resume and interruption keep working."""

from __future__ import annotations

import dataclasses

import pytest
import torch
from conftest import TINY_PAIRS

from convs2s.model import ConvS2SConfig
from convs2s.run import final_choices
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.distributed import Distributed
from convs2s.run.presets import PRESETS, Preset
from convs2s.run.train import TrainState, train

TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=4,
    patience=100, label_smoothing=0.0, seed=7, average_last=3,
)
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}


def _run(out, preset=TINY, **kw):
    return train(preset, out, data=DATA, progress=False, log=lambda *_: None, **kw)


def test_a_run_ends_with_final_pt_chosen_on_validation(tmp_path):
    result = _run(tmp_path / "run")
    assert result.final_path == tmp_path / "run" / "final.pt"
    snaps = sorted(p.name for p in (tmp_path / "run" / "snapshots").iterdir())
    assert snaps == ["epoch02.pt", "epoch03.pt", "epoch04.pt"]  # only the last 3 are kept
    ckpt = Checkpoint.load(result.final_path)
    c = ckpt.choices
    assert [r["k"] for r in c["averages"]] == [1, 2, 3]
    assert [r["alpha"] for r in c["alphas"]] == list(final_choices.ALPHAS)
    top = max(r["valid_sacrebleu_greedy"] for r in c["averages"])
    chosen = next(r for r in c["averages"] if r["k"] == c["k"])
    assert chosen["valid_sacrebleu_greedy"] == top
    assert min(r["k"] for r in c["averages"] if r["valid_sacrebleu_greedy"] == top) == c["k"]
    top_alpha = max(r["valid_sacrebleu"] for r in c["alphas"])
    assert next(r for r in c["alphas"] if r["alpha"] == c["length_penalty"])[
        "valid_sacrebleu"] == top_alpha
    assert ckpt.length_penalty == c["length_penalty"] and c["valid_sentences"] == 4
    # the weights are what the choice says
    if c["k"] == 1:
        expected = Checkpoint.load(tmp_path / "run" / "best.pt").state_dict
    else:
        snapshots = tmp_path / "run" / "snapshots"
        expected = final_choices.average([Checkpoint.load(snapshots / n).state_dict
                                          for n in snaps[-c["k"]:]])
    for key, value in ckpt.state_dict.items():
        torch.testing.assert_close(value, expected[key], rtol=0, atol=0)
    assert ckpt.run_id == Checkpoint.load(tmp_path / "run" / "best.pt").run_id
    with pytest.raises(CheckpointError, match="cannot be resumed"):
        ckpt.resumable()  # a model to translate with, not a run to continue


def test_snapshots_of_each_epoch_belong_to_their_run(tmp_path):
    _run(tmp_path / "a")
    _run(tmp_path / "b", dataclasses.replace(TINY, seed=8))
    (tmp_path / "b" / "snapshots" / "epoch03.pt").write_bytes(
        (tmp_path / "a" / "snapshots" / "epoch03.pt").read_bytes())
    best = Checkpoint.load(tmp_path / "b" / "best.pt")
    with pytest.raises(CheckpointError, match="epoch03.pt belongs to another run"):
        final_choices.load_snapshots(tmp_path / "b", best.run_id)


def test_a_new_run_refuses_a_folder_with_final_pt_or_snapshots(tmp_path):
    out = tmp_path / "run"
    _run(out)
    for name in ("last.pt", "best.pt"):
        (out / name).unlink()
    with pytest.raises(CheckpointError, match="already holds a training run"):
        _run(out)
    (out / "final.pt").unlink()
    with pytest.raises(CheckpointError, match="already holds a training run"):
        _run(out)


def test_an_interrupted_run_resumes_and_still_ends_with_final_pt(tmp_path, monkeypatch):
    out, calls = tmp_path / "run", {"n": 0}
    real = train_mod.next_token_loss

    def interrupting(*a, **k):
        calls["n"] += 1
        if calls["n"] == 7:  # inside epoch 2 or 3
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(train_mod, "next_token_loss", interrupting)
    with pytest.raises(KeyboardInterrupt):
        _run(out)
    assert not (out / "final.pt").exists()
    monkeypatch.undo()
    result = _run(out, resume=True)
    reference = _run(tmp_path / "reference")
    assert [r["valid_loss"] for r in result.history] == [
        r["valid_loss"] for r in reference.history]
    a, b = (Checkpoint.load(p / "final.pt") for p in (out, tmp_path / "reference"))
    assert (a.choices["k"], a.choices["length_penalty"]) == (
        b.choices["k"], b.choices["length_penalty"])
    for key in a.state_dict:
        torch.testing.assert_close(a.state_dict[key], b.state_dict[key], rtol=0, atol=0)


def test_the_time_budget_keeps_room_for_the_final_choices():
    t = train_mod.Trainer.__new__(train_mod.Trainer)  # the stopping rule alone, on a state
    t.dist = Distributed(torch.device("cpu"))  # one process
    t.preset = dataclasses.replace(TINY, max_minutes=1)
    t.state = TrainState(step=5, seconds=50.0, final_reserve=0.0, bad_epochs=0, epoch=1)
    assert t.should_stop() == ""
    t.state.final_reserve = 10.0  # 50 s trained + 10 s for the choices = the whole minute
    assert t.should_stop() == "time budget"


def test_a_timed_run_measures_the_reserve_again_after_every_epoch(tmp_path, monkeypatch):
    """Decoding time follows the model (an early model's outputs run on to the length limit),
    so the reserve is the last epoch's measurement, not the first's."""
    measured = iter([{"greedy": 30.0, "beam": 20.0}, {"greedy": 6.0, "beam": 4.0},
                     {"greedy": 5.0, "beam": 3.0}])
    real = final_choices.estimate_costs
    calls = []

    def estimate(translator, pairs, **kw):
        calls.append(real(translator, pairs, **kw))  # the real measurement still runs
        return next(measured)

    monkeypatch.setattr(final_choices, "estimate_costs", estimate)
    out = tmp_path / "run"
    _run(out, dataclasses.replace(TINY, epochs=3, max_minutes=60, average_last=2))
    state = Checkpoint.load(out / "last.pt").train_state
    assert len(calls) == 3 and all(c["greedy"] > 0 and c["beam"] > 0 for c in calls)
    assert state["final_costs"] == {"greedy": 5.0, "beam": 3.0}
    assert state["final_costs_epoch"] == 3
    assert state["final_reserve"] == 2 * 5 + 3 + 5  # average_last candidates, sweep, loading


def test_a_pause_during_one_timing_is_not_taken_for_the_cost(monkeypatch):
    """A run paused (Ctrl-Z, a suspended laptop) while it timed the choices once kept ten
    hours for them and stopped at once: each cost is the fastest of two timings."""
    clock = {"now": 0.0, "calls": 0}

    def evaluate(translator, pairs, beam_sizes):
        clock["calls"] += 1
        clock["now"] += 1000.0 if clock["calls"] == 1 else 1.0  # the first greedy run paused

    monkeypatch.setattr(final_choices, "evaluate", evaluate)
    monkeypatch.setattr(final_choices.time, "perf_counter", lambda: clock["now"])
    costs = final_choices.estimate_costs(None, TINY_PAIRS[:8], sample=4)
    assert clock["calls"] == 4  # greedy twice, beam twice
    assert costs == pytest.approx({"greedy": 2 * 1.1, "beam": 2 * 1.1})  # 8/4 pairs, 10% more
    clock.update(now=0.0, calls=0)
    one = final_choices.estimate_costs(None, TINY_PAIRS[:8], sample=4, repeats=1)
    assert one["greedy"] == pytest.approx(2000 * 1.1)  # one timing keeps the pause


def test_a_resumed_run_measures_the_reserve_again_before_going_on(tmp_path, monkeypatch):
    """A checkpoint's costs were measured on the machine of the run's last session (or
    inflated by a pause there): a resumed run's first stop decision rests on a new one."""
    out, preset = tmp_path / "run", dataclasses.replace(TINY, epochs=2, average_last=2)
    measured = [{"greedy": 9000.0, "beam": 9000.0}]  # epoch 1's, as if paused
    calls, real = [], train_mod.next_token_loss

    def estimate(*a, **kw):
        calls.append(1)
        return measured[-1]

    def loss(*a, **k):
        if calls:
            raise KeyboardInterrupt  # in epoch 2, once epoch 1 has measured
        return real(*a, **k)

    monkeypatch.setattr(final_choices, "estimate_costs", estimate)
    monkeypatch.setattr(train_mod, "next_token_loss", loss)
    with pytest.raises(KeyboardInterrupt):  # a generous budget then: the reserve did not stop it
        train(dataclasses.replace(preset, max_minutes=100_000), out, data=DATA, progress=False,
              log=lambda *_: None)
    assert Checkpoint.load(out / "last.pt").train_state["final_reserve"] > 60 * 60
    monkeypatch.setattr(train_mod, "next_token_loss", real)
    measured.append({"greedy": 1.0, "beam": 1.0})  # this machine, no pause
    lines = []
    result = train(dataclasses.replace(preset, max_minutes=60), out, data=DATA, progress=False,
                   resume=True, log=lines.append)
    assert result.stopped == "epochs"  # not "time budget" on the stale hour-long reserve
    state = Checkpoint.load(out / "last.pt").train_state
    assert state["epoch"] == 2 and state["final_costs"] == {"greedy": 1.0, "beam": 1.0}
    assert any("measured again on resuming" in line for line in lines)


def test_the_reserve_counts_only_the_candidates_the_finished_epochs_give():
    """After 1 epoch, stopping leaves best.pt alone to score; after 2, best.pt and one
    average; never more than average_last candidates. The α sweep is one beam search."""
    t = train_mod.Trainer.__new__(train_mod.Trainer)
    t.dist = Distributed(torch.device("cpu"))
    t.preset = dataclasses.replace(TINY, max_minutes=1, average_last=3)
    costs = {"greedy": 4.0, "beam": 10.0}
    reserves = []
    for epoch in (0, 1, 2, 3, 7):
        reserves.append(final_choices.seconds_to_keep(costs, epoch, t.preset.average_last))
    assert reserves == [19, 19, 23, 27, 27]  # candidates × 4 s + 10 s + 5 s of loading
    t.state = TrainState(step=5, seconds=41.0, bad_epochs=0, epoch=1, final_costs=costs)
    assert t.should_stop() == "time budget"  # 41 s trained + 19 s kept = the whole minute
    t.state.seconds = 40.0
    assert t.should_stop() == ""
    t.state.epoch = 2  # one more finished epoch: one more candidate to score
    assert t.should_stop() == "time budget"


def test_score_alphas_gives_evaluates_figures_from_one_search(tmp_path):
    from convs2s.run.evaluate import evaluate, score_alphas
    from convs2s.run.translator import Translator

    result = _run(tmp_path / "run", dataclasses.replace(TINY, epochs=2))
    translator = Translator.from_checkpoint(result.final_path)
    pairs = DATA["valid"] + DATA["test"]
    rows = score_alphas(translator, pairs, [0.0, 1.0, 2.0], beam_size=3)
    assert [row["alpha"] for row in rows] == [0.0, 1.0, 2.0]
    for row in rows:
        m = evaluate(translator, pairs, beam_sizes=[3], length_penalty=row["alpha"])["beam3"]
        assert (row["sacrebleu"], row["chrf"]) == (m["sacrebleu"], m["chrf"])
        assert row["sentences"] == len(pairs)


def test_the_subword_presets_tie_the_output_embedding_and_end_with_final_pt():
    """The word-level presets stay as notebooks 01-04, 07 and 08 use them (no final.pt)."""
    for name, preset in PRESETS.items():
        subword = preset.tokenizer == "subword"
        assert (preset.average_last >= 1) == subword, name
        assert preset.model.share_input_output_embed == subword, name
    with pytest.raises(ValueError, match="average_last must be a whole number >= 0"):
        dataclasses.replace(TINY, average_last=-1)


def test_final_pt_records_the_whole_run_not_the_run_up_to_its_best_epoch(tmp_path):
    """Notebook 09's full run: best at epoch 17, early stop after 20, the average of epochs
    16-20 chosen; final.pt said "17 epochs trained" and drew 17 of the 20 epochs, because it
    took best.pt's record."""
    result = _run(tmp_path / "run")
    folder = tmp_path / "run"
    best = Checkpoint.load(folder / "best.pt")
    state = dict(best.train_state)
    state["history"], state["epoch"] = state["history"][:1], 1  # as if best at epoch 1
    dataclasses.replace(best, train_state=state).save(folder / "best.pt")
    final_choices.finalize(folder, TINY_PAIRS[:4], log=lambda *_: None)
    final, last = Checkpoint.load(result.final_path), Checkpoint.load(folder / "last.pt")
    assert len(last.history) == 4
    assert final.history == last.history
    assert final.train_state["epoch"] == last.train_state["epoch"]
    assert final.train_state["seconds"] == last.train_state["seconds"]


def test_average_is_the_elementwise_mean():
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)}
    b = {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(3)}
    avg = final_choices.average([a, b])
    assert avg["w"].tolist() == [2.0, 4.0] and avg["n"].item() == 3


def test_an_average_of_a_tied_model_keeps_one_tensor_for_the_tied_weights(tmp_path):
    """Averaged separately, a tied embedding and output layer became two tensors, and the
    project's float16 model 20.7 MB where the limit is 20 (notebook 09's full run)."""
    from convs2s.model import ConvS2S

    config = ConvS2SConfig(src_vocab_size=40, trg_vocab_size=40, emb_dim=16, hid_dim=16,
                           enc_layers=1, dec_layers=1, share_input_output_embed=True,
                           src_pad_idx=1, trg_pad_idx=1)
    states = [ConvS2S(config).state_dict() for _ in range(2)]
    tied = ("decoder.tok_embedding.weight", "decoder.fc_out.weight")
    avg = final_choices.average(states)
    assert avg[tied[0]] is avg[tied[1]]
    torch.testing.assert_close(avg[tied[1]], (states[0][tied[1]] + states[1][tied[1]]) / 2)
    untied = [{k: v.clone() for k, v in s.items()} for s in states]  # the negative control
    assert final_choices.average(untied)[tied[0]] is not final_choices.average(untied)[tied[1]]
    saved = tmp_path / "avg.pt"
    torch.save(avg, saved)
    torch.save(final_choices.average(untied), tmp_path / "untied.pt")
    assert saved.stat().st_size < (tmp_path / "untied.pt").stat().st_size


def test_translate_and_evaluate_decode_with_the_recorded_length_penalty(tmp_path):
    from convs2s.run.evaluate import evaluate
    from convs2s.run.translator import Translator

    result = _run(tmp_path / "run")
    ckpt = Checkpoint.load(result.final_path)
    ckpt.choices["length_penalty"] = 0.0  # as if validation had chosen 0
    path = ckpt.save(tmp_path / "chosen.pt")
    t = Translator.from_checkpoint(path, device="cpu")
    assert t.length_penalty == 0.0
    assert Translator.from_checkpoint(tmp_path / "run" / "best.pt").length_penalty == 1.0
    sources = [s for s, _ in TINY_PAIRS[:6]]
    chosen = t.translate(sources, beam_size=3)
    assert chosen == t.translate(sources, beam_size=3, length_penalty=0.0)
    # the control: on this model the default α (1) translates otherwise, so the equality above
    # shows the recorded α was used
    assert chosen != t.translate(sources, beam_size=3, length_penalty=1.0)
    assert evaluate(t, TINY_PAIRS[:4], beam_sizes=[3])["length_penalty"] == 0.0
    scores = [{k: m[k] for k in ("sacrebleu", "chrf")} for m in (
        evaluate(t, TINY_PAIRS[:6], beam_sizes=[3], length_penalty=a)["beam3"]
        for a in (None, 0.0, 1.0))]
    assert scores[0] == scores[1] != scores[2]
    assert evaluate(t, TINY_PAIRS[:4], beam_sizes=[3], length_penalty=0.5)[
        "length_penalty"] == 0.5
