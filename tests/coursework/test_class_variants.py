"""A class's own version of the graded copy (``make student VARIANT=<name>``, tools/variants.py):
neither the public solutions nor the public stored outputs answer it.

For every predict and derive exercise: two class variants and the public version grade against
different values; the public solution's answer scores 0 on each variant; each variant's own
solution (the instructor version's) scores full marks. Grading is the real one
(``convs2s.course.checks.grading``) on the built test cells.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from convs2s.course.checks import _core, grading
from tools import coursework, variants

ROOT = Path(__file__).resolve().parents[2]
NAMES = ("class-g", "class-x")  # two names whose variants differ in every exercise
#: Exercises a public solution answers whatever the class (implement and debug): practice.
PRACTICE = {"my_glu", "mask_source_padding", "causal_conv1d", "teacher_forcing_loss",
            "masked_softmax", "row_entropy", "build_itos", "token_loss", "rerank", "repeats",
            "lightweight_conv"}
#: Predict exercises graded on their form only (the answer depends on the machine): practice,
#: with nothing for a variant to change.
PRACTICE_PREDICT = {"speed_crossover"}


def _build(out: Path, variant: str | None) -> dict[str, dict]:
    """exercise -> {setup, answer (the instructor's), test, names, task} of one built copy."""
    built = coursework.write_assignments(out, ROOT / "notebooks", ROOT / "coursework" / "hidden",
                                         variant=variant)
    found = {}
    for b in built:
        cells = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
                 for c in json.loads(Path(b.path).read_text(encoding="utf-8"))["cells"]}
        for ex in b.exercises:
            if not ex.manual:
                found[ex.id] = {"setup": cells["setup"], "answer": cells[ex.id],
                                "test": cells[f"{ex.id}_tests"], "names": ex.answer_names,
                                "task": cells[f"{ex.id}_task"]}
    return found


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    root = tmp_path_factory.mktemp("variants")
    return {name: _build(root / (name or "public"), name) for name in (None, *NAMES)}


def _grade(copy: dict, exercise: str, answer: str) -> tuple[bool, str]:
    visible, hidden = coursework.split_test_cell(copy[exercise]["test"])
    _core._graded, _core._variant = False, None
    try:
        passed, line, _ = grading.grade(grading.Job(exercise, copy[exercise]["names"],
                                                    copy[exercise]["setup"], answer, visible,
                                                    hidden))
    finally:
        _core._graded, _core._variant = False, None
    return passed, line


def _variant_values(test_cell: str) -> dict:
    _, hidden = coursework.split_test_cell(test_cell)
    line = next(line for line in hidden.splitlines() if line.startswith("_variant = "))
    return ast.literal_eval(line.removeprefix("_variant = "))


def test_every_predict_and_derive_exercise_has_a_variant_and_the_others_are_practice(copies):
    public = copies[None]
    assert sorted(variants.BUILDERS) == sorted(set(public) - PRACTICE - PRACTICE_PREDICT)
    kinds = {ex.id: ex.kind for path in coursework.course_notebooks(ROOT / "notebooks")
             for ex in coursework.read_notebook(path).exercises}
    assert {e for e in variants.BUILDERS} == {e for e, k in kinds.items()
                                              if k in ("predict", "derive")} - PRACTICE_PREDICT
    assert all(kinds[e] == "predict" for e in PRACTICE_PREDICT)
    readme = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    for exercise in PRACTICE | PRACTICE_PREDICT:
        assert f"`{exercise}`" in readme
    assert "practice: a public solution exists" in readme


@pytest.mark.parametrize("exercise", sorted(variants.BUILDERS))
def test_two_variants_and_the_public_version_grade_against_different_values(exercise, copies):
    values = [_variant_values(copies[name][exercise]["test"]) for name in (None, *NAMES)]
    assert values[0] != values[1] and values[0] != values[2] and values[1] != values[2], values
    for name in NAMES:  # and the task says so
        assert copies[name][exercise]["task"] != copies[None][exercise]["task"]


@pytest.mark.parametrize("exercise", sorted(variants.BUILDERS))
def test_the_public_solution_scores_nothing_on_a_variant(exercise, copies):
    public_answer = copies[None][exercise]["answer"]
    assert _grade(copies[None], exercise, public_answer)[0], "the public copy's own solution"
    for name in NAMES:
        passed, line = _grade(copies[name], exercise, public_answer)
        assert not passed, f"{exercise}: the public solution passed variant {name}"


@pytest.mark.parametrize("exercise", sorted(variants.BUILDERS))
def test_each_variants_own_solution_scores_full_marks(exercise, copies):
    for name in NAMES:
        passed, line = _grade(copies[name], exercise, copies[name][exercise]["answer"])
        assert passed, f"{exercise}, variant {name}: {line}"


def test_the_same_name_gives_the_same_copy(tmp_path, copies):
    again = _build(tmp_path / "again", NAMES[0])
    assert again == copies[NAMES[0]]


def test_a_variant_copy_says_so_and_its_checks_only_record(copies):
    from convs2s.course import checks

    setup = copies[NAMES[0]]["my_receptive_field"]["setup"]
    assert f"checks.graded_copy(variant={NAMES[0]!r})" in setup
    namespace: dict = {}
    try:
        exec(setup, namespace)  # noqa: S102 - the built setup cell
        assert checks.my_receptive_field(lambda k, n: 1 + n * (k - 1)) is True  # recorded only
        assert checks.my_receptive_field(lambda k, n: 0) is True
    finally:
        _core._graded, _core._variant = False, None


def test_the_cli_builds_a_variant_and_refuses_an_unusable_name(tmp_path):
    ok = subprocess.run([sys.executable, "-m", "tools.coursework", "--out", str(tmp_path / "a"),
                         "--only", "01", "--variant", "ml-2027"], cwd=ROOT, capture_output=True,
                        text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "tools.coursework", "--out", str(tmp_path / "b"),
                          "--only", "01", "--variant", "  "], cwd=ROOT, capture_output=True,
                         text=True)
    assert bad.returncode == 2 and bad.stderr.count("\n") == 1 and "Traceback" not in bad.stderr
    assert "--variant" in bad.stderr and not (tmp_path / "b").exists()
