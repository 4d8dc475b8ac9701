"""Checks for notebook 01 · GLU and padding."""

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
    _seeded,
    _shape,
    check,
)

__all__ = ["my_glu", "causal_left_padding", "my_receptive_field"]


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


@check
def causal_left_padding(fn: Callable) -> None:
    """Exercise "how much causal padding?": ``fn(k)`` zeros on the left keep length + causality."""
    from convs2s import viz
    from convs2s.layers import ConvGLUBlock

    run = _Run("causal_left_padding")
    hint = ("a width-k convolution without padding returns k - 1 fewer outputs than inputs; "
            "put all the missing positions on the left, so output i only reaches back")
    g = _gen(1)
    for k in range(1, 7):
        with _seeded(k):
            blk = ConvGLUBlock(4, k, padding="causal", residual=False).eval()
        x = torch.randn(1, 4, 10, generator=g)  # x = [1, 4, 10]
        with run.case(f"causal_left_padding({k})", hint):
            pad = _assert_int(fn(k))

            def padded_conv(t, blk=blk, pad=pad):
                return F.glu(blk.conv(F.pad(t, (pad, 0))), dim=1)  # [1, 4, len]

            out = padded_conv(x)
            if _shape(out) != _shape(x):
                raise AssertionError(f"with {pad} zeros on the left the length changes from "
                                     f"{x.size(2)} to {out.size(2)}")
            dep = viz.measure_dependency(padded_conv, x)
            if bool(viz.future_leaks(dep).any()):
                raise AssertionError("an output depends on a later input (it sees the future)")
            _assert_close(out, blk(x), ref='ConvGLUBlock(padding="causal")')
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
