"""Checks for notebook 01 · GLU and padding.

The exercise ``glu_vs_gtu`` (explain) is graded by hand and has no check.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from convs2s.checks._core import (
    _assert_close,
    _assert_equal,
    _assert_int,
    _assert_raises,
    _forbidden,
    _gen,
    _Run,
    check,
)

__all__ = ["my_glu", "same_padding_moves", "my_receptive_field"]


@check
def my_glu(fn: Callable) -> None:
    """Exercise "GLU by hand": ``fn(h, dim)`` equals ``F.glu(h, dim)`` without calling it."""
    run = _Run("my_glu")
    hint = ("split h into two equal halves along dim (h.chunk(2, dim=dim)): A is the first "
            "half, B (the gate) the second; return A * torch.sigmoid(B)")
    g = _gen(0)
    for shape, dim in [((2, 8, 5), 1), ((3, 4), -1), ((2, 3, 6), 2), ((6,), 0), ((4, 2, 3), -3)]:
        h = torch.randn(shape, generator=g)
        with run.case(f"my_glu(h of shape {list(shape)}, dim={dim})", hint):
            _assert_close(fn(h, dim), F.glu(h, dim=dim), ref=f"F.glu(h, dim={dim})")
    with run.case("my_glu(h of shape [2, 5], dim=1) (size 5 is odd)",
                  "check h.size(dim) % 2 before splitting and raise ValueError when it is odd"):
        _assert_raises(ValueError, fn, torch.randn(2, 5, generator=g), 1)
    with run.case("my_glu(h of shape [2, 8, 5], dim=1) without F.glu",
                  "compute A * torch.sigmoid(B) yourself instead of calling F.glu"):
        h = torch.randn(2, 8, 5, generator=g)
        expected = F.glu(h, dim=1)
        with _forbidden(F, "glu", "the exercise is to compute it yourself"):
            _assert_close(fn(h, 1), expected, ref="F.glu(h, dim=1)")
    run.done()


# The stack of the "predict" exercise: L "same"-padded blocks of width k over n positions.
SAME_K, SAME_LAYERS, SAME_LENGTH, SAME_CHANGED = 3, 3, 10, 8


def _measured_moves(changed: int = SAME_CHANGED) -> list[int]:
    """The outputs of a real "same"-padded ConvGLUBlock stack that move when input ``changed``
    changes, measured with autograd (viz.dependency_map)."""
    from convs2s import viz

    dep = viz.dependency_map(SAME_K, SAME_LAYERS, "same", length=SAME_LENGTH)  # [out, in]
    return dep[:, changed].nonzero().flatten().tolist()


@check
def same_padding_moves(prediction) -> None:
    """Exercise "which outputs move?" (predict): vs the outputs a real stack moves."""
    run = _Run("same_padding_moves")
    hint = (f"one 'same' block of width k reaches (k - 1)/2 = {(SAME_K - 1) // 2} position(s) "
            f"to each side, and {SAME_LAYERS} stacked blocks reach {SAME_LAYERS} times as far; "
            f"the sentence only has positions 0 ... {SAME_LENGTH - 1}")
    measured = _measured_moves()
    with run.case(f"your prediction for input {SAME_CHANGED} of {SAME_LENGTH} "
                  f"(k={SAME_K}, {SAME_LAYERS} blocks)", hint):
        if isinstance(prediction, int | str) or not hasattr(prediction, "__iter__"):
            raise AssertionError("write the prediction as a list of output positions, e.g. "
                                 "[2, 3, 4]")
        guess = sorted({_assert_int(p, "each position") for p in prediction})
        if guess != measured:
            raise AssertionError(f"you predicted {guess}, the measured outputs that move are "
                                 f"{measured}")
    print(f"  predicted {guess}, measured {measured} on a stack of {SAME_LAYERS} "
          f"ConvGLUBlocks: your prediction held")
    run.done()


@check
def my_receptive_field(fn: Callable) -> None:
    """Exercise "the receptive field formula": compared with the measured field."""
    from convs2s import viz

    run = _Run("my_receptive_field")
    hint = ("one layer sees k inputs; every further layer widens the field by the k - 1 "
            "positions its outermost taps reach beyond the layer below")
    for k, n_layers in [(3, 1), (3, 4), (5, 2), (2, 3), (1, 5), (7, 3)]:
        dep = viz.dependency_map(k, n_layers, "causal", length=40)
        measured = viz.dependency_summary(dep)["receptive_field"]
        with run.case(f"my_receptive_field(k={k}, n_layers={n_layers}) vs the measured field",
                      hint):
            _assert_equal(fn(k, n_layers), measured)
    run.done()
