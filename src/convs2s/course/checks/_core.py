"""The machinery behind ``convs2s.course.checks``: one run per check, one case per visible test.

The checks are self-contained: they build their own tiny, seeded models and data on the CPU,
take well under a second each, and leave PyTorch's global random state as they found it.

Hints come in two steps (:class:`Hint`): the first wrong try of a check prints a *nudge* that
points at the idea; the second and later wrong tries of the same check in this Python session
print a *closer* hint too; ``convs2s.course.checks.hint("<exercise>")`` prints both on request,
before any try. Neither ever holds a solution's code (tests/coursework/test_hints.py holds every
hint against every solution cell of the notebooks).

A *predict* exercise's check never shows the value it grades before the prediction holds: a wrong
prediction is told only that it did not hold (and a hint); a right one is shown the measurement.
A self-learner who wants the measurement without a right prediction asks for it explicitly with
``convs2s.course.checks.show_me("<exercise>")``. A graded copy (the nbgrader release that
``make student`` builds) starts with :func:`graded_copy`: there ``show_me`` and ``hint`` are off
and a wrong try prints the nudge only, never the closer hint.

Every answer is read through :func:`_answer` before it is compared: a value of the wrong kind (a
NaN, a number written as a string, a bool where a count is asked, an object with its own
``__eq__``, an iterator that does not end) fails its case with one line saying what kind of
value is expected. A ``sys.exit()`` in the learner's code fails the check with one line too.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
import numbers
import operator
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np
import torch
from torch import Tensor, nn

_PAD = 1  # the padding id of every made-up batch
_WORDS = [f"w{i}" for i in range(30)]  # the made-up vocabulary


# --------------------------------------------------------------------------------------------
# Hints in two steps
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Hint:
    """What a wrong answer is told: ``nudge`` first, ``closer`` from the second wrong try on.

    The nudge points at the idea (which quantity, which property to look at); the closer hint
    names the step to take. Neither holds the solution's code.
    """

    nudge: str
    closer: str

    def __post_init__(self) -> None:
        if not (self.nudge.strip() and self.closer.strip()):
            raise ValueError("a Hint needs both a nudge and a closer hint")


#: Wrong tries so far in this session, by check name.
_wrong_tries: Counter[str] = Counter()
#: True in a graded copy (:func:`graded_copy`).
_graded = False
#: True in a graded copy of a class's own version (its numbers are not the public ones).
_class_version = False
#: The exercises whose check only records the answer in this graded copy (:func:`graded_copy`).
_recorded: frozenset[str] = frozenset()


# --------------------------------------------------------------------------------------------
# One declaration per exercise
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Shortcut:
    """A function whose call is an exercise's own answer: ``target`` is ``"module:Attr.attr"``,
    ``label`` what the learner is told it called, ``why`` why it is refused. ``stated_as`` is
    the name the task states it under, where that is not ``label`` (``F.glu`` for its
    ``torch._C._nn.glu``): every refusal is stated in the task (a test reads the notebooks).
    ``operator``: the PyTorch operator the function computes (``"aten::glu"``), which grading
    also refuses at PyTorch's dispatcher, by every route through it (``torch.ops.aten.glu``);
    only for an operator no honest answer's computation dispatches."""

    target: str
    label: str
    why: str
    stated_as: str | None = None
    operator: str | None = None

    @property
    def stated(self) -> str:
        """The name the exercise's task gives this refused function."""
        return self.stated_as or self.label


@dataclass(frozen=True)
class Exercise:
    """Everything about one exercise that the learner's package holds, declared once beside its
    check with :func:`exercise`. Its kind and points are the notebook's (the task cell's
    metadata); its hidden test, class versions and sample answers are the instructor's
    (``coursework/hidden/NN.py``): no solution is ever in the package.

    Attributes:
        id: the exercise's name: its check is ``checks.<id>``, its hidden test ``<id>(variant)``.
        check: the visible check (see :func:`check`).
        hint: the nudge and closer hint a wrong answer earns (``checks.hint(id)``).
        form: how the answer must look where the check only records it (a predict exercise in a
            graded copy, a derive one in a class's version): raises :class:`WrongForm`.
        accept: a predict exercise's acceptance, ``accept(prediction, measured)``: the check and
            the hidden test call the same function, outside the sandbox.
        measure: a predict exercise's measurement with the notebook's numbers (what ``accept``
            compares with in the course notebook).
        show: the lines ``checks.show_me(id)`` (and a prediction that held) prints.
        shortcuts: what the answer may not call (the check refuses a call; grading removes these
            from the sandbox before the answer runs).
        forbidden_names: names whose use in the answer cell the advisory static read flags
            (:mod:`convs2s.course.checks.answer_rules`).
        shortcut_hint: what a refused shortcut is told.
    """

    id: str
    check: Callable[..., bool]
    hint: Hint
    form: Callable[..., object] | None = None
    accept: Callable[[object, object], None] | None = None
    measure: Callable[[], object] | None = None
    show: Callable[[], list[str]] | None = None
    shortcuts: tuple[Shortcut, ...] = ()
    forbidden_names: frozenset[str] = frozenset()
    shortcut_hint: Hint | None = None


#: Every exercise with a check, by id, in course order (the check modules declare them).
EXERCISES: dict[str, Exercise] = {}


def exercise(*, hint: Hint, form: Callable[..., object] | None = None,
             accept: Callable[[object, object], None] | None = None,
             measure: Callable[[], object] | None = None,
             show: Callable[[], list[str]] | None = None, shortcuts: tuple[Shortcut, ...] = (),
             forbidden_names: frozenset[str] | set[str] = frozenset(),
             shortcut_hint: Hint | None = None) -> Callable[[Callable], Callable[..., bool]]:
    """Declare an exercise: decorate its check function (named as the exercise) with what the
    exercise is (:class:`Exercise`); returns the check (:func:`check`)."""

    def declare(fn: Callable) -> Callable[..., bool]:
        if fn.__name__ in EXERCISES:
            raise ValueError(f"the exercise {fn.__name__!r} is declared twice")
        checked = check(fn)
        EXERCISES[fn.__name__] = Exercise(
            id=fn.__name__, check=checked, hint=hint, form=form, accept=accept, measure=measure,
            show=show, shortcuts=tuple(shortcuts), forbidden_names=frozenset(forbidden_names),
            shortcut_hint=shortcut_hint)
        return checked

    return declare


def graded_copy(class_version: bool = False, records: tuple[str, ...] | list[str] = ()) -> None:
    """Called by the first cell of a graded (nbgrader release) copy: from now on in this session
    ``show_me`` and ``hint`` are off, a wrong try prints only the nudge, and the checks of the
    exercises in ``records`` only record the answer (whether it holds is decided when the
    assignment is autograded, never in the student's kernel). The assignment builder passes
    the predict exercises there, and in a class's own version the derive ones too (the kinds are
    the notebook's). The copy never names the class's variant (a secret of the instructor's)."""
    global _graded, _class_version, _recorded
    if not isinstance(class_version, bool) or isinstance(records, str) \
            or not all(isinstance(r, str) for r in records):
        raise TypeError("graded_copy(class_version=True or False, records=[exercise ids])")
    _graded = True
    _class_version = class_version
    _recorded = frozenset(records)
    print(f"graded copy{' (your class’s own version)' if class_version else ''}: a check that "
          "only records your answer says so (autograding decides whether it holds); other "
          "checks say whether your answer held, never the value they grade; a wrong try prints "
          "one hint; checks.hint and checks.show_me are off")


def is_graded() -> bool:
    """Whether this session runs a graded copy (:func:`graded_copy` was called)."""
    return _graded


def records_only(exercise: str) -> bool:
    """Whether ``exercise``'s check only records the answer here (:func:`graded_copy`)."""
    return _graded and exercise in _recorded


def _on_request(exercise: str | Callable, table: dict, off: str, known: str):
    """(name, entry) of what ``checks.show_me``/``checks.hint`` was asked for, or None after
    printing why not: ``off`` in a graded copy, the list of ``known`` names for an unknown one."""
    name = getattr(exercise, "__name__", exercise)
    if not isinstance(name, str):
        print(f"… give the exercise's name as a string, e.g. {_known_example(table)}")
        return None
    if _graded:
        print(f"… {off} is off in a graded copy: {name}'s check says what it may")
        return None
    if name not in table:
        print(f"… no {known} is called {name!r}; the ones there are: {', '.join(table)}")
        return None
    return name, table[name]


def _known_example(table: dict) -> str:
    return f'"{next(iter(table))}"' if table else '"<exercise>"'


def show_me(exercise: str | Callable) -> None:
    """Print the measurement a predict exercise compares with (a self-learner's "show me"; off in
    a graded copy): ``checks.show_me("<exercise>")``. Ask after you have predicted."""
    shown = {name: ex.show for name, ex in EXERCISES.items() if ex.show is not None}
    found = _on_request(exercise, shown, "show_me", "predict exercise with a measurement")
    if found is None:
        return
    name, lines = found
    print(f"the measurement behind {name} (a prediction written after this is no longer one):")
    for line in lines():
        print(f"  {line}")


def hint(exercise: str | Callable) -> None:
    """Print both hints of ``exercise`` (a name or the check itself):
    ``checks.hint("<exercise>")``."""
    hints = {name: ex.hint for name, ex in EXERCISES.items()}
    found = _on_request(exercise, hints, "checks.hint", "exercise with hints")
    if found is not None:
        name, h = found
        print(f"hint for {name}: {h.nudge}\ncloser hint: {h.closer}")


def _hint_lines(name: str, hint: Hint | str) -> list[str]:
    """Count a wrong try of check ``name``; the hint lines it earns (nudge, then closer)."""
    _wrong_tries[name] += 1
    if isinstance(hint, str):  # a one-step hint
        return [f"hint: {hint}"]
    if _wrong_tries[name] == 1 or _graded:
        return [f"hint: {hint.nudge}"]
    return [f"hint: {hint.nudge}", f"closer hint: {hint.closer}"]


# --------------------------------------------------------------------------------------------
# The machinery: one run per check function, one case per visible test
# --------------------------------------------------------------------------------------------


class CheckFailed(AssertionError):
    """A check that did not pass: its line and hint are already printed. In Jupyter the cell
    fails with this one line, not a traceback through the checks' code (IPython shows what
    ``_render_traceback_`` returns instead of the traceback)."""

    def _render_traceback_(self) -> list[str]:
        return [f"{type(self).__name__}: the check did not pass (what failed and a hint are "
                "printed above)"]


class NotAnswered(Exception):
    """Raised inside a check when the learner has not answered yet; :func:`check` returns False."""


def check(fn: Callable) -> Callable[..., bool]:
    """Make ``fn(*answers)`` a check: True when it passes, False when not answered yet.

    A wrong answer still raises ``AssertionError`` (with the hint already printed). An answer
    that is ``None``, or a function that raises ``NotImplementedError`` (a stub), is "not
    answered yet": the check says what to do and returns False, so a notebook still runs top to
    bottom, while a grade cell (``assert checks.<id>(...)``) scores it 0. ``SystemExit``
    raised by the answer's code is a failed check (one line), not the end of the program.

    Before anything runs, the cell that defined each function answer is read
    (:func:`~convs2s.course.checks.answer_rules.problems`, when the session still holds its
    text): what it flags is said in one line, as grading lists it for the instructor; it fails
    nothing. Where the check only records (:func:`records_only`), it checks the answer's form
    (:attr:`Exercise.form`) and says it was recorded.
    """

    @functools.wraps(fn)
    def wrapper(*answers) -> bool:
        name = fn.__name__
        if any(answer is None for answer in answers):
            print(f"… {name}: not answered yet — fill in the cell above, run it, then run "
                  "this check again (or open the solution below)")
            return False
        _note_flagged(name, answers)
        answers = tuple(guarded(name, answer) for answer in answers)
        try:
            if records_only(name):
                run = _Run(name)
                with run.case("the answer's form", FORM_HINT):
                    EXERCISES[name].form(*answers)
                print(f"… {name}: answer recorded — autograding decides whether it holds (a "
                      "graded copy's check does not say)")
                return True
            fn(*answers)
        except NotAnswered:
            return False
        except SystemExit:  # raised by the learner's code outside a case
            line = f"{name}: {_EXITED}"
            print(f"✗ {line}")
            raise CheckFailed(line) from None
        return True

    return wrapper


def _note_flagged(name: str, answers: tuple) -> None:
    """Say (one line, no failure) what the static read flags in the cell that defined a
    function answer: grading lists the same for the instructor, and takes no marks for it."""
    from convs2s.course.checks import answer_rules

    for answer in answers:
        source = answer_rules.source_of(answer) if callable(answer) else None
        declared = EXERCISES.get(name)
        forbidden = declared.forbidden_names if declared else frozenset()
        found = answer_rules.problems(source, forbidden) if source else []
        if found:
            print(f"note: {name}: the answer's cell {found[0]} (not an error: your instructor "
                  "sees what this read flags; the rules are in "
                  "convs2s.course.checks.answer_rules.RULES)")


#: What an answer of the wrong form is told where its check only records it.
FORM_HINT = Hint(nudge="give the answer in the form the task asks for (the comment in the answer "
                       "cell says which)",
                 closer="print type(...) of your answer and compare it with the form the task "
                        "names")


def form_calls(kind: str | tuple[str, ...], *calls: tuple) -> Callable[..., None]:
    """A derive exercise's form: each answer function, called with its example arguments
    (``calls[i]`` for answer ``i``), returns a value of ``kind`` (see :func:`_answer`), or of
    ``kind[i]`` where the answers return different kinds (a count and a ratio)."""
    kinds = kind if isinstance(kind, tuple) else (kind,) * len(calls)
    if len(kinds) != len(calls):
        raise ValueError("form_calls: one kind for every call, or one for all")

    def form(*fns) -> None:
        for fn, args, each in zip(fns, calls, kinds, strict=True):
            if not callable(fn):
                raise _wrong_kind("the answer", "a function", _type_name(fn))
            _answer(fn(*args), each, f"{getattr(fn, '__name__', 'the function')}{args}")

    return form


def form_value(kind: str, expected: str | None = None) -> Callable[..., None]:
    """A predict exercise's form: one value of ``kind`` (see :func:`_answer`)."""

    def form(value) -> None:
        _answer(value, kind, "the prediction", expected=expected)

    return form


#: What a check says when the learner's code calls ``sys.exit()`` (or raises SystemExit).
_EXITED = ("the answer called sys.exit() (SystemExit): a function should return its answer, "
           "not end the program")


class _Run:
    """Counts passing cases; the first failing case prints ``✗`` with a hint and raises."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.passed = 0

    def not_answered(self, what: str) -> None:
        """Stop the check: print ``what`` the learner still has to do; the check returns False."""
        print(f"… {self.name}: {what}")
        raise NotAnswered(what)

    @contextlib.contextmanager
    def case(self, what: str, hint: Hint | str | None = None) -> Iterator[None]:
        """One visible test: a failure prints ``✗``, ``what`` went wrong and ``hint`` (by
        default the exercise's own)."""
        declared = EXERCISES.get(self.name)
        if hint is None:
            hint = declared.hint if declared else SHORTCUT_HINT
        try:
            yield
        except NotImplementedError:
            self.not_answered("not implemented yet — replace `raise NotImplementedError()` with "
                              "your code, run the cell, then run this check again")
        except NotAnswered:
            raise
        except SystemExit:
            line = f"{self.name}: {what}: {_EXITED}"
            print(f"✗ {line}")
            raise CheckFailed(line) from None
        except ShortcutRefused as e:
            self._fail(f"{what}: {e}", (declared and declared.shortcut_hint) or SHORTCUT_HINT,
                       cause=None)
        except AssertionError as e:
            detail = f": {e}" if str(e) else ""
            self._fail(f"{what}{detail}", hint, cause=None)
        except Exception as e:  # an error inside the learner's function
            self._fail(f"{what}: raised {type(e).__name__}: {e}", hint, cause=e)
        self.passed += 1

    def _fail(self, what: str, hint: Hint | str, cause: BaseException | None) -> None:
        """Print ``✗``, what failed and the hint this try earns; raise AssertionError."""
        lines = _hint_lines(self.name, hint)
        print(f"✗ {self.name}: {what}")
        for line in lines:
            print(f"  {line}")
        if isinstance(hint, Hint) and len(lines) == 1 and not _graded:
            print(f"  (wrong again? the next try adds a closer hint; or run "
                  f"checks.hint(\"{self.name}\"))")
        raise CheckFailed(f"{self.name}: {what} — {' — '.join(lines)}") from cause

    def predicted(self, what: str, prediction) -> None:
        """A whole predict check: ``what`` was predicted; the exercise's ``accept`` compares the
        prediction with its ``measure()``; a prediction that held is shown the measurement."""
        declared = _exercise(self.name)
        with self.case(what):
            declared.accept(prediction, declared.measure())
        self.held()

    def held(self) -> None:
        """The end of a predict check whose prediction held: the measurement, then done."""
        print("  your prediction held; the measurement:")
        for line in EXERCISES[self.name].show():
            print(f"    {line}")
        self.done()

    def done(self) -> None:
        print(f"✓ {self.name}: all {self.passed} checks passed")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Build modules from a fixed seed without touching the caller's random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _shape(t: Tensor) -> list[int]:
    return list(t.shape)


# --------------------------------------------------------------------------------------------
# The kind of an answer: checked before any comparison
# --------------------------------------------------------------------------------------------

#: At most this many items of an answer that is a collection are read (an iterator may not end).
MAX_ITEMS = 10_000


class WrongForm(AssertionError):
    """An answer of the wrong form: its line names the form asked for and the type that came,
    never a value (so grading may show it to the student)."""


class Unreadable:
    """A value grading could not carry out of the sandbox as data (an object of a class of its
    own, a tensor subclass, ...): every reader refuses it, naming its type."""

    def __init__(self, type_name: str) -> None:
        self.type_name = type_name

    def __repr__(self) -> str:
        return f"<{self.type_name}>"


def _type_name(value) -> str:
    if type(value) is Unreadable:
        return value.type_name[:60]
    return type(value).__name__[:40]


def _is_bool(value) -> bool:
    return isinstance(value, bool | np.bool_)


def _wrong_kind(name: str, expected: str, got: str) -> WrongForm:
    return WrongForm(f"{name} should be {expected}, got {got}")


def _plain_tensor(value, name: str, expected: str = "a torch.Tensor") -> Tensor:
    """``value`` if it is a dense tensor with values (not a subclass, a sparse or a meta one)."""
    if type(value) is not Tensor and type(value) is not nn.Parameter:
        raise _wrong_kind(name, expected, _type_name(value))
    if value.layout != torch.strided or value.is_meta:
        raise _wrong_kind(name, expected, "a tensor without values in memory (sparse or meta)")
    return value


def _scalar_tensor(value: Tensor, name: str, expected: str):
    """The Python number (or bool) held by a one-element tensor."""
    _plain_tensor(value, name, expected)
    if value.numel() != 1:
        raise _wrong_kind(name, expected, f"a tensor of shape {_shape(value)}")
    return value.item()


def _answer(value, kind: str, name: str = "the result", *, limit: int = MAX_ITEMS,
            expected: str | None = None):
    """``value`` as a plain Python value of ``kind``, or AssertionError with one line.

    Every check reads an answer through this before comparing it, so that a NaN, a string or an
    object with its own ``__eq__`` cannot pass a comparison. The line says what kind of value is
    expected and the type that came, never the value itself. ``kind`` is one of:

    - ``"int"``: a whole number (``int``, a NumPy integer or a one-element integer tensor; a bool
      is not one);
    - ``"number"``: a finite real number (``int``, ``float``, a NumPy number or a one-element
      real tensor; a bool or a str is not one), returned as a ``float``;
    - ``"bool"``: ``True`` or ``False`` (also a NumPy bool or a one-element bool tensor);
    - ``"tensor"``: a dense real-valued ``torch.Tensor`` of finite values, returned as it is;
    - ``"items"``: a collection (list, tuple, set, iterator, ...; not a str, bytes or dict) of
      at most ``limit`` items, returned as a list; only ``limit + 1`` items are ever read.

    ``expected`` replaces the kind's own description in the line (``"a list of positions"``).
    """
    if kind == "int":
        expected = expected or "a whole number (an int)"
        if isinstance(value, Tensor):
            if _is_bool(_scalar_tensor(value, name, expected)) or value.dtype.is_floating_point \
                    or value.dtype.is_complex:
                raise _wrong_kind(name, expected, f"a {value.dtype} tensor")
            return int(value.item())
        if _is_bool(value):
            raise _wrong_kind(name, expected, "a bool")
        try:
            return int.__index__(operator.index(value))  # an exact int, also from a subclass
        except TypeError:
            raise _wrong_kind(name, expected, _type_name(value)) from None
    if kind == "number":
        expected = expected or "a number (an int or a float)"
        if isinstance(value, Tensor):
            item = _scalar_tensor(value, name, expected)
            if _is_bool(item) or isinstance(item, complex):
                raise _wrong_kind(name, expected, f"a {value.dtype} tensor")
        elif _is_bool(value) or not isinstance(value, numbers.Real):
            raise _wrong_kind(name, expected, "a bool" if _is_bool(value) else _type_name(value))
        else:
            item = value
        try:
            number = float(item)
        except OverflowError:  # an int too large for a float
            number = math.inf
        if not math.isfinite(number):
            raise _wrong_kind(name, "a finite number",
                              "NaN" if math.isnan(number) else "an infinite number")
        return number
    if kind == "bool":
        expected = expected or "True or False (a bool)"
        if isinstance(value, Tensor):
            item = _scalar_tensor(value, name, expected)
            if not _is_bool(item):
                raise _wrong_kind(name, expected, f"a {value.dtype} tensor")
            return bool(item)
        if not _is_bool(value):
            raise _wrong_kind(name, expected, _type_name(value))
        return bool(value)
    if kind == "tensor":
        _plain_tensor(value, name, expected or "a torch.Tensor")
        if value.dtype.is_complex or value.dtype == torch.bool:
            raise _wrong_kind(name, "a tensor of real numbers", f"a {value.dtype} tensor")
        if not bool(torch.isfinite(value).all()):
            raise _wrong_kind(name, "a tensor of finite numbers", "a tensor holding NaN or "
                              "infinite values")
        return value
    if kind == "items":
        expected = expected or "a list"
        if isinstance(value, str | bytes | dict) or not hasattr(type(value), "__iter__"):
            raise _wrong_kind(name, expected, _type_name(value))
        if isinstance(value, Tensor) and _plain_tensor(value, name, expected).dim() == 0:
            raise _wrong_kind(name, expected, "a tensor of shape []")
        items = list(itertools.islice(value, limit + 1))
        if len(items) > limit:
            raise _wrong_kind(name, f"a list of at most {limit:,} items", "more")
        return items
    raise ValueError(f"unknown kind of answer: {kind!r}")


def _assert_tensor(actual, name: str = "the result") -> Tensor:
    return _answer(actual, "tensor", name)


def _assert_int(value, name: str = "the result") -> int:
    return _answer(value, "int", name)


def _float(value, name: str = "the result") -> float:
    return _answer(value, "number", name)


def _assert_close(actual, expected: Tensor, *, name: str = "the result", ref: str = "expected",
                  atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """A one-line message (shape, or the largest difference) instead of assert_close's."""
    _assert_tensor(actual, name)
    if _shape(actual) != _shape(expected):
        raise WrongForm(f"{name} has shape {_shape(actual)}, expected {_shape(expected)}")
    a, b = actual.detach().double(), expected.detach().double()
    diff = (a - b).abs()
    ok = diff <= atol + rtol * b.abs()
    if not bool(ok.all()):
        worst = diff.nan_to_num(nan=math.inf).max().item()
        raise AssertionError(f"{name}: not close to {ref} (largest difference {worst:.3g}, "
                             f"{int((~ok).sum())} of {ok.numel()} values off)")


_TYPE_WORDS = {bool: "True or False (a bool)", int: "a whole number (an int)", float: "a float",
          str: "a str", list: "a list", tuple: "a tuple", type(None): "None"}


def _kind_problem(actual, expected, name: str) -> str | None:
    """Why ``actual`` is not the same kind of value as ``expected`` (exact types, the items of a
    list or tuple too), or None. Then ``actual`` holds only plain Python values."""
    if type(actual) is not type(expected):
        kind = _TYPE_WORDS.get(type(expected), f"a {type(expected).__name__}")
        return str(_wrong_kind(name, kind, _type_name(actual)))
    if isinstance(expected, list | tuple):
        item_name = f"each item of {name}"
        for item in actual:
            if expected:
                problem = _kind_problem(item, expected[0], item_name)
            elif type(item) not in (bool, int, float, str):
                problem = str(_wrong_kind(item_name, "a bool, int, float or str",
                                          _type_name(item)))
            else:
                problem = None
            if problem:
                return problem
    return None


def _short_repr(value, limit: int = 300) -> str:
    text = repr(value)
    return text if len(text) <= limit else f"{text[:limit]}… ({len(text):,} characters)"


def _assert_equal(actual, expected, *, name: str = "the result") -> None:
    """``actual == expected`` with exact types (a bool is not an int, a str not a number)."""
    problem = _kind_problem(actual, expected, name)
    if problem:
        raise WrongForm(problem)
    if actual != expected:
        raise AssertionError(f"{name} is {_short_repr(actual)}, not the right one")


def _assert_raises(error: type[BaseException], fn: Callable, *args) -> None:
    try:
        fn(*args)
    except error:
        return
    raise AssertionError(f"no {error.__name__} was raised")

# --------------------------------------------------------------------------------------------
# Shortcuts refused: the package's (or PyTorch's) own answer to a derive / implement exercise
# --------------------------------------------------------------------------------------------

#: The shortcut of a counting exercise: building the module and counting its parameters.
MODULE_BUILDING = Shortcut("torch.nn:Module.__init__", "a module's constructor (nn.Module)",
                           "count from the shapes you derive, without building a module",
                           stated_as="nn.Module")


class ShortcutRefused(AssertionError):
    """The learner's code called what its exercise asks it to write (:attr:`Exercise.shortcuts`)."""


def _resolve(target: str):
    """``"module:Attr.attr"`` -> (the object holding the attribute, the attribute's name)."""
    import importlib

    module_name, _, path = target.partition(":")
    owner = importlib.import_module(module_name)
    *parents, attr = path.split(".")
    for parent in parents:
        owner = getattr(owner, parent)
    return owner, attr


def _watched(exercise: str) -> tuple[dict, dict]:
    """The code objects (Python functions) and the objects (built-in functions) of
    ``exercise``'s shortcuts, each with the line its call is refused with."""
    codes, builtins = {}, {}
    declared = EXERCISES.get(exercise)
    for shortcut in declared.shortcuts if declared else ():
        owner, attr = _resolve(shortcut.target)
        raw = vars(owner).get(attr) if isinstance(owner, type) else getattr(owner, attr)
        func = raw.__func__ if isinstance(raw, (classmethod, staticmethod)) else raw
        message = f"it called {shortcut.label}; {shortcut.why}"
        code = getattr(func, "__code__", None)
        if code is not None:
            codes[code] = message
        else:
            builtins[id(func)] = message
    return codes, builtins


@contextlib.contextmanager
def refusing(exercise: str) -> Iterator[None]:
    """Run the learner's code for ``exercise`` with its shortcuts watched: a call to one,
    however it was reached (an alias, ``nn.GLU`` calling ``F.glu``, a name imported before), is
    seen by a profiler on this thread (``sys.setprofile``), and the block fails with
    :class:`ShortcutRefused` ("it called F.glu; the exercise is to compute it yourself") when it
    ends, also when the learner's code caught an error. Nothing shared is changed: no function
    is replaced, other threads run as before. Used by the checks in the learner's kernel;
    grading removes the same functions from its sandbox before the answer runs."""
    import sys

    codes, builtins = _watched(exercise)
    called: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            message = codes.get(frame.f_code)
        elif event == "c_call":
            message = builtins.get(id(arg))
        else:
            return
        if message is not None and message not in called:
            called.append(message)

    watch_operators = _operator_watch(exercise, called)
    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        with watch_operators:
            yield
    finally:
        sys.setprofile(previous)
    if called:
        raise ShortcutRefused(called[0])


def _operator_watch(exercise: str, called: list[str]):
    """A context that notes in ``called`` each dispatch, on this thread, of an operator one of
    ``exercise``'s shortcuts computes (``aten::glu``, however it was reached:
    ``torch.ops.aten.glu``), and passes the call on unchanged; a null context where none has one."""
    import contextlib

    declared = EXERCISES.get(exercise)
    operators = {s.operator: f"it called {s.operator} ({s.label} by another name); {s.why}"
                 for s in (declared.shortcuts if declared else ()) if s.operator}
    if not operators:
        return contextlib.nullcontext()
    from convs2s.system.operator_watch import OperatorWatch

    def seen(name: str) -> None:
        message = operators.get(name)
        if message is not None and message not in called:
            called.append(message)

    return OperatorWatch(seen)


def guarded(exercise: str, fn):
    """``fn`` (the learner's function), run inside :func:`refusing` at every call; anything
    else unchanged. Every check guards its answers so; a hidden test calls
    ``guarded("<exercise>", <the learner's function>)`` before it calls it."""
    if exercise not in EXERCISES or not EXERCISES[exercise].shortcuts or not callable(fn):
        return fn

    @functools.wraps(fn)
    def run_refusing(*args, **kwargs):
        with refusing(exercise):
            return fn(*args, **kwargs)

    return run_refusing


#: What a refused shortcut is told, unless its exercise declares its own (``shortcut_hint``).
SHORTCUT_HINT = Hint(
    nudge="your function called what the exercise asks you to work out (the package's own "
          "answer, or PyTorch's); the check refuses it, and so does grading",
    closer="start again from the quantities the exercise names and write each step yourself; "
           "the package's function is there to compare with afterwards, in a cell of your own")


def _exercise(name: str) -> Exercise:
    """The declaration of exercise ``name`` (KeyError names the exercise)."""
    try:
        return EXERCISES[name]
    except KeyError:
        raise KeyError(f"no exercise is declared as {name!r}") from None




def _check_causal(run: _Run, conv: Callable[[Tensor], Tensor], x: Tensor, what: str,
                  hint: Hint | str, cut: int) -> None:
    """Changing inputs from ``cut`` on must not change outputs before ``cut``."""
    with run.case(f"{what}: outputs before position {cut} when later inputs change", hint):
        future = x.clone()
        future[:, :, cut:] += torch.randn(future[:, :, cut:].shape, generator=_gen(cut))
        changed, unchanged = _assert_tensor(conv(future)), _assert_tensor(conv(x))
        _assert_close(changed[:, :, :cut], unchanged[:, :, :cut], name="the earlier outputs",
                      ref="the outputs before the change")


def _made_up_sentences(n: int, seed: int, *, min_len: int = 2, max_len: int = 9) -> list[str]:
    """Sentences of made-up words, Zipf-like frequencies (low word ids are frequent)."""
    g = _gen(seed)
    out = []
    weights = 1.0 / torch.arange(1, len(_WORDS) + 1, dtype=torch.float)
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        ids = torch.multinomial(weights, length, replacement=True, generator=g).tolist()
        out.append(" ".join(_WORDS[i] for i in ids))
    return out


def _tiny_convs2s(padding: str, *, layers: int, kernel_size: int, seed: int = 5, dim: int = 16):
    from convs2s.model.convs2s import ConvS2S

    with _seeded(seed):
        return ConvS2S(50, 50, emb_dim=dim, hid_dim=dim, enc_layers=layers, dec_layers=layers,
                       kernel_size=kernel_size, dropout=0.1, max_positions=32, src_pad_idx=_PAD,
                       trg_pad_idx=_PAD, decoder_padding=padding).eval()
