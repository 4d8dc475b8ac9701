"""Checks for notebook 02 · The convolutional encoder.

The exercise ``keys_and_values`` (explain) is graded by hand and has no check.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
import torch.nn.functional as F
from torch import Tensor

from convs2s.course.checks._core import (
    _PAD,
    MODULE_BUILDING,
    Hint,
    Shortcut,
    _assert_close,
    _assert_int,
    _assert_tensor,
    _float,
    _gen,
    _Run,
    _seeded,
    exercise,
    form_calls,
    form_value,
)

__all__ = ["residual_variance", "mask_source_padding", "block_parameters"]

# The encoder of the "predict" exercise (the notebook's toy sizes).
VARIANCE_BLOCKS, VARIANCE_SEEDS = 10, 3
#: A prediction within this factor of the measurement holds (a variance spans decades here).
VARIANCE_FACTOR = 5.0


def _tiny_encoder(n_layers: int = 2, kernel_size: int = 3, seed: int = 0, *, emb_dim: int = 16,
                  hid_dim: int = 32, vocab: int = 60):
    from convs2s.model.encoder import Encoder

    with _seeded(seed):
        return Encoder(vocab, emb_dim=emb_dim, hid_dim=hid_dim, n_layers=n_layers,
                       kernel_size=kernel_size, dropout=0.0, max_positions=32,
                       pad_idx=_PAD).eval()


def _padded_batch(lengths: Sequence[int], seed: int, vocab: int = 60) -> Tensor:
    g = _gen(seed)
    src = torch.full((len(lengths), max(lengths)), _PAD)  # src = [batch, src_len]
    for b, n in enumerate(lengths):
        src[b, :n] = torch.randint(4, vocab, (n,), generator=g)
    return src


# --------------------------------------------------------------------------------------------
# Predict, then measure: the variance after 10 residual blocks without √0.5
# --------------------------------------------------------------------------------------------


def measured_variance(n_blocks: int = VARIANCE_BLOCKS, scale: float = 1.0,
                      seeds: int = VARIANCE_SEEDS) -> float:
    """Var(after ``n_blocks`` blocks) / Var(input) of a ``convs2s.Encoder``'s blocks run as
    (GLU(conv(x)) + x)·``scale`` (1: without the √0.5, as the exercise asks; median over
    ``seeds`` initialisations; the notebook's toy sizes)."""
    from convs2s.course.stacks import pad_sequence, stack_activations

    ratios = []
    for seed in range(seeds):
        enc = _tiny_encoder(n_blocks, seed=seed, emb_dim=32, hid_dim=64, vocab=100)
        tokens = torch.randint(4, 100, (16, 20), generator=_gen(seed))  # [batch, src_len]
        with torch.no_grad():
            e = enc.tok_embedding(tokens) + enc.pos_embedding(torch.arange(20))
            x0 = enc.emb2hid(e).transpose(1, 2)  # x0 = [batch, hid_dim, src_len]
            layers = [lambda h, b=block: F.glu(  # as normalisation.residual_stack_activations
                b.conv(pad_sequence(b.dropout(h), b.kernel_size, b.padding)), dim=1)
                for block in enc.blocks]
            out = stack_activations(layers, x0, residual_scale=float(scale))[-1]
        ratios.append(float(out.var() / x0.var()))
    return float(torch.tensor(ratios).median())


def accept_residual_variance(prediction, measured: float) -> None:
    """What this exercise accepts (its check and its hidden test alike): a positive number
    within a factor VARIANCE_FACTOR of the measurement; AssertionError otherwise."""
    guess = _float(prediction, "the prediction")
    if not guess > 0:
        raise AssertionError(f"a ratio of variances is positive, you wrote {guess}")
    if abs(math.log(guess / measured)) > math.log(VARIANCE_FACTOR):
        raise AssertionError(f"your prediction {guess:.3g} did not hold (it must be within "
                             f"{VARIANCE_FACTOR:g}x of the measurement)")


@exercise(
    hint=Hint(
        nudge="a block without √0.5 returns GLU(conv(x)) + x: at initialisation, how does the "
              "variance of the first term compare with that of x, and are the two terms "
              "correlated?",
        closer="if Var(x) = 1 before the first block, about what is the variance of "
               "GLU(conv(x)) + x after it? The next block starts from that sum: write the same "
               "step again, and look for the pattern over 10 blocks"),
    form=form_value("number"),
    accept=accept_residual_variance,
    measure=measured_variance,
    show=lambda: [f"Var(after {VARIANCE_BLOCKS} blocks) / Var(input) without √0.5: "
                  f"{measured_variance():.3g} ({VARIANCE_BLOCKS} blocks of a "
                  f"convs2s.Encoder, median of {VARIANCE_SEEDS} initialisations; a prediction "
                  f"within {VARIANCE_FACTOR:g}x holds)"])
def residual_variance(prediction) -> None:
    """Exercise "the variance without √0.5" (predict): within a factor 5 of the measurement."""
    _Run("residual_variance").predicted(
        f"your prediction of Var(after {VARIANCE_BLOCKS} blocks) / Var(input) without √0.5",
        prediction)


# --------------------------------------------------------------------------------------------
# Debug: an encoder stack that lets the padding leak (the classic tutorial's encoder)
# --------------------------------------------------------------------------------------------


def planted_conv_stack(e, src_mask, emb2hid, convs, hid2emb):
    """The planted bug of notebook 02's debug exercise, verbatim: no masking before the convs."""
    x = emb2hid(e).transpose(1, 2)  # x = [batch, hid_dim, src_len]
    for conv in convs:
        k = conv.kernel_size[0]
        h = conv(F.pad(x, ((k - 1) // 2, (k - 1) // 2)))  # h = [batch, 2·hid_dim, src_len]
        x = (F.glu(h, dim=1) + x) * math.sqrt(0.5)  # x = [batch, hid_dim, src_len]
    z = hid2emb(x.transpose(1, 2))  # z = [batch, src_len, emb_dim]
    return z.masked_fill(~src_mask.unsqueeze(-1), 0.0)  # z = 0 at padding


MASK_SOURCE_PADDING = Hint(
    nudge="encode one sentence alone and the same sentence padded, and compare z at its real "
          "positions: which positions does a 'same' convolution at the last real tokens read, "
          "and what do they hold?",
    closer="print the values at the pad positions just before the second block's convolution: are "
           "they zero? Which inputs of a 'same' convolution at the last real tokens must hold "
           "zeros for the padded sentence to give the unpadded one's outputs, and where in each "
           "block are those inputs in hand?")


@exercise(hint=MASK_SOURCE_PADDING)
def mask_source_padding(fn: Callable) -> None:
    """Exercise "the padding leaks" (debug): z must equal convs2s.Encoder's on padded batches."""
    run = _Run("mask_source_padding")
    for seed, lengths in [(0, [7, 4, 2]), (1, [9, 9, 5, 1]), (2, [6, 3])]:
        enc = _tiny_encoder(n_layers=3, seed=seed)
        src = _padded_batch(lengths, seed=seed + 10)  # src = [batch, src_len]
        mask = src != _PAD
        args = (enc.emb2hid, [block.conv for block in enc.blocks], enc.hid2emb)
        what = f"conv_stack(e, src_mask, ...) on a batch of lengths {list(lengths)}"
        with run.case(what), torch.no_grad():
            e = enc.tok_embedding(src) + enc.pos_embedding(torch.arange(src.size(1)))
            expected = enc(src).conved  # z = [batch, src_len, emb_dim]
            planted = planted_conv_stack(e, mask, *args)
            z = fn(e, mask, *args)
            _assert_tensor(z, "z")
            if (z.shape == planted.shape and torch.allclose(z, planted, atol=1e-6)
                    and not torch.allclose(planted, expected, atol=1e-6)):
                run.not_answered("the planted bug is still there (z equals the leaky "
                                 "encoder's): encode one of these sentences alone and padded, "
                                 "compare z at its real positions, fix the cell above, run it, "
                                 "then run this check again")
            _assert_close(z, expected, name="z", ref="convs2s.Encoder's conved")
    with run.case("a sentence alone vs the same sentence with 4 pads"), torch.no_grad():
        enc = _tiny_encoder(n_layers=4, seed=7)
        alone = _padded_batch([5], seed=20)
        padded = torch.cat([alone, torch.full((1, 4), _PAD)], dim=1)  # [1, 9]
        args = (enc.emb2hid, [block.conv for block in enc.blocks], enc.hid2emb)

        def z_of(src: Tensor) -> Tensor:
            e = enc.tok_embedding(src) + enc.pos_embedding(torch.arange(src.size(1)))
            return _assert_tensor(fn(e, src != _PAD, *args), "z")  # [1, src_len, emb_dim]

        _assert_close(z_of(padded)[:, :5], z_of(alone), name="z at the real positions",
                      ref="z of the sentence alone")
    run.done()


# --------------------------------------------------------------------------------------------
# Derive: the parameters of one conv-GLU block with weight normalisation
# --------------------------------------------------------------------------------------------


def counted_block_parameters(hid_dim: int, kernel_size: int, weight_norm: bool = True) -> int:
    """The parameters of a real ``ConvGLUBlock(hid_dim, kernel_size)``, counted."""
    from convs2s.model.layers import ConvGLUBlock

    with _seeded(0):
        block = ConvGLUBlock(hid_dim, kernel_size, padding="same", weight_norm=weight_norm)
    return sum(p.numel() for p in block.parameters())


BLOCK_PARAMETERS = Hint(
    nudge="list the tensors a ConvGLUBlock owns (print its named parameters on a small block) "
          "and count each one's numbers",
    closer="write the shape of each tensor the block owns in terms of hid_dim and k: how many "
           "output channels does its convolution have before the GLU halves them, and what does "
           "weight norm store besides the direction v?")


@exercise(hint=BLOCK_PARAMETERS, form=form_calls("int", (4, 3)),
          shortcuts=(MODULE_BUILDING,
                     Shortcut("convs2s.model.convs2s:count_parameters", "count_parameters",
                              "count from the shapes you derive")),
          forbidden_names={"Conv1d", "weight_norm", "parametrizations", "Module"})
def block_parameters(fn: Callable) -> None:
    """Exercise "the parameters of one block" (derive): vs a real ConvGLUBlock's count."""
    run = _Run("block_parameters")
    for hid_dim, k in [(4, 3), (16, 5), (1, 1), (7, 3), (512, 3)]:
        what = f"block_parameters(hid_dim={hid_dim}, kernel_size={k}) vs a ConvGLUBlock"
        with run.case(what):
            got = _assert_int(fn(hid_dim, k))
            counted = counted_block_parameters(hid_dim, k)
            if got != counted:
                without_g = counted_block_parameters(hid_dim, k, weight_norm=False)
                extra = " (that is the count WITHOUT weight norm)" if got == without_g else ""
                raise AssertionError(f"you said {got:,}, not the parameters of "
                                     f"ConvGLUBlock(hid_dim={hid_dim}, kernel_size={k}, "
                                     f"weight_norm=True){extra}")
    run.done()


# --------------------------------------------------------------------------------------------
# Probes of the hidden tests (``coursework/hidden/02.py``): run in the grading sandbox
# --------------------------------------------------------------------------------------------


def probe_mask_source_padding(answers: dict, *, seed: int, config: dict, src: Tensor,
                              pad: int) -> Tensor:
    """The answer's ``conv_stack`` on the pieces of ``Encoder(**config)`` built from ``seed``
    (eval mode) and the batch ``src`` whose padding id is ``pad``: z, [batch, src_len, emb_dim].
    The hidden test builds the same encoder outside and compares z with its ``conved``."""
    from convs2s.model.encoder import Encoder

    conv_stack = answers.get("conv_stack")
    if conv_stack is None:
        raise NameError("the answer cell does not define conv_stack")
    with _seeded(seed):
        enc = Encoder(**config).eval()
    with torch.no_grad():
        e = enc.tok_embedding(src) + enc.pos_embedding(torch.arange(src.size(1)))
        return conv_stack(e, src != pad, enc.emb2hid, [b.conv for b in enc.blocks],
                          enc.hid2emb)
