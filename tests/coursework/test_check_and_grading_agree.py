"""For every autograded exercise, the visible check and grading give the same verdict.

The sample answers are the instructor's, beside the hidden tests: each ``coursework/hidden/NN.py``
holds ``SAMPLES`` (:class:`convs2s.course.checks.testing.Samples`, each the text of an answer
cell): right answers written in different styles (a loop, a vectorised one, one that works in
place, helpers of any name, other variable names, numbers as Python, NumPy or one-element tensor
values where the check's form allows them), wrong ones (the typical mistakes) and ones that call
what the exercise declares as a shortcut. Each runs through (``tools.coursework.run_samples``,
the code ``python -m tools.coursework --check-hidden`` runs):

- the check, as in the course notebook: the answer cell run in a namespace holding the setup
  cell's imports (``answer_rules.define``, which keeps the cell's text as IPython does), then
  ``checks.<exercise>(...)``;
- grading, as ``nbgrader autograde`` does it (``coursework/sandbox_grading.py``):
  ``grader.grade`` runs the setup cell of the graded copy (the notebook's exercise-setup cell,
  then ``checks.graded_copy(...)``: ``tools/coursework.py``'s ``_graded_setup``) and the answer
  cell's text in the bubblewrap sandbox, on the calls of the exercise's hidden test (the public
  version), and judges what came back outside it.

A right answer must pass both, a wrong one fail both, a shortcut one be refused by both for
calling the shortcut. A right answer that breaks only a static rule of ``answer_rules`` (an
import it does not list, a private module part) passes both too: the static read is advisory
(the check notes it, grading flags it for the instructor) and takes no marks; grading must flag
it. On the code before grading moved out of the kernel this failed: a helper named like a
private function scored 0, 2.25 for 16/7 passed the check and failed the hidden test, an
in-place sort passed the check only.

Grading starts one sandbox per answer (about a second each), so each exercise's answers are one
test, graded a few at a time. These run the real sandbox: never skipped in CI.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sandbox_support import needs_sandbox

from convs2s.course.checks import EXERCISES, answer_rules
from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS, HIDDEN = ROOT / "notebooks", ROOT / "coursework" / "hidden"


def _with_hidden_tests() -> list[str]:
    """The registry's exercises that have a hidden test (read from the hidden-test files)."""
    tested = {name for path in sorted(HIDDEN.glob("[0-9][0-9].py"))
              for name in coursework.read_hidden(path)}
    return [name for name in EXERCISES if name in tested]


GRADED = _with_hidden_tests()


@pytest.fixture(scope="module")
def setups() -> dict[str, coursework.SampleSetup]:
    """exercise -> its samples and what the check and grading need, from notebooks/ and
    coursework/hidden/ (as ``--check-hidden`` reads them)."""
    return {setup.exercise: setup for setup in coursework.sample_setups(NOTEBOOKS, HIDDEN)}


def test_every_exercise_with_a_hidden_test_has_right_and_wrong_samples(setups):
    assert GRADED and sorted(setups) == sorted(GRADED)
    missing = [name for name, setup in setups.items()
               if setup.samples is None or not setup.samples.right or not setup.samples.wrong]
    assert not missing, f"no right and wrong samples in SAMPLES for: {', '.join(missing)}"


def test_some_right_samples_break_a_static_rule(setups):
    """The static read takes no marks: right samples that break one of its rules (four today:
    an import it does not list) are among the samples, so that the test below holds the check
    and grading to passing them and grading to flagging them."""
    flagged = [answer for name, setup in setups.items() if setup.samples is not None
               for answer in setup.samples.right
               if answer_rules.problems(answer, EXERCISES[name].forbidden_names)]
    assert len(flagged) >= 4, flagged


@needs_sandbox
@pytest.mark.parametrize("exercise", GRADED)
def test_the_check_and_grading_agree(exercise, setups):
    """Every sample of ``exercise``: right ones pass the check and grading (and grading flags
    the static rules one breaks), wrong ones fail both, shortcut ones are refused by both for
    the shortcut. All disagreements are reported together, each with the whole answer."""
    setup = setups[exercise]
    if setup.samples is None:
        pytest.fail(f"no SAMPLES for {exercise} in {setup.hidden_path}")
    disagree = [f"{verdict.problem}\n{verdict.answer}"
                for verdict in coursework.run_samples(setup) if verdict.problem is not None]
    assert not disagree, "\n\n".join(disagree)
