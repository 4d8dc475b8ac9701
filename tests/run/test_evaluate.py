"""convs2s.run.evaluate: arguments refused at parse time, an unwritable --json refused before any
work, and metrics written with the umask's mode; a tiny random model on the tiny invented
corpus."""

from __future__ import annotations

import hashlib
import json
import os

import pytest
import torch
from conftest import run_evaluate

from convs2s.data import load_multi30k, multi30k
from convs2s.model import ConvS2S
from convs2s.run import evaluate
from convs2s.run.checkpoint import save_checkpoint, vocab_to_dict
from convs2s.run.translator import Translator


@pytest.fixture
def corpus(tiny_corpus, monkeypatch, tmp_path):
    """The tiny corpus as the Multi30k files (its own checksums), and no network."""
    sums = {n: hashlib.sha256((tiny_corpus / n).read_bytes()).hexdigest()
            for n in multi30k.multi30k_files("de", "en")}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)
    (tmp_path / "no_mirror").mkdir()
    monkeypatch.setenv("CONVS2S_DATA_URL", (tmp_path / "no_mirror").as_uri())
    return tiny_corpus


@pytest.mark.parametrize("limit", ["0", "-995", "2.5", "all"])
def test_limit_must_be_positive_refused_at_parse_time(limit, tiny_ckpt, capsys, no_evaluation):
    code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, "--limit", limit], capsys)
    assert code == 2 and out == "" and len(err) == 1
    assert err[0].startswith("python -m convs2s.evaluate: error: argument --limit: ")


def test_beam_sizes_and_device_refused_at_parse_time(tiny_ckpt, capsys, no_evaluation):
    for argv in (["--beam-sizes", "1", "0"], ["--device", "quantum"],
                 ["--beam-sizes", "5", str(10**23)], ["--beam-sizes", "1001"]):
        code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, *argv], capsys)
        assert code == 2 and out == "" and len(err) == 1, err


@pytest.mark.parametrize("limit", [0, -995, 2.5, True])
def test_evaluate_function_refuses_a_limit_that_is_not_positive(limit):
    with pytest.raises(ValueError, match="limit must be None .* or a positive integer"):
        evaluate.evaluate(None, [("a", "b")] * 10, limit=limit)
    with pytest.raises(ValueError, match="beam_sizes must be positive integers"):
        evaluate.evaluate(None, [("a", "b")], beam_sizes=[1, 0])


@pytest.mark.parametrize("where", ["missing folder", "folder is a file", "path is a folder"])
def test_an_unwritable_json_fails_before_the_work(where, tiny_ckpt, tmp_path, capsys,
                                                  no_evaluation):
    (tmp_path / "a_file").write_text("x")
    target = {"missing folder": tmp_path / "nope" / "m.json",
              "folder is a file": tmp_path / "a_file" / "m.json",
              "path is a folder": tmp_path}[where]
    code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, "--json", target], capsys)
    assert code == 1 and out == "" and len(err) == 1, err
    assert err[0].startswith(f"error: cannot write the metrics to {target}: ")
    assert not (tmp_path / "nope").exists()


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0,
                    reason="needs a POSIX user that folder permissions apply to")
def test_a_read_only_json_folder_fails_before_the_work(tiny_ckpt, tmp_path, capsys, no_evaluation):
    folder = tmp_path / "ro"
    folder.mkdir(mode=0o555)
    code, _, err = run_evaluate(["--checkpoint", tiny_ckpt, "--json", folder / "m.json"], capsys)
    assert code == 1 and len(err) == 1 and f"cannot write in {folder}" in err[0]


@pytest.mark.parametrize("mask", [0o022, 0o027], ids=["umask022", "umask027"])
def test_metrics_json_gets_the_umask_mode(mask, corpus, tiny_ckpt, tmp_path, capsys):
    old = os.umask(mask)
    try:
        code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, "--data-dir", corpus, "--split",
                              "valid", "--beam-sizes", "1", "2", "--limit", "1"], capsys)
    finally:
        os.umask(old)
    assert code == 0, err
    path = tiny_ckpt.with_name("metrics_valid_best.json")
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
    metrics = json.loads(path.read_text())
    assert metrics["sentences"] == 1 and metrics["split"] == "valid"
    assert {"beam1", "beam2"} <= set(metrics) and f"wrote {path}" in out
    assert sorted(p.name for p in path.parent.iterdir()) == ["best.pt", "metrics_valid_best.json"]


def test_limit_evaluates_exactly_the_first_n(corpus, tiny_ckpt):
    translator = Translator.from_checkpoint(tiny_ckpt, device="cpu")
    train = load_multi30k(corpus)["train"]
    for n in (1, 5, len(train), len(train) + 3):
        result = evaluate.evaluate(translator, train, beam_sizes=(1,), limit=n)
        assert result["sentences"] + result["skipped"] == min(n, len(train))
    alone = evaluate.evaluate(translator, train, beam_sizes=())  # the perplexity alone
    assert alone["perplexity"] > 1 and not any(k.startswith("beam") for k in alone)


def test_a_missing_checkpoint_is_named_first(tmp_path, capsys):
    code, out, err = run_evaluate(["--checkpoint", tmp_path / "nowhere" / "best.pt"], capsys)
    assert code == 1 and len(err) == 1 and err[0].startswith("error: No checkpoint at ")


def test_scores_are_sacrebleu_and_chrf_of_the_detokenized_output(corpus, tiny_ckpt):
    import sacrebleu

    translator = Translator.from_checkpoint(tiny_ckpt, device="cpu")
    pairs = load_multi30k(corpus)["valid"]
    result = evaluate.evaluate(translator, pairs, beam_sizes=(2,))
    hyps = translator.translate([de for de, _ in pairs], beam_size=2)
    refs = [en for _, en in pairs]
    assert result["beam2"]["sacrebleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert result["beam2"]["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    # a checkpoint without the issue-20 fields is German to English, word-level
    assert (result["src_lang"], result["trg_lang"]) == ("de", "en")
    assert result["tokenizer"] == {"src_lang": "de", "trg_lang": "en", "kind": "word",
                                   "lower": True}


def test_a_subword_checkpoint_is_scored_on_its_decoded_cased_text(corpus, tmp_path, tiny_pairs):
    import sacrebleu

    from convs2s.data.subword import SubwordSettings, TextPipeline

    pipeline = TextPipeline.learn(tiny_pairs, "de", "en", SubwordSettings(vocab_size=80),
                                  cache=False)
    src, trg = pipeline.vocabs()
    torch.manual_seed(0)
    model = ConvS2S(len(src), len(trg), emb_dim=16, hid_dim=32, enc_layers=2, dec_layers=2,
                    max_positions=40, src_pad_idx=src.pad_idx, trg_pad_idx=trg.pad_idx)
    path = save_checkpoint(tmp_path / "sw" / "best.pt", {
        "model_config": dict(model.config), "model": model.state_dict(),
        "src_vocab": vocab_to_dict(src), "trg_vocab": vocab_to_dict(trg), **pipeline.record()})
    translator = Translator.from_checkpoint(path, device="cpu")
    pairs = load_multi30k(corpus)["test"]
    result = evaluate.evaluate(translator, pairs, beam_sizes=(1,))
    tokens = translator.translate_tokens([de for de, _ in pairs], beam_size=1)
    hyps = [pipeline.trg_tokenizer.decode(t) for t in tokens]
    refs = [en for _, en in pairs]
    assert result["beam1"]["sacrebleu"] == pytest.approx(sacrebleu.corpus_bleu(hyps, [refs]).score)
    assert result["beam1"]["chrf"] == pytest.approx(sacrebleu.corpus_chrf(hyps, [refs]).score)
    assert result["tokenizer"]["kind"] == "subword" and result["perplexity"] > 1


# ------------------------------------------------------------------------------------------
# metrics never overwrite what is not metrics; a folder or "." as --checkpoint
# ------------------------------------------------------------------------------------------


def _evaluate_args(corpus):
    return ["--data-dir", corpus, "--split", "valid", "--beam-sizes", "1", "--limit", "1"]


def test_json_metrics_never_overwrite_a_file_that_is_not_metrics(tiny_ckpt, tmp_path,
                                                                 capsys, no_evaluation):
    last = tiny_ckpt.with_name("last.pt")
    last.write_bytes(tiny_ckpt.read_bytes())
    (tmp_path / "notes.json").write_text("my notes, not JSON\n")
    (tmp_path / "list.json").write_text("[1, 2, 3]\n")
    (tmp_path / "other.json").write_text('{"loss": 1.5, "epochs": 3}\n')
    (tmp_path / "metrics.txt").write_text("")  # an empty file, but not named .json
    cases = {last: "its name does not end in .json",
             tmp_path / "new.txt": "its name does not end in .json",
             tmp_path / "metrics.txt": "its name does not end in .json",
             tmp_path / "notes.json": "not a metrics file written by convs2s.evaluate",
             tmp_path / "list.json": "not a metrics file written by convs2s.evaluate",
             tmp_path / "other.json": "not a metrics file written by convs2s.evaluate"}
    before = {p: p.read_bytes() for p in cases if p.exists()}
    for target, why in cases.items():
        code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, "--json", target], capsys)
        assert code == 1 and out == "" and len(err) == 1, (target, err)
        assert err[0].startswith(f"error: cannot write the metrics to {target}: "), err
        assert why in err[0] and "--json" in err[0], err
    assert {p: p.read_bytes() for p in before} == before
    assert not (tmp_path / "new.txt").exists()


def test_metrics_of_best_and_last_go_to_files_named_after_them(corpus, tiny_ckpt, tmp_path,
                                                               capsys):
    last = tiny_ckpt.with_name("last.pt")
    last.write_bytes(tiny_ckpt.read_bytes())
    for ckpt in (tiny_ckpt, last):
        code, out, err = run_evaluate(["--checkpoint", ckpt, *_evaluate_args(corpus)], capsys)
        assert code == 0, err
        path = ckpt.with_name(f"metrics_valid_{ckpt.stem}.json")
        assert out.splitlines()[-1] == f"wrote {path}"
    for ckpt in (tiny_ckpt, last):
        metrics = json.loads(ckpt.with_name(f"metrics_valid_{ckpt.stem}.json").read_text())
        assert metrics["checkpoint"] == str(ckpt) and metrics["written_by"] == "convs2s.evaluate"
    # evaluating best.pt again replaces its own metrics, and says so
    code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, *_evaluate_args(corpus)], capsys)
    path = tiny_ckpt.with_name("metrics_valid_best.json")
    assert code == 0 and out.splitlines()[-1].startswith(
        f"wrote {path}, replacing the metrics it held (")
    # an explicit --json may replace metrics this tool wrote, including an older file's
    older = tmp_path / "older.json"
    older.write_text(json.dumps({"checkpoint": "x.pt", "split": "test", "sentences": 3,
                                 "perplexity": 9.0, "loss": 2.2}))
    code, out, err = run_evaluate(["--checkpoint", last, *_evaluate_args(corpus), "--json", older],
                                  capsys)
    assert code == 0, err
    assert json.loads(older.read_text())["checkpoint"] == str(last)


def test_evaluate_checkpoint_dot_is_one_line(tiny_ckpt, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code, out, err = run_evaluate(["--checkpoint", "."], capsys)
    assert code == 1 and out == "" and err == [
        "error: . is a folder, not a checkpoint file."]
    monkeypatch.chdir(tiny_ckpt.parent)  # a folder holding best.pt
    code, out, err = run_evaluate(["--checkpoint", "."], capsys)
    assert code == 1 and err == ["error: . is a folder, not a checkpoint file. Did you mean "
                                 "best.pt?"]


def test_evaluate_of_a_folder_says_did_you_mean_best_pt(tiny_ckpt, capsys):
    folder = tiny_ckpt.parent
    code, out, err = run_evaluate(["--checkpoint", folder], capsys)
    assert code == 1 and out == "" and err == [
        f"error: {folder} is a folder, not a checkpoint file. Did you mean "
        f"{folder / 'best.pt'}?"]
    assert sorted(p.name for p in folder.iterdir()) == ["best.pt"]
