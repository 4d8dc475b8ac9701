"""The machinery behind ``convs2s.course.checks``: one run per check, one case per visible test.

The checks are self-contained: they build their own tiny, seeded models and data on the CPU,
take well under a second each, and leave PyTorch's global random state as they found it.

Hints come in two steps (:class:`Hint`): the first wrong try of a check prints a *nudge* that
points at the idea; the second and later wrong tries of the same check in this Python session
print a *closer* hint too; ``convs2s.course.checks.hint("<exercise>")`` prints both on request, before
any try. Neither ever holds a solution's code (tests/coursework/test_hints.py holds every hint against
every solution cell of the notebooks).
"""

from __future__ import annotations

import contextlib
import functools
import math
import operator
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from unittest import mock

import torch
from torch import Tensor

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


#: The main hint of every exercise, by exercise name (what ``hint(name)`` prints).
HINTS: dict[str, Hint] = {}
#: Wrong tries so far in this session, by check name.
_wrong_tries: Counter[str] = Counter()


def register_hint(exercise: str, hint: Hint) -> Hint:
    """Declare the main hint of ``exercise`` at import, so that ``hint(exercise)`` works before
    any try; returns ``hint`` for the check's cases to use."""
    HINTS[exercise] = hint
    return hint


def hint(exercise: str | Callable) -> None:
    """Print both hints of ``exercise`` (a name or the check itself): ``checks.hint("my_glu")``."""
    name = getattr(exercise, "__name__", exercise)
    found = HINTS.get(name)
    if found is None:
        print(f"… no exercise is called {name!r}; the exercises with hints are: "
              f"{', '.join(HINTS)}")
        return
    print(f"hint for {name}: {found.nudge}\ncloser hint: {found.closer}")


def _hint_lines(name: str, hint: Hint | str) -> list[str]:
    """Count a wrong try of check ``name``; the hint lines it earns (nudge, then closer)."""
    _wrong_tries[name] += 1
    if isinstance(hint, str):  # a one-step hint
        return [f"hint: {hint}"]
    if _wrong_tries[name] == 1:
        return [f"hint: {hint.nudge}"]
    return [f"hint: {hint.nudge}", f"closer hint: {hint.closer}"]


# --------------------------------------------------------------------------------------------
# The machinery: one run per check function, one case per visible test
# --------------------------------------------------------------------------------------------


class NotAnswered(Exception):
    """Raised inside a check when the learner has not answered yet; :func:`check` returns False."""


def check(fn: Callable) -> Callable[..., bool]:
    """Make ``fn(*answers)`` a check: True when it passes, False when not answered yet.

    A wrong answer still raises ``AssertionError`` (with the hint already printed). An answer
    that is ``None``, or a function that raises ``NotImplementedError`` (a stub), is "not
    answered yet": the check says what to do and returns False, so a notebook still runs top to
    bottom, while a grade cell (``assert checks.<id>(...)``) scores it 0.
    """

    @functools.wraps(fn)
    def wrapper(*answers) -> bool:
        if any(answer is None for answer in answers):
            print(f"… {fn.__name__}: not answered yet — fill in the cell above, run it, then run "
                  "this check again (or open the solution below)")
            return False
        try:
            fn(*answers)
        except NotAnswered:
            return False
        return True

    return wrapper


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
    def case(self, what: str, hint: Hint | str) -> Iterator[None]:
        """One visible test: a failure prints ``✗``, ``what`` went wrong and ``hint``."""
        try:
            yield
        except NotImplementedError:
            self.not_answered("not implemented yet — replace `raise NotImplementedError()` with "
                              "your code, run the cell, then run this check again")
        except NotAnswered:
            raise
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
        if isinstance(hint, Hint) and len(lines) == 1:
            print(f"  (wrong again? the next try adds a closer hint; or run "
                  f"checks.hint(\"{self.name}\"))")
        raise AssertionError(f"{self.name}: {what} — {' — '.join(lines)}") from cause

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


def _assert_tensor(actual, name: str = "the result") -> None:
    if not isinstance(actual, Tensor):
        raise AssertionError(f"{name} should be a torch.Tensor, got {type(actual).__name__}")


def _assert_close(actual, expected: Tensor, *, name: str = "the result", ref: str = "expected",
                  atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """A one-line message (shape, or the largest difference) instead of assert_close's."""
    _assert_tensor(actual, name)
    if _shape(actual) != _shape(expected):
        raise AssertionError(f"{name} has shape {_shape(actual)}, expected {_shape(expected)}")
    a, b = actual.detach().double(), expected.detach().double()
    diff = (a - b).abs()
    ok = diff <= atol + rtol * b.abs()
    if not bool(ok.all()):
        worst = diff.nan_to_num(nan=math.inf).max().item()
        raise AssertionError(f"{name}: not close to {ref} (largest difference {worst:.3g}, "
                             f"{int((~ok).sum())} of {ok.numel()} values off)")


def _assert_equal(actual, expected, *, name: str = "the result") -> None:
    if actual != expected:
        raise AssertionError(f"{name} is {actual!r}, expected {expected!r}")


def _assert_int(value, name: str = "the result") -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise AssertionError(
            f"{name} should be a whole number (int), got {type(value).__name__} {value!r}"
        ) from None


def _assert_raises(error: type[BaseException], fn: Callable, *args) -> None:
    try:
        fn(*args)
    except error:
        return
    raise AssertionError(f"no {error.__name__} was raised")


@contextlib.contextmanager
def _forbidden(module, name: str, instead: str) -> Iterator[None]:
    def refuse(*_args, **_kwargs):
        raise AssertionError(f"it called {module.__name__.split('.')[-1]}.{name}; {instead}")

    with mock.patch.object(module, name, refuse):
        yield


def _float(value, name: str = "the result") -> float:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise AssertionError(f"{name} should be one number, got a tensor of shape "
                                 f"{_shape(value)}")
        return float(value.item())
    try:
        return float(value)
    except (TypeError, ValueError):
        raise AssertionError(f"{name} should be a number, got {type(value).__name__}") from None


def _check_causal(run: _Run, conv: Callable[[Tensor], Tensor], x: Tensor, what: str,
                  hint: Hint | str, cut: int) -> None:
    """Changing inputs from ``cut`` on must not change outputs before ``cut``."""
    with run.case(f"{what}: outputs before position {cut} when later inputs change", hint):
        future = x.clone()
        future[:, :, cut:] += torch.randn(future[:, :, cut:].shape, generator=_gen(cut))
        _assert_close(conv(future)[:, :, :cut], conv(x)[:, :, :cut], name="the earlier outputs",
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
