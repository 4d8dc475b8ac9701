"""Training, checkpoints, resume, translation, BLEU and DDP, on a tiny invented corpus."""

import dataclasses
import math
import os
import subprocess
import sys
import textwrap
from collections import Counter
from pathlib import Path

import pytest
import sacrebleu
import torch
from conftest import TINY_PAIRS

from convs2s.data import Vocab, detokenize, load_multi30k
from convs2s.model import ConvS2SConfig
from convs2s.run import train as train_mod
from convs2s.run.checkpoint import Checkpoint, CheckpointError, load_checkpoint
from convs2s.run.metrics import corpus_bleu, tutorial_bleu
from convs2s.run.presets import PRESETS, Preset
from convs2s.run.resume import check_compatible
from convs2s.run.train import train
from convs2s.run.translator import Translator

TINY = Preset(
    name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                     dropout=0.1, max_positions=32),
    min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=4,
    patience=100, label_smoothing=0.0, seed=7,
)
DATA = {"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4], "test": TINY_PAIRS[4:8]}


def _run(out, preset=TINY, **kw):
    return train(preset, out, data=DATA, progress=False, log=lambda *_: None, **kw)


def _same_weights(a, b):
    sa, sb = a.state_dict(), b.state_dict()
    assert sa.keys() == sb.keys()
    for k in sa:
        torch.testing.assert_close(sa[k], sb[k], rtol=0, atol=0, msg=k)


def test_training_lowers_validation_loss(tmp_path):
    result = _run(tmp_path / "run", dataclasses.replace(TINY, epochs=8))
    losses = [row["valid_loss"] for row in result.history]
    assert len(losses) == 8
    assert losses[-1] < losses[0] - 0.5, losses
    assert result.best_path.exists() and result.last_path.exists()
    assert result.stopped == "epochs"


def test_resume_after_interruption_equals_uninterrupted(tmp_path):
    full = _run(tmp_path / "full")
    # stop in the middle of the second epoch, as an interruption would, then resume
    steps_per_epoch = full.steps // TINY.epochs
    part = _run(tmp_path / "part", dataclasses.replace(TINY, max_steps=steps_per_epoch + 1))
    assert part.stopped == "max_steps"
    state = load_checkpoint(tmp_path / "part" / "last.pt")["train_state"]
    assert state["batch_in_epoch"] == 1 and state["epoch"] == 1
    resumed = _run(tmp_path / "part", resume=True)
    assert resumed.steps == full.steps
    last_full = load_checkpoint(tmp_path / "full" / "last.pt")
    last_resumed = load_checkpoint(tmp_path / "part" / "last.pt")
    for k, v in last_full["model"].items():
        torch.testing.assert_close(last_resumed["model"][k], v, rtol=0, atol=0, msg=k)
    assert [r["valid_loss"] for r in resumed.history] == [r["valid_loss"] for r in full.history]
    _same_weights(resumed.model, full.model)  # the best weights too


def test_ctrl_c_saves_last_checkpoint_and_resume_continues(tmp_path, monkeypatch):
    full = _run(tmp_path / "full")
    real_loss, calls = train_mod.next_token_loss, {"n": 0}

    def interrupting_loss(*args, **kw):
        calls["n"] += 1
        if calls["n"] == 3:
            raise KeyboardInterrupt
        return real_loss(*args, **kw)

    monkeypatch.setattr(train_mod, "next_token_loss", interrupting_loss)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path / "stopped")
    assert load_checkpoint(tmp_path / "stopped" / "last.pt")["train_state"]["step"] == 2
    monkeypatch.setattr(train_mod, "next_token_loss", real_loss)
    resumed = _run(tmp_path / "stopped", resume=True)
    _same_weights(resumed.model, full.model)


def test_nan_loss_stops_with_step_and_keeps_checkpoint(tmp_path, monkeypatch):
    out = tmp_path / "run"
    _run(out, dataclasses.replace(TINY, epochs=1))
    before = (out / "last.pt").read_bytes()
    real_loss, calls = train_mod.next_token_loss, {"n": 0}

    def nan_on_third(*args, **kw):
        calls["n"] += 1
        loss = real_loss(*args, **kw)
        return loss * float("nan") if calls["n"] == 3 else loss

    monkeypatch.setattr(train_mod, "next_token_loss", nan_on_third)
    with pytest.raises(FloatingPointError, match=r"became nan at step \d+ .*last good checkpoints"):
        _run(out, resume=True)
    assert (out / "last.pt").read_bytes() == before


def test_refuses_to_overwrite_a_run(tmp_path):
    _run(tmp_path / "run", dataclasses.replace(TINY, epochs=1))
    with pytest.raises(CheckpointError, match="already holds a training run.*resume"):
        _run(tmp_path / "run")


def test_resume_with_other_model_config_is_a_clear_error(tmp_path):
    _run(tmp_path / "run", dataclasses.replace(TINY, epochs=1))
    with pytest.raises(CheckpointError, match="other settings.*emb_dim: checkpoint 16, now 32"):
        _run(tmp_path / "run", TINY.replace(emb_dim=32), resume=True)


def test_mismatched_vocab_is_a_clear_error(tmp_path):
    result = _run(tmp_path / "run", dataclasses.replace(TINY, epochs=1))
    data = load_checkpoint(result.best_path)
    other = Vocab.build([["ganz", "andere", "wörter"]], min_freq=1)
    with pytest.raises(CheckpointError, match="different src_vocab"):
        check_compatible(data, result.model.config, other, result.trg_vocab)


@pytest.fixture(scope="module")
def translator(tmp_path_factory):
    out = tmp_path_factory.mktemp("translator")
    result = _run(out, TINY.replace(epochs=25, dropout=0.0))
    return Translator.from_checkpoint(result.best_path, device="cpu")


def test_translator_translates_what_it_learned(translator):
    assert translator.translate("Ein Hund läuft.", beam_size=1) == "A dog runs."
    out = translator.translate(["Ein Hund läuft.", "Eine Katze schläft."], beam_size=3)
    assert out == ["A dog runs.", "A cat sleeps."]
    t = translator.translate_with_attention("Ein Hund läuft.")
    assert t.attention.shape == (1, len(t.tokens), len(t.source_tokens))
    torch.testing.assert_close(t.attention.sum(-1), torch.ones(1, len(t.tokens)))


@pytest.mark.parametrize(
    "bad, error, match",
    [
        ("", ValueError, "empty or whitespace-only"),
        ("   \n", ValueError, "empty or whitespace-only"),
        (42, TypeError, "str or a list of str"),
        (["Ein Hund läuft.", None], TypeError, "German sentence"),
        ("Hund " * 40, ValueError, r"40 positions long.*at most 32.*Shorten"),
    ],
)
def test_translator_bad_input(translator, bad, error, match):
    with pytest.raises(error, match=match):
        translator.translate(bad)


def test_detokenize():
    assert detokenize(["a", "man", ",", "a", "dog", "'s", "ball", "."]) == "A man, a dog's ball."
    assert detokenize(["he", "does", "n't", "(", "really", ")", "!"]) == "He doesn't (really)!"
    assert detokenize([]) == ""


def _bleu4_by_hand(hyps, refs):
    """Corpus BLEU-4 (Papineni et al.): clipped n-gram precisions, brevity penalty."""
    matches, totals, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
    for h, r in zip(hyps, refs, strict=True):
        hyp_len, ref_len = hyp_len + len(h), ref_len + len(r)
        for n in range(1, 5):
            hc = Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
            rc = Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
            matches[n - 1] += sum(min(c, rc[g]) for g, c in hc.items())
            totals[n - 1] += max(len(h) - n + 1, 0)
    log_p = sum(math.log(m / t) for m, t in zip(matches, totals, strict=True)) / 4
    bp = 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
    return 100 * bp * math.exp(log_p)


def test_corpus_bleu_both_scores():
    hyps = ["A man rides a red bike down the street.", "Two dogs play in the snow together."]
    refs = ["A man rides a bike down the street.", "Two dogs are playing in the snow."]
    scores = corpus_bleu(hyps, refs)
    assert scores.sacrebleu == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert "tok:13a" in scores.signature
    tok = [h.lower().replace(".", " .").split() for h in hyps]
    ref_tok = [r.lower().replace(".", " .").split() for r in refs]
    assert scores.tutorial == pytest.approx(_bleu4_by_hand(tok, ref_tok))
    assert tutorial_bleu(tok, ref_tok) == pytest.approx(_bleu4_by_hand(tok, ref_tok))
    # case matters for the standard score only
    lower = corpus_bleu([h.lower() for h in hyps], refs)
    assert lower.tutorial == pytest.approx(scores.tutorial) and lower.sacrebleu < scores.sacrebleu


def test_corpus_bleu_scores_given_tokens_as_they_are():
    refs = ["A man rides a bike."]
    tokens = [["a", "<unk>", "rides", "a", "bike", "."]]
    text = [detokenize(tokens[0])]
    given = corpus_bleu(text, refs, hyp_tokens=tokens)
    assert given.tutorial == pytest.approx(tutorial_bleu(tokens, [["a", "man", "rides", "a",
                                                                    "bike", "."]]))
    assert corpus_bleu(text, refs).tutorial != pytest.approx(given.tutorial)  # "<unk>" split


def test_corpus_bleu_errors():
    with pytest.raises(ValueError, match="2 hypotheses but 1 references"):
        corpus_bleu(["a", "b"], ["a"])
    with pytest.raises(TypeError, match="lists of sentences"):
        corpus_bleu("a b", "a b")


def test_clis_train_translate_evaluate(tmp_path, monkeypatch, capsys):
    from convs2s.run import evaluate as evaluate_mod
    from convs2s.run import translate_cli as translate_mod

    monkeypatch.setitem(PRESETS, "quick", dataclasses.replace(TINY, epochs=2))
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: DATA)
    monkeypatch.setattr(evaluate_mod, "load_multi30k", lambda *a, **k: DATA)
    out = tmp_path / "run"
    assert train_mod.main(["--preset", "quick", "--out", str(out), "--no-progress"]) == 0
    assert train_mod.main(["--preset", "quick", "--out", str(out)]) == 1
    assert "already holds a training run" in capsys.readouterr().err
    assert translate_mod.main(["--checkpoint", str(out / "best.pt"), "Ein Hund läuft."]) == 0
    assert capsys.readouterr().out.strip()
    # an empty sentence: an empty output line and a warning, not a failure
    assert translate_mod.main(["--checkpoint", str(out / "best.pt"), " "]) == 0
    captured = capsys.readouterr()
    assert captured.out == "\n" and "empty" in captured.err
    metrics_path = tmp_path / "m.json"
    args = ["--checkpoint", str(out / "best.pt"), "--split", "test", "--json", str(metrics_path)]
    assert evaluate_mod.main(args) == 0
    import json

    metrics = json.loads(metrics_path.read_text())
    assert metrics["sentences"] == 4 and metrics["split"] == "test"
    assert {"sacrebleu", "tutorial_bleu"} <= set(metrics["beam5"]) and metrics["perplexity"] > 1


@pytest.mark.slow
def test_quick_preset_on_multi30k_lowers_validation_loss(tmp_path):
    if not os.environ.get("CONVS2S_DATA_DIR"):
        pytest.skip("set CONVS2S_DATA_DIR to the Multi30k folder to run this test")
    preset = dataclasses.replace(PRESETS["quick"], epochs=2)
    result = train(preset, tmp_path / "q", data=load_multi30k(), progress=False)
    losses = [row["valid_loss"] for row in result.history]
    assert losses[1] < losses[0]


DDP_SCRIPT = """
import os, sys, dataclasses, torch
sys.path.insert(0, {tests!r})
from conftest import TINY_PAIRS
from convs2s.model import ConvS2SConfig
from convs2s.run.presets import Preset
from convs2s.run.train import train
preset = Preset(name="ddp", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                                dropout=0.1, max_positions=32),
                min_freq=1, max_tokens=40, lr=5e-3, warmup_steps=2, epochs=1, max_steps=3,
                seed=3)
data = {{"train": TINY_PAIRS * 2, "valid": TINY_PAIRS[:4]}}
result = train(preset, {out!r}, data=data, progress=False, device="cpu")
torch.save(result.model.state_dict(), os.path.join({out!r}, f"rank{{os.environ['RANK']}}.pt"))
"""


@pytest.mark.slow
def test_ddp_two_cpu_processes_keep_identical_replicas(tmp_path):
    script = tmp_path / "ddp_train.py"
    tests_dir = str(Path(__file__).resolve().parents[1])
    script.write_text(textwrap.dedent(DDP_SCRIPT.format(tests=tests_dir, out=str(tmp_path))))
    env = dict(os.environ, OMP_NUM_THREADS="1")
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
         str(script)],
        capture_output=True, text=True, timeout=300, env=env,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    w0 = torch.load(tmp_path / "rank0.pt", weights_only=True)
    w1 = torch.load(tmp_path / "rank1.pt", weights_only=True)
    for k in w0:
        torch.testing.assert_close(w0[k], w1[k], rtol=0, atol=0, msg=k)
    # rank 0 wrote the checkpoint after the 3 steps, with those same weights
    last = load_checkpoint(tmp_path / "last.pt")
    assert last["train_state"]["step"] == 3
    for k in w0:
        torch.testing.assert_close(last["model"][k], w0[k], rtol=0, atol=0, msg=k)


def test_the_train_command_sets_the_model_size(tmp_path, monkeypatch, capsys):
    """A larger (or smaller) model than the preset's, for the candidates a quality issue
    tries: the layers (as many in the encoder as in the decoder) and both widths reach the
    run's model and its checkpoint; a size out of range is one line and trains nothing."""
    monkeypatch.setitem(PRESETS, "quick", dataclasses.replace(TINY, epochs=1))
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: DATA)
    out = tmp_path / "run"
    assert train_mod.main(["--preset", "quick", "--out", str(out), "--no-progress",
                           "--layers", "2", "--emb-dim", "24", "--hid-dim", "20"]) == 0
    config = Checkpoint.load(out / "last.pt").model_config
    assert (config["enc_layers"], config["dec_layers"], config["emb_dim"],
            config["hid_dim"]) == (2, 2, 24, 20)
    _each_refused_in_one_line(tmp_path, capsys, [("--layers", "0"), ("--hid-dim", "100000"),
                                                 ("--emb-dim", "wide")])


def test_the_train_command_overrides_dropout_label_smoothing_and_patience(tmp_path, monkeypatch,
                                                                          capsys):
    """The settings a longer run chooses on validation reach the run and its checkpoints; a
    value out of range is one line and trains nothing."""
    monkeypatch.setitem(PRESETS, "quick", dataclasses.replace(TINY, epochs=1))
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: DATA)
    out = tmp_path / "run"
    assert train_mod.main(["--preset", "quick", "--out", str(out), "--no-progress",
                           "--dropout", "0.3", "--label-smoothing", "0.05",
                           "--patience", "7"]) == 0
    recorded = Checkpoint.load(out / "last.pt").preset
    assert (recorded["dropout"], recorded["label_smoothing"], recorded["patience"]) == \
        (0.3, 0.05, 7)
    _each_refused_in_one_line(tmp_path, capsys, [("--dropout", "1.5"),
                                                 ("--label-smoothing", "-0.1"),
                                                 ("--patience", "0")])


def test_the_train_command_sets_the_learning_rate_schedule(tmp_path, monkeypatch, capsys):
    """Another schedule for a quality issue's candidates: the peak rate, the warm-up and the
    shrink at each plateau reach the run (the rates it used) and its checkpoint; a value out of
    range is one line and trains nothing."""
    monkeypatch.setitem(PRESETS, "quick", dataclasses.replace(TINY, epochs=1))
    monkeypatch.setattr(train_mod, "load_multi30k", lambda *a, **k: DATA)
    out = tmp_path / "run"
    assert train_mod.main(["--preset", "quick", "--out", str(out), "--no-progress",
                           "--lr", "0.004", "--warmup-steps", "1", "--lr-shrink", "0.8"]) == 0
    checkpoint = Checkpoint.load(out / "last.pt")
    recorded = checkpoint.preset
    assert (recorded["lr"], recorded["warmup_steps"], recorded["lr_shrink"]) == (0.004, 1, 0.8)
    # the epoch's last update ran at the peak: a one-update warm-up was over
    assert checkpoint.train_state["history"][-1]["lr"] == pytest.approx(0.004)
    _each_refused_in_one_line(tmp_path, capsys, [("--lr", "0"), ("--lr", "2"),
                                                 ("--lr-shrink", "1.5"),
                                                 ("--warmup-steps", "-3")])


def test_a_preset_refuses_a_rate_or_shrink_out_of_range():
    for bad in (dict(lr=0.0), dict(lr=-1e-3), dict(lr=float("nan")), dict(lr=float("inf")),
                dict(lr_shrink=1.2), dict(lr_shrink=0), dict(lr=True)):
        with pytest.raises(ValueError, match="must be a number above 0"):
            TINY.replace(**bad)


def _each_refused_in_one_line(tmp_path, capsys, bad: list[tuple[str, str]]) -> None:
    """Each (flag, value) is refused by the train command in one line naming the flag (exit 2),
    and nothing is trained."""
    capsys.readouterr()
    for flag, value in bad:
        with pytest.raises(SystemExit) as e:
            train_mod.main(["--preset", "quick", "--out", str(tmp_path / "bad"), flag, value])
        assert e.value.code == 2
        err = capsys.readouterr().err
        assert flag in err and err.count("\n") <= 2, err
    assert not (tmp_path / "bad").exists()
