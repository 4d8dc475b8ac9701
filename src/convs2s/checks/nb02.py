"""Checks for notebook 02 · The convolutional encoder."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import Tensor, nn

from convs2s.checks._core import (
    _PAD,
    _assert_close,
    _assert_equal,
    _assert_int,
    _assert_tensor,
    _gen,
    _Run,
    _seeded,
    _shape,
    check,
)

__all__ = ["embed", "mask_padding", "measured_receptive_field"]




def _tiny_encoder(n_layers: int = 2, kernel_size: int = 3, seed: int = 0):
    from convs2s.encoder import Encoder

    with _seeded(seed):
        return Encoder(60, emb_dim=16, hid_dim=32, n_layers=n_layers, kernel_size=kernel_size,
                       dropout=0.0, max_positions=32, pad_idx=_PAD).eval()


def _padded_batch(lengths: Sequence[int], seed: int, vocab: int = 60) -> Tensor:
    g = _gen(seed)
    src = torch.full((len(lengths), max(lengths)), _PAD)  # src = [batch, src_len]
    for b, n in enumerate(lengths):
        src[b, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src


@check
def embed(fn: Callable) -> None:
    """Exercise "the input embeddings": ``e = w + p`` equals what the package's encoder uses."""
    from convs2s.layers import RESIDUAL_SCALE

    run = _Run("embed")
    hint = ("w = tok_embedding(src) is [batch, src_len, emb_dim]; p = pos_embedding(positions) "
            "with positions = torch.arange(src_len) (0, 1, ...) is [src_len, emb_dim]; "
            "return w + p (p broadcasts over the batch)")
    enc = _tiny_encoder()
    for lengths in ([6, 6], [8, 5, 3], [1], [20, 2, 11, 7]):
        src = _padded_batch(lengths, seed=len(lengths))
        with run.case(f"embed(src of shape {_shape(src)}, ...)", hint), torch.no_grad():
            out = enc(src)
            expected = out.combined / RESIDUAL_SCALE - out.conved  # e, from section 4's fact
            _assert_close(fn(src, enc.tok_embedding, enc.pos_embedding), expected,
                          ref="the encoder's e = combined / √0.5 − conved")
    run.done()


@check
def mask_padding(fn: Callable) -> None:
    """Exercise "mask the padding": zeros at padding, nothing changed in place."""
    from convs2s.layers import ConvGLUBlock

    run = _Run("mask_padding")
    hint = ("src_mask is [batch, src_len] and True on real tokens; add a channel dimension "
            "(src_mask.unsqueeze(1)) and use x.masked_fill(~mask, 0.0), which returns a copy")
    g = _gen(2)
    src = _padded_batch([8, 4, 3], seed=3)
    mask = src != _PAD  # mask = [3, 8]
    x = torch.randn(3, 6, 8, generator=g)  # x = [batch, hid_dim, src_len]
    before = x.clone()
    with run.case("mask_padding(x of shape [3, 6, 8], src_mask)", hint):
        masked = fn(x, mask)
        _assert_tensor(masked)
        if _shape(masked) != _shape(x):
            raise AssertionError(f"the result has shape {_shape(masked)}, expected {_shape(x)}")
    with run.case("x after mask_padding(x, src_mask)",
                  "do not assign into x (x[...] = 0 or x.masked_fill_); return a new tensor"):
        if not torch.equal(x, before):
            raise AssertionError("x was changed in place")
    pads = ~mask.unsqueeze(1).expand_as(x)  # [3, 6, 8]
    with run.case("the padding positions of the result", hint):
        if not bool((masked[pads] == 0).all()):
            raise AssertionError(f"{int((masked[pads] != 0).sum())} padding values are not 0")
    with run.case("the real-token positions of the result",
                  "only the positions where src_mask is False may change"):
        _assert_close(masked[~pads], x[~pads], name="the real positions", ref="x's")
    with _seeded(4):
        block = ConvGLUBlock(6, 3, padding="same").eval()
    with run.case("ConvGLUBlock(your masked x) vs ConvGLUBlock(x, mask=src_mask)", hint):
        with torch.no_grad():
            _assert_close(block(fn(x, mask)), block(x, mask=mask), ref="the block's own masking")
    run.done()


def _encoder_stack(n_layers: int, kernel_size: int, *, buggy: bool, seed: int = 0,
                   emb_dim: int = 8, hid_dim: int = 12) -> Callable[[Tensor], Tensor]:
    """A tiny encoder conv stack, embeddings ``[1, src_len, emb]`` -> ``[1, src_len, emb]``.

    ``buggy=True`` repeats the encoder bug of notebook 02, section 7: every block reads the
    stack's input instead of the previous block's output, so the field stays one block wide.
    """
    from convs2s.layers import ConvGLUBlock

    with _seeded(seed):
        emb2hid = nn.Linear(emb_dim, hid_dim)
        blocks = [ConvGLUBlock(hid_dim, kernel_size, padding="same").eval()
                  for _ in range(n_layers)]
        hid2emb = nn.Linear(hid_dim, emb_dim)

    def stack(e: Tensor) -> Tensor:
        x = emb2hid(e).transpose(1, 2)  # x = [batch, hid_dim, src_len]
        out = x
        for block in blocks:
            out = block(x if buggy else out)  # out = [batch, hid_dim, src_len]
        return hid2emb(out.transpose(1, 2))  # [batch, src_len, emb_dim]

    return stack


@check
def measured_receptive_field(fn: Callable) -> None:
    """Exercise "a receptive-field meter": 1 + L(k-1) for a correct stack, k for the buggy one."""
    run = _Run("measured_receptive_field")
    hint = ("dep = viz.measure_dependency(stack, e, channels_last=True) is a bool "
            "[outputs, inputs] map; count the True entries of each row (each output) and "
            "return the largest count as an int")
    e = torch.randn(1, 16, 8, generator=_gen(5))  # e = [1, src_len, emb_dim]
    for n_layers, k in [(1, 3), (2, 3), (5, 3), (2, 5)]:
        for buggy in (False, True):
            stack = _encoder_stack(n_layers, k, buggy=buggy, seed=n_layers)
            expected = k if buggy else 1 + n_layers * (k - 1)
            kind = "buggy" if buggy else "correct"
            with run.case(f"measured_receptive_field({kind} stack of {n_layers} blocks, k={k})",
                          hint):
                _assert_equal(_assert_int(fn(stack, e)), expected)
    run.done()
