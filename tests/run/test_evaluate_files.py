"""``python -m convs2s.evaluate --source FILE --reference FILE``: any pair of line-aligned files
scores exactly as the split they hold does, and every bad input is one line, exit status 2,
before any work, with no metrics file left. A tiny random model (``tiny_ckpt``, in
tests/conftest.py, which tests/run/test_evaluate.py scores too) on Multi30k's own test files."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pytest
from conftest import run_evaluate

from convs2s.data.multi30k import MULTI30K_FILES
from convs2s.run import evaluate

PROG = "python -m convs2s.evaluate: error: "
TEST_STEM = MULTI30K_FILES["test"]  # test_2016_flickr


@pytest.fixture
def multi30k_dir() -> Path:
    folder = os.environ.get("CONVS2S_DATA_DIR")
    if not folder or not all((Path(folder) / f"{TEST_STEM}.{lang}.gz").is_file()
                             for lang in ("de", "en")):
        pytest.skip("needs the Multi30k files in CONVS2S_DATA_DIR")
    return Path(folder)


#: What differs between two runs of the same evaluation (the clock) or names its data.
_NOT_SCORES = {"seconds", "sentences_per_s", "date", "split", "source", "reference"}


def _scores(metrics: dict) -> dict:
    return {k: ({kk: vv for kk, vv in v.items() if kk not in _NOT_SCORES}
                if isinstance(v, dict) else v)
            for k, v in metrics.items() if k not in _NOT_SCORES}


def test_the_test_splits_own_files_score_exactly_as_split_test(tiny_ckpt, multi30k_dir,
                                                               tmp_path, capsys):
    common = ["--checkpoint", tiny_ckpt, "--device", "cpu", "--beam-sizes", "1", "2",
              "--limit", "12"]
    code, _, err = run_evaluate([*common, "--split", "test", "--data-dir", multi30k_dir,
                        "--json", tmp_path / "split.json"], capsys)
    assert code == 0, err
    by_split = json.loads((tmp_path / "split.json").read_text())

    de, en = (multi30k_dir / f"{TEST_STEM}.{lang}.gz" for lang in ("de", "en"))
    plain_de, plain_en = tmp_path / "test.de", tmp_path / "test.en"
    plain_de.write_bytes(gzip.decompress(de.read_bytes()))
    plain_en.write_bytes(gzip.decompress(en.read_bytes()))
    for source, reference in ((plain_de, plain_en), (de, en)):  # plain text, and gzip as shipped
        code, out, err = run_evaluate([*common, "--source", source, "--reference", reference],
                                      capsys)
        assert code == 0, err
        path = tiny_ckpt.with_name(f"metrics_{source.name}_best.json")  # the default name
        assert f"wrote {path}" in out and f"of {source}" in out
        by_files = json.loads(path.read_text())
        assert "split" not in by_files
        assert (by_files["source"], by_files["reference"]) == (str(source), str(reference))
        assert by_files["sentences"] + by_files["skipped"] == 12 and by_files["sentences"] > 0
        assert _scores(by_files) == _scores(by_split)  # same BLEU, chrF, perplexity, counts
        for beam in ("beam1", "beam2"):
            assert by_files[beam]["sacrebleu"] == by_split[beam]["sacrebleu"]


def _bad(tmp_path: Path, case: str) -> list:
    """The arguments (after --checkpoint) of one bad input, its files written in tmp_path."""
    good = tmp_path / "good.de"
    good.write_text("Ein Hund läuft.\nZwei Männer.\n", encoding="utf-8")
    ref = tmp_path / "good.en"
    ref.write_text("A dog runs.\nTwo men.\n", encoding="utf-8")
    odd = tmp_path / "odd.txt"
    if case == "only --source":
        return ["--source", good]
    if case == "only --reference":
        return ["--reference", ref]
    if case.startswith("files and "):
        flag = case.removeprefix("files and ").split()
        return ["--source", good, "--reference", ref, *flag]
    if case == "missing source":
        return ["--source", tmp_path / "nope.de", "--reference", ref]
    if case == "missing reference":
        return ["--source", good, "--reference", tmp_path / "nope.en"]
    if case == "source is a folder":
        return ["--source", tmp_path, "--reference", ref]
    if case == "source under a file":
        return ["--source", good / "x.de", "--reference", ref]
    if case == "unreadable":
        odd.write_text("Ein Hund.\nZwei.\n")
        odd.chmod(0)
        return ["--source", odd, "--reference", ref]
    if case == "latin-1":
        odd.write_bytes("Ein Hund läuft.\nZwei Männer.\n".encode("latin-1"))
        return ["--source", odd, "--reference", ref]
    if case == "utf-16":
        odd.write_text("A dog runs.\nTwo men.\n", encoding="utf-16")
        return ["--source", good, "--reference", odd]
    if case == "utf-16 without a byte order mark":
        odd.write_bytes("A dog runs.\nTwo men.\n".encode("utf-16-le"))
        return ["--source", good, "--reference", odd]
    if case == "different line counts":
        odd.write_text("A dog runs.\nTwo men.\nThree cats.\n", encoding="utf-8")
        return ["--source", good, "--reference", odd]
    if case == "empty source":
        odd.write_bytes(b"")
        return ["--source", odd, "--reference", ref]
    if case == "empty reference":
        odd.write_bytes(b"")
        return ["--source", good, "--reference", odd]
    if case == "a checkpoint as the source":
        odd.write_bytes(b"PK\x03\x04" + bytes(200))
        return ["--source", odd, "--reference", ref]
    if case == "an archive with no newline in its first 2 MiB":
        odd.write_bytes(b"PK\x03\x04" + bytes(2 << 20))
        return ["--source", odd, "--reference", ref]
    if case == "corrupted gzip":
        odd.write_bytes(gzip.compress(b"A dog runs.\nTwo men.\n" * 50)[:40])
        return ["--source", good, "--reference", odd]
    raise AssertionError(case)


BAD = {  # case: words the one line must hold
    "only --source": ["--source needs --reference"],
    "only --reference": ["--reference needs --source"],
    "files and --split test": ["--split and --source/--reference"],
    "files and --split valid": ["--split and --source/--reference"],
    "files and --data-dir .": ["--data-dir and --source/--reference"],
    "missing source": ["--source", "nope.de", "no such file"],
    "missing reference": ["--reference", "nope.en", "no such file"],
    "source is a folder": ["--source", "is a folder"],
    "source under a file": ["cannot read --source", "good.de/x.de", "Not a directory"],
    "unreadable": ["cannot read --source", "odd.txt"],
    "latin-1": ["--source", "odd.txt", "not UTF-8", "line 1", "iconv -f LATIN1"],
    "utf-16": ["--reference", "odd.txt", "not UTF-8", "iconv -f UTF-16"],
    "utf-16 without a byte order mark": ["--reference", "not UTF-8", "NUL", "iconv -f UTF-16"],
    "different line counts": ["good.de", "has 2 lines", "odd.txt", "has 3"],
    "empty source": ["--source", "odd.txt", "is empty"],
    "empty reference": ["--reference", "odd.txt", "is empty"],
    "corrupted gzip": ["--reference", "corrupted gzip"],
    "a checkpoint as the source": ["--source", "odd.txt is a zip archive", "give a text file"],
    "an archive with no newline in its first 2 MiB": ["--source", "odd.txt is a zip archive"],
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_line_exit_2_before_the_work_and_no_file(case, tiny_ckpt, tmp_path,
                                                                  capsys, no_evaluation):
    if case == "unreadable" and (os.name != "posix" or os.geteuid() == 0):
        pytest.skip("needs a POSIX user that file permissions apply to")
    argv = _bad(tmp_path, case)
    before = sorted(p.name for p in tmp_path.iterdir())
    code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, *argv], capsys)
    assert code == 2 and out == "" and len(err) == 1, err
    assert err[0].startswith(PROG) and "Traceback" not in err[0]
    for words in BAD[case]:
        assert words in err[0], err[0]
    assert sorted(p.name for p in tiny_ckpt.parent.iterdir()) == ["best.pt"]  # no metrics
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_an_explicit_json_is_not_written_either(tiny_ckpt, tmp_path, capsys, no_evaluation):
    argv = _bad(tmp_path, "different line counts")
    code, _, err = run_evaluate(["--checkpoint", tiny_ckpt, *argv, "--json", tmp_path / "m.json"],
                       capsys)
    assert code == 2 and len(err) == 1 and not (tmp_path / "m.json").exists()


@pytest.mark.parametrize("limit", ["lines", "bytes of a line"])
def test_too_many_lines_or_too_long_a_line_is_refused_in_one_line(limit, tiny_ckpt, tmp_path,
                                                                  capsys, no_evaluation,
                                                                  monkeypatch):
    monkeypatch.setattr(evaluate, "MAX_SENTENCES" if limit == "lines" else "MAX_LINE_BYTES", 3)
    argv = _bad(tmp_path, "missing source")  # writes good.en (2 lines)
    many = tmp_path / "many.de"
    many.write_text("a\nb\nc\nd\n" if limit == "lines" else "ab\nEin Hund läuft.\n")
    code, out, err = run_evaluate(["--checkpoint", tiny_ckpt, "--source", many,
                          "--reference", argv[-1]], capsys)
    assert code == 2 and out == "" and len(err) == 1, err
    assert ("more than 3 lines" if limit == "lines" else "line 2 of --source") in err[0]
    assert sorted(p.name for p in tiny_ckpt.parent.iterdir()) == ["best.pt"]


def test_read_parallel_reads_as_the_multi30k_loader_does(tmp_path):
    """A byte order mark and \\r\\n endings dropped, NFC, a last line without its newline."""
    src, ref = tmp_path / "s", tmp_path / "r"
    src.write_bytes(b"\xef\xbb\xbfEin Hund.\r\nZwei Ma\xcc\x88nner\n\nDrei")
    ref.write_bytes(b"A dog.\nTwo men.\n\nThree\n")
    assert evaluate.read_parallel(src, ref) == [
        ("Ein Hund.", "A dog."), ("Zwei Männer", "Two men."), ("", ""), ("Drei", "Three")]
