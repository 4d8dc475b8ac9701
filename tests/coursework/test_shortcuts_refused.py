"""A derive or implement exercise may not call the package's (or PyTorch's) own answer to it:
each declared shortcut (``Exercise.shortcuts``) is refused by the exercise's check and by its
hidden test, also when the learner's code catches the refusal, and the refused functions work
again afterwards.

The answers that take a shortcut are the hidden-test files' shortcut samples
(``SAMPLES[<id>].shortcut`` in ``coursework/hidden/NN.py``, each the text of an answer cell):
every exercise that declares shortcuts has them, and each declared shortcut is the one some
sample is refused for. Here each runs through the check, as in the course notebook, and through
its hidden test in this process (``grader.in_this_process``: the refusal the checks use);
``test_check_and_grading_agree.py`` runs the same samples through sandboxed grading, which
removes the shortcuts from the sandbox."""

import math
import re
from pathlib import Path

import pytest
import torch
import torch.nn.functional as F

from convs2s.course import checks
from convs2s.course.attention_maps import attention_entropy
from convs2s.course.checks import _core, grader
from convs2s.course.receptive_field import conv_path_length, receptive_field, rnn_path_length
from convs2s.data import Vocab
from convs2s.model.variants import separable_conv1d_parameters
from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
#: The exercises that declare shortcuts (the registry).
WITH_SHORTCUTS = [name for name, ex in checks.EXERCISES.items() if ex.shortcuts]
#: What a refusal says: the check's and the hidden test's name the call and say why.
REFUSED = re.compile(r"it called .*; ")


@pytest.fixture(scope="module")
def setups() -> dict[str, coursework.SampleSetup]:
    """exercise -> its samples, setup cells and public hidden cases (as ``--check-hidden``)."""
    return {setup.exercise: setup for setup in
            coursework.sample_setups(ROOT / "notebooks", ROOT / "coursework" / "hidden")}


def _hidden_test_says(exercise: str, cases: list, answers: dict) -> str:
    """Why the hidden test's cases fail ``answers`` in this process (``grader.in_this_process``,
    which raises the refusal when its watch ends); fails the test if they hold."""
    try:
        verdict = grader.in_this_process(exercise, cases, answers)
    except AssertionError as e:  # the refusal (ShortcutRefused)
        return str(e)
    assert not verdict.passed, verdict.line
    return verdict.line


def _exercise_refusing(target: str) -> str:
    """The exercise that declares ``target`` ("module:function") a shortcut."""
    (name,) = [name for name, ex in checks.EXERCISES.items()
               if any(s.target == target for s in ex.shortcuts)]
    return name


def test_every_shortcut_resolves_and_every_exercise_with_shortcuts_has_shortcut_samples(setups):
    assert WITH_SHORTCUTS
    for name in WITH_SHORTCUTS:
        for shortcut in checks.EXERCISES[name].shortcuts:
            owner, attr = _core._resolve(shortcut.target)
            assert hasattr(owner, attr), shortcut.target
    missing = [name for name in WITH_SHORTCUTS
               if name not in setups or setups[name].samples is None
               or not setups[name].samples.shortcut]
    assert not missing, f"no shortcut samples in SAMPLES for: {', '.join(missing)}"


@pytest.mark.parametrize("exercise", WITH_SHORTCUTS)
def test_the_check_and_the_hidden_test_refuse_each_shortcut_sample(exercise, setups, capsys):
    """Each shortcut sample: the check fails it with the refusal (and prints ✗), the hidden
    test's cases fail it with the refusal; and every shortcut the exercise declares is the one
    some sample's check names (a sample for each)."""
    setup = setups[exercise]
    named = set()
    for answer in setup.samples.shortcut:
        with coursework.fresh_checks_session():
            with pytest.raises(AssertionError, match=REFUSED) as refused:
                getattr(checks, exercise)(*coursework.define_answer(setup, answer))
        assert f"✗ {exercise}" in capsys.readouterr().out, answer
        named |= {s.label for s in checks.EXERCISES[exercise].shortcuts
                  if f"it called {s.label};" in str(refused.value)}
        values = coursework.define_answer(setup, answer)
        answers = dict(zip(setup.answer_names, values, strict=True))
        said = _hidden_test_says(exercise, setup.cases, answers)
        assert REFUSED.search(said), (said, answer)
    declared = {s.label for s in checks.EXERCISES[exercise].shortcuts}
    assert named == declared, f"no shortcut sample is refused for: {declared - named}"


def test_a_shortcut_whose_refusal_is_caught_is_still_refused(setups):
    exercise = _exercise_refusing("convs2s.course.receptive_field:receptive_field")

    def sneaky(k, n_layers):
        try:
            return receptive_field(k, n_layers)
        except Exception:  # noqa: BLE001 - what a learner might write
            return 1 + n_layers * (k - 1)

    with pytest.raises(AssertionError, match="it called receptive_field.receptive_field"):
        getattr(checks, exercise)(sneaky)
    said = _hidden_test_says(exercise, setups[exercise].cases, {exercise: sneaky})
    assert "it called receptive_field.receptive_field" in said


def test_the_refused_functions_work_again_afterwards(setups):
    """After every shortcut sample's check, each declared shortcut is the same function, with
    the same code, as before, and works."""

    def declared():
        found = {}
        for name in WITH_SHORTCUTS:
            for shortcut in checks.EXERCISES[name].shortcuts:
                owner, attr = _core._resolve(shortcut.target)
                function = getattr(owner, attr)
                found[shortcut.target] = (function, getattr(function, "__code__", None))
        return found

    before = declared()
    for exercise in WITH_SHORTCUTS:
        setup = setups[exercise]
        for answer in setup.samples.shortcut:
            with coursework.fresh_checks_session(), pytest.raises(AssertionError):
                getattr(checks, exercise)(*coursework.define_answer(setup, answer))
    after = declared()  # (a classmethod is a new bound method at each look-up: equal, not the same)
    assert all(after[t][0] == f and after[t][1] is code for t, (f, code) in before.items())
    assert receptive_field(3, 2) == 5 and conv_path_length(9, 9) == 2 and rnn_path_length(4) == 4
    assert F.glu(torch.ones(1, 2), -1).shape == (1, 1)
    assert Vocab.build([["a", "a"]], min_freq=2).itos[-1] == "a"
    assert sum(p.numel() for p in torch.nn.GRUCell(1, 1).parameters()) == 12
    assert math.isfinite(float(attention_entropy(torch.eye(2))))
    assert separable_conv1d_parameters(1, 1, 1) == 3


def test_a_refusal_changes_nothing_shared_and_other_threads_run_as_before():
    """A check watches the learner's calls with a profiler on its own thread: F.glu is the same
    function, with the same code, inside the block and after it, and another thread calling it
    meanwhile is not refused."""
    import threading

    from convs2s.course.checks import refusing

    exercise = _exercise_refusing("torch.nn.functional:glu")
    real_glu, real_code = F.glu, F.glu.__code__
    inside, done = threading.Event(), threading.Event()
    elsewhere = []

    def other_thread():
        inside.wait(timeout=60)
        elsewhere.append(F.glu(torch.ones(1, 2), -1).shape)
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with refusing(exercise):
        assert F.glu is real_glu and F.glu.__code__ is real_code
        inside.set()
        assert done.wait(timeout=60), "the other thread's call did not end while the check ran"
    thread.join(timeout=60)
    assert elsewhere == [(1, 1)]
    with pytest.raises(_core.ShortcutRefused, match="it called F.glu"):
        with refusing(exercise):
            glu = F.glu  # an alias made before the call
            glu(torch.ones(1, 2), -1)
    assert F.glu is real_glu and F.glu.__code__ is real_code


def test_no_code_object_of_a_function_is_replaced_anywhere_in_the_package():
    package = Path(_core.__file__).resolve().parents[2]
    offenders = [str(p) for p in package.rglob("*.py") if ".__code__ =" in p.read_text()
                 or "__code__, " in p.read_text() and "= saved" in p.read_text()]
    assert offenders == []


def test_hint_and_show_me_of_a_value_that_is_not_a_name_say_so_in_one_line(capsys):
    checks.hint([1])
    checks.show_me({"a": 1})
    out = capsys.readouterr().out
    assert out.count("\n") == 2 and "give the exercise's name as a string" in out
