"""Check your exercise answers: ``convs2s.course.checks.<exercise>(your_answer)``.

Every exercise of the course notebooks has a function here, named after the exercise. It runs
the exercise's *visible* tests and prints one line: ``✓ my_glu: all 7 checks passed``, or what
failed and a hint. A wrong answer also raises ``AssertionError``, so the cell is marked wrong.
(Grading for credit runs hidden tests on the answer cell in a sandbox instead:
:mod:`convs2s.course.checks.grader`.) The checks of each notebook
live in their own module (``convs2s.course.checks.nb01`` ... ``nb08``); this package collects them.

Hints come in two steps: the first wrong try prints a nudge, the next ones a closer hint too;
``hint("<exercise>")`` prints both whenever you ask. No hint holds a solution's code. A predict
exercise's check shows its measurement only once your prediction holds, or when you ask with
``show_me("<exercise>")``; a graded copy turns ``hint`` and ``show_me`` off. A derive or implement
exercise may not call the package's own answer to it (``SHORTCUTS``): its check refuses that, and
grading removes those functions from the sandbox before the answer runs.
"""

from __future__ import annotations

from collections.abc import Callable

from convs2s.course.checks import nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08
from convs2s.course.checks._core import (
    HINTS,
    MEASUREMENTS,
    SHORTCUTS,
    Hint,
    ShortcutRefused,
    graded_copy,
    guarded,
    hint,
    is_graded,
    refusing,
    show_me,
)

_MODULES = (nb01, nb02, nb03, nb04, nb05, nb06, nb07, nb08)

#: Every check, by exercise name, in course order.
EXERCISES: dict[str, Callable] = {
    name: getattr(module, name) for module in _MODULES for name in module.__all__
}
globals().update(EXERCISES)

__all__ = ["EXERCISES", "HINTS", "MEASUREMENTS", "SHORTCUTS", "Hint", "ShortcutRefused",
           "graded_copy", "guarded", "hint", "is_graded", "refusing", "show_me", *EXERCISES]
