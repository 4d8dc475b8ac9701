"""benchmarks/truecasing.py: each row translates what its name says, made by the package's own
functions (str.lower / str.upper, then convs2s.data.truecase.truecase with the training
captions' casing or the vocabulary's), refusals count as empty translations, and bad arguments
are one line and exit 2. The shipped de-en model on the tiny corpus (a few sentences, seconds);
no figure of the real corpus is checked here (benchmarks/results/truecasing_de_en.json)."""

from __future__ import annotations

import hashlib
import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from convs2s.data import multi30k
from convs2s.data.truecase import multi30k_casing, piece_casing, truecase
from convs2s.run.metrics import corpus_bleu
from convs2s.run.pretrained import pretrained
from convs2s.run.translator import Translator

ROOT = Path(__file__).resolve().parents[2]
BENCHMARKS = ROOT / "benchmarks"


@pytest.fixture
def on_tiny_corpus(tiny_corpus, monkeypatch):
    """The Multi30k loader reads the tiny corpus (its own checksums expected); the training
    casing table is read from it, not from a table another test cached."""
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tiny_corpus.iterdir()}
    monkeypatch.setattr(multi30k, "MULTI30K_SHA256", sums)
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tiny_corpus))
    multi30k_casing.cache_clear()
    yield tiny_corpus
    multi30k_casing.cache_clear()


@pytest.fixture
def script(monkeypatch):
    """benchmarks/truecasing.py as a module."""
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    return importlib.import_module("truecasing")


@pytest.fixture(scope="module")
def shipped() -> Translator:
    return pretrained("de-en", device="cpu")


def _run(script, monkeypatch, *args) -> int:
    """The script's main, through run_main as from the command line: its exit status."""
    import common

    monkeypatch.setattr(sys, "argv", ["benchmarks/truecasing.py", *args])
    return common.run_main(lambda: script.main(list(args)))


def test_every_row_translates_what_its_name_says(script, on_tiny_corpus, shipped, monkeypatch,
                                                 tmp_path, capsys):
    decoded = []  # the source token lists of every decode, in order
    original = Translator.translate_token_lists

    def recording(self, token_lists, **kw):
        assert kw.get("beam_size") == 1  # greedy
        decoded.append([list(t) for t in token_lists])
        return original(self, token_lists, **kw)

    monkeypatch.setattr(Translator, "translate_token_lists", recording)
    out = tmp_path / "truecasing.json"
    assert _run(script, monkeypatch, "--json", str(out)) == 0
    report = json.loads(out.read_text(encoding="utf-8"))

    # what each row should be, made here with the package's functions
    training = multi30k_casing("de")
    vocabulary = piece_casing(shipped.src_tokenizer, shipped.src_vocab.stoi)
    assert training is not None and report["widget_casing"] == "training"
    expected_rows = {
        "cased": lambda s: s,
        "lower": str.lower,
        "lower_training": lambda s: truecase(s.lower(), training),
        "lower_vocabulary": lambda s: truecase(s.lower(), vocabulary),
        "upper": str.upper,
        "upper_training": lambda s: truecase(s.upper(), training),
        "upper_vocabulary": lambda s: truecase(s.upper(), vocabulary),
    }
    assert [key for key, *_ in script.ROWS] == list(expected_rows)
    data = multi30k.load_multi30k(download=False)
    assert list(report["splits"]) == ["valid", "test"] and len(decoded) == 2 * len(expected_rows)
    calls = iter(decoded)
    for split, result in report["splits"].items():
        sources, refs = [s for s, _ in data[split]], [t for _, t in data[split]]
        assert result["sentences"] == len(sources) == 2
        for key, make in expected_rows.items():
            sentences = [make(s) for s in sources]
            row = result["rows"][key]
            accepted = []
            for s in sentences:
                try:
                    accepted.append(shipped.source_tokens(s))
                except ValueError:
                    pass
            assert next(calls) == accepted, (split, key)
            assert row["refused"] == len(sentences) - len(accepted)
            # the score is the package's sacreBLEU of those translations (refused: empty)
            hyps, _ = script.translate_all(shipped, sentences)
            assert row["sacrebleu"] == pytest.approx(corpus_bleu(hyps, refs).sacrebleu)
            assert "tok:13a" in row["signature"]
            if key.endswith(("_training", "_vocabulary")):
                share = sum(a == b for a, b in zip(sentences, sources, strict=True)) / len(sources)
                assert row["restored"] == pytest.approx(share)
            else:
                assert row["restored"] is None
    # the typed rows differ from the source as written (what was decoded, checked above)
    assert decoded[1] != decoded[0] and decoded[4] != decoded[0]
    assert report["benchmark"] == "truecasing" and report["beam"] == 1
    assert report["model"] == "pretrained de-en" and len(report["model_sha256"]) == 64
    assert report["date"] and "truecasing.py" in report["command"]
    printed = capsys.readouterr().out
    assert "| lower-case, then the training casing |" in printed
    assert "validation (2)" in printed and "test2016 (2)" in printed


def test_row_sources_use_truecase_with_each_casing(script):
    table = {"ein": "Ein", "hund": "Hund", "läuft": "läuft", "straße": "Straße",
             "strasse": "Straße", "über": "über", "die": "die"}
    chosen = {"training": table, "vocabulary": lambda w: w.capitalize()}
    source = "Ein Hund läuft über die Straße."
    rows = script.row_sources([source], chosen)
    assert rows["cased"] == [source]
    assert rows["lower"] == ["ein hund läuft über die straße."]
    assert rows["upper"] == ["EIN HUND LÄUFT ÜBER DIE STRASSE."]
    assert rows["lower_training"] == rows["upper_training"] == [source]  # ß back from STRASSE
    assert rows["lower_vocabulary"] == [truecase(source.lower(), chosen["vocabulary"])]
    assert rows["upper_vocabulary"] == ["Ein Hund Läuft Über Die Strasse."]
    assert script.restored(rows["lower_training"] + rows["lower"], [source, source]) == 0.5


def test_a_refused_sentence_is_an_empty_translation_and_counted(script, shipped):
    long = " ".join(["HUND"] * 200) + "."
    hyps, refused = script.translate_all(shipped, ["Ein Hund läuft.", long, "\u200b"])
    assert hyps[0] and hyps[1] == "" and hyps[2] == ""
    assert refused["count"] == 2 and refused["too_long"] == 1
    assert refused["first"].startswith("sentence 2: ")


def test_a_lower_cased_word_model_is_refused_in_one_line(script, tiny_ckpt, on_tiny_corpus,
                                                        monkeypatch, capsys):
    assert _run(script, monkeypatch, "--checkpoint", str(tiny_ckpt)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "lower-cased words" in err


@pytest.mark.parametrize("args, words", [
    (["--limit", "0"], "--limit"),
    (["--splits", "train"], "--splits"),
    (["--pretrained", "xx-yy"], "xx-yy"),
    (["--pretrained", "de-en", "--checkpoint", "x.pt"], "not allowed with"),
    (["--json", "/nonexistent/folder/r.json"], "does not exist"),
    (["--checkpoint", "/nonexistent/model.pt"], "model.pt"),
])
def test_bad_arguments_are_one_line_and_exit_2(script, monkeypatch, capsys, args, words):
    try:
        code = _run(script, monkeypatch, *args)
    except SystemExit as e:  # the parser's own refusal
        code = e.code
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and words in err, err
    assert "Traceback" not in err


def test_the_command_line_refuses_a_bad_limit_without_a_traceback():
    proc = subprocess.run([sys.executable, str(BENCHMARKS / "truecasing.py"), "--limit", "-3"],
                          capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert proc.returncode == 2 and "--limit" in proc.stderr and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1 and not proc.stdout
