"""Notebook 09's project, graded as an instructor grades it: assignment 09 built by
``python -m tools.coursework`` (as ``make student`` runs it), a small checkpoint trained here
(the quick preset, French→English), submissions collected, one real ``nbgrader autograde`` in
the sandbox with low bands (so that the small model scores), scores read from the gradebook.

The good submission scores; every bad one (no file, not a checkpoint, a pickle that runs code,
the wrong direction, a model over the size limit, NaN weights, a 10 GB file, a decoder that
never stops, a link to the instructor's files, a folder in the file's place) scores 0 with its
one line, and grading goes on with the next student; a submission over the time limit is
stopped and scores 0 with its line. The release holds no model answer and nothing of the
instructor's test files. Needs the Multi30k files (``CONVS2S_DATA_DIR``) and a sandbox.
"""

from __future__ import annotations

import gzip
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from sandbox_support import needs_sandbox

from convs2s.course import project
from convs2s.run.checkpoint import Checkpoint, save_checkpoint
from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
NAME = "09_project_train_your_own_translator"
DATA = Path(os.environ.get("CONVS2S_DATA_DIR", "/nonexistent"))
#: The instructor's test sentences here: the first of Multi30k's test2016 French→English pairs
#: (a class uses files its students never see; these are a stand-in).
TEST_PAIRS = 100

pytestmark = [needs_sandbox, pytest.mark.skipif(
    not all((DATA / f"{s}.{lang}.gz").is_file() for s in ("train", "val", "test_2016_flickr")
            for lang in ("fr", "en")), reason="needs the Multi30k files in CONVS2S_DATA_DIR")]


def _nbgrader(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                 os.environ.get("PATH", "")]))
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=INFO"],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    """A small French→English model: the project's quick preset, handed in as final.pt."""
    run_dir = tmp_path_factory.mktemp("run")
    result = project.train("fr-en", {}, out=run_dir / "run", quick=True, log=lambda line: None)
    return project.save_submission(result, run_dir / "final.pt")


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """Assignment 09 as `make student` builds it (the notebook's own direction, fr→en), the
    instructor's test files beside it, and nbgrader_config.py pointing at them with low bands."""
    root = tmp_path_factory.mktemp("instructor") / "coursework"
    root.mkdir()
    for name in ("nbgrader_config.py", "sandbox_grading.py"):
        shutil.copy(ROOT / "coursework" / name, root / name)
    shutil.copytree(ROOT / "coursework" / "hidden", root / "hidden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    tests = root / "tests"
    tests.mkdir()
    for lang in ("fr", "en"):
        with gzip.open(DATA / f"test_2016_flickr.{lang}.gz", "rt", encoding="utf-8") as f:
            lines = [next(f) for _ in range(TEST_PAIRS)]
        (tests / f"test.{lang}").write_text("".join(lines), encoding="utf-8")
    with open(root / "nbgrader_config.py", "a", encoding="utf-8") as f:
        f.write('\nc.GradeInSandbox.project_test_files = {"fr-en": ["tests/test.fr", '
                '"tests/test.en"]}\n'
                'c.GradeInSandbox.project_bands = {"fr-en": [[0.5, 1.0], [0.01, 0.5]]}\n'
                "c.GradeInSandbox.project_seconds = 300\n")
    code = coursework.main(["--out", str(root / "source"), "--hidden", str(root / "hidden"),
                            "--only", "09", "--public"])
    assert code == 0
    _nbgrader("generate_assignment", NAME, "--force", cwd=root)
    return root


def _raw(path: Path) -> dict:
    """A checkpoint file's entries as ``torch.save`` wrote them (our own test files)."""
    data = torch.load(path, weights_only=True)
    return {k: v for k, v in data.items() if k not in ("format", "version")}


class _RunsCode:
    def __reduce__(self):
        return (os.system, ("echo owned > /tmp/convs2s-project-owned",))


def _bad_files(good: Path, folder: Path) -> dict[str, object]:
    """student -> what their final.pt is (a path to copy, bytes, or a callable writing it)."""
    folder.mkdir()
    raw = _raw(good)
    wrong = dict(raw, src_lang="en", trg_lang="fr")  # a joint vocabulary: en→fr loads too
    save_checkpoint(folder / "wrong.pt", wrong)
    nan = dict(raw, model=dict(raw["model"]))
    name = next(k for k, v in nan["model"].items() if v.is_floating_point())
    nan["model"][name] = nan["model"][name].clone()
    nan["model"][name].view(-1)[0] = float("nan")
    save_checkpoint(folder / "nan.pt", nan)
    never = dict(raw, model=dict(raw["model"]))
    eos = Checkpoint.load(good).trg_vocab.eos_idx
    never["model"]["decoder.fc_out.bias"] = never["model"]["decoder.fc_out.bias"].clone()
    never["model"]["decoder.fc_out.bias"][eos] = -1e4  # <eos> is never the likeliest
    save_checkpoint(folder / "never.pt", never)
    small = Checkpoint.load(good)
    from convs2s.model import ConvS2S

    big = ConvS2S(len(small.src_vocab), len(small.trg_vocab), emb_dim=256, hid_dim=512,
                  enc_layers=3, dec_layers=3, max_positions=100,
                  src_pad_idx=small.src_vocab.pad_idx, trg_pad_idx=small.trg_vocab.pad_idx)
    Checkpoint.from_model(big, small.src_vocab, small.trg_vocab,
                          pipeline=small.pipeline).save(folder / "big.pt")
    assert (folder / "big.pt").stat().st_size > project.MAX_SUBMISSION_BYTES
    torch.save({"format": "convs2s-checkpoint", "version": 1, "model": _RunsCode()},
               folder / "pickle.pt")

    def sparse(path: Path) -> None:
        with open(path, "wb") as f:
            f.truncate(10 * 2**30)  # 10 GB, none of it written

    return {"s_good": good, "s_nofile": None, "s_garbage": b"not a checkpoint\n" * 1000,
            "s_pickle": folder / "pickle.pt", "s_wrongdir": folder / "wrong.pt",
            "s_toobig": folder / "big.pt", "s_nan": folder / "nan.pt", "s_10gb": sparse,
            "s_neverstops": folder / "never.pt", "s_link": "link", "s_folder": "folder"}


#: What each bad submission's one line says.
EXPECTED = {
    "s_nofile": "no final.pt beside the notebook",
    "s_garbage": "not a checkpoint this course loads",
    "s_pickle": "not a checkpoint this course loads",
    "s_wrongdir": "final.pt translates en→fr; the project asks for fr→en",
    "s_toobig": "over the 20 MB limit",
    "s_nan": "not a checkpoint this course loads",
    "s_10gb": "10,737.4 MB, over the 20 MB limit",
    "s_neverstops": "the decoder does not stop",
    "s_link": "not a plain file",
    "s_folder": "not a plain file",
}


def _submit(course: Path, student: str, what, release: Path) -> None:
    dest = course / "submitted" / student / NAME
    dest.mkdir(parents=True)
    shutil.copy(release, dest / f"{NAME}.ipynb")
    target = dest / project.SUBMISSION
    if isinstance(what, Path):
        shutil.copy(what, target)
    elif isinstance(what, bytes):
        target.write_bytes(what)
    elif what == "link":
        target.symlink_to(course / "grading.json")
    elif what == "folder":  # a folder named final.pt, a model inside it
        target.mkdir()
        shutil.copy(release, target / "inside.ipynb")
    elif callable(what):
        what(target)


def _verdicts(course: Path, student: str) -> list[dict]:
    nb = json.loads((course / "autograded" / student / NAME / f"{NAME}.ipynb").read_text())
    return [cell for cell in nb["cells"] if _meta(cell).get("grade_id") == "translator_tests"]


@pytest.mark.slow
def test_autograde_scores_the_good_submission_and_zero_with_one_line_for_each_bad(
        course, trained, tmp_path):
    from nbgrader.api import Gradebook

    files = _bad_files(trained, tmp_path / "files")
    release = course / "release" / NAME / f"{NAME}.ipynb"
    for student, what in files.items():
        _submit(course, student, what, release)
    proc = _nbgrader("autograde", NAME, "--force", cwd=course)
    assert not (course / "autograded" / "s_10gb" / NAME / project.SUBMISSION).exists()
    assert not any(p.name == project.SUBMISSION for p in (course / "autograded").rglob("*"))
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="convs2s") as gb:
        scores = {s: gb.find_grade("translator_tests", NAME, NAME, s).score for s in files}
    lines = {}
    for student in files:
        (cell,) = _verdicts(course, student)
        (out, *rest) = cell["outputs"]
        lines[student] = out.get("evalue") or "".join(out.get("text", ""))
        assert "\n" not in lines[student].strip(), lines[student]
        if student == "s_good":
            assert out["output_type"] == "stream" and rest[0]["output_type"] == "execute_result"
        else:
            assert out["output_type"] == "error" and not rest, (student, cell["outputs"])
    assert scores["s_good"] == 10.0, (scores, lines["s_good"], proc.stderr[-2000:])
    assert "✓ translator: fr→en, test sacreBLEU" in lines["s_good"]
    assert f"on {TEST_PAIRS} sentences (beam 5): 10 of 10 points" in lines["s_good"]
    for student, said in EXPECTED.items():
        assert scores[student] == 0, (student, scores[student], lines[student])
        assert lines[student].startswith("✗ translator: ") and said in lines[student], \
            (student, lines[student])
    assert not Path("/tmp/convs2s-project-owned").exists()


def test_the_release_holds_no_model_answer_and_nothing_of_the_test_files(course):
    release = course / "release" / NAME / f"{NAME}.ipynb"
    source = course / "source" / NAME / f"{NAME}.ipynb"
    text = release.read_text(encoding="utf-8")
    cells = json.loads(text)["cells"]
    assert "BEGIN SOLUTION" not in text and "A good answer" not in text
    assert "A good answer" in source.read_text(encoding="utf-8")  # the instructor's has them
    references = (course / "tests" / "test.en").read_text(encoding="utf-8").splitlines()
    sources = (course / "tests" / "test.fr").read_text(encoding="utf-8").splitlines()
    for path in (release, source):
        content = path.read_text(encoding="utf-8")
        assert not [s for s in references + sources if s in content], path
        assert "tests/test." not in content and "project_bands" not in content
    tests = [_source(c) for c in cells if _meta(c).get("grade_id") == "translator_tests"]
    assert tests and tests[0].splitlines()[-1] == (
        "assert project.check_submission('final.pt', DIRECTION)")
    working = [_source(c) for c in cells if _meta(c).get("grade_id") == "translator"]
    assert working and "project.save_submission" in working[0]
    assert working[0].startswith('DIRECTION = "fr-en"') and "CHANGES =" not in working[0]
    assert "raise NotImplementedError()" in working[0]  # the student writes their CHANGES
    manual = [c for c in cells if _meta(c).get("solution") and c["cell_type"] == "markdown"]
    assert [_meta(c)["grade_id"] for c in manual] == ["report_tried", "report_curve",
                                                      "report_error"]
    assert all(_source(c) == "YOUR ANSWER HERE" for c in manual)
    grading = json.loads((course / "grading.json").read_text())["assignments"][NAME]
    assert grading["exercises"] == {"translator": {
        "variant": {"direction": "fr-en"}, "answer_names": [], "points": 10,
        "kind": "project", "file": "final.pt"}}


def test_a_submission_over_the_time_limit_is_stopped_and_scores_0_with_one_line(
        trained, tmp_path):
    """``c.GradeInSandbox.project_seconds`` bounds loading and translating: here 0.2 s of wall
    clock, which no Python that imports torch meets, so the sandbox is stopped."""
    folder = tmp_path / "student"
    folder.mkdir()
    shutil.copy(trained, folder / project.SUBMISSION)
    with gzip.open(DATA / "test_2016_flickr.fr.gz", "rt", encoding="utf-8") as f:
        sources = [next(f).strip() for _ in range(TEST_PAIRS)]
    pairs = [(s, "a reference") for s in sources]
    test = project.ProjectTest("fr-en", (project.Band(0.0, 1.0),), seconds=0.2)
    verdict = project.grade(folder, test, pairs)
    assert verdict.points == 0 and "\n" not in verdict.line, verdict
    assert verdict.line.startswith("✗ translator: ") and \
        f"translating the {TEST_PAIRS:,} test sentences took longer than the limit of 0.2 s" \
        in verdict.line, verdict.line
