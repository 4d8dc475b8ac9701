"""A class's own version of the graded copy (``make student``,
``convs2s.course.checks.class_variants``): neither the public solutions nor the public stored
outputs answer it, and two classes rarely share one.

Every predict and derive exercise draws its version uniformly from an explicit list of at least
20 choices, declared beside its hidden test (``coursework/hidden/NN.py``'s ``VERSIONS``, loaded
here as the course builder loads it). For every exercise the tests here build every
choice and compute, exactly, the probability that two classes with independent secrets draw
versions whose answers are interchangeable: one's right answer (its measured value or its
instructor's solution) passes the other's hidden test, with the hidden test's own acceptance.
It must be at most 0.05. Every choice's own solution passes its own hidden test (for a predict
exercise: the solution's formula against the measurement), neither the public solution nor the
public measurement passes it, and its text replacements apply to the notebook's task.

Judged here, in this process, as grading judges (``grader.in_this_process``: the same data
coding and judgement as the sandbox's grading; the answers are the course's own). Two named
copies and the public one are also built (``tools.coursework``) and their cells graded the same
way; two exercises of one copy are graded for real, in the sandbox (``grader.grade``).
"""

from __future__ import annotations

import ast
import functools
import json
import math
import re
import secrets
import subprocess
import sys
from fractions import Fraction
from pathlib import Path

import pytest

from convs2s.course import checks
from convs2s.course.checks import _core, class_variants, grader, testing
from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
HIDDEN = ROOT / "coursework" / "hidden"
#: Two names whose variants differ from each other and from the public version in every
#: exercise (test_the_two_names_differ_in_every_exercise checks it).
NAMES = ("class-a", "class-b")
#: Exercises a public solution answers whatever the class (implement and debug): practice.
PRACTICE = {"my_glu", "mask_source_padding", "causal_conv1d", "teacher_forcing_loss",
            "masked_softmax", "row_entropy", "build_itos", "token_loss", "rerank", "repeats",
            "lightweight_conv"}
#: Predict exercises graded on their form only (the answer depends on the machine): practice,
#: with nothing for a variant to change.
PRACTICE_PREDICT = {"speed_crossover"}
#: The most two classes may share an exercise's answer (probability, independent secrets).
SHARED = 0.05
#: What the answer cells run after (the setup cells' imports the solutions use).
SETUP = "import math\n\nimport torch"


def _declared_versions() -> dict[str, class_variants.Versions]:
    """Every hidden-test file's ``VERSIONS``, as the course builder reads them."""
    found: dict[str, class_variants.Versions] = {}
    for path in sorted(HIDDEN.glob("[0-9][0-9].py")):
        versions = coursework.read_hidden(path).versions
        assert not set(versions) & set(found), f"{path.name}: an exercise declared twice"
        found.update(versions)
    return found


#: Every exercise's versions (its hidden-test file's VERSIONS), by exercise id.
VERSIONS = _declared_versions()
EXERCISES = sorted(VERSIONS)
#: The predict exercises: those whose check module declares an acceptance.
PREDICT = sorted(e for e in EXERCISES if checks.EXERCISES[e].accept is not None)
DERIVE = sorted(set(EXERCISES) - set(PREDICT))


def _helper(number: str, name: str):
    """A helper of the hidden-test file ``NN.py`` (``_moved_outputs``, ...)."""
    return getattr(coursework._hidden_module(HIDDEN / f"{number}.py"), name)


# --------------------------------------------------------------------------------------------
# The notebooks' exercises, the hidden tests, and every choice's version
# --------------------------------------------------------------------------------------------


@functools.cache
def _notebook_exercises() -> dict[str, tuple[str, coursework.ExerciseCells]]:
    """exercise -> (its notebook's number, the exercise as the notebook writes it)."""
    found = {}
    for path in coursework.course_notebooks(ROOT / "notebooks"):
        nb = coursework.read_notebook(path)
        for ex in nb.exercises:
            found[ex.id] = (nb.number, ex)
    return found


@functools.cache
def _hidden_test(exercise: str):
    number, _ = _notebook_exercises()[exercise]
    return coursework.read_hidden(HIDDEN / f"{number}.py")[exercise]


def _cases(exercise: str, params: dict) -> list[testing.Case]:
    return _hidden_test(exercise)(json.loads(json.dumps(params)))  # as grading.json holds it


def _defined(exercise: str, code: str, setup: str = SETUP) -> dict:
    """The answer names and values an answer cell (``code``, run after ``setup``) defines."""
    namespace: dict = {"__name__": "__main__"}
    try:
        exec(compile(f"{setup}\n{code}", f"<{exercise}>", "exec"), namespace)  # noqa: S102
    finally:  # a built copy's setup cell calls checks.graded_copy()
        _core._graded, _core._class_version, _core._recorded = False, False, frozenset()
    return {n: namespace.get(n) for n in _notebook_exercises()[exercise][1].answer_names}


def _verdict(exercise: str, answers: dict, params: dict) -> grader.Verdict:
    """The hidden test of the version ``params`` on ``answers``, judged as grading judges (in
    this process: the answers are the course's own)."""
    return grader.in_this_process(exercise, _cases(exercise, params), answers)


def _failures(exercise: str, answer: str, params: dict) -> list[str]:
    """Why ``answer`` (an answer cell) fails the hidden test of the version ``params`` (empty:
    it passes)."""
    verdict = _verdict(exercise, _defined(exercise, answer), params)
    return [] if verdict.passed else [verdict.line]


def _value_passes(exercise: str, value, params: dict) -> bool:
    """Whether a predict answer ``value`` passes the hidden test of the version ``params``."""
    (name,) = _notebook_exercises()[exercise][1].answer_names
    return _verdict(exercise, {name: value}, params).passed


def _solution_value(exercise: str, solution: str):
    """The value a predict exercise's solution binds to its answer name."""
    (value,) = _defined(exercise, solution).values()
    return value


@functools.cache
def _versions(exercise: str) -> tuple[class_variants.Variant, ...]:
    """Every choice's version, built (a predict exercise's measured with the package)."""
    return tuple(class_variants.build(exercise, choice, VERSIONS)
                 for choice in VERSIONS[exercise].choices)


@functools.cache
def _public(exercise: str) -> class_variants.Variant:
    return class_variants.build(exercise, None, VERSIONS)


def _answers_public(exercise: str, version: class_variants.Variant) -> bool:
    """Whether the public solution or measurement passes ``version`` (the exercise's declared
    acceptance, as :func:`class_variants.variant` judges it)."""
    return class_variants.answers_public(version, _public(exercise),
                                         VERSIONS[exercise].public_answers,
                                         checks.EXERCISES[exercise].accept)


@functools.cache
def _groups(exercise: str) -> tuple[tuple[int, ...], ...]:
    """The choices' indices, grouped where the versions are the same exercise (same params and
    solution: the same answers, the same hidden test)."""
    found: dict[str, list[int]] = {}
    for i, version in enumerate(_versions(exercise)):
        key = json.dumps(version.params, sort_keys=True) + version.solution
        if exercise in PREDICT:  # a predict version is its expected value and its solution's
            key = json.dumps([version.params["expected"],
                              _solution_value(exercise, version.solution)], sort_keys=True)
        found.setdefault(key, []).append(i)
    return tuple(tuple(g) for g in found.values())


@functools.cache
def _right_answers(exercise: str, i: int) -> tuple:
    """Choice ``i``'s right answers: a predict version's measured value and its solution's
    value, a derive version's solution (its answer cell)."""
    version = _versions(exercise)[i]
    if exercise in PREDICT:
        return version.params["expected"], _solution_value(exercise, version.solution)
    return (version.solution,)


def _passes(exercise: str, i: int, j: int) -> bool:
    """Whether one of choice ``i``'s right answers passes choice ``j``'s hidden test."""
    params = _versions(exercise)[j].params
    if exercise in PREDICT:
        return any(_value_passes(exercise, value, params)
                   for value in _right_answers(exercise, i))
    return not _failures(exercise, _right_answers(exercise, i)[0], params)


@functools.cache
def _interchangeable(exercise: str) -> frozenset[tuple[int, int]]:
    """The pairs of groups (g, h) whose answers are interchangeable: one's right answer passes
    the other's hidden test (either way); every group with itself."""
    groups = _groups(exercise)
    pairs = set()
    for g, first in enumerate(groups):
        pairs.add((g, g))
        for h in range(g + 1, len(groups)):
            a, b = first[0], groups[h][0]
            if _passes(exercise, a, b) or _passes(exercise, b, a):
                pairs |= {(g, h), (h, g)}
    return frozenset(pairs)


def shared_probability(exercise: str) -> Fraction:
    """The exact probability that two independent uniform draws from the exercise's choices
    give interchangeable versions: Σ over interchangeable pairs of groups of p_g · p_h (Σ p_g²
    where each group is interchangeable with itself only)."""
    sizes = [len(g) for g in _groups(exercise)]
    n = len(VERSIONS[exercise].choices)
    return sum((Fraction(sizes[g] * sizes[h], n * n) for g, h in _interchangeable(exercise)),
               Fraction(0))


# --------------------------------------------------------------------------------------------
# The choices
# --------------------------------------------------------------------------------------------


def test_every_predict_and_derive_exercise_has_a_variant_and_the_others_are_practice():
    exercises = _notebook_exercises()
    # (notebook 09's project is graded on its file: its class's direction, test_project_release)
    autograded = {e for e, (_, ex) in exercises.items() if not ex.manual and not ex.project}
    assert sorted(VERSIONS) == sorted(autograded - PRACTICE - PRACTICE_PREDICT)
    kinds = {e: ex.kind for e, (_, ex) in exercises.items()}
    assert set(VERSIONS) == {e for e, k in kinds.items()
                             if k in ("predict", "derive")} - PRACTICE_PREDICT
    assert all(kinds[e] == "predict" for e in PRACTICE_PREDICT)
    assert set(PREDICT) == {e for e in VERSIONS if kinds[e] == "predict"}
    # a predict exercise's acceptance is the one its check module declares (and only theirs)
    assert {e for e, declared in checks.EXERCISES.items()
            if declared.accept is not None} == set(PREDICT)
    readme = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    for exercise in PRACTICE | PRACTICE_PREDICT:
        assert f"`{exercise}`" in readme
    assert "are practice, 0 points, in a class copy" in readme


def test_each_exercises_versions_are_declared_beside_its_hidden_test_only():
    """An exercise's versions are in the hidden-test file of its own notebook, which the grader
    loads where ``tools`` is not importable (it imports no ``tools``), and nowhere else: the
    machinery (class_variants) and the tools name no exercise."""
    exercises = _notebook_exercises()
    for path in sorted(HIDDEN.glob("[0-9][0-9].py")):
        for exercise in coursework.read_hidden(path).versions:
            assert exercises[exercise][0] == path.stem, (path.name, exercise)
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom):
                imported.add((node.module or "").split(".")[0] if not node.level else ".")
        assert imported - sys.stdlib_module_names <= {"convs2s", "torch", "numpy"}, \
            (path.name, imported)  # what the grader's machine has: never tools
    elsewhere = [ROOT / "src" / "convs2s" / "course" / "checks" / "class_variants.py",
                 *sorted((ROOT / "tools").rglob("*.py"))]
    for path in elsewhere:
        words = set(re.findall(r"\w+", path.read_text(encoding="utf-8")))
        assert not words & set(VERSIONS), (path, sorted(words & set(VERSIONS)))


def test_versions_that_do_not_fit_their_notebook_are_refused_in_one_line(tmp_path):
    source = (HIDDEN / "01.py").read_text(encoding="utf-8")
    for n, (tail, said) in enumerate((
            ("VERSIONS = {'my_receptive_field': (2, 3)}", "VERSIONS must be a dict"),
            ("VERSIONS = {**VERSIONS, 'my_glu': VERSIONS['my_receptive_field']}",
             "VERSIONS names my_glu, of kind implement"),
            ("VERSIONS = {**VERSIONS, 'rerank': VERSIONS['my_receptive_field']}",
             "VERSIONS names rerank, not an exercise of 01_"))):
        hidden = tmp_path / f"hidden{n}"
        hidden.mkdir()
        (hidden / "01.py").write_text(f"{source}\n{tail}\n", encoding="utf-8")
        with pytest.raises(coursework.CourseworkError) as info:
            coursework.write_assignments(tmp_path / "out", ROOT / "notebooks", hidden,
                                         only={"01"}, variant="class-a")
        assert said in str(info.value) and "\n" not in str(info.value)
        assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("exercise", EXERCISES)
def test_each_exercise_draws_uniformly_from_at_least_20_distinct_choices(exercise):
    choices = VERSIONS[exercise].choices
    assert type(choices) is tuple and len(choices) >= 20
    assert len(set(choices)) == len(choices), "a choice listed twice is drawn twice as often"
    for n in range(5):
        name = f"class-{n}"
        assert class_variants.draw(exercise, name, VERSIONS) == \
            class_variants._rng(name, exercise).choice(choices)  # random.Random.choice: uniform
    with pytest.raises(class_variants.VariantError):
        class_variants.build(exercise, "not a choice", VERSIONS)


def test_the_derive_exercises_change_what_the_hidden_tests_read():
    def values(exercise, key):
        return sorted(v.params[key] for v in _versions(exercise))

    for exercise in ("my_receptive_field", "path_length"):
        assert values(exercise, "convs_per_layer") == list(range(2, 22))
    assert values("block_parameters", "groups") == list(range(2, 22))
    assert values("cache_floats", "beam") == list(range(2, 22))
    assert values("attention_macs", "every") == list(range(2, 22))
    assert values("perplexity_from_loss", "base") == list(range(3, 31))
    assert values("separable_params", "multiplier") == list(range(2, 22))
    baseline = [v.params for v in _versions("baseline_parameters")]
    assert {p["gru_bias"] for p in baseline} == {False}
    assert sorted((p["u_bias"], p["pieces"]) for p in baseline) == \
        sorted((u, n) for u in (False, True) for n in range(2, 12))
    assert _public("baseline_parameters").params == {"gru_bias": True, "u_bias": True,
                                                     "pieces": 2}
    for version in _versions("block_parameters"):
        assert f"`hid_dim` is a multiple of {version.params['groups']}" in version.note


@pytest.mark.parametrize("exercise", EXERCISES)
def test_two_classes_share_an_answer_with_probability_at_most_five_percent(exercise):
    p = shared_probability(exercise)
    choices, groups = VERSIONS[exercise].choices, _groups(exercise)
    shared = sorted({tuple(sorted((choices[groups[g][0]], choices[groups[h][0]]), key=repr))
                     for g, h in _interchangeable(exercise) if g != h}, key=repr)
    assert p <= SHARED, (f"{exercise}: two classes share the answer with probability "
                         f"{float(p):.4f} (choices whose answers pass each other's hidden test: "
                         f"{shared[:8]})")


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_choices_own_solution_passes_its_own_hidden_test(exercise):
    for choice, version in zip(VERSIONS[exercise].choices, _versions(exercise), strict=True):
        assert not version.public and version.solution
        if exercise in PREDICT:  # the solution's formula against the measurement
            value = _solution_value(exercise, version.solution)
            assert _value_passes(exercise, value, version.params), (choice, value)
            assert _value_passes(exercise, version.params["expected"], version.params)
        else:
            assert not _failures(exercise, version.solution, version.params), choice


@pytest.mark.parametrize("exercise", EXERCISES)
def test_no_choice_is_answered_by_the_public_solution_or_measurement(exercise):
    public = _public(exercise)
    solution = _notebook_exercises()[exercise][1].solution
    assert not _failures(exercise, solution, public.params), "the public solution, public copy"
    for choice, version in zip(VERSIONS[exercise].choices, _versions(exercise), strict=True):
        assert version.params != public.params
        assert _failures(exercise, solution, version.params), choice
        if exercise in PREDICT:
            assert not _answers_public(exercise, version), choice
            for value in (public.params["expected"], *VERSIONS[exercise].public_answers):
                assert not _value_passes(exercise, value, version.params), choice


@pytest.mark.parametrize("exercise", EXERCISES)
def test_every_choice_rewrites_the_task_where_the_notebook_says_it(exercise):
    _, ex = _notebook_exercises()[exercise]
    for choice, version in zip(VERSIONS[exercise].choices, _versions(exercise), strict=True):
        task = class_variants.apply_text(ex.task, version.replace, f"{exercise} {choice}")
        class_variants.apply_text(ex.answer, version.answer_replace, f"{exercise} {choice}")
        assert (task + version.note) != ex.task, choice
        if exercise in DERIVE:
            assert version.note.startswith(class_variants.NOTE) and not version.replace
            # the answer cell's docstring says what this version counts, not the notebook's
            assert version.answer_replace, exercise
            answer = class_variants.apply_text(ex.answer, version.answer_replace, exercise)
            assert answer != ex.answer
        else:
            assert version.replace and not version.note
        compile(version.solution, f"<{exercise} {choice}>", "exec")


def test_the_predict_formulas_are_what_the_package_measures():
    """The formulas the choices were picked with (and the solutions write) are the measured
    values, for every choice."""
    moved_outputs = _helper("01", "_moved_outputs")
    for (k, layers, length, changed), v in zip(VERSIONS["same_padding_moves"].choices,
                                               _versions("same_padding_moves"), strict=True):
        assert v.params["expected"] == moved_outputs(k, layers, length, changed)
    brevity_bleu = _helper("06", "_brevity_bleu")
    for (kept, parts), v in zip(VERSIONS["brevity_prediction"].choices,
                                _versions("brevity_prediction"), strict=True):
        assert math.isclose(v.params["expected"], brevity_bleu(kept, parts), rel_tol=1e-9)
    scaled_variance = _helper("04", "_scaled_variance")
    for (m, first), v in zip(VERSIONS["scaled_context_variance"].choices,
                             _versions("scaled_context_variance"), strict=True):
        assert math.isclose(v.params["expected"], scaled_variance(m, first), rel_tol=0.01)
    for (d, k), v in zip(VERSIONS["attention_vs_conv"].choices, _versions("attention_vs_conv"),
                         strict=True):
        assert v.params["expected"] == d * k
    for (lengths, layers), v in zip(VERSIONS["training_steps"].choices,
                                    _versions("training_steps"), strict=True):
        assert v.params["expected"] == {"GRU + attention": [2 * n for n in lengths],
                                        "ConvS2S": [2 * layers] * 3}
    for (scale, blocks), v in zip(VERSIONS["residual_variance"].choices,
                                  _versions("residual_variance"), strict=True):
        predicted = float((2 * scale**2) ** blocks)  # within 2x: the factor 5 holds with room
        assert abs(math.log(predicted / v.params["expected"])) < math.log(2), (scale, blocks)


def test_the_residual_variance_at_scale_1_is_what_the_notebooks_stack_measures():
    """The declared measure (any scale, for a class's version) equals, at scale 1, the
    notebook's own residual stack without the √0.5 (normalisation.residual_stack_activations)."""
    import torch

    from convs2s.course import normalisation
    from convs2s.course.checks import EXERCISES, nb02

    enc = nb02._tiny_encoder(3, seed=0, emb_dim=32, hid_dim=64, vocab=100)
    tokens = torch.randint(4, 100, (16, 20), generator=nb02._gen(0))
    with torch.no_grad():
        e = enc.tok_embedding(tokens) + enc.pos_embedding(torch.arange(20))
        x0 = enc.emb2hid(e).transpose(1, 2)
        out = normalisation.residual_stack_activations(enc.blocks, x0, scale=False)[-1]
    assert EXERCISES["residual_variance"].measure(3, 1.0, seeds=1) == float(out.var() / x0.var())


def test_two_classes_drawn_at_random_rarely_share_an_answer():
    """200 random secrets: the share of pairs of classes with interchangeable versions, for
    every exercise, is near its exact probability (the derive exercises and brevity_prediction
    through ``class_variants.variant`` itself, the others through the choice it draws)."""
    names = [secrets.token_hex(16) for _ in range(200)]
    for exercise in EXERCISES:
        index = {choice: i for i, choice in enumerate(VERSIONS[exercise].choices)}
        group = {i: g for g, members in enumerate(_groups(exercise)) for i in members}
        if exercise in DERIVE or exercise == "brevity_prediction":
            params = {json.dumps(v.params, sort_keys=True): i
                      for i, v in enumerate(_versions(exercise))}
            drawn = [params[json.dumps(class_variants.variant(exercise, name, VERSIONS).params,
                                       sort_keys=True)]
                     for name in names]
        else:
            drawn = [index[class_variants.draw(exercise, name, VERSIONS)] for name in names]
        pairs = _interchangeable(exercise)
        shared = sum((group[a], group[b]) in pairs
                     for n, a in enumerate(drawn) for b in drawn[n + 1:])
        rate = shared / (len(names) * (len(names) - 1) / 2)
        assert rate <= float(shared_probability(exercise)) + 0.02, (exercise, rate)
        assert len(set(drawn)) >= min(20, len(index)) * 0.9, exercise  # the draws spread


def test_a_predict_variant_is_the_choice_its_name_draws():
    for exercise in PREDICT:
        for name in ("ml-2027", "x"):
            assert class_variants.variant(exercise, name, VERSIONS) == class_variants.build(
                exercise, class_variants.draw(exercise, name, VERSIONS), VERSIONS)


def test_the_two_names_differ_in_every_exercise():
    for exercise in EXERCISES:
        index = {choice: i for i, choice in enumerate(VERSIONS[exercise].choices)}
        group = {i: g for g, members in enumerate(_groups(exercise)) for i in members}
        a, b = (group[index[class_variants.draw(exercise, name, VERSIONS)]] for name in NAMES)
        assert (a, b) not in _interchangeable(exercise), exercise


# --------------------------------------------------------------------------------------------
# Two named copies, built and graded as autograding grades them (in the sandbox)
# --------------------------------------------------------------------------------------------


def _build(out: Path, variant: str | None) -> dict[str, dict]:
    """exercise -> {setup, answer (the instructor's), names, task, variant} of one built copy."""
    built = coursework.write_assignments(out / "source", ROOT / "notebooks",
                                         ROOT / "coursework" / "hidden", variant=variant)
    found = {}
    for b in built:
        cells = {c["metadata"]["nbgrader"]["grade_id"]: "".join(c["source"])
                 for c in json.loads(Path(b.path).read_text(encoding="utf-8"))["cells"]}
        for ex in b.exercises:
            if ex.id in b.grading["exercises"]:
                found[ex.id] = {"setup": cells["setup"], "answer": cells[ex.id],
                                "names": ex.answer_names, "task": cells[f"{ex.id}_task"],
                                "variant": b.grading["exercises"][ex.id]["variant"]}
    return found


@pytest.fixture(scope="module")
def copies(tmp_path_factory):
    root = tmp_path_factory.mktemp("variants")
    return {name: _build(root / (name or "public"), name) for name in (None, *NAMES)}


def _copy_cases(copy: dict, exercise: str) -> list[testing.Case]:
    return coursework.hidden_cases(_hidden_test(exercise), exercise, copy[exercise]["variant"],
                                   Path("hidden"))


def _grade(copy: dict, exercise: str, answer: str) -> tuple[bool, str]:
    """Grade ``answer`` after the built copy's setup cell on its hidden test (with the copy's
    values from its grading.json), judged as grading judges, in this process."""
    one = copy[exercise]
    verdict = grader.in_this_process(exercise, _copy_cases(copy, exercise),
                                     _defined(exercise, answer, one["setup"]))
    return verdict.passed, verdict.line


@pytest.mark.parametrize("exercise", EXERCISES)
def test_two_variants_and_the_public_version_grade_against_different_values(exercise, copies):
    values = [copies[name][exercise]["variant"] for name in (None, *NAMES)]
    assert values[0] != values[1] and values[0] != values[2] and values[1] != values[2], values
    for name in NAMES:  # and the task says so
        assert copies[name][exercise]["task"] != copies[None][exercise]["task"]


@pytest.mark.parametrize("exercise", EXERCISES)
def test_the_public_solution_scores_nothing_on_a_variant(exercise, copies):
    public_answer = copies[None][exercise]["answer"]
    assert _grade(copies[None], exercise, public_answer)[0], "the public copy's own solution"
    for name in NAMES:
        passed, line = _grade(copies[name], exercise, public_answer)
        assert not passed, f"{exercise}: the public solution passed variant {name}"


@pytest.mark.parametrize("exercise", EXERCISES)
def test_each_variants_own_solution_scores_full_marks(exercise, copies):
    for name in NAMES:
        passed, line = _grade(copies[name], exercise, copies[name][exercise]["answer"])
        assert passed, f"{exercise}, variant {name}: {line}"


@pytest.mark.parametrize("exercise", ["my_receptive_field", "attention_vs_conv"])
def test_the_grader_in_its_sandbox_agrees(exercise, copies):
    from convs2s.system import sandbox

    one = copies[NAMES[0]][exercise]
    for answer, passes in ((one["answer"], True), (copies[None][exercise]["answer"], False)):
        try:
            verdict = grader.grade(exercise, setup=one["setup"], answer=answer,
                                   answer_names=one["names"],
                                   cases=_copy_cases(copies[NAMES[0]], exercise))
        except sandbox.SandboxUnavailable as e:
            pytest.skip(f"no grading sandbox here: {e}")
        assert verdict.passed is passes, verdict.line


def test_the_same_name_gives_the_same_copy(tmp_path, copies):
    again = _build(tmp_path / "again", NAMES[0])
    assert again == copies[NAMES[0]]


def test_a_variant_copy_says_so_and_its_checks_only_record(copies):
    setup = copies[NAMES[0]]["my_receptive_field"]["setup"]
    assert "checks.graded_copy(class_version=True, records=[" in setup
    assert "'my_receptive_field'" in setup and NAMES[0] not in setup
    namespace: dict = {}
    try:
        exec(setup, namespace)  # noqa: S102 - the built setup cell
        assert checks.my_receptive_field(lambda k, n: 1 + n * (k - 1)) is True  # recorded only
        assert checks.my_receptive_field(lambda k, n: 0) is True
    finally:
        _core._graded, _core._class_version, _core._recorded = False, False, frozenset()


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

