"""Checks for notebook 08 · Beyond ConvS2S."""

from __future__ import annotations

from collections.abc import Callable

import torch

from convs2s.checks._core import (
    _assert_close,
    _assert_equal,
    _assert_int,
    _assert_tensor,
    _check_causal,
    _float,
    _gen,
    _Run,
    _seeded,
    _shape,
    check,
)

__all__ = ["separable_params", "causal_separable_conv", "lightweight_conv"]


@check
def separable_params(params_fn: Callable, saving_fn: Callable) -> None:
    """Exercise "count a separable convolution's parameters": ``separable_params``, ``saving``."""
    from convs2s.variants import DepthwiseSeparableConv1d

    run = _Run("separable_params")
    hint = ("depthwise: c_in filters of width k, no bias (c_in·k); pointwise 1x1: c_in·c_out "
            "weights plus c_out biases when bias=True")
    for c_in, c_out, k in ((8, 16, 3), (256, 512, 3), (100, 7, 5), (3, 3, 1)):
        module = DepthwiseSeparableConv1d(c_in, c_out, k, init="pytorch")
        expected = sum(p.numel() for p in module.parameters())
        with run.case(f"separable_params({c_in}, {c_out}, {k})", hint):
            _assert_equal(_assert_int(params_fn(c_in, c_out, k)), expected)
        with run.case(f"separable_params({c_in}, {c_out}, {k}, bias=False)", hint):
            _assert_equal(_assert_int(params_fn(c_in, c_out, k, bias=False)), expected - c_out)
        full = c_in * c_out * k + c_out  # nn.Conv1d(c_in, c_out, k) with bias
        with run.case(f"saving({c_in}, {c_out}, {k})",
                      "nn.Conv1d(c_in, c_out, k) has c_in·c_out·k + c_out parameters; divide "
                      "that by separable_params(c_in, c_out, k)"):
            value = _float(saving_fn(c_in, c_out, k))
            if abs(value - full / expected) > 1e-9:
                raise AssertionError(f"got {value:.6g}, expected {full / expected:.6g}")
    run.done()


@check
def causal_separable_conv(fn: Callable) -> None:
    """Exercise "a causal separable convolution with F.conv1d"."""
    from convs2s.variants import DepthwiseSeparableConv1d

    run = _Run("causal_separable_conv")
    hint = ("k = depthwise_weight.size(-1); x = F.pad(x, (k - 1, 0)); then "
            "F.conv1d(x, depthwise_weight, groups=c_in) and "
            "F.conv1d(that, pointwise_weight, pointwise_bias)")
    g = _gen(15)
    for k in (1, 3, 4):
        with _seeded(20 + k):
            ref = DepthwiseSeparableConv1d(6, 10, k, padding="causal")
        x = torch.randn(2, 6, 9, generator=g)  # x = [2, 6, 9]
        args = (ref.depthwise.weight, ref.pointwise.weight, ref.pointwise.bias)
        what = f"causal_separable_conv(x of shape [2, 6, 9], weights of width {k})"

        def conv(t, args=args):
            return fn(t, *args)

        with run.case(what, hint), torch.no_grad():
            _assert_close(conv(x), ref(x), ref="DepthwiseSeparableConv1d(padding='causal')")
        with torch.no_grad():
            _check_causal(run, conv, x, what, hint, cut=5)
    run.done()


@check
def lightweight_conv(fn: Callable) -> None:
    """Exercise "a lightweight convolution (Wu et al., 2019)"."""
    run = _Run("lightweight_conv")
    hint = ("kernel = softmax(weight, dim=-1) is [H, k]; repeat each head's row for its "
            "channels // H channels (repeat_interleave) to get [channels, 1, k]; pad k - 1 on "
            "the left and F.conv1d(x, kernel, groups=channels)")
    g = _gen(16)
    w = torch.randn(4, 5, generator=g)  # 4 heads, k = 5
    x = torch.randn(2, 16, 11, generator=g)  # x = [2, 16, 11]
    what = "lightweight_conv(x of shape [2, 16, 11], weight of shape [4, 5])"
    with run.case(what, hint):
        out = fn(x, w)
        _assert_tensor(out)
        if _shape(out) != _shape(x):
            raise AssertionError(f"the result has shape {_shape(out)}, expected {_shape(x)}")
    with run.case(f"{what}: channel 5 (head 1) at position 10, by hand", hint):
        taps = torch.softmax(w[1], dim=0)
        _assert_close(out[:, 5, 10], (x[:, 5, 6:11] * taps).sum(-1),
                      ref="the softmax-weighted sum of inputs 6..10")
    with run.case(f"{what}: channel 15 (head 3) at position 2 (partly in the padding)", hint):
        taps = torch.softmax(w[3], dim=0)
        _assert_close(out[:, 15, 2], (x[:, 15, 0:3] * taps[2:]).sum(-1),
                      ref="the last 3 taps on inputs 0..2")
    with run.case("lightweight_conv(a constant input 3.0, ...)",
                  "normalise each head's kernel with a softmax over its k taps, so it sums to 1"):
        ones = torch.full((1, 16, 11), 3.0)
        _assert_close(fn(ones, w)[:, :, 4:], ones[:, :, 4:], ref="3.0 (a weighted average)")
    _check_causal(run, lambda t: fn(t, w), x, what, hint, cut=7)
    run.done()


#: Every exercise id (= the function its exercise asks for) -> the check function.
