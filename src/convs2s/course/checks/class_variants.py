"""A class's own version of the graded exercises: ``make student VARIANT=<name>``.

The public course notebooks show every solution (folded) and every measurement, so a graded copy
built from them is answered by them. A *variant* changes, for every predict and derive exercise,
what the public material answers: a predict exercise gets new numbers (kernel width, layers,
lengths, dimensions, a fraction), a derive exercise, whose answer is a formula the public
solution writes in general, gets a change of the thing it counts (blocks of several
convolutions, a grouped convolution, a beam, ...). The change is made in the task's text, in the
values the hidden test grades against (the exercise's ``variant`` in ``grading.json``) and in
the instructor's solution.

This module is the machinery only; it names no exercise. Each exercise's versions are the
instructor's, declared beside its hidden test: the hidden test file of its notebook
(``coursework/hidden/NN.py``, never installed or released) holds ``VERSIONS``, a dict from
exercise id to :class:`Versions`: its explicit finite list of choices, the builder that turns a
choice into a :class:`Variant`, and (for a predict exercise) what the public solution answers.
The course builder (``tools/coursework.py``) reads ``VERSIONS`` from the hidden folder it is
given and calls :func:`variant`.

Every exercise draws its version uniformly from its choices: at least 20, chosen so that two
classes with independent secrets share an answer (one class's right answer passes the other's
hidden test) with probability at most 0.05 (``tests/coursework/test_class_variants.py``
computes that probability exactly from every choice's answer and the exercises' acceptance). No
choice of a predict exercise is answered by the public solution or the public measurement: a
predict exercise is judged by the ``accept`` its check module declares
(``convs2s.course.checks.EXERCISES[id].accept``), the same function its check and its hidden
test call.

Implement and debug exercises have no variant (a public solution exists): the coursework
README's instructor section lists them as practice. Nor has a predict exercise graded on its
form only (its declaration names no ``accept``: its answer depends on the machine): the README
lists it as practice too.

The name seeds everything: the same name gives the same variant on any machine (sha256 of the
name and the exercise), so an instructor can rebuild a class's copy. The public version (no
name) holds the notebook's own numbers.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from fractions import Fraction

__all__ = ["NOTE", "Variant", "VariantError", "Versions", "answers_public", "apply_text",
           "build", "check_name", "draw", "fraction_words", "ordinal", "tex", "variant"]

#: How a derive exercise's note (:attr:`Variant.note`) starts.
NOTE = "**In this class's version:** "


@dataclass(frozen=True)
class Variant:
    """One exercise's version: what its hidden test reads, and what changes in its cells.

    Attributes:
        params: the values the hidden test grades against (the exercise's ``variant``).
        replace: (text in the task, its replacement), each found exactly once in the task.
        answer_replace: the same for the answer cell (a comment naming the numbers).
        note: a paragraph added to the task ("In this class's version ...").
        solution: the instructor's solution (the answer cell's code) for this version; "" keeps
            the notebook's.
        public: the public version (the notebook's own numbers): nothing in the cells changes.
    """

    params: dict
    replace: tuple[tuple[str, str], ...] = ()
    answer_replace: tuple[tuple[str, str], ...] = ()
    note: str = ""
    solution: str = ""
    public: bool = field(default=False)


class VariantError(ValueError):
    """A variant that cannot be applied (a text it should change is not in the notebook)."""


@dataclass(frozen=True)
class Versions:
    """The versions of one exercise, declared in its hidden test file's ``VERSIONS``.

    Attributes:
        choices: what a class's version is drawn from, uniformly (a tuple of hashable values).
        build: ``build(choice)``: the :class:`Variant` of one of ``choices``; ``build(None)`` is
            the public version (the notebook's own numbers, ``public=True``).
        public_answers: for a predict exercise, what the public solution answers (the course
            notebook's solution cell): no version may accept it, as none may accept the public
            measurement.
    """

    choices: tuple
    build: Callable[[object], Variant]
    public_answers: tuple = ()

    def __post_init__(self) -> None:
        if type(self.choices) is not tuple or not self.choices:
            raise TypeError("Versions.choices is a non-empty tuple of choices")
        if not callable(self.build):
            raise TypeError("Versions.build is a function: build(choice) -> Variant")
        if type(self.public_answers) is not tuple:
            raise TypeError("Versions.public_answers is a tuple (of the public solution's "
                            "answers)")


# --------------------------------------------------------------------------------------------
# Text helpers for the builders
# --------------------------------------------------------------------------------------------


def tex(f: Fraction) -> str:
    """``f`` in the notebooks' LaTeX: ``\\tfrac{1}{2}``, or a whole number."""
    if f.denominator == 1:
        return str(f.numerator)
    return f"\\tfrac{{{f.numerator}}}{{{f.denominator}}}"


_NUMBERS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten",
            "eleven", "twelve")
_PARTS = {2: ("half", "halves"), 3: ("third", "thirds"), 4: ("quarter", "quarters"),
          5: ("fifth", "fifths"), 6: ("sixth", "sixths"), 7: ("seventh", "sevenths"),
          8: ("eighth", "eighths"), 9: ("ninth", "ninths"), 10: ("tenth", "tenths"),
          11: ("eleventh", "elevenths"), 12: ("twelfth", "twelfths")}


def fraction_words(kept: int, parts: int) -> str:
    """``kept/parts`` in words: "a third", "three sevenths"."""
    one, many = _PARTS[parts]
    return f"a {one}" if kept == 1 else f"{_NUMBERS[kept]} {many}"


def ordinal(n: int) -> str:
    """``n`` as an ordinal: "1st", "2nd", "3rd", "11th", "21st"."""
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# --------------------------------------------------------------------------------------------
# Drawing a class's version
# --------------------------------------------------------------------------------------------


def _rng(name: str, exercise: str) -> random.Random:
    seed = hashlib.sha256(f"{name}\0{exercise}".encode()).digest()
    return random.Random(int.from_bytes(seed[:8], "big"))


def _declared_accept(exercise: str) -> Callable[[object, object], None] | None:
    """The acceptance ``exercise`` declares (a predict exercise's), or None."""
    from convs2s.course.checks import EXERCISES

    declared = EXERCISES.get(exercise)
    return declared.accept if declared is not None else None


def build(exercise: str, choice: object, versions: dict[str, Versions]) -> Variant:
    """``exercise``'s version for one of its choices (None: the public version)."""
    declared = versions[exercise]
    if choice is not None and choice not in declared.choices:
        raise VariantError(f"{exercise}: {choice!r} is not one of its choices")
    return declared.build(choice)


def draw(exercise: str, name: str, versions: dict[str, Versions]) -> object:
    """The choice the class ``name`` draws for ``exercise`` (uniformly from its choices, seeded
    by sha256 of the name and the exercise)."""
    return _rng(name, exercise).choice(versions[exercise].choices)


def answers_public(version: Variant, public: Variant, public_answers: tuple,
                   accept: Callable[[object, object], None] | None) -> bool:
    """Whether the public measurement (``public``'s expected value) or one of the public
    solution's ``public_answers`` passes ``version`` under ``accept`` (never, without one)."""
    if accept is None:
        return False
    for answer in [public.params["expected"], *public_answers]:
        try:
            accept(answer, version.params["expected"])
        except AssertionError:
            continue
        return True
    return False


def variant(exercise: str, name: str | None, versions: dict[str, Versions],
            accept: Callable[[object, object], None] | None = None) -> Variant | None:
    """``exercise``'s version for the class ``name`` (None: the public one), from its declared
    ``versions``; None when it has none (implement, debug, explain, practice).

    A predict exercise (``accept``: by default the one its check module declares,
    ``EXERCISES[exercise].accept``) is drawn again until neither the public solution nor the
    public measurement passes it (no choice is answered by them: the first draw is kept, unless a
    measurement changed)."""
    if exercise not in versions:
        return None
    if name is None:
        return build(exercise, None, versions)
    declared = versions[exercise]
    accept = accept if accept is not None else _declared_accept(exercise)
    rng = _rng(name, exercise)
    version = build(exercise, rng.choice(declared.choices), versions)
    if accept is not None:
        public = build(exercise, None, versions)
        for _ in range(50):
            if not answers_public(version, public, declared.public_answers, accept):
                break
            version = build(exercise, rng.choice(declared.choices), versions)
        else:
            raise VariantError(f"{exercise}: no variant of {name!r} differs enough from the "
                               "public numbers (its VERSIONS in the hidden test file)")
    return version


def apply_text(text: str, pairs: tuple[tuple[str, str], ...], where: str) -> str:
    """``text`` with each (old, new) replaced; VariantError when an ``old`` is not found once."""
    for old, new in pairs:
        if text.count(old) != 1:
            raise VariantError(f"{where}: the variant changes {old!r}, which the notebook's text "
                               f"holds {text.count(old)} times (it must hold it once): update "
                               "the exercise's VERSIONS (its hidden test file) with the notebook")
        text = text.replace(old, new)
    return text


def check_name(name: str) -> str:
    """A variant name as given on the command line, or VariantError (one line)."""
    if not isinstance(name, str) or not name.strip() or len(name) > 100 or not name.isprintable():
        raise VariantError(f"--variant {name[:40]!r}: give a short printable name (e.g. the "
                           "class and term, 'ml-2027-spring')")
    return name.strip()
