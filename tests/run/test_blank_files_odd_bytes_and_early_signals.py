"""Input that says nothing, bytes that are not UTF-8, and a signal in the first seconds.

- ``python -m convs2s.evaluate --source/--reference`` on files that hold only blank lines: one
  line naming the file(s), exit 2, before any work (it was "corpus_bleu needs at least one
  sentence", after loading the model).
- ``python -m convs2s.run.distill`` resuming a progress file (``FILE.partial``) with bytes that
  are not UTF-8: one line naming the file and what to do (it was Python's "'utf-8' codec can't
  decode byte ..."), the file left as it was.
- ``python -m convs2s.run.distill`` stopped by Ctrl-C or SIGTERM while torch loads: one line,
  exit 130 or 143 (it was a traceback), as the package's other commands
  (tests/system/test_signals.py).
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import run_evaluate
from signal_support import run_while_torch_loads

from convs2s.run import distill

ROOT = Path(__file__).resolve().parents[2]
PROG = "python -m convs2s.evaluate: error: "


# -- python -m convs2s.evaluate on blank files ---------------------------------------------------


@pytest.mark.parametrize("blank", ["source", "reference", "both"])
def test_files_of_blank_lines_are_one_line_naming_them(blank, tiny_ckpt, tmp_path, capsys,
                                                       no_evaluation):
    good_de, good_en = tmp_path / "good.de", tmp_path / "good.en"
    good_de.write_text("Ein Hund läuft.\nZwei Männer.\n", encoding="utf-8")
    good_en.write_text("A dog runs.\nTwo men.\n", encoding="utf-8")
    blank_de, blank_en = tmp_path / "blank.de", tmp_path / "blank.en"
    for path in (blank_de, blank_en):
        path.write_bytes(b"  \n\t\r\n")
    source = blank_de if blank in ("source", "both") else good_de
    reference = blank_en if blank in ("reference", "both") else good_en
    out = tmp_path / "m.json"
    code, stdout, err = run_evaluate(["--checkpoint", tiny_ckpt, "--device", "cpu", "--source",
                                      source, "--reference", reference, "--json", out], capsys)
    assert (code, stdout, len(err)) == (2, "", 1), err
    named = {"source": [f"--source {blank_de}"], "reference": [f"--reference {blank_en}"],
             "both": [f"--source {blank_de} and --reference {blank_en}"]}[blank]
    assert err[0].startswith(PROG) and "no sentences" in err[0], err
    for words in named:
        assert words in err[0], err
    assert "corpus_bleu" not in err[0]
    assert not out.exists()


# -- python -m convs2s.run.distill: a progress file that is not UTF-8 ---------------------------


def _translator(stop: bool):
    """What distill() asks of a Translator, made up: a word a token; with ``stop``, Ctrl-C in
    the first batch (so that a progress file is left, its first line written)."""
    def translate_token_lists(batch, **kwargs):
        if stop:
            raise KeyboardInterrupt
        return batch

    return SimpleNamespace(source_tokens=lambda s: s.split(), length_penalty=1.0,
                           translate_token_lists=translate_token_lists,
                           detokenize=lambda tokens: " ".join(tokens))


def test_a_progress_file_with_bytes_not_utf8_is_named_and_left_as_it_is(tmp_path):
    sources = ["ein hund", "zwei männer", "eine katze", "ein kind"]
    references = ["a dog", "two men", "a cat", "a child"]
    out = tmp_path / "distilled.en"
    partial = distill.progress_path(out)
    settings = dict(header={"teacher_sha256": "0" * 64, "direction": "de-en"},
                    batch_size=2, log=lambda line: None)
    with pytest.raises(KeyboardInterrupt):
        distill.distill(_translator(stop=True), sources, references, out, **settings)
    header = partial.read_bytes()
    assert json.loads(header)["written_by"] == distill.WRITTEN_BY
    partial.write_bytes(header + b"a dog\nt\xe4o men\n")  # a whole batch, in Latin-1
    before = partial.read_bytes()
    with pytest.raises(ValueError) as caught:
        distill.distill(_translator(stop=False), sources, references, out, **settings)
    message = str(caught.value)
    assert str(partial) in message and "not UTF-8" in message, message
    assert "line 3" in message and "remove it" in message, message
    assert "codec" not in message
    assert partial.read_bytes() == before and not out.exists()


# -- python -m convs2s.run.distill: Ctrl-C or SIGTERM while torch loads --------------------------


@pytest.mark.parametrize(("sig", "line", "status"), [("SIGINT", "interrupted.", 130),
                                                     ("SIGTERM", "stopped by SIGTERM.", 143)])
def test_a_signal_while_torch_loads_stops_distill_in_one_line(tmp_path, sig, line, status):
    done = run_while_torch_loads(tmp_path, sig, "-m", "convs2s.run.distill", "--help")
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (status, [line], "")


def test_distill_as_a_command_still_works(tmp_path):
    """Its command line, imported again as the command's first step, reads its arguments."""
    done = subprocess.run([sys.executable, "-m", "convs2s.run.distill", "--teacher",
                           str(tmp_path / "nope.pt"), "--out", str(tmp_path / "d.en")],
                          cwd=ROOT, text=True, capture_output=True, timeout=300)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "--teacher" in done.stderr and "no such checkpoint file" in done.stderr
    help_text = subprocess.run([sys.executable, "-m", "convs2s.run.distill", "--help"], cwd=ROOT,
                               text=True, capture_output=True, timeout=300)
    assert help_text.returncode == 0 and "--teacher" in help_text.stdout, help_text.stderr
