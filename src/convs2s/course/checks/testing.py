"""Hidden tests, written against a public API: what runs in the sandbox, what is decided outside.

A hidden test (``coursework/hidden/NN.py``, or an instructor's private one) is a function named
after its exercise that takes this copy's ``variant`` (a dict: the class's numbers, ``{}`` for
the notebook's own) and returns a list of :class:`Case`::

    from convs2s.course.checks.testing import Case, assert_close, call

    def my_relu(variant):
        x = torch.randn(3, 10, generator=torch.Generator().manual_seed(101))
        expected = x.clamp(min=0)
        return [Case("my_relu(x of shape [3, 10])", call("my_relu", x),
                     lambda got: assert_close(got, expected)),
                Case("my_relu(a str)", call("my_relu", "x"), raises="TypeError")]

Each case is a :class:`Call` and a judgement. Only the call crosses into the sandbox, as data:
:func:`call` (call an answer function with data arguments), :func:`value` (the value a predict
answer binds) or :func:`probe` (a function of the ``convs2s`` package builds the inputs a call
needs, a seeded model for instance, calls the answer and returns data). What comes back is data
too (:func:`encode`/:func:`decode`: JSON, no pickle), and the judgement (``accept``, or
``raises``) runs outside the sandbox, in the grader's process: the expected values never enter
the sandbox, and nothing the answer prints, writes or exits with is read as a verdict.

A judgement raises ``AssertionError`` when the result does not hold. Use the readers and
comparisons below (the same the course's checks use): :func:`as_int`, :func:`as_number`,
:func:`as_bool`, :func:`as_tensor`, :func:`as_items`, :func:`assert_equal`,
:func:`assert_close`. A form problem (a str where a number is asked) is told to the student with
its line; any other failure is told as "does not hold", never with the expected value.
"""

from __future__ import annotations

import fractions
import math
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import torch

from convs2s.course.checks import _core

#: The most items of a list, tuple, dict or iterable that :func:`encode` writes (one more than
#: the checks ever read, so that "too many" is still seen).
MAX_ITEMS = _core.MAX_ITEMS + 1
#: The most elements of one tensor or array that :func:`encode` writes.
MAX_ELEMENTS = 1_000_000
#: How deep :func:`encode` follows nested lists (deeper: an unreadable value).
MAX_DEPTH = 20


# --------------------------------------------------------------------------------------------
# What runs in the sandbox: calls, as data
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Call:
    """One thing the sandbox does with the answer: ``kind`` is "call", "value" or "probe"."""

    kind: str
    target: str
    args: tuple = ()
    kwargs: dict = field(default_factory=dict)

    def to_data(self) -> dict:
        return {"kind": self.kind, "target": self.target, "args": encode(list(self.args)),
                "kwargs": encode(dict(self.kwargs))}


def call(name: str, *args, **kwargs) -> Call:
    """Call the answer's function ``name`` with data arguments (numbers, str, None, lists,
    tuples, dicts, tensors, NumPy arrays)."""
    return Call("call", name, args, kwargs)


def value(name: str) -> Call:
    """The value the answer cell binds to ``name`` (a predict exercise's prediction)."""
    return Call("value", name)


def probe(target: str, **kwargs) -> Call:
    """Run ``target`` ("convs2s.<module>:<function>") in the sandbox as ``f(answers, **kwargs)``,
    ``answers`` the answer's names and values: for inputs that are not data (a seeded model)."""
    if not target.startswith("convs2s.") or target.count(":") != 1:
        raise ValueError(f"a probe is a function of the convs2s package, 'convs2s.<module>:"
                         f"<function>', not {target!r}")
    return Call("probe", target, (), kwargs)


def predicted(name: str, exercise: str, variant: dict) -> list:
    """A predict exercise's hidden test: one case, the value the answer binds to ``name``,
    judged by the ``accept`` that ``exercise`` declares (as its check uses it) against this
    copy's measurement, ``variant["expected"]``."""
    from convs2s.course.checks import EXERCISES

    accept, expected = EXERCISES[exercise].accept, variant["expected"]
    if accept is None:
        raise ValueError(f"{exercise} declares no accept: it is not a predict exercise")
    return [Case("your prediction", value(name), lambda got: accept(got, expected))]


@dataclass(frozen=True)
class Samples:
    """Sample answers of one exercise, each the text of an answer cell (run after the notebook's
    exercise-setup cell): ``right`` ones in different styles, which its check and its hidden
    test must both accept; typical ``wrong`` ones, and ones that take a ``shortcut`` (call what
    the exercise declares it may not), which both must refuse. A hidden-test file holds them in
    its ``SAMPLES`` dict; ``python -m tools.coursework --check-hidden`` and the course's tests run
    every one through both."""

    right: tuple[str, ...] | list[str]
    wrong: tuple[str, ...] | list[str] = ()
    shortcut: tuple[str, ...] | list[str] = ()

    def __post_init__(self) -> None:
        for group in ("right", "wrong", "shortcut"):
            answers = getattr(self, group)
            if isinstance(answers, str) or not all(isinstance(a, str) for a in answers):
                raise TypeError(f"Samples.{group} is a list of answer cells' texts")
            object.__setattr__(self, group, tuple(answers))
        if not self.right:
            raise ValueError("Samples need at least one right answer")


@dataclass(frozen=True)
class Case:
    """One hidden case: ``what`` (shown to the student: the call, never the expected value),
    the ``call``, and ``accept(result)`` (raises AssertionError when it does not hold), or
    ``raises``: the name of the exception the call must raise instead."""

    what: str
    call: Call
    accept: Callable[[object], None] | None = None
    raises: str | None = None

    def __post_init__(self) -> None:
        if (self.accept is None) == (self.raises is None):
            raise ValueError(f"{self.what}: a Case has either accept or raises")


# --------------------------------------------------------------------------------------------
# Judgements, outside: the checks' own readers and comparisons
# --------------------------------------------------------------------------------------------

WrongForm = _core.WrongForm
Unreadable = _core.Unreadable


def seeded(seed: int):
    """A context in which modules are built from ``seed`` without touching anyone's random state
    (``with seeded(202): enc = Encoder(...)``): the hidden test and its probe build the same."""
    return _core._seeded(seed)


def as_int(value, name: str = "the result") -> int:
    """``value`` as an int (an int, a NumPy integer, a one-element integer tensor; not a bool)."""
    return _core._answer(value, "int", name)


def as_number(value, name: str = "the result") -> float:
    """``value`` as a finite float (an int, float, NumPy number or one-element real tensor)."""
    return _core._answer(value, "number", name)


def as_bool(value, name: str = "the result") -> bool:
    """``value`` as a bool (also a NumPy bool or a one-element bool tensor)."""
    return _core._answer(value, "bool", name)


def as_tensor(value, name: str = "the result") -> torch.Tensor:
    """``value`` as a dense tensor of finite real numbers."""
    return _core._answer(value, "tensor", name)


def as_items(value, name: str = "the result") -> list:
    """``value`` (a list, tuple, set or other iterable; not a str or dict) as a list."""
    return _core._answer(value, "items", name)


def assert_equal(actual, expected, name: str = "the result") -> None:
    """``actual == expected`` with exact types (a bool is not an int)."""
    _core._assert_equal(actual, expected, name=name)


def assert_close(actual, expected: torch.Tensor, name: str = "the result", *,
                 atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """``actual`` is a tensor of ``expected``'s shape, element-wise within the tolerances."""
    _core._assert_close(actual, expected, name=name, atol=atol, rtol=rtol)


def assert_number_close(actual, expected: float, name: str = "the result", *,
                        rel: float = 1e-6, abs_tol: float = 1e-9) -> None:
    """``actual`` is a number (:func:`as_number`) within ``rel`` (relative) of ``expected``."""
    if not math.isclose(as_number(actual, name), expected, rel_tol=rel, abs_tol=abs_tol):
        raise AssertionError(f"{name} does not hold")


# --------------------------------------------------------------------------------------------
# Data across the sandbox's wall: JSON with a few tagged kinds, never a pickle
# --------------------------------------------------------------------------------------------


class IntSubclass(int):
    """An int that came as an instance of a subclass of int (read as an int, not equal to one
    of exact type)."""


class FloatSubclass(float):
    """A float that came as an instance of a subclass of float."""


class _Iterable:
    """An iterable that came as one (a generator, a map): iterable, not a list."""

    def __init__(self, items: list) -> None:
        self._items = items

    def __iter__(self):
        return iter(self._items)


def _tensor(t: torch.Tensor) -> dict:
    if t.numel() > MAX_ELEMENTS:
        raise _TooLarge(f"a tensor of {t.numel():,} elements")
    dtype = str(t.dtype).removeprefix("torch.")
    plain = t.detach().cpu()
    if plain.is_complex():
        return {"$unreadable": f"a {dtype} tensor"}
    if plain.dtype in (torch.bfloat16, torch.float16):
        plain = plain.float()
    return {"$tensor": dtype, "shape": list(t.shape), "data": plain.flatten().tolist(),
            "parameter": type(t) is torch.nn.Parameter}


class _TooLarge(Exception):
    pass


def encode(obj, _depth: int = 0):
    """``obj`` as JSON-ready data; what cannot be written becomes an unreadable marker."""
    if _depth > MAX_DEPTH:
        return {"$unreadable": "a value nested too deep"}
    kind = type(obj)
    if obj is None or kind in (bool, int, str):
        return obj
    if kind is float:
        return obj if math.isfinite(obj) else {"$float": repr(obj)}
    if kind is list:
        return [encode(x, _depth + 1) for x in obj[:MAX_ITEMS]]
    if kind is tuple:
        return {"$tuple": [encode(x, _depth + 1) for x in obj[:MAX_ITEMS]]}
    if kind is dict:
        items = list(obj.items())[:MAX_ITEMS]
        return {"$dict": [[encode(k, _depth + 1), encode(v, _depth + 1)] for k, v in items]}
    if kind in (set, frozenset):
        return {"$set": [encode(x, _depth + 1) for x in list(obj)[:MAX_ITEMS]]}
    if kind is torch.Tensor or kind is torch.nn.Parameter:
        if obj.layout != torch.strided or obj.is_meta:
            return {"$unreadable": "a tensor without values in memory (sparse or meta)"}
        try:
            return _tensor(obj)
        except _TooLarge as e:
            return {"$unreadable": str(e)}
    if isinstance(obj, np.generic) and kind.__module__ == "numpy":
        if isinstance(obj, np.complexfloating):
            return {"$unreadable": type(obj).__name__}
        return {"$numpy": type(obj).__name__, "value": encode(obj.item(), _depth + 1)}
    if kind is np.ndarray:
        if obj.size > MAX_ELEMENTS or obj.dtype.kind not in "biuf":
            return {"$unreadable": f"a NumPy array of {obj.dtype}"}
        return {"$ndarray": str(obj.dtype), "shape": list(obj.shape),
                "data": obj.ravel().tolist()}
    if isinstance(obj, bool | np.bool_):
        return {"$unreadable": kind.__name__[:40]}
    if isinstance(obj, fractions.Fraction):
        return {"$fraction": [obj.numerator, obj.denominator]}
    if isinstance(obj, numbers.Integral):
        return {"$int_subclass": int.__index__(obj) if isinstance(obj, int) else int(obj)}
    if isinstance(obj, numbers.Real) and isinstance(obj, float):
        return {"$float_subclass": encode(float.__float__(obj), _depth + 1)}
    if not isinstance(obj, str | bytes | dict | torch.Tensor) and hasattr(kind, "__iter__"):
        items = []
        for x in obj:  # an iterator that does not end: only MAX_ITEMS are read
            items.append(encode(x, _depth + 1))
            if len(items) >= MAX_ITEMS:
                break
        return {"$iterable": kind.__name__[:40], "items": items}
    return {"$unreadable": kind.__name__[:40]}


_NUMPY_SCALARS = {name: getattr(np, name) for name in (
    "bool", "bool_", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
    "float16", "float32", "float64", "longlong", "ulonglong", "intc", "uintc", "longdouble")
    if hasattr(np, name)}


def decode(data):
    """The value :func:`encode` wrote (tensors as tensors of their dtype, NumPy as NumPy).

    ``data`` comes from the sandbox, where the answer may have forged it: what :func:`encode`
    would never write is an :class:`Unreadable`, not work for the grader. Collections hold at
    most MAX_ITEMS items and nest at most MAX_DEPTH deep, tensors and arrays hold at most
    MAX_ELEMENTS elements of a plain real dtype, and the keys of all sets and dicts of one value
    together number at most ten times MAX_ITEMS, each an int whose hash is itself, a float, a
    string, True, False, None or a tuple of small ints, strings, booleans, None and such tuples
    (keys made to share one hash would cost time quadratic in their number)."""
    try:
        return _decode(data, [_MAX_KEYS], 0)
    except _TooLarge as e:
        return Unreadable(str(e))


#: The largest int a set or dict key may be: its hash is the int itself, so no two collide.
_MAX_KEY_INT = 2**61 - 2
#: The largest int inside a tuple key: a tuple's hash mixes its items' hashes, and keys made to
#: share one need items of about 61 bits; ints this small leave no such choice.
_MAX_TUPLE_INT = 2**31
#: How deep tuples may nest in a key.
_MAX_KEY_DEPTH = 3
#: The most set and dict keys one value may hold together.
_MAX_KEYS = 10 * MAX_ITEMS


def _key(key, keys_left: list[int]):
    keys_left[0] -= 1
    if keys_left[0] < 0:
        raise _TooLarge("too many keys")
    if isinstance(key, np.integer):
        key = int(key)
    if type(key) is int and abs(key) > _MAX_KEY_INT:
        raise _TooLarge("a key too large")
    if type(key) is tuple and not _plain_tuple(key, 1):
        raise _TooLarge("a key of another kind")
    return _hashable(key)


def _plain_tuple(key: tuple, depth: int) -> bool:
    """Whether a tuple key holds only small ints, strings, booleans, None and such tuples."""
    if depth > _MAX_KEY_DEPTH:
        return False
    for item in key:
        if type(item) is tuple:
            if not _plain_tuple(item, depth + 1):
                return False
        elif isinstance(item, bool | str | type(None)):
            continue
        elif isinstance(item, int | np.integer) and abs(int(item)) <= _MAX_TUPLE_INT:
            continue
        else:
            return False
    return True


def _elements(data: dict) -> tuple[list, list[int]]:
    """A tensor's or array's values and shape, within MAX_ELEMENTS (else _TooLarge)."""
    values, shape = data.get("data"), data.get("shape")
    if type(values) is not list or type(shape) is not list or len(shape) > MAX_DEPTH \
            or not all(type(n) is int and -1 <= n <= MAX_ELEMENTS for n in shape):
        raise _TooLarge("not a tensor's data")
    known = [n for n in shape if n != -1]
    if len(values) > MAX_ELEMENTS or math.prod(known) > MAX_ELEMENTS or len(known) < len(shape) - 1:
        raise _TooLarge("too many elements")
    if not all(type(x) in (int, float, bool) for x in values):
        raise _TooLarge("not numbers")
    return values, shape


def _decode(data, keys_left: list[int], depth: int):
    if data is None or type(data) in (bool, int, float, str):
        return data
    if depth > MAX_DEPTH:
        return Unreadable("a value nested too deep")
    if type(data) is list:
        if len(data) > MAX_ITEMS:
            return Unreadable("list")
        return [_decode(x, keys_left, depth + 1) for x in data]
    if type(data) is not dict or len(data) == 0:
        return Unreadable(type(data).__name__)
    tag = next(iter(data))
    body = data[tag]
    if tag in ("$tuple", "$dict", "$set") and (type(body) is not list or len(body) > MAX_ITEMS):
        return Unreadable(tag[1:])
    try:
        if tag == "$float":
            return float(body)
        if tag == "$tuple":
            return tuple(_decode(x, keys_left, depth + 1) for x in body)
        if tag == "$dict":
            return {_key(_decode(k, keys_left, depth + 1), keys_left): _decode(v, keys_left,
                                                                               depth + 1)
                    for k, v in body}
        if tag == "$set":
            return {_key(_decode(x, keys_left, depth + 1), keys_left) for x in body}
        if tag == "$tensor":
            dtype = getattr(torch, str(body), None)
            if not isinstance(dtype, torch.dtype) or dtype.is_complex:
                return Unreadable("tensor")
            values, shape = _elements(data)
            t = torch.tensor(values, dtype=torch.float64 if dtype.is_floating_point else None)
            t = t.to(dtype).reshape(shape) if t.numel() or shape else torch.empty(shape,
                                                                                  dtype=dtype)
            return torch.nn.Parameter(t, requires_grad=False) if data.get("parameter") else t
        if tag == "$numpy":
            kind = _NUMPY_SCALARS.get(str(body))
            value = _decode(data.get("value"), keys_left, depth + 1)  # a NaN comes as $float
            if kind is None or type(value) not in (int, float, bool):
                return Unreadable(str(body)[:60])
            return kind(value)
        if tag == "$ndarray":
            dtype = np.dtype(str(body)[:20])
            if dtype.kind not in "biuf" or dtype.subdtype is not None or dtype.itemsize > 8:
                return Unreadable("ndarray")
            values, shape = _elements(data)
            return np.asarray(values, dtype=dtype).reshape(shape)
        if tag == "$fraction":
            numerator, denominator = body
            return fractions.Fraction(int(numerator), int(denominator))
        if tag == "$int_subclass":
            return IntSubclass(int(body))
        if tag == "$float_subclass":
            return FloatSubclass(_decode(body, keys_left, depth + 1))
        if tag == "$iterable":
            items = data.get("items")
            if type(items) is not list or len(items) > MAX_ITEMS:
                return Unreadable("iterable")
            return _Iterable([_decode(x, keys_left, depth + 1) for x in items])
        if tag == "$unreadable":
            return Unreadable(str(body)[:60])
    except _TooLarge as e:
        return Unreadable(str(e))
    return Unreadable("value")


def _hashable(key):
    return key if isinstance(key, str | int | float | bool | tuple | type(None)) else repr(key)
