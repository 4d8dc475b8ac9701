"""Every Multi30k direction: loading, training, checkpoints and translation in any of en/de/fr/cs.

A made-up four-language corpus (twelve files laid out like Multi30k's) stands in for the real
one; no test downloads anything. The last test trains a tiny cased subword model end to end.
"""

import gzip
import hashlib
import io
import itertools
import json
import os
import re
import sys
from pathlib import Path

import pytest
import torch
from conftest import FOUR_LANGUAGE_CAPTIONS as CAPTIONS  # line i: one made-up caption

from convs2s.data import (
    LANGUAGES,
    DataError,
    fetch_multi30k,
    load_multi30k,
    make_tokenizer,
    multi30k,
)
from convs2s.model import ConvS2SConfig
from convs2s.run import evaluate
from convs2s.run import train as train_mod
from convs2s.run import translate_cli as translate
from convs2s.run.checkpoint import Checkpoint, CheckpointError, load_checkpoint, save_checkpoint
from convs2s.run.presets import Preset
from convs2s.run.train import train
from convs2s.run.translator import Translator

SPLITS = {"train": ("train", slice(0, 8)), "valid": ("val", slice(8, 10)),
          "test": ("test_2016_flickr", slice(10, 12))}
TINY = Preset(name="tiny", model=ConvS2SConfig(emb_dim=16, hid_dim=16, enc_layers=1, dec_layers=1,
                                               dropout=0.1, max_positions=32),
              min_freq=1, max_tokens=60, lr=5e-3, warmup_steps=2, epochs=1, patience=100,
              label_smoothing=0.0, seed=7, vocab_size=60)


def _gz(path: Path, lines) -> None:
    path.write_bytes(gzip.compress("".join(f"{s}\n" for s in lines).encode(), mtime=0))


def expected(split: str, src: str, trg: str) -> list[tuple[str, str]]:
    part = SPLITS[split][1]
    return list(zip(CAPTIONS[src][part], CAPTIONS[trg][part], strict=True))


@pytest.fixture
def corpus(tmp_path, monkeypatch) -> Path:
    """The twelve files of the made-up corpus; the loader expects their sha256; no network."""
    root = tmp_path / "multi30k4"
    root.mkdir()
    for (stem, part), lang in itertools.product(SPLITS.values(), LANGUAGES):
        _gz(root / f"{stem}.{lang}.gz", CAPTIONS[lang][part])
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in root.iterdir()}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)
    (tmp_path / "no_mirror").mkdir()
    monkeypatch.setenv("CONVS2S_DATA_URL", (tmp_path / "no_mirror").as_uri())
    monkeypatch.setenv("CONVS2S_CACHE_DIR", str(tmp_path / "cache"))
    return root


def _train(out, preset=TINY, **kw):
    return train(preset, out, progress=False, log=lambda *_: None, **kw)


# ------------------------------------------------------------------------------- loading


@pytest.mark.parametrize("src, trg", list(itertools.permutations(LANGUAGES, 2)))
def test_every_direction_loads_its_pairs(corpus, src, trg):
    splits = load_multi30k(corpus, src=src, trg=trg, download=False)
    assert splits == {split: expected(split, src, trg) for split in SPLITS}


def test_swapped_directions_give_swapped_pairs(corpus):
    for src, trg in itertools.combinations(LANGUAGES, 2):
        forth = load_multi30k(corpus, src=src, trg=trg)
        back = load_multi30k(corpus, src=trg, trg=src)
        assert {k: [(b, a) for a, b in v] for k, v in back.items()} == forth


def test_the_default_direction_is_german_to_english(corpus):
    assert load_multi30k(corpus) == load_multi30k(corpus, src="de", trg="en")
    assert load_multi30k(corpus)["train"][0] == ("Ein Hund läuft.", "A dog runs.")


@pytest.mark.parametrize("src, trg, message", [
    ("xx", "en", "no source language 'xx'; choose one of en, de, fr, cs"),
    ("de", "es", "no target language 'es'; choose one of en, de, fr, cs"),
    ("EN", "de", "no source language 'EN'"),
    ("fr", "fr", "both 'fr'"),
])
def test_an_unknown_language_is_a_one_line_error(corpus, src, trg, message):
    with pytest.raises(ValueError, match=re.escape(message)) as e:
        load_multi30k(corpus, src=src, trg=trg)
    assert "\n" not in str(e.value)


def test_a_direction_needs_only_its_own_six_files(corpus, tmp_path):
    only = tmp_path / "fr_en_only"
    only.mkdir()
    for name in multi30k.multi30k_files("fr", "en"):
        (only / name).write_bytes((corpus / name).read_bytes())
    assert load_multi30k(only, src="en", trg="fr", download=False)["valid"] == \
        expected("valid", "en", "fr")
    with pytest.raises(DataError, match=r"train\.de\.gz is not in"):
        load_multi30k(only, src="de", trg="fr", download=False)


def test_the_downloader_knows_all_twelve_files(corpus, tmp_path, monkeypatch):
    monkeypatch.setenv("CONVS2S_DATA_URL", corpus.as_uri())
    root = tmp_path / "downloaded"
    paths = fetch_multi30k(root)
    assert sorted(p.name for p in paths) == sorted(multi30k.MULTI30K_SHA256)
    assert len(paths) == 12
    assert load_multi30k(root, src="cs", trg="fr") == load_multi30k(corpus, src="cs", trg="fr")
    # one direction downloads only its own files
    one = tmp_path / "one"
    load_multi30k(one, src="cs", trg="en")
    assert sorted(p.name for p in one.iterdir()) == sorted(multi30k.multi30k_files("cs", "en"))
    with pytest.raises(ValueError, match="no language 'es'"):
        fetch_multi30k(root, languages=["es"])


def test_the_real_checksums_are_the_data_readmes():
    """The twelve sha256 sums in the package are those the shared data folder's README lists."""
    assert len(multi30k.MULTI30K_SHA256) == 12
    assert {n.split(".")[-2] for n in multi30k.MULTI30K_SHA256} == set(LANGUAGES)
    readme = Path(os.environ.get("CONVS2S_DATA_DIR", "/nonexistent")) / "README.md"
    if not readme.is_file():
        pytest.skip("set CONVS2S_DATA_DIR to the shared Multi30k folder (with its README.md)")
    listed = dict(re.findall(r"\|\s*(\S+\.gz)\s*\|\s*\d+\s*\|\s*([0-9a-f]{64})\s*\|",
                             readme.read_text()))
    assert listed == multi30k.MULTI30K_SHA256


@pytest.mark.parametrize("lang", LANGUAGES)
def test_each_language_has_a_spacy_tokenizer(lang):
    tok = make_tokenizer(lang)
    assert tok(CAPTIONS[lang][0])[-1] == "."
    assert tok(CAPTIONS[lang][0])[0] == CAPTIONS[lang][0].split()[0].lower()


# ------------------------------------------------------------------------------- training


def test_presets_and_the_train_cli_refuse_unknown_languages_in_one_line(capsys):
    with pytest.raises(ValueError, match="no source language 'xx'"):
        Preset(name="x", src_lang="xx")
    with pytest.raises(ValueError, match="tokenizer must be one of word, subword"):
        Preset(name="x", tokenizer="chars")
    for args, message in ((["--src", "xx"], "invalid choice: 'xx'"),
                          (["--src", "en", "--trg", "en"], "both 'en'"),
                          (["--tokenizer", "bytes"], "invalid choice: 'bytes'")):
        with pytest.raises(SystemExit) as e:
            train_mod.main(["--preset", "quick", "--out", "unused", *args])
        err = capsys.readouterr().err
        assert e.value.code == 2 and message in err and err.count("\n") == 1, err
    assert not Path("unused").exists()


def test_the_default_training_is_still_word_level_german_to_english():
    for name in ("quick", "cpu", "gpu"):
        p = train_mod.PRESETS[name]
        assert (p.src_lang, p.trg_lang, p.tokenizer, p.lower) == ("de", "en", "word", True)


@pytest.mark.parametrize("tokenizer", ["word", "subword"])
def test_checkpoint_records_the_pair_and_tokenizer_and_translate_uses_them(corpus, tmp_path,
                                                                        tokenizer, capsys):
    preset = Preset(**{**TINY.__dict__, "src_lang": "fr", "trg_lang": "cs",
                       "tokenizer": tokenizer})
    result = _train(tmp_path / "run", preset, data=corpus)  # a folder: read in fr -> cs
    ckpt = load_checkpoint(result.best_path)
    assert (ckpt["src_lang"], ckpt["trg_lang"]) == ("fr", "cs")
    assert ckpt["tokenizer"]["kind"] == tokenizer
    assert (ckpt["preset"]["src_lang"], ckpt["preset"]["trg_lang"]) == ("fr", "cs")
    # trained on the fr -> cs pairs
    assert ckpt["data"]["train"]["pairs"] == 8
    if tokenizer == "word":
        assert ckpt["tokenizer"]["lower"] is True
        assert "chien" in ckpt["src_vocab"]["itos"] and "pes" in ckpt["trg_vocab"]["itos"]
    else:
        assert isinstance(ckpt["tokenizer"]["src_model"], bytes)
        assert any("č" in p for p in ckpt["trg_vocab"]["itos"])  # the Czech side is in it

    t = Translator.from_checkpoint(result.best_path)
    assert (t.src_lang, t.trg_lang, t.pipeline.kind) == ("fr", "cs", tokenizer)
    if tokenizer == "word":
        assert t.src_tokenizer.lang == "fr" and t.trg_tokenizer.lang == "cs"
        assert t.src_tokenizer("L'homme court.")[:2] == ["l'", "homme"]  # French rules
    else:
        assert t.src_tokenizer("Un chien.") == t.pipeline.src_tokenizer("Un chien.")
        assert t.src_tokenizer.decode(t.src_tokenizer("Un Chien.")) == "Un Chien."

    # the translate CLI reads everything from the checkpoint
    assert translate.main(["--checkpoint", str(result.best_path), "--beam-size", "2",
                           "Un chien court.", "Un chat dort."]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out == t.translate(["Un chien court.", "Un chat dort."], beam_size=2)

    # evaluate reads the split in the checkpoint's direction and scores it against Czech
    report = tmp_path / "m.json"
    assert evaluate.main(["--checkpoint", str(result.best_path), "--data-dir", str(corpus),
                          "--split", "test", "--beam-sizes", "1", "--json", str(report)]) == 0
    m = json.loads(report.read_text())
    assert (m["src_lang"], m["trg_lang"], m["sentences"]) == ("fr", "cs", 2)
    assert m["tokenizer"]["kind"] == tokenizer
    assert 0 <= m["beam1"]["chrf"] <= 100 and "nc:6|nw:0" in m["beam1"]["chrf_signature"]
    assert "fr->cs" in capsys.readouterr().out


def test_resume_refuses_another_direction_or_tokenizer(corpus, tmp_path):
    preset = Preset(**{**TINY.__dict__, "src_lang": "fr", "trg_lang": "cs"})
    out = tmp_path / "run"
    _train(out, preset, data=corpus)
    before = (out / "last.pt").read_bytes()
    for change in ({"src_lang": "en"}, {"trg_lang": "de"}, {"tokenizer": "subword"},
                   {"lower": False}):
        other = Preset(**{**preset.__dict__, **change, "epochs": 2})
        with pytest.raises(CheckpointError, match="trained with other settings or data") as e:
            _train(out, other, data=corpus, resume=True)
        assert next(iter(change)) in str(e.value) and "\n" not in str(e.value)
    assert (out / "last.pt").read_bytes() == before
    # the same settings resume
    assert len(_train(out, Preset(**{**preset.__dict__, "epochs": 2}), data=corpus,
                      resume=True).history) == 2


def test_resume_of_a_subword_run_refuses_another_vocabulary(corpus, tmp_path):
    preset = Preset(**{**TINY.__dict__, "tokenizer": "subword"})
    out = tmp_path / "run"
    _train(out, preset, data=corpus)
    for change in ({"vocab_size": 50}, {"joint_vocab": False}, {"subword_model": "unigram"}):
        other = Preset(**{**preset.__dict__, **change, "epochs": 2})
        with pytest.raises(CheckpointError, match="trained with other settings or data"):
            _train(out, other, data=corpus, resume=True)


def _strip_to_old_format(path: Path) -> None:
    """Make a checkpoint look like one written before checkpoints recorded their language pair
    and tokenizer."""
    ckpt = torch.load(path, weights_only=True)
    for key in ("src_lang", "trg_lang", "tokenizer", "tokenizers"):
        ckpt.pop(key, None)
    for key in ("tokenizer", "vocab_size", "joint_vocab", "subword_model"):
        ckpt["preset"].pop(key, None)
    save_checkpoint(path, {k: v for k, v in ckpt.items() if k not in ("format", "version")})


def test_old_checkpoints_still_load_as_german_to_english_word_level(corpus, tmp_path):
    result = _train(tmp_path / "run", data=corpus)
    before = Translator.from_checkpoint(result.best_path).translate(["Ein Hund läuft."])
    for name in ("best.pt", "last.pt"):
        _strip_to_old_format(tmp_path / "run" / name)
    t = Translator.from_checkpoint(result.best_path)
    assert (t.src_lang, t.trg_lang, t.pipeline.kind, t.pipeline.lower) == \
        ("de", "en", "word", True)
    assert t.translate(["Ein Hund läuft."]) == before
    # resuming it as word-level de -> en works; as subword it is refused
    with pytest.raises(CheckpointError, match="kind: checkpoint 'word', now 'subword'"):
        _train(tmp_path / "run", Preset(**{**TINY.__dict__, "tokenizer": "subword",
                                           "epochs": 2}), data=corpus, resume=True)
    assert len(_train(tmp_path / "run", Preset(**{**TINY.__dict__, "epochs": 2}), data=corpus,
                      resume=True).history) == 2


# ------------------------------------------------------------------------------- end to end


def test_a_tiny_subword_model_learns_to_output_cased_sentences(tmp_path, monkeypatch):
    """Seconds of training on four made-up pairs: the output is the cased target text."""
    monkeypatch.setenv("CONVS2S_CACHE_DIR", str(tmp_path / "cache"))
    pairs = [("Ein Mädchen läuft.", "A girl runs."), ("Zwei Männer grüßen.", "Two men greet."),
             ("Die Straße ist groß.", "The street is big."),
             ("Der Bär schläft.", "The bear sleeps.")]
    preset = Preset(name="e2e", model=ConvS2SConfig(emb_dim=32, hid_dim=32, enc_layers=1,
                                                    dec_layers=1, dropout=0.0, max_positions=40),
                    tokenizer="subword", vocab_size=60,
                    max_tokens=300, lr=1e-2, warmup_steps=5, epochs=25, patience=25,
                    label_smoothing=0.0)
    result = _train(tmp_path / "run", preset,
                    data={"train": pairs * 16, "valid": pairs, "test": pairs})
    t = Translator.from_checkpoint(result.best_path)
    assert t.pipeline.kind == "subword" and t.pipeline.cased
    sources = [s for s, _ in pairs]
    assert t.translate(sources, beam_size=1) == [e for _, e in pairs]
    assert t.translate(sources, beam_size=3) == [e for _, e in pairs]
    # and through the CLI, line by line
    stdin = io.BytesIO("".join(f"{s}\n" for s in sources).encode())
    out, err = io.StringIO(), io.StringIO()
    n, failed = translate.translate_lines(t, stdin, out, err, beam_size=2)
    assert (n, failed) == (4, []) and out.getvalue().splitlines() == [e for _, e in pairs]


def test_the_quality_benchmark_trains_and_scores_any_direction(corpus, tmp_path, monkeypatch,
                                                                capsys):
    """benchmarks/quality.py: en -> de with subwords, the learning curve on validation."""
    import importlib

    monkeypatch.setenv("CONVS2S_DATA_DIR", str(corpus))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    quality = importlib.import_module("quality")
    monkeypatch.setitem(train_mod.PRESETS, "tiny", Preset(**{**TINY.__dict__, "epochs": 2}))
    report = tmp_path / "q.json"
    argv = ["--preset", "tiny", "--src", "en", "--trg", "de", "--tokenizer", "subword",
            "--out", str(tmp_path / "run"), "--device", "cpu", "--json", str(report)]
    monkeypatch.setattr(sys, "argv", ["benchmarks/quality.py", *argv])
    assert quality.main(argv) == 0
    r = json.loads(report.read_text())
    assert (r["src_lang"], r["trg_lang"], r["tokenizer"]["kind"]) == ("en", "de", "subword")
    assert r["split"] == "test" and r["sentences"] == 2 and r["valid"]["sentences"] == 2
    assert r["settings"]["tokenizer"] == "subword" and r["settings"]["src_lang"] == "en"
    for scores in (r, r["valid"]):
        for beam in ("beam1", "beam5"):
            assert 0 <= scores[beam]["sacrebleu"] <= 100 and 0 <= scores[beam]["chrf"] <= 100
            assert "tok:13a" in scores[beam]["signature"]
    curve = r["valid_curve"]
    assert [row["epoch"] for row in curve] == [1, 2]
    # (the history rounds its seconds to 0.1)
    assert curve[0]["train_seconds"] <= curve[1]["train_seconds"] <= r["train_seconds"] + 0.05
    assert all(0 <= row["valid_sacrebleu"] <= 100 and row["beam"] == 1 for row in curve)
    # the best epoch's curve point is the best checkpoint's greedy validation score
    best = next(row for row in curve if row["epoch"] == r["best_epoch"])
    assert best["valid_sacrebleu"] == pytest.approx(r["valid"]["beam1"]["sacrebleu"])
    assert "en->de" in capsys.readouterr().out


def test_choose_averages_checkpoints_and_picks_alpha_on_validation(corpus, tmp_path, monkeypatch,
                                                                   capsys):
    """benchmarks/choose.py: both choices made on validation; averaged.pt is a checkpoint."""
    import importlib

    monkeypatch.setenv("CONVS2S_DATA_DIR", str(corpus))
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2] / "benchmarks"))
    quality, choose = importlib.import_module("quality"), importlib.import_module("choose")
    monkeypatch.setitem(train_mod.PRESETS, "tiny", Preset(**{**TINY.__dict__, "epochs": 3}))
    run = tmp_path / "run"
    argv = ["--preset", "tiny", "--tokenizer", "subword", "--out", str(run), "--device", "cpu",
            "--average-last", "3", "--beam-sizes", "1"]
    monkeypatch.setattr(sys, "argv", ["benchmarks/quality.py", *argv])
    assert quality.main(argv) == 0
    snaps = sorted((run / "snapshots").glob("epoch*.pt"))
    assert [p.name for p in snaps] == ["epoch01.pt", "epoch02.pt", "epoch03.pt"]
    assert (run / "final.pt").exists()  # training made the final model itself

    report = tmp_path / "choose.json"
    argv = [str(run), "--device", "cpu", "--json", str(report)]
    monkeypatch.setattr(sys, "argv", ["benchmarks/choose.py", *argv])
    assert choose.main(argv) == 0
    r = json.loads(report.read_text())
    assert [row["k"] for row in r["averages"]] == [1, 2, 3]
    assert r["averages"][2]["epochs"] == [1, 2, 3]
    best_k = max(row["valid_sacrebleu_greedy"] for row in r["averages"])
    chosen = next(row for row in r["averages"] if row["k"] == r["chosen_k"])
    assert chosen["valid_sacrebleu_greedy"] == best_k
    assert [row["alpha"] for row in r["alphas"]] == list(choose.ALPHAS)
    chosen_alpha = next(row for row in r["alphas"] if row["alpha"] == r["chosen_alpha"])
    assert chosen_alpha["valid_sacrebleu"] == max(row["valid_sacrebleu"] for row in r["alphas"])
    assert r["split"] == "test" and set(r["plain"]) == set(r["chosen"]) == {"beam1", "beam5"}
    t = Translator.from_checkpoint(run / "final.pt", device="cpu")
    if r["chosen_k"] > 1:
        weights = [Checkpoint.load(p).state_dict for p in snaps[-r["chosen_k"]:]]
        for key, value in t.model.state_dict().items():
            if torch.is_floating_point(value):
                torch.testing.assert_close(value, sum(w[key] for w in weights) / len(weights))

    # the average of state dicts, exactly
    a = {"w": torch.tensor([1.0, 2.0]), "n": torch.tensor(3)}
    b = {"w": torch.tensor([3.0, 6.0]), "n": torch.tensor(3)}
    avg = choose.average([a, b])
    assert avg["w"].tolist() == [2.0, 4.0] and avg["n"].item() == 3

    # a run without snapshots: best.pt is the only candidate for the weights
    (run / "snapshots").rename(tmp_path / "elsewhere")
    assert choose.main([str(run), "--device", "cpu", "--json", str(report)]) == 0
    assert [row["k"] for row in json.loads(report.read_text())["averages"]] == [1]
    # and one without best.pt: one line, exit 2
    (run / "best.pt").unlink()
    capsys.readouterr()
    assert choose.main([str(run), "--device", "cpu"]) == 2
    assert capsys.readouterr().err.count("\n") == 1


@pytest.mark.parametrize("size", ["quick", "cpu", "gpu"])
def test_each_subword_preset_is_its_word_preset_on_pieces(size):
    """The subword presets change the vocabulary (and the cpu one its budget) and tie the output
    embedding (one joint vocabulary makes it possible), nothing else."""
    import dataclasses

    word, sub = train_mod.PRESETS[size], train_mod.PRESETS[f"{size}_subword"]
    differ = {f.name for f in dataclasses.fields(Preset)
              if getattr(word, f.name) != getattr(sub, f.name)}
    assert differ <= {"name", "tokenizer", "vocab_size", "max_minutes", "epochs", "model",
                      "average_last", "final_pairs"}
    assert (sub.tokenizer, word.tokenizer) == ("subword", "word")
    assert sub.model.share_input_output_embed and not word.model.share_input_output_embed
    assert sub.model == dataclasses.replace(word.model, share_input_output_embed=True)
