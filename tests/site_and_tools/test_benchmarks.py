"""The benchmark scripts run end to end and report what they say (tiny corpus, quick preset).

Figures themselves are not checked here (timed tests are not allowed): only that the scripts
produce complete, consistent reports and refuse bad input with a clear message. They run in
this process, with the loader told to expect the tiny corpus's checksums.
"""

import dataclasses
import hashlib
import importlib
import json
import sys
from pathlib import Path

import pytest

from convs2s.data import multi30k

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


@pytest.fixture
def on_tiny_corpus(tiny_corpus, monkeypatch):
    """The Multi30k loader reads the tiny corpus (its own checksums expected)."""
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tiny_corpus.iterdir()}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tiny_corpus))
    return tiny_corpus


def _script(name, monkeypatch):
    """benchmarks/<name>.py as a module; run(*args) calls its main with those arguments."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module(name)

    def run(*args):
        monkeypatch.setattr(sys, "argv", [f"benchmarks/{name}.py", *args])
        return module.main(list(args))

    return run


@pytest.fixture
def quality(on_tiny_corpus, monkeypatch):
    """benchmarks/quality.py reading the tiny corpus, on the CPU; run(*args) -> exit code."""
    script = _script("quality", monkeypatch)
    return lambda *args: script(*args, "--device", "cpu")


@pytest.mark.slow
def test_quality_trains_evaluates_and_reports(quality, tmp_path, capsys):
    out, report = tmp_path / "run", tmp_path / "results" / "quality.json"
    report.parent.mkdir()  # --json's folder must exist (nothing is made that was not asked)
    assert quality("--preset", "quick", "--out", str(out), "--json", str(report)) == 0
    printed = capsys.readouterr().out
    r = json.loads(report.read_text())
    assert r["benchmark"] == "quality" and r["preset"] == "quick" and r["split"] == "test"
    assert r["sentences"] + r["skipped"] == 2  # the tiny corpus's test split
    assert r["perplexity"] > 1 and r["parameters"] > 0 and r["train_seconds"] > 0
    assert r["epochs"] >= r["best_epoch"] >= 1
    for beam in ("beam1", "beam5"):
        assert 0 <= r[beam]["sacrebleu"] <= 100 and 0 <= r[beam]["tutorial_bleu"] <= 100
        assert "tok:13a" in r[beam]["signature"]
    assert r["device"].startswith("CPU") and r["date"] and "quality.py" in r["command"]
    assert "sacreBLEU" in printed and "greedy" in printed and "beam 5" in printed
    assert not list(report.parent.glob("*.tmp")), "a temporary file was left behind"

    # Scoring the run's checkpoint again gives the same figures (decoding is deterministic).
    again = tmp_path / "again.json"
    assert quality("--checkpoint", str(out / "best.pt"), "--json", str(again)) == 0
    r2 = json.loads(again.read_text())
    assert r2["beam5"]["sacrebleu"] == r["beam5"]["sacrebleu"]
    assert r2["perplexity"] == pytest.approx(r["perplexity"])
    assert r2["train_seconds"] == r["train_seconds"] and r2["wall_seconds_train_call"] is None

    # A second training run into the same folder is refused, not silently mixed or overwritten.
    capsys.readouterr()
    assert quality("--preset", "quick", "--out", str(out)) == 2
    err = capsys.readouterr().err
    assert "already holds a run" in err and "--overwrite" in err
    # ... unless asked: --overwrite trains afresh.
    assert quality("--preset", "quick", "--out", str(out), "--overwrite") == 0


def test_quality_rejects_a_checkpoint_that_is_not_one(quality, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_:
        quality("--checkpoint", str(tmp_path / "metrics.json"))
    assert exit_.value.code == 2
    assert "expected a .pt file" in capsys.readouterr().err


def test_decoding_times_the_model_of_the_preset_asked_for(monkeypatch, tmp_path, capsys):
    from convs2s.model import ConvS2S, count_parameters
    from convs2s.run.presets import PRESETS

    decoding = _script("decoding", monkeypatch)
    report = tmp_path / "decoding.json"
    assert decoding("--preset", "quick", "--device", "cpu", "--batch", "2", "--lengths", "2", "3",
                    "--repeats", "1", "--json", str(report)) == 0
    r = json.loads(report.read_text())
    quick = ConvS2S(dataclasses.replace(PRESETS["quick"].model, src_vocab_size=7851,
                                        trg_vocab_size=5892, src_pad_idx=1, trg_pad_idx=1))
    assert r["model"] == "preset quick" and r["parameters"] == count_parameters(quick)
    assert [row["length"] for row in r["rows"]] == [2, 3]
    for row in r["rows"]:
        assert row["incremental_speedup"] == pytest.approx(
            row["incremental_sent_per_s"] / row["full_sent_per_s"])
    assert f"{count_parameters(quick):,} parameters" in capsys.readouterr().out

    # A checkpoint and a preset at once is ambiguous: refused by the argument parser.
    with pytest.raises(SystemExit) as exit_:
        decoding("--preset", "quick", "--checkpoint", str(tmp_path / "best.pt"))
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


@pytest.mark.parametrize("preset, target", [("cpu", "3 GB RAM"), ("quick", None)])
def test_memory_reports_a_target_only_for_the_presets_own_device(
        preset, target, on_tiny_corpus, monkeypatch, tmp_path, capsys):
    memory = _script("memory", monkeypatch)
    report = tmp_path / "memory.json"
    assert memory("--preset", preset, "--device", "cpu", "--steps", "1", "--json",
                  str(report)) == 0
    r = json.loads(report.read_text())
    assert r["preset"] == preset and r["steps"] == 1 and r["peak_rss_gb"] > 0
    assert r["target"] == target
    printed = capsys.readouterr().out
    assert (f"target within {target}" if target else "no target for this preset") in printed


@pytest.mark.slow
def test_speed_reports_both_models_and_their_arithmetic(on_tiny_corpus, monkeypatch, tmp_path):
    speed = _script("speed", monkeypatch)
    report = tmp_path / "speed.json"
    speed("--preset", "quick", "--device", "cpu", "--steps", "1", "--warmup", "0",
          "--sentences", "2", "--batch-size", "2", "--json", str(report))
    r = json.loads(report.read_text())
    t = r["training"]
    for name in ("convs2s", "rnn"):
        assert t[name]["steps"] == 1 and t[name]["tokens"] > 0
        assert t[name]["flops_per_token"] > 0
        assert t[name]["gflops_per_s"] == pytest.approx(
            t[name]["flops_per_token"] * t[name]["tokens_per_s"] / 1e9)
    assert t["convs2s"]["tokens"] == t["rnn"]["tokens"]  # the very same batch
    assert t["ratio"] == pytest.approx(t["convs2s"]["tokens_per_s"] / t["rnn"]["tokens_per_s"])
    assert t["flops_per_token_ratio"] == pytest.approx(
        t["convs2s"]["flops_per_token"] / t["rnn"]["flops_per_token"])
    for label in ("greedy", "beam5"):
        assert r["decoding"][label]["convs2s"]["sentences"] == 2


def _tiny_checkpoint(path, src="de", trg="en", seed=0, dog="hund"):
    """A one-layer word model of ``src``→``trg``, saved at ``path`` (random weights)."""
    import torch

    from convs2s.data import Vocab
    from convs2s.data.subword import TextPipeline
    from convs2s.model import ConvS2S
    from convs2s.run.checkpoint import Checkpoint

    specials = ["<unk>", "<pad>", "<bos>", "<eos>"]
    vocab = Vocab(specials + ["ein", dog, "a", "dog", "."], specials)
    torch.manual_seed(seed)
    model = ConvS2S(len(vocab), len(vocab), emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=1,
                    src_pad_idx=vocab.pad_idx, trg_pad_idx=vocab.pad_idx,
                    max_positions=64).eval()
    Checkpoint.from_model(model, vocab, vocab, TextPipeline.word(src, trg)).save(path)
    return path


def test_alpha_grid_scores_every_alpha_of_every_model_on_validation(
        on_tiny_corpus, monkeypatch, tmp_path, capsys):
    run = _script("alpha_grid", monkeypatch)
    a, b = _tiny_checkpoint(tmp_path / "a.pt"), _tiny_checkpoint(tmp_path / "b.pt", seed=1)
    report = tmp_path / "grid.json"
    assert run("--checkpoint", str(a), "--checkpoint", str(b), "--alphas", "0.5", "1",
               "--beam", "2", "--json", str(report)) == 0
    r = json.loads(report.read_text())
    assert r["benchmark"] == "alpha_grid" and r["split"] == "valid" and r["direction"] == "de-en"
    assert list(r["models"]) == [str(a), str(b)]
    for rows in r["models"].values():
        assert [row["alpha"] for row in rows] == [0.5, 1.0]
        assert all(row["sentences"] == 2 and 0 <= row["sacrebleu"] <= 100 for row in rows)
    assert capsys.readouterr().out.count("(best: α ") == 2


@pytest.mark.parametrize("args, words", [
    ((), "give at least one model"),
    (("--alphas", "-1"), "length_penalty must be between 0 and 10"),
    (("--other",), "translates en-de, the first model de-en"),
])
def test_alpha_grid_refuses_bad_input_in_one_line(on_tiny_corpus, monkeypatch, tmp_path, capsys,
                                                  args, words):
    run = _script("alpha_grid", monkeypatch)
    a = _tiny_checkpoint(tmp_path / "a.pt")
    if args == ("--other",):
        args = ("--checkpoint", str(a), "--checkpoint",
                str(_tiny_checkpoint(tmp_path / "b.pt", src="en", trg="de")))
    elif args:
        args = ("--checkpoint", str(a), *args)
    with pytest.raises(SystemExit) as exit_:
        run(*args, "--json", str(tmp_path / "grid.json"))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "grid.json").exists()


def test_greedy_soup_adds_an_ingredient_only_when_the_score_rises():
    """Wortsman et al.'s recipe: best single model first, then each in order of its own
    score, kept only if the soup scores higher with it (a tie keeps the smaller soup)."""
    sys.path.insert(0, str(BENCHMARKS))
    try:
        from weight_soup import greedy_soup
    finally:
        sys.path.remove(str(BENCHMARKS))
    singles = {"a": 40.0, "b": 41.0, "c": 39.0, "d": 38.0}
    soups = {("b", "a"): 41.0, ("b", "c"): 41.5, ("b", "c", "d"): 41.2}
    tried = []

    def score_of(members):
        tried.append(tuple(members))
        return soups[tuple(members)]

    soup, score, steps = greedy_soup(list(singles), singles, score_of)
    assert tried == [("b", "a"), ("b", "c"), ("b", "c", "d")]  # a tie (41.0) is not kept
    assert (soup, score) == (["b", "c"], 41.5)
    assert [s["kept"] for s in steps] == [True, False, True, False]


def test_weight_soup_scores_the_mean_of_the_models_it_names(on_tiny_corpus, monkeypatch,
                                                            tmp_path, capsys):
    """Random tiny models score 0 BLEU whatever their weights, so the score here is read off
    the weights the translator holds when it is scored: the uniform soup's must be those of the
    models' mean, computed here on its own, and each single model's its own."""
    from convs2s.run.checkpoint import Checkpoint
    from convs2s.run.final_choices import ALPHAS

    run = _script("weight_soup", monkeypatch)
    module = sys.modules["weight_soup"]
    paths = [_tiny_checkpoint(tmp_path / f"{i}.pt", seed=i) for i in range(3)]
    ckpts = [Checkpoint.load(p) for p in paths]
    key = next(k for k, v in ckpts[0].state_dict.items() if v.is_floating_point())

    def weights_score(translator, pairs, beam_sizes):  # a score only the weights decide
        return {"beam1": {"sacrebleu": float(translator.model.state_dict()[key].sum())}}

    monkeypatch.setattr(module, "evaluate", weights_score)
    report = tmp_path / "soup.json"
    assert run(*[a for p in paths for a in ("--checkpoint", str(p))], "--beam", "2",
               "--json", str(report)) == 0
    r = json.loads(report.read_text())
    assert (r["benchmark"], r["split"], r["direction"], r["sentences"]) == (
        "weight_soup", "valid", "de-en", 2)
    singles = [float(c.state_dict[key].sum()) for c in ckpts]
    assert [r["ingredients"][str(p)]["valid_sacrebleu_greedy"] for p in paths] == \
        pytest.approx(singles)
    assert len(set(singles)) == 3  # three different models
    mean = float((sum(c.state_dict[key] for c in ckpts) / 3).sum())
    uniform = r["results"]["uniform soup"]
    assert uniform["ingredients"] == [str(p) for p in paths]
    assert uniform["valid_sacrebleu_greedy"] == pytest.approx(mean, abs=1e-5)
    assert len(r["greedy_soup_steps"]) == 3
    for row in r["results"].values():
        assert [b["alpha"] for b in row["beam"]] == list(ALPHAS)
        assert row["valid_sacrebleu_beam"] == max(b["sacrebleu"] for b in row["beam"])
    assert "greedy soup (" in capsys.readouterr().out


@pytest.mark.parametrize("args, words", [
    ((), "give two or more models"),
    (("--other-direction",), "translates en-de, the first model de-en"),
    (("--other-vocabulary",), "has other vocabularies than the first model"),
    (("--twice",), "a checkpoint is named twice"),
])
def test_weight_soup_refuses_models_it_cannot_average_in_one_line(
        on_tiny_corpus, monkeypatch, tmp_path, capsys, args, words):
    run = _script("weight_soup", monkeypatch)
    a = _tiny_checkpoint(tmp_path / "a.pt")
    if args == ("--other-direction",):
        args = (str(_tiny_checkpoint(tmp_path / "b.pt", src="en", trg="de")),)
    elif args == ("--other-vocabulary",):
        args = (str(_tiny_checkpoint(tmp_path / "b.pt", dog="katze")),)
    elif args == ("--twice",):
        args = (str(a),)
    argv = ("--checkpoint", str(a), *(x for p in args for x in ("--checkpoint", p)))
    with pytest.raises(SystemExit) as exit_:
        run(*argv, "--json", str(tmp_path / "soup.json"))
    err = capsys.readouterr().err
    assert exit_.value.code == 2 and err.count("\n") == 1 and words in err, err
    assert not (tmp_path / "soup.json").exists()


@pytest.mark.parametrize("students", ["0", "201", "x"])
def test_grading_benchmark_refuses_a_class_size_it_cannot_take_in_one_line(students, monkeypatch,
                                                                             capsys):
    run = _script("grading", monkeypatch)
    with pytest.raises(SystemExit) as stop:
        run("--students", students)
    assert stop.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--students" in err
