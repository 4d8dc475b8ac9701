"""Checks for notebook 03 · The causal decoder."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from convs2s.checks._core import (
    _assert_close,
    _assert_equal,
    _assert_int,
    _assert_tensor,
    _check_causal,
    _gen,
    _Run,
    _seeded,
    _tiny_convs2s,
    check,
)

__all__ = ["causal_padding", "causal_conv1d", "moved_positions"]


@check
def causal_padding(fn: Callable) -> None:
    """Exercise "how much causal padding?" (notebook 03): ``(left, right)`` for ``F.pad``."""
    from convs2s.layers import ConvGLUBlock

    run = _Run("causal_padding")
    hint = ("F.pad(x, (left, right)) adds zeros before and after the last dimension; a causal "
            "convolution gets all k - 1 missing positions on the left, none on the right")
    g = _gen(6)
    for k in (1, 2, 3, 5, 7):
        with _seeded(k):
            blk = ConvGLUBlock(4, k, padding="causal", residual=False).eval()
        x = torch.randn(1, 4, 10, generator=g)  # x = [1, 4, 10]
        with run.case(f"causal_padding({k})", hint):
            pads = fn(k)
            if not isinstance(pads, tuple | list) or len(pads) != 2:
                raise AssertionError(f"the result should be a pair (left, right), got {pads!r}")
            left, right = (_assert_int(p, "each padding amount") for p in pads)
            out = F.glu(F.conv1d(F.pad(x, (left, right)), blk.conv.weight, blk.conv.bias), dim=1)
            _assert_close(out, blk(x), name="the padded convolution",
                          ref='ConvGLUBlock(padding="causal")')
    run.done()




@check
def causal_conv1d(fn: Callable) -> None:
    """Exercise "a causal convolution with F.pad": same length, matches the package, causal."""
    from convs2s.layers import ConvGLUBlock

    run = _Run("causal_conv1d")
    hint = ("k = weight.size(-1); pad k - 1 zeros on the left only (F.pad(x, (k - 1, 0))), "
            "then F.conv1d(x, weight, bias) without padding")
    g = _gen(7)
    for k in (1, 3, 4):
        with _seeded(10 + k):
            blk = ConvGLUBlock(5, k, padding="causal", residual=False).eval()
        x = torch.randn(2, 5, 8, generator=g)  # x = [2, 5, 8]
        what = f"causal_conv1d(x of shape [2, 5, 8], weight of width {k}, bias)"

        def conv(t, blk=blk):
            return fn(t, blk.conv.weight, blk.conv.bias)  # [2, 10, 8]

        with run.case(what, hint), torch.no_grad():
            out = conv(x)
            _assert_tensor(out)
            _assert_close(F.glu(out, dim=1), blk(x), name="GLU of the result",
                          ref='ConvGLUBlock(padding="causal")')
        with torch.no_grad():
            _check_causal(run, conv, x, what, hint, cut=5)
    run.done()




@check
def moved_positions(fn: Callable) -> None:
    """Exercise "predict which predictions a perturbation moves": vs the measured effect."""
    from convs2s import probe

    run = _Run("moved_positions")
    hint = ("L layers of width k reach L·(k - 1) positions in all; a causal decoder spends the "
            "whole reach on later outputs (t ... t + reach), a 'same' one half on each side; "
            "clip to 0 ... length - 1 and return a sorted list")
    src = torch.randint(4, 50, (1, 5), generator=_gen(3))
    trg = torch.randint(4, 50, (1, 14), generator=_gen(4))
    for pad, k, n_layers, t in [("causal", 3, 2, 5), ("causal", 5, 1, 0), ("same", 3, 2, 7),
                                ("same", 5, 2, 1), ("causal", 3, 3, 12)]:
        model = _tiny_convs2s(pad, layers=n_layers, kernel_size=k)
        measured = probe.perturbation_effect(model, src, trg, t)  # measured = [14]
        expected = (measured > 0).nonzero().flatten().tolist()
        with run.case(f"moved_positions({t}, kernel_size={k}, n_layers={n_layers}, length=14, "
                      f"padding={pad!r}) vs the measured effect", hint):
            _assert_equal(list(fn(t, k, n_layers, 14, pad)), expected)
    run.done()
