"""Checks for notebook 08 · Beyond ConvS2S."""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from convs2s.course.checks._core import (
    MODULE_BUILDING,
    Hint,
    Shortcut,
    _assert_close,
    _assert_equal,
    _assert_int,
    _assert_tensor,
    _check_causal,
    _float,
    _gen,
    _Run,
    _shape,
    exercise,
    form_calls,
    form_value,
)

__all__ = ["separable_params", "attention_vs_conv", "lightweight_conv"]

SEPARABLE = Hint(
    nudge="count the two convolutions separately: how many filters does each have, and how "
          "many weights does one filter hold?",
    closer="print the parameter shapes of a small DepthwiseSeparableConv1d (in a cell of your "
           "own): how many weights does each of its two convolutions hold, and which of them has a"
           " bias?")
SAVING = Hint(
    nudge="how many parameters does a standard convolution from c_in to c_out channels of "
          "width k, with bias, hold?",
    closer="which count goes in the numerator and which in the denominator? Is the standard "
           "convolution's count with or without its bias?")
LIGHTWEIGHT = Hint(
    nudge="each head's k taps must become weights that sum to 1, and each channel must use its "
          "head's taps: which head does channel c use?",
    closer="check three things on a tiny example: do each head's k taps sum to 1 after your "
           "normalisation? Which head does your kernel give channel c (print it for every c)? Does"
           " output t change when input t + 1 does?")
HEADS = Hint(
    nudge="channels 0 to C/H - 1 share head 0, the next C/H channels head 1, and so on: does "
          "your kernel follow that order?",
    closer="print which head each channel's kernel comes from in your code, for C = 6 and H = 2: "
           "is it 0, 0, 0, 1, 1, 1?")
AVERAGE = Hint(
    nudge="a weighted average of equal numbers is that number: do your kernels sum to 1?",
    closer="print the sum of each head's k taps after your normalisation: which operation makes "
           "weights positive and summing to 1?")
CAUSAL = Hint(
    nudge="an output may depend on its own position and earlier ones only: which inputs does "
          "your output at position t see?",
    closer="change input t + 1 only and print which outputs move: which side of the input may be "
           "padded, and by how much, so that output t reads no later input?")
ATTENTION_COST = Hint(
    nudge="count multiply-adds per position: which of the two costs depends on n?",
    closer="write each cost per position as a formula in n, d and k: which of the two grows with "
           "n? For which n are the two equal?")


#: What counts as the right ratio in ``saving``, for this check and for grading (hidden/08.py)
#: alike: within this relative difference (float32 arithmetic is right). The task says so.
SAVING_REL_TOL = 1e-6


@exercise(
    hint=SEPARABLE,
    form=form_calls(("int", "number"), (4, 6, 3), (4, 6, 3)),  # a count, then a ratio
    shortcuts=(
        MODULE_BUILDING,
        *(Shortcut(f"convs2s.model.variants:{name}", f"variants.{name}",
                   "the exercise is to count them yourself")
          for name in ("separable_conv1d_parameters", "conv1d_parameters", "conv_costs"))),
    forbidden_names={"Conv1d", "Module", "parameters"})
def separable_params(params_fn: Callable, saving_fn: Callable) -> None:
    """Exercise "count a separable convolution's parameters": ``separable_params``, ``saving``."""
    from convs2s.model.variants import DepthwiseSeparableConv1d

    run = _Run("separable_params")
    for c_in, c_out, k in ((8, 16, 3), (256, 512, 3), (100, 7, 5), (3, 3, 1)):
        module = DepthwiseSeparableConv1d(c_in, c_out, k, init="pytorch")
        expected = sum(p.numel() for p in module.parameters())
        with run.case(f"separable_params({c_in}, {c_out}, {k})"):
            _assert_equal(_assert_int(params_fn(c_in, c_out, k)), expected)
        with run.case(f"separable_params({c_in}, {c_out}, {k}, bias=False)"):
            _assert_equal(_assert_int(params_fn(c_in, c_out, k, bias=False)), expected - c_out)
        full = c_in * c_out * k + c_out  # nn.Conv1d(c_in, c_out, k) with bias
        with run.case(f"saving({c_in}, {c_out}, {k})", SAVING):
            value = _float(saving_fn(c_in, c_out, k))
            if not math.isclose(value, full / expected, rel_tol=SAVING_REL_TOL):
                raise AssertionError(f"got {value:.6g}, not nn.Conv1d's parameters over the "
                                     "separable convolution's")
    run.done()


#: The sizes of the "self-attention against a convolution" exercise.
ATTENTION_CHANNELS, ATTENTION_KERNEL = 256, 3


def _measured_flops(length: int, d: int = ATTENTION_CHANNELS,
                    k: int = ATTENTION_KERNEL) -> tuple[int, int]:
    """(convolution, attention) FLOPs over ``length`` positions, from PyTorch's FLOP counter."""
    import torch.nn.functional as F
    from torch.utils.flop_counter import FlopCounterMode

    g = _gen(18)
    x = torch.randn(1, d, length, generator=g)  # x = [1, d, n]
    weight = torch.randn(2 * d, d, k, generator=g)  # ConvS2S's convolution d -> 2d (then GLU)
    q = torch.randn(1, length, d, generator=g)  # queries = keys = values = [1, n, d]
    counts = []
    for part in ("conv", "attention"):
        counter = FlopCounterMode(display=False)
        with counter, torch.no_grad():
            if part == "conv":
                F.conv1d(F.pad(x, (k - 1, 0)), weight)  # [1, 2d, n]
            else:
                scores = q @ q.transpose(1, 2)  # scores = [1, n, n]: every pair of positions
                torch.softmax(scores, dim=-1) @ q  # [1, n, d]: weighted sum of the values
        counts.append(int(counter.get_total_flops()))
    return counts[0], counts[1]


def accept_attention_vs_conv(prediction, crossover: float) -> None:
    """What this exercise accepts (its check and its hidden test alike): a length within 2% of
    the measured crossover; AssertionError otherwise."""
    guess = _float(prediction, "prediction")
    if abs(guess - crossover) > 0.02 * crossover:
        raise AssertionError("it did not hold (it must be within 2% of the measured crossover)")


def _crossover(d: int = ATTENTION_CHANNELS,
               k: int = ATTENTION_KERNEL) -> tuple[float, float, float]:
    """The measured crossover length, the convolution's FLOPs per position and attention's per
    pair of positions (measured at n = 64; the first is the same at every length)."""
    n = 64
    conv, attention = _measured_flops(n, d, k)
    per_position_conv = conv / n  # the same for every length
    per_pair_attention = attention / n**2  # attention grows with n per position
    return per_position_conv / per_pair_attention, per_position_conv, per_pair_attention


def _crossover_length(d: int = ATTENTION_CHANNELS, k: int = ATTENTION_KERNEL) -> float:
    """The measured crossover length (what the prediction is compared with)."""
    return _crossover(d, k)[0]


def _attention_vs_conv_lines() -> list[str]:
    crossover, per_position_conv, per_pair_attention = _crossover()
    at = round(crossover)
    conv_at, attention_at = _measured_flops(at)
    return [f"measured with torch.utils.flop_counter: the convolution costs "
            f"{per_position_conv:,.0f} FLOPs per position at any length; attention costs "
            f"{per_pair_attention:,.0f} FLOPs per pair of positions: they cross at n = "
            f"{crossover:g}",
            f"at n = {at}: convolution {conv_at:,} FLOPs, attention {attention_at:,} FLOPs"]


@exercise(hint=ATTENTION_COST, form=form_value("number"), accept=accept_attention_vs_conv,
          measure=_crossover_length, show=_attention_vs_conv_lines)
def attention_vs_conv(prediction) -> None:
    """Exercise "self-attention against a convolution" (predict, then measure).

    ``prediction``: the sentence length n at which self-attention's two n x n products
    (scores and weighted sum, d = 256 channels) cost as many FLOPs as one ConvS2S convolution
    (256 -> 512 channels, width 3) over the same n positions.
    """
    run = _Run("attention_vs_conv")
    with run.case("the prediction's form", Hint(
            nudge="one number: a sentence length in positions",
            closer="a float or an int, not a string or a list")):
        guess = _float(prediction, "prediction")
    crossover = _crossover()[0]
    with run.case(f"your prediction {guess:g} against the measured crossover"):
        accept_attention_vs_conv(guess, crossover)
    run.held()


@exercise(hint=LIGHTWEIGHT, forbidden_names={"Conv1d"})
def lightweight_conv(fn: Callable) -> None:
    """Exercise "a lightweight convolution (Wu et al., 2019)"."""
    run = _Run("lightweight_conv")
    g = _gen(16)
    w = torch.randn(4, 5, generator=g)  # 4 heads, k = 5
    x = torch.randn(2, 16, 11, generator=g)  # x = [2, 16, 11]
    what = "lightweight_conv(x of shape [2, 16, 11], weight of shape [4, 5])"
    with run.case(what):
        out = fn(x, w)
        _assert_tensor(out)
        if _shape(out) != _shape(x):
            raise AssertionError(f"the result has shape {_shape(out)}, expected {_shape(x)}")
    with run.case(f"{what}: channel 5 (head 1) at position 10, by hand"):
        taps = torch.softmax(w[1], dim=0)
        _assert_close(out[:, 5, 10], (x[:, 5, 6:11] * taps).sum(-1),
                      ref="the softmax-weighted sum of inputs 6..10")
    with run.case(f"{what}: channel 15 (head 3) at position 2 (partly in the padding)"):
        taps = torch.softmax(w[3], dim=0)
        _assert_close(out[:, 15, 2], (x[:, 15, 0:3] * taps[2:]).sum(-1),
                      ref="the last 3 taps on inputs 0..2")
    with run.case(f"{what}: every channel at position 10, by hand", HEADS):
        taps = torch.softmax(w, dim=-1).repeat_interleave(4, dim=0)  # [16, 5]: head c // 4
        _assert_close(out[:, :, 10], (x[:, :, 6:11] * taps).sum(-1),
                      ref="each channel's head's softmax-weighted sum of inputs 6..10")
    with run.case("lightweight_conv(a constant input 3.0, ...)", AVERAGE):
        ones = torch.full((1, 16, 11), 3.0)
        _assert_close(_assert_tensor(fn(ones, w))[:, :, 4:], ones[:, :, 4:],
                      ref="3.0 (a weighted average)")
    _check_causal(run, lambda t: fn(t, w), x, what, CAUSAL, cut=7)
    run.done()
