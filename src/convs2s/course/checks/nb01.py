"""Checks for notebook 01 · GLU and padding.

The exercise ``glu_vs_gtu`` (explain) is graded by hand and has no check.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from convs2s.course.checks._core import (
    Hint,
    Shortcut,
    _answer,
    _assert_close,
    _assert_equal,
    _assert_int,
    _assert_raises,
    _gen,
    _Run,
    exercise,
    form_calls,
)

__all__ = ["my_glu", "same_padding_moves", "my_receptive_field"]

MY_GLU = Hint(
    nudge="which half of h is the content A and which is the gate B, and what happens to the "
          "gate before it meets A? Compare your output with F.glu on a tiny tensor whose "
          "values you can read",
    closer="print the shapes of the two pieces you cut, for dim=1 and for dim=-1: is each half of "
           "h's size along dim? Then, for one position, which piece is squashed between 0 and 1, "
           "and what is it multiplied with?")
ODD_SIZE = Hint(
    nudge="what should happen when the size of h along dim cannot be cut into two equal halves?",
    closer="which sizes can be cut into two equal halves, and what does the exercise ask your "
           "function to do with the others?")
WITHOUT_F_GLU = Hint(
    nudge="the exercise is to build the GLU yourself: your function may not call F.glu",
    closer="which element-wise operations does the GLU's formula use, and which of them does torch"
           " offer as functions of their own?")


@exercise(hint=MY_GLU,
          shortcuts=(Shortcut("torch.nn.functional:glu", "F.glu",
                              "the exercise is to compute it yourself", operator="aten::glu"),
                     Shortcut("torch._C._nn:glu", "torch._C._nn.glu",
                              "the exercise is to compute it yourself", stated_as="F.glu")),
          forbidden_names={"glu", "GLU"}, shortcut_hint=WITHOUT_F_GLU)
def my_glu(fn: Callable) -> None:
    """Exercise "GLU by hand": ``fn(h, dim)`` equals ``F.glu(h, dim)`` without calling it."""
    run = _Run("my_glu")
    g = _gen(0)
    for shape, dim in [((2, 8, 5), 1), ((3, 4), -1), ((2, 3, 6), 2), ((6,), 0), ((4, 2, 3), -3)]:
        h = torch.randn(shape, generator=g)
        with run.case(f"my_glu(h of shape {list(shape)}, dim={dim})"):
            _assert_close(fn(h, dim), F.glu(h, dim=dim), ref=f"F.glu(h, dim={dim})")
    with run.case("my_glu(h of shape [2, 5], dim=1) (size 5 is odd)", ODD_SIZE):
        _assert_raises(ValueError, fn, torch.randn(2, 5, generator=g), 1)
    with run.case("my_glu(h of shape [2, 8, 5], dim=1) without F.glu", WITHOUT_F_GLU):
        h = torch.randn(2, 8, 5, generator=g)
        expected = F.glu(h, dim=1)
        _assert_close(fn(h, 1), expected, ref="F.glu(h, dim=1)")
    run.done()


# The stack of the "predict" exercise: L "same"-padded blocks of width k over n positions.
SAME_K, SAME_LAYERS, SAME_LENGTH, SAME_CHANGED = 3, 3, 10, 8


def _measured_moves(changed: int = SAME_CHANGED, k: int = SAME_K, layers: int = SAME_LAYERS,
                    length: int = SAME_LENGTH) -> list[int]:
    """The outputs of a real "same"-padded ConvGLUBlock stack that move when input ``changed``
    changes, measured with autograd (dependency.dependency_map)."""
    from convs2s.course import dependency

    dep = dependency.dependency_map(k, layers, "same", length=length)  # [out, in]
    return dep[:, changed].nonzero().flatten().tolist()


def accept_same_padding_moves(prediction, measured: list[int]) -> None:
    """What this exercise accepts (its check and its hidden test alike): the set of positions
    equals the measured one (order and repeats do not matter); AssertionError otherwise."""
    positions = _answer(prediction, "items", "the prediction",
                        expected="a list of output positions, e.g. [2, 3, 4]")
    guess = sorted({_assert_int(p, "each position") for p in positions})
    if guess != sorted(set(measured)):
        raise AssertionError(f"your prediction {guess} did not hold")


@exercise(
    hint=Hint(
        nudge="start with one block: which outputs read input 8 through their window? Then ask "
              "the same of the next block, whose inputs are those outputs",
        closer="how far does one 'same' block of width 3 reach to each side of input 8? The "
               "second block reads the first one's outputs: how far from input 8 can it reach? "
               "And which positions does a sentence of 10 tokens have?"),
    form=lambda moved: [_assert_int(p, "each position") for p in _answer(
        moved, "items", "the prediction", expected="a list of output positions, e.g. [2, 3, 4]")],
    accept=accept_same_padding_moves,
    measure=_measured_moves,
    show=lambda: [f"changing input {SAME_CHANGED} of {SAME_LENGTH} moves the outputs "
                  f"{_measured_moves()} of a stack of {SAME_LAYERS} ConvGLUBlocks with 'same' "
                  f"padding (k={SAME_K})"])
def same_padding_moves(prediction) -> None:
    """Exercise "which outputs move?" (predict): vs the outputs a real stack moves."""
    _Run("same_padding_moves").predicted(
        f"your prediction for input {SAME_CHANGED} of {SAME_LENGTH} (k={SAME_K}, {SAME_LAYERS} "
        "blocks)", prediction)


@exercise(
    hint=Hint(
        nudge="one layer sees k inputs; draw two layers and count the inputs that one output of "
              "the top layer reaches through the k outputs of the layer below",
        closer="the k windows of neighbouring outputs overlap in all but one position, so every "
               "layer after the first widens the field by the same number of new positions: how "
               "many, and how many layers add them?"),
    form=form_calls("int", (3, 2)),
    shortcuts=(
        Shortcut("convs2s.course.receptive_field:receptive_field",
                 "receptive_field.receptive_field", "the exercise is to derive the formula"),
        Shortcut("convs2s.course.dependency:dependency_map", "dependency.dependency_map",
                 "the exercise is to derive the field, not to measure it"),
        Shortcut("convs2s.course.dependency:measure_dependency", "dependency.measure_dependency",
                 "the exercise is to derive the field, not to measure it")))
def my_receptive_field(fn: Callable) -> None:
    """Exercise "the receptive field formula": compared with the measured field."""
    from convs2s.course import dependency

    run = _Run("my_receptive_field")
    for k, n_layers in [(3, 1), (3, 4), (5, 2), (2, 3), (1, 5), (7, 3)]:
        dep = dependency.dependency_map(k, n_layers, "causal", length=40)
        measured = dependency.dependency_summary(dep)["receptive_field"]
        with run.case(f"my_receptive_field(k={k}, n_layers={n_layers}) vs the measured field"):
            _assert_equal(_assert_int(fn(k, n_layers)), measured)
    run.done()
