"""Checks for notebook 04 · Multi-step attention."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from convs2s.checks._core import (
    _PAD,
    _assert_close,
    _assert_tensor,
    _float,
    _gen,
    _Run,
    _shape,
    _tiny_convs2s,
    check,
)

__all__ = ["masked_softmax", "length_scale", "row_entropy"]


def _mask_rows(lengths: Sequence[int], width: int) -> Tensor:
    return torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]  # [batch, width]


@check
def masked_softmax(fn: Callable) -> None:
    """Exercise "masked softmax": exact zeros on padding; equals the package's attention."""
    from convs2s.layers import RESIDUAL_SCALE

    run = _Run("masked_softmax")
    hint = ("fill the energies of padding positions with float('-inf') before the softmax "
            "(energy.masked_fill(~src_mask[:, None, :], float('-inf'))), then softmax over "
            "the last dimension: exp(-inf) = 0 exactly")
    g = _gen(8)
    energy = torch.randn(3, 4, 7, generator=g)  # energy = [batch, trg_len, src_len]
    mask = _mask_rows([7, 3, 1], 7)  # mask = [3, 7]
    what = "masked_softmax(energy of shape [3, 4, 7], src_mask with 7, 3 and 1 real tokens)"
    with run.case(what, hint):
        out = fn(energy, mask)
        _assert_tensor(out)
        if _shape(out) != [3, 4, 7]:
            raise AssertionError(f"the result has shape {_shape(out)}, expected [3, 4, 7]")
    with run.case(f"{what}: weights on padding", hint):
        pads = out[~mask[:, None, :].expand_as(out)]
        if not bool((pads == 0).all()):
            raise AssertionError(f"padding gets weight up to {pads.abs().max():.3g}, not exactly 0")
    with run.case(f"{what}: row sums", "a softmax over the last dimension (dim=-1)"):
        _assert_close(out.sum(-1), torch.ones(3, 4), name="the row sums", ref="1")
    with run.case(f"{what}: the weights of sentence 1 (3 real tokens)", hint):
        _assert_close(out[1, :, :3], torch.softmax(energy[1, :, :3], dim=-1),
                      ref="a softmax over its 3 real positions")
    toy = _tiny_convs2s("causal", layers=2, kernel_size=3, seed=0, dim=16)
    att = toy.decoder.attentions[0]
    src = torch.tensor([[5, 6, 7, _PAD], [8, 9, _PAD, _PAD]])
    h, emb = torch.randn(2, 3, 16, generator=g), torch.randn(2, 3, 16, generator=g)
    with run.case("masked_softmax(d · z, src_mask) vs convs2s.Attention's weights", hint):
        with torch.no_grad():
            encoded = toy.encode(src)
            d = (att.hid2emb(h) + emb) * RESIDUAL_SCALE  # d = [2, 3, emb_dim]
            _assert_close(fn(d @ encoded.conved.transpose(1, 2), encoded.src_mask),
                          att(h, emb, encoded)[1], ref="the package's attention weights")
    run.done()


@check
def length_scale(fn: Callable) -> None:
    """Exercise "the length-scaling factor": √m per sentence, shaped ``[batch, 1, 1]``."""
    run = _Run("length_scale")
    hint = ("m = src_mask.sum(dim=1) counts the real tokens of each sentence (as a float); "
            "m·√(1/m) = √m; reshape to [batch, 1, 1] with .view(-1, 1, 1)")
    mask = _mask_rows([9, 4, 1], 9)
    with run.case("length_scale(src_mask with 9, 4 and 1 real tokens)", hint):
        out = fn(mask)
        _assert_tensor(out)
        _assert_close(out, torch.tensor([3.0, 2.0, 1.0]).view(3, 1, 1), ref="[3, 2, 1] as "
                      "[3, 1, 1]")
    with run.case("length_scale(a padded batch of 5 sentences)", hint):
        lengths = [1, 2, 3, 5, 8]
        _assert_close(fn(_mask_rows(lengths, 8)),
                      torch.tensor(lengths, dtype=torch.float).sqrt().view(-1, 1, 1), ref="√m")
    with run.case("the variance of a uniform average of 16 unit-variance values, rescaled",
                  "the factor must undo the 1/m variance of an average of m values"):
        values = torch.randn(50_000, 16, 1, generator=_gen(9))  # values = [batch, 16, 1]
        scaled = values.mean(dim=1, keepdim=True) * fn(torch.ones(50_000, 16, dtype=torch.bool))
        var = scaled.var().item()
        if abs(var - 1.0) > 0.05:
            raise AssertionError(f"the variance is {var:.3f}, expected 1")
    run.done()


@check
def row_entropy(fn: Callable) -> None:
    """Exercise "attention entropy": mean row entropy in nats, 0·log 0 = 0."""
    from convs2s import probe

    run = _Run("row_entropy")
    hint = ("compute p·log p only where p > 0 (torch.where(a > 0, a * torch.log(a), 0)), sum "
            "over the source dimension (-1), negate, then average over the rows")
    with run.case("row_entropy(uniform rows over 5 positions)", hint):
        value = _float(fn(torch.full((4, 5), 0.2)))
        if abs(value - math.log(5)) > 1e-6:
            raise AssertionError(f"got {value:.6f}, expected log(5) = {math.log(5):.6f}")
    with run.case("row_entropy(torch.eye(3)) (one-hot rows, with zeros)", hint):
        value = _float(fn(torch.eye(3)))
        if value != 0.0:
            raise AssertionError(f"got {value}, expected 0 (is 0·log 0 a NaN?)")
    g = _gen(10)
    for trg_len, src_len, n_real in [(6, 9, 9), (4, 7, 3), (5, 2, 1)]:
        energy = torch.randn(trg_len, src_len, generator=g, dtype=torch.float64)
        energy[:, n_real:] = -math.inf  # padding: exact zeros
        a = torch.softmax(energy, dim=-1)  # a = [trg_len, src_len]
        with run.case(f"row_entropy(attention [{trg_len}, {src_len}], {n_real} real positions)",
                      hint):
            expected = probe.attention_entropy(a).item()
            value = _float(fn(a))
            if not abs(value - expected) <= 1e-6 * max(1.0, abs(expected)):
                raise AssertionError(f"got {value:.6f}, expected {expected:.6f}")
    run.done()
