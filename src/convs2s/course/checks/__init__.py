"""Check your exercise answers: ``convs2s.course.checks.<exercise>(your_answer)``.

Every exercise of the course notebooks is declared once, in its notebook's check module
(``convs2s.course.checks.nb01`` ... ``nb08``), by ``@exercise(...)`` on its check function:
its hints, the form of its answer, what it refuses, its acceptance and measurement
(:class:`Exercise`; all of them in :data:`EXERCISES`). ``checks.<exercise>`` is that check. It
runs the exercise's *visible* tests and prints one line: ``✓ <exercise>: all 7 checks passed``, or
what failed and a hint. A wrong answer also raises ``AssertionError``, so the cell is marked
wrong. (Grading for credit runs hidden tests on the answer cell in a sandbox instead:
:mod:`convs2s.course.checks.grader`.)

Hints come in two steps: the first wrong try prints a nudge, the next ones a closer hint too;
``hint("<exercise>")`` prints both whenever you ask. No hint holds a solution's code. A predict
exercise's check shows its measurement only once your prediction holds, or when you ask with
``show_me("<exercise>")``; a graded copy turns ``hint`` and ``show_me`` off. A derive or implement
exercise may not call the package's own answer to it (its ``shortcuts``): its check refuses
that, and grading removes those functions from the sandbox before the answer runs.
"""

from __future__ import annotations

from collections.abc import Callable

# Importing the check modules declares their exercises (in course order).
from convs2s.course.checks import nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08  # noqa: F401
from convs2s.course.checks._core import (
    EXERCISES,
    Exercise,
    Hint,
    Shortcut,
    ShortcutRefused,
    graded_copy,
    guarded,
    hint,
    is_graded,
    refusing,
    show_me,
)

__all__ = ["EXERCISES", "Exercise", "Hint", "Shortcut", "ShortcutRefused", "graded_copy",
           "guarded", "hint", "is_graded", "refusing", "show_me"]


def __getattr__(name: str) -> Callable[..., bool]:
    """``checks.<exercise>``: the check the exercise's module declares."""
    declared = EXERCISES.get(name)
    if declared is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return declared.check


def __dir__() -> list[str]:
    return sorted({*globals(), *EXERCISES})
