"""An answer of the wrong kind fails its check with one line saying what kind of value is expected:
a NaN or an infinity, a number written as a string, a bool where a count is asked, an object that
claims to equal anything, a tensor subclass that claims to be close to anything, an iterator that
never ends, and a call of ``sys.exit()`` inside the learner's function."""

from __future__ import annotations

import contextlib
import itertools
import math
import signal
import sys
from collections import Counter

import pytest
import torch

from convs2s.course import checks


def separable_params(c_in, c_out, k, bias=True):
    return c_in * k + c_in * c_out + (c_out if bias else 0)


def saving(c_in, c_out, k):
    return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)


def receptive_field(k, n_layers):
    return n_layers * (k - 1) + 1


def right_repeats(tokens, n=1):
    return any(tokens[i: i + n] == tokens[i + n: i + 2 * n]
               for i in range(len(tokens) - 2 * n + 1))


# --- numbers: finite, and numbers ------------------------------------------------------------

NUMERIC_CHECKS = {
    "brevity_prediction": checks.brevity_prediction,
    "attention_vs_conv": checks.attention_vs_conv,
    "separable_params (saving)": lambda value: checks.separable_params(
        separable_params, lambda c_in, c_out, k: value),
    "scaled_context_variance": checks.scaled_context_variance,
    "residual_variance": checks.residual_variance,
}


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, torch.tensor(math.nan)],
                         ids=["nan", "inf", "-inf", "tensor-nan"])
@pytest.mark.parametrize("name", list(NUMERIC_CHECKS))
def test_a_nan_or_infinite_answer_fails_a_numeric_check(name, value, capsys):
    with pytest.raises(AssertionError, match="should be a finite number, got (NaN|an infinite)"):
        NUMERIC_CHECKS[name](value)
    assert "✗" in capsys.readouterr().out


@pytest.mark.parametrize("name, value", [
    ("attention_vs_conv", "768"),
    ("brevity_prediction", "36.79"),
    ("separable_params (saving)", "1.5"),
    ("scaled_context_variance", "2.2857"),
])
def test_a_number_written_as_a_string_fails_a_numeric_check(name, value, capsys):
    with pytest.raises(AssertionError,
                       match=r"should be a number \(an int or a float\), got str"):
        NUMERIC_CHECKS[name](value)
    out = capsys.readouterr().out
    assert "✗" in out and value not in out  # the kind expected, not the value


def test_a_string_answer_to_a_function_exercise_fails_too():
    with pytest.raises(AssertionError, match="got str"):
        checks.separable_params(separable_params, lambda c_in, c_out, k: str(saving(c_in, c_out,
                                                                                   k)))


# --- exact types: a bool is not an int, an object is not a number ------------------------------


def test_a_bool_is_not_a_whole_number():
    # my_receptive_field(1, 5) is 1, and True == 1
    with pytest.raises(AssertionError, match=r"should be a whole number \(an int\), got a bool"):
        checks.my_receptive_field(lambda k, n: True if k == 1 else receptive_field(k, n))


def test_a_bool_is_not_a_number():
    # perplexity_from_loss(0.0) is 1.0, and True == 1.0
    def perplexity(loss, unit="nats"):
        return True if loss == 0 else (math.exp(loss) if unit == "nats" else 2.0 ** loss)

    with pytest.raises(AssertionError, match="should be a number .*, got a bool"):
        checks.perplexity_from_loss(perplexity)


def test_a_count_is_not_a_bool():
    with pytest.raises(AssertionError, match=r"should be True or False \(a bool\), got int"):
        checks.repeats(lambda tokens, n=1: int(right_repeats(tokens, n)))


class AlwaysEqual:
    """An object that says it equals (and does not differ from) anything."""

    def __eq__(self, other):
        return True

    def __ne__(self, other):
        return False

    __hash__ = object.__hash__


def test_an_answer_that_claims_to_equal_anything_fails():
    with pytest.raises(AssertionError, match=r"should be a whole number \(an int\), got "
                                             "AlwaysEqual"):
        checks.my_receptive_field(lambda k, n: AlwaysEqual())


def test_a_list_of_objects_that_claim_to_equal_anything_fails():
    def itos(token_lists, min_freq, *specials):
        counts = Counter(t for tokens in token_lists for t in tokens)
        kept = [t for t, n in counts.items() if n >= min_freq]
        return [AlwaysEqual()] * (len(specials[0] if specials else range(4)) + len(kept))

    with pytest.raises(AssertionError, match="each item of the token list should be a str, got "
                                             "AlwaysEqual"):
        checks.build_itos(itos)


class Agreeable(torch.Tensor):
    """A tensor whose every comparison says "yes"."""

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        out = super().__torch_function__(func, types, args, kwargs or {})
        if getattr(func, "__name__", "") in ("__le__", "le", "__eq__", "eq", "all"):
            return torch.ones_like(out.as_subclass(torch.Tensor), dtype=torch.bool)
        return out


def test_a_tensor_subclass_that_claims_to_be_close_fails():
    def glu(h, dim):
        if h.size(dim) % 2:
            raise ValueError(f"size {h.size(dim)} is odd")
        shape = list(h.shape)
        shape[dim] //= 2
        return torch.zeros(shape).as_subclass(Agreeable)

    with pytest.raises(AssertionError, match="should be a torch.Tensor, got Agreeable"):
        checks.my_glu(glu)


# --- collections are read only so far -----------------------------------------------------------


class Hung(BaseException):
    """Raised by the deadline (not an Exception: a check cannot turn it into a failure)."""


@contextlib.contextmanager
def deadline(seconds: float):
    def expire(*_):
        raise Hung(f"still running after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def endless(item):
    while True:
        yield item


ENDLESS = {
    "same_padding_moves": lambda: checks.same_padding_moves(itertools.count()),
    "build_itos": lambda: checks.build_itos(lambda token_lists, min_freq, *_: endless("w1")),
    "rerank": lambda: checks.rerank(lambda hypotheses, alpha: endless([5, 6])),
    "rerank (one endless hypothesis)": lambda: checks.rerank(
        lambda hypotheses, alpha: [endless(5) for _ in hypotheses]),
}


@pytest.mark.parametrize("name", list(ENDLESS))
def test_an_endless_iterator_is_read_only_up_to_a_bound(name):
    with deadline(5), pytest.raises(AssertionError, match="should be a list of at most [0-9,]+ "
                                                          "items, got more"):
        ENDLESS[name]()


# --- sys.exit() in an answer -------------------------------------------------------------------


def test_sys_exit_in_the_learners_function_is_a_failed_check_of_one_line(capsys):
    with pytest.raises(AssertionError, match=r"called sys.exit\(\)"):
        checks.my_glu(lambda h, dim: sys.exit(0))
    out = capsys.readouterr().out
    assert out.startswith("✗ my_glu: my_glu(h of shape [2, 8, 5], dim=1): the answer called "
                          "sys.exit()")
    assert out.count("\n") == 1


class Exits:
    """A "number" that ends the program when it is read."""

    def __index__(self):
        sys.exit("bye")


def test_sys_exit_while_a_prediction_is_read_is_a_failed_check_of_one_line(capsys):
    prediction = {"GRU + attention": [Exits(), 40, 80], "ConvS2S": [6, 6, 6]}
    with pytest.raises(AssertionError, match=r"called sys.exit\(\)"):
        checks.training_steps(prediction)
    out = capsys.readouterr().out
    assert out.startswith("✗ training_steps: GRU + attention, decoder lengths [10, 20, 40]: "
                          "the answer called sys.exit()")
    assert out.count("\n") == 1


def test_sys_exit_outside_a_checks_cases_is_a_failed_check_of_one_line(capsys):
    from convs2s.course.checks._core import check

    @check
    def reads_a_number(answer):  # a check that reads its answer outside any case
        int(answer)

    with pytest.raises(AssertionError, match=r"called sys.exit\(\)"):
        reads_a_number(Exits())
    out = capsys.readouterr().out
    assert out.startswith("✗ reads_a_number: the answer called sys.exit()")
    assert out.count("\n") == 1
