"""One definition of right at the margin, in a class's own versions of the numeric exercises.

A class's version (``make student``, :mod:`convs2s.course.checks.class_variants`) changes what
a derive exercise computes (``perplexity_from_loss``'s third unit ``base<b>``,
``separable_params``'s depth multiplier) and what a predict exercise measures (new numbers).
For each such exercise graded within a tolerance, the tests here take its versions (every one,
or a stated few where measuring one takes seconds), each as the class copy a named class draws
(``hidden(nb, variant=<name>)``), and answers written otherwise than the solution: float32
arithmetic, another type, the right value moved by a fraction of the tolerance (inside), or by
twice it (clearly outside). For each:

- the hidden test of that version accepts the inside ones and refuses the outside ones;
- the visible check that judges values, the course notebook's (a self-learner's), gives the
  same verdict to the same answer style at the same offset from its own (public) value: the
  class's grading keeps the check's tolerance (the constant the hidden test imports, or the
  ``accept`` both call);
- the class copy's visible check (its setup cell as ``make student`` writes it, then the check
  its test cell calls) accepts every one of them by recording it, and refuses, as grading does,
  an answer of the wrong form. It cannot judge the value: in a class's version a derive or
  predict check only records (``checks.graded_copy(class_version=True, records=[...])``), and
  the copy holds nothing of its version (no ``base``, no multiplier, no measurement: those are
  in the instructor's ``grading.json``), so that it is no oracle to try answers against.

Exact exercises (integer counts, lists of positions: ``my_receptive_field``,
``block_parameters``, ``cache_floats``, ``attention_macs``, ``path_length``,
``baseline_parameters``, ``same_padding_moves``, ``training_steps``) have no tolerance and are
not here; ``test_class_variants.py`` grades every version's own solution.
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
import pytest
import torch
from exercise_support import ROOT, hidden, notebook_path

from convs2s.course import checks
from convs2s.course.checks import _core, class_variants, nb02, nb04, nb05, nb08
from tools import coursework

#: The notebook of each exercise here.
NOTEBOOK = {"perplexity_from_loss": "05", "separable_params": "08", "residual_variance": "02",
            "scaled_context_variance": "04", "brevity_prediction": "06",
            "attention_vs_conv": "08"}
#: Offsets from the right value, in tolerances: inside (must hold) and clearly outside.
INSIDE, OUTSIDE = (-0.9, -0.5, 0.5, 0.9), (-2.0, 2.0)


@functools.cache
def _versions(exercise: str) -> class_variants.Versions:
    path = ROOT / "coursework" / "hidden" / f"{NOTEBOOK[exercise]}.py"
    return coursework.read_hidden(path).versions[exercise]


def _class_drawing(exercise: str, choice) -> str:
    """A class name whose copy draws ``choice`` for ``exercise`` (the draw is sha256 of the name:
    a predict version is kept as drawn, as no choice is answered by the public numbers,
    ``test_class_variants.py``)."""
    versions = {exercise: _versions(exercise)}
    for i in range(100_000):
        if class_variants.draw(exercise, f"class-{i}", versions) == choice:
            return f"class-{i}"
    raise AssertionError(f"no class name draws {exercise} {choice!r}")


def _grading(exercise: str, choice):
    """The hidden test of ``exercise`` in the copy of a class that draws ``choice``."""
    return getattr(hidden(NOTEBOOK[exercise], variant=_class_drawing(exercise, choice)),
                   exercise)


def _holds(judge, *answers) -> bool:
    """Whether ``judge`` (a visible check, or a hidden test from :func:`hidden`) accepts."""
    try:
        result = judge(*answers)
    except AssertionError:
        return False
    assert result in (True, None), "a check that returns False did not judge (not answered)"
    return True


@contextlib.contextmanager
def _class_copy(exercise: str):
    """The session of a class's graded copy: its setup cell, as ``make student`` writes it for
    any class's version (it names none), has run; yields the ``checks`` its test cells call."""
    nb = coursework.read_notebook(notebook_path(NOTEBOOK[exercise]))
    namespace: dict = {}
    try:
        exec(coursework._graded_setup(nb, class_version=True), namespace)  # noqa: S102
        assert _core.records_only(exercise)
        yield namespace["checks"]
    finally:
        _core._graded, _core._class_version, _core._recorded = False, False, frozenset()


def _recorded(check, capsys, *answers) -> None:
    """The class copy's ``check`` takes ``answers`` as recorded, saying nothing of the value."""
    capsys.readouterr()
    assert check(*answers) is True
    said = capsys.readouterr().out
    assert "answer recorded" in said and "✓" not in said and "✗" not in said


# --- perplexity_from_loss: a third unit, "base<b>" (every version) ---------------------------


def _units(base: int) -> dict[str, float]:
    return {"nats": math.e, "bits": 2.0, f"base{base}": float(base)}


def _perplexity_off(base: int, off: float, *, only_base: bool = False):
    """The version's right perplexity, times 1 + ``off`` (in every unit, or in base<b> only)."""
    def perplexity_from_loss(loss, unit="nats"):
        moved = unit == f"base{base}" or not only_base
        return _units(base)[unit] ** loss * (1 + off * moved)
    return perplexity_from_loss


def _perplexity_float32_pow(base: int):
    def perplexity_from_loss(loss, unit="nats"):
        b = torch.tensor(_units(base)[unit], dtype=torch.float32)
        return b ** torch.tensor(loss, dtype=torch.float32)  # a 0-dim float32 tensor
    return perplexity_from_loss


def _perplexity_float32_exp(base: int):
    def perplexity_from_loss(loss, unit="nats"):
        return np.exp(np.float32(loss) * np.log(np.float32(_units(base)[unit])))  # np.float32
    return perplexity_from_loss


@pytest.mark.parametrize("base", _versions("perplexity_from_loss").choices)
def test_perplexity_each_class_version_grades_at_the_checks_tolerance(base, capsys):
    tol = nb05.PERPLEXITY_REL_TOL
    grading = _grading("perplexity_from_loss", base)
    answers = [(_perplexity_float32_pow(base), True), (_perplexity_float32_exp(base), True),
               *((_perplexity_off(base, f * tol), f in INSIDE) for f in INSIDE + OUTSIDE)]
    for answer, holds in answers:
        assert _holds(grading, answer) is holds, (base, answer)
        assert _holds(checks.perplexity_from_loss, answer) is holds, (base, answer)  # nats, bits
    # the unit only this version has: the same tolerance (no visible check computes it)
    for f in INSIDE + OUTSIDE:
        assert _holds(grading, _perplexity_off(base, f * tol, only_base=True)) is (f in INSIDE)

    def wrong_form(loss, unit="nats"):
        return str(_units(base)[unit] ** loss)

    assert not _holds(grading, wrong_form)
    with _class_copy("perplexity_from_loss") as copy_checks:
        for answer, _ in answers:
            _recorded(copy_checks.perplexity_from_loss, capsys, answer)
        assert not _holds(copy_checks.perplexity_from_loss, wrong_form)


# --- separable_params: a depth multiplier (every version) -------------------------------------


def _separable(m: int, style):
    """``separable_params`` and ``saving`` for depth multiplier ``m``: the ratio in float32
    (``style`` "float32") or the right one times 1 + ``style`` relative tolerances."""
    def separable_params(c_in, c_out, k, bias=True):
        return m * c_in * k + m * c_in * c_out + (c_out if bias else 0)

    def saving(c_in, c_out, k):
        full = c_in * c_out * k + c_out
        if style == "float32":
            return (torch.tensor(full, dtype=torch.float32)
                    / torch.tensor(separable_params(c_in, c_out, k), dtype=torch.float32))
        return full / separable_params(c_in, c_out, k) * (1 + style * nb08.SAVING_REL_TOL)

    return separable_params, saving


@functools.cache
def _public_separable_holds(style) -> bool:
    """The course notebook's check (it judges the public version, m = 1) on that style."""
    return _holds(checks.separable_params, *_separable(1, style))


@pytest.mark.parametrize("m", _versions("separable_params").choices)
def test_separable_params_each_class_version_grades_at_the_checks_tolerance(m, capsys):
    grading = _grading("separable_params", m)
    styles = [("float32", True), *((f, f in INSIDE) for f in INSIDE + OUTSIDE)]
    for style, holds in styles:
        assert _holds(grading, *_separable(m, style)) is holds, (m, style)
        assert _public_separable_holds(style) is holds, style
    params, saving = _separable(m, 0.0)

    def float_count(c_in, c_out, k, bias=True):
        return float(params(c_in, c_out, k, bias))

    assert not _holds(grading, float_count, saving)
    with _class_copy("separable_params") as copy_checks:
        for style, _ in styles:
            _recorded(copy_checks.separable_params, capsys, *_separable(m, style))
        assert not _holds(copy_checks.separable_params, float_count, saving)


# --- predict exercises: new numbers, a new measurement ---------------------------------------

#: The right value moved by ``f`` tolerances, as each exercise's ``accept`` (its check's and its
#: hidden test's) and its task state the tolerance.
MOVED = {
    "residual_variance": lambda v, f: v * nb02.VARIANCE_FACTOR ** f,  # "within a factor of 5"
    "scaled_context_variance": lambda v, f: v * (1 + f * nb04.SCALED_TOLERANCE),  # "3 %"
    "brevity_prediction": lambda v, f: v + f * 1.0,  # "within 1 point"
    "attention_vs_conv": lambda v, f: v * (1 + f * 0.02),  # "within 2 %"
}
#: Each value in another type than the solution's float, in turn.
STYLES = (float, np.float64, lambda v: torch.tensor(v, dtype=torch.float64),
          lambda v: torch.tensor([v]))


def _predict_versions() -> list:
    """Every version where measuring one is quick (BLEU of made-up sentences, a FLOP count);
    where it takes seconds (a 10-block encoder's variance, 200,000 attention draws), the first,
    the middle and the last choice: the extremes of what is measured."""
    chosen = []
    for exercise in MOVED:
        choices = _versions(exercise).choices
        if exercise in ("residual_variance", "scaled_context_variance"):
            choices = tuple(dict.fromkeys((choices[0], choices[len(choices) // 2],
                                           choices[-1])))
        chosen += [pytest.param(exercise, c, id=f"{exercise}-{c}") for c in choices]
    return chosen


@functools.cache
def _expected(exercise: str, choice) -> float:
    """What the version of ``choice`` (None: the public one) measures, as grading.json holds
    it."""
    return _versions(exercise).build(choice).params["expected"]


@functools.cache
def _public_check_holds(exercise: str, f: float) -> bool:
    """The course notebook's check (it measures the public numbers) on its value moved by f."""
    return _holds(getattr(checks, exercise), MOVED[exercise](_expected(exercise, None), f))


@pytest.mark.parametrize(("exercise", "choice"), _predict_versions())
def test_a_predict_class_version_grades_at_the_checks_tolerance(exercise, choice, capsys):
    grading = _grading(exercise, choice)
    expected = _expected(exercise, choice)
    offsets = [(f, f in INSIDE) for f in INSIDE + OUTSIDE]
    answers = []
    for n, (f, holds) in enumerate(offsets):
        answer = STYLES[n % len(STYLES)](MOVED[exercise](expected, f))
        answers.append(answer)
        assert _holds(grading, answer) is holds, (exercise, choice, f, answer)
        assert _public_check_holds(exercise, f) is holds, (exercise, f)
    assert not _holds(grading, str(expected))
    with _class_copy(exercise) as copy_checks:
        for answer in answers:
            _recorded(getattr(copy_checks, exercise), capsys, answer)
        assert not _holds(getattr(copy_checks, exercise), str(expected))
