"""benchmarks/candidates.py: the candidates train side by side as separate processes, each
resumed or read where its run folder says so, and the report says what each run folder holds
(tiny corpus, a tiny preset, the CPU; no figure is checked, only that the report is the runs')."""

import hashlib
import importlib
import json
import shutil
import sys
from pathlib import Path

import pytest
from signal_support import default_signals

from convs2s.run.checkpoint import Checkpoint

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"

#: The trainer (or the teacher's translating) with the loader told to expect the tiny corpus's
#: checksums (given as argv[1]).
WRAPPER = """import json, sys
from convs2s.data import multi30k
multi30k.MULTI30K_SHA256 = json.loads(sys.argv.pop(1))
from convs2s.run.{module} import main
sys.exit(main())
"""


@pytest.fixture
def candidates(tiny_corpus, monkeypatch, tmp_path):
    """benchmarks/candidates.py with its trainer reading the tiny corpus; run(*args) -> exit."""
    sums = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in tiny_corpus.iterdir()}
    monkeypatch.setenv("CONVS2S_DATA_DIR", str(tiny_corpus))
    monkeypatch.syspath_prepend(str(BENCHMARKS))
    module = importlib.import_module("candidates")
    for constant, name in (("TRAIN", "train"), ("DISTILL", "distill")):
        wrapper = tmp_path / f"{name}_tiny.py"
        wrapper.write_text(WRAPPER.format(module=name), encoding="utf-8")
        monkeypatch.setattr(module, constant, [sys.executable, str(wrapper), json.dumps(sums)])

    def run(*args):
        monkeypatch.setattr(sys, "argv", ["benchmarks/candidates.py", *args])
        return module.main(list(args))

    return run


@pytest.mark.slow
def test_candidates_train_side_by_side_and_the_report_reads_their_runs(
        candidates, tiny_corpus, tmp_path, capsys):
    runs, teachers, report = tmp_path / "runs", tmp_path / "teachers", tmp_path / "r.json"
    teachers.mkdir()
    teacher = [s.upper() for s in _gz_lines(tiny_corpus / "train.en.gz")]  # any one a line
    (teachers / "de-en.en").write_text("".join(f"{s}\n" for s in teacher), encoding="utf-8")
    args = ["--runs", str(runs), "--distilled", str(teachers), "--parallel", "3",
            "--minutes", "30", "--base", "--preset quick_subword --epochs 1 --vocab-size 60",
            "--only", "de-en_rdrop-0.5", "de-en_distill", "en-de_baseline", "en-de_distill",
            "--json", str(report)]
    assert candidates(*args) == 0
    r = json.loads(report.read_text(encoding="utf-8"))
    rows = r["candidates"]
    assert rows["en-de_distill"]["status"].startswith("not started: no distilled file en-de.de")
    for name in ("de-en_rdrop-0.5", "de-en_distill", "en-de_baseline"):
        row, folder = rows[name], runs / name
        assert row["status"] == "finished" and row["stopped"] in ("epochs", "early stop"), row
        history = Checkpoint.load(folder / "last.pt").history
        choices = Checkpoint.load(folder / "final.pt").choices
        assert row["epochs"] == len(history) == 1
        assert row["best_valid_loss"] == round(min(h["valid_loss"] for h in history), 4)
        assert row["valid_beam5"] == round(choices["valid_sacrebleu"], 2)
        assert row["alpha"] == choices["length_penalty"]
        assert "--src " + name[:2] in row["command"] and "--resume" not in row["command"]
    assert "--rdrop 0.5" in rows["de-en_rdrop-0.5"]["command"]
    assert f"--distilled {teachers / 'de-en.en'}" in rows["de-en_distill"]["command"]
    best = r["best"]["de-en"]
    assert best["candidate"] in ("de-en_rdrop-0.5", "de-en_distill")
    assert best["valid_beam5"] == max(rows[n]["valid_beam5"]
                                      for n in ("de-en_rdrop-0.5", "de-en_distill"))
    assert best["beats_shipped"] == (best["valid_beam5"] > best["shipped_valid_beam5"])

    # the same command again: the finished runs are only read, nothing trains
    stamps = {n: (runs / n / "final.pt").stat().st_mtime_ns for n in ("de-en_distill",)}
    assert candidates(*args) == 0
    again = json.loads(report.read_text(encoding="utf-8"))["candidates"]
    assert again["de-en_distill"]["status"] == "finished before this command: read"
    assert again["de-en_distill"]["valid_beam5"] == rows["de-en_distill"]["valid_beam5"]
    assert (runs / "de-en_distill" / "final.pt").stat().st_mtime_ns == stamps["de-en_distill"]

    # --teachers: en-de's file is missing; a teacher for it (here the run just trained) makes it
    # first, and the candidate that needs it trains on it
    models = tmp_path / "models"
    models.mkdir()
    shutil.copy(runs / "en-de_baseline" / "final.pt", models / "en-de.pt")
    assert candidates("--runs", str(runs), "--distilled", str(teachers), "--teachers",
                      str(models), "--parallel", "2", "--minutes", "30", "--base",
                      "--preset quick_subword --epochs 1 --vocab-size 60",
                      "--only", "en-de_distill", "de-en_distill", "--json", str(report)) == 0
    r = json.loads(report.read_text(encoding="utf-8"))
    assert r["distilled_here"] == {"en-de": "finished"}  # de-en had its file: not made again
    made = (teachers / "en-de.de").read_text(encoding="utf-8").splitlines()
    assert len(made) == len(_gz_lines(tiny_corpus / "train.de.gz"))
    row = r["candidates"]["en-de_distill"]
    assert row["status"] == "finished" and row["epochs"] == 1, row
    assert f"--distilled {teachers / 'en-de.de'}" in row["command"]
    assert "distilling" in (runs / "distill_en-de.log").read_text(encoding="utf-8")


def test_no_candidate_starts_after_the_deadline(candidates, tmp_path):
    """Past the deadline (less than LEAST_MINUTES left) a candidate is reported, not started:
    no process, no run folder; a finished one is still read."""
    import argparse
    import time

    module = sys.modules["candidates"]
    runs = tmp_path / "runs"
    (runs / "de-en_fr-cs").mkdir(parents=True)
    (runs / "de-en_fr-cs" / "final.pt").write_bytes(b"")  # finished: read, never started
    args = argparse.Namespace(runs=runs, minutes=10.0, parallel=2, distilled=None)
    rows = {}
    module._train(args, [], "cpu", time.monotonic() - 9.5 * 60, ["de-en_rdrop-0.5", "de-en_fr-cs"],
                  rows, {})
    assert rows["de-en_rdrop-0.5"]["status"] == "not started: out of time"
    assert rows["de-en_fr-cs"]["status"] == "finished before this command: read"
    assert sorted(p.name for p in runs.iterdir()) == ["de-en_fr-cs"]


def test_a_candidate_waits_for_its_teachers_translations_until_the_deadline(
        candidates, monkeypatch, tmp_path):
    """A distilled file being made holds back the candidates that need it, not the others; at
    the deadline the teacher is stopped (its part kept for the same command to continue) and
    they are reported as not started. The clock is the test's: no fixed waits."""
    import time
    import types

    module = sys.modules["candidates"]
    runs, distilled, models = tmp_path / "runs", tmp_path / "distilled", tmp_path / "models"
    for folder in (runs, distilled, models):
        folder.mkdir()
    (models / "en-de.pt").write_bytes(b"")  # a teacher is there (this fake one never finishes)
    monkeypatch.setattr(module, "DISTILL",
                        [sys.executable, "-c", "import time\nwhile True: time.sleep(1)"])
    monkeypatch.setattr(module, "TRAIN", [sys.executable, "-c", "pass"])  # ends at once
    clock = [0.0]

    def sleep(_seconds):  # each wait moves the test's clock on by a minute
        clock[0] += 60
        time.sleep(0.05)

    monkeypatch.setattr(module, "time", types.SimpleNamespace(monotonic=lambda: clock[0],
                                                              sleep=sleep))
    started, start = [], module._start
    monkeypatch.setattr(module, "_start", lambda name, *a: (started.append(name),
                                                            start(name, *a)))
    args = types.SimpleNamespace(runs=runs, minutes=3.0, parallel=3, distilled=distilled,
                                 teachers=models)
    rows, distilling = {}, {}
    module._train(args, [], "cpu", 0.0, ["en-de_distill", "en-de_baseline"], rows, {},
                  distilling)
    assert started == ["distill_en-de", "en-de_baseline"]  # the other one did not wait
    assert rows["en-de_distill"]["status"] == "not started: out of time"
    assert rows["en-de_baseline"]["status"] == "finished"
    assert distilling["en-de"].startswith("failed (exit status")  # stopped at the deadline
    assert module._RUNNING == {}


def test_bad_arguments_are_one_line(candidates, tmp_path, capsys):
    with pytest.raises(SystemExit) as e:
        candidates("--runs", str(tmp_path / "runs"), "--minutes", "0.5")
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--minutes must be more than 1" in err[0]
    with pytest.raises(SystemExit):
        candidates("--runs", str(tmp_path / "runs"), "--minutes", "5",
                   "--distilled", str(tmp_path / "nowhere"))
    assert "no such folder" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        candidates("--runs", str(tmp_path / "runs"), "--minutes", "5",
                   "--teachers", str(tmp_path))
    assert "--teachers needs --distilled" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()  # nothing made for a refused command


def _gz_lines(path):
    import gzip

    return gzip.decompress(path.read_bytes()).decode("utf-8").splitlines()


def test_the_device_scripts_spacy_stand_in_serves_the_packages_tokenizer():
    """tools/device/candidates.sh puts a stand-in for spaCy on the path where spaCy is missing:
    the package's word tokenizer runs with it (words and punctuation apart), sacreBLEU's figures
    do not use it."""
    import subprocess

    stand_in = BENCHMARKS.parent / "tools" / "device" / "spacy_stand_in"
    code = ("import spacy, convs2s.data as d; assert 'stand_in' in spacy.__file__; "
            "print(d.make_tokenizer('en')('A man, in  blue.'))")
    env = {"PYTHONPATH": str(stand_in), "PATH": "/usr/bin:/bin"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         check=True).stdout
    assert out.strip() == "['a', 'man', ',', 'in', 'blue', '.']"


@pytest.mark.slow
def test_sigterm_stops_every_candidate_with_its_last_checkpoint_saved(tmp_path):
    """SIGTERM to the command reaches each trainer it started: each saves its last.pt and stops
    (the same command resumes them), none is left running, and the command says so in one
    line, exit status 143. Waits for conditions (a finished epoch), never for fixed times."""
    import os
    import signal
    import subprocess
    import time

    from convs2s.data.multi30k import DataError, load_multi30k

    try:
        load_multi30k(download=False)
    except (DataError, OSError) as e:
        pytest.skip(f"needs the Multi30k files (CONVS2S_DATA_DIR): {e}")
    runs = tmp_path / "runs"
    names = ["de-en_rdrop-0.5", "en-de_baseline"]
    command = [sys.executable, str(BENCHMARKS / "candidates.py"), "--runs", str(runs),
               "--minutes", "60", "--parallel", "2", "--base",
               "--preset quick_subword --epochs 80 --patience 80", "--only", *names]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, preexec_fn=default_signals)
    logs = [runs / f"{n}.log" for n in names]
    try:
        while not all(p.exists() and "valid loss" in p.read_text(errors="replace")
                      for p in logs):
            assert process.poll() is None, process.communicate()
            time.sleep(0.2)
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=600)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 143, (out, err)
    assert err.strip().splitlines() == ["stopped by SIGTERM (candidates.py)."], err
    for name, log in zip(names, logs, strict=True):
        assert "stopped by SIGTERM" in log.read_text(encoding="utf-8"), name
        assert Checkpoint.load(runs / name / "last.pt").history  # an epoch's state, resumable
    assert _processes_naming(str(runs)) == []  # no trainer left running


def _processes_naming(text: str) -> list[str]:
    """The command lines of the running processes that contain ``text`` (Linux's /proc)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            line = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # the process ended meanwhile
            continue
        if text in line:
            found.append(line)
    return found
