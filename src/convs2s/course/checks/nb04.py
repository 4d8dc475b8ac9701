"""Checks for notebook 04 · Multi-step attention."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence

import torch
from torch import Tensor

from convs2s.course.checks._core import (
    _PAD,
    Hint,
    Shortcut,
    _assert_close,
    _assert_int,
    _assert_tensor,
    _float,
    _gen,
    _Run,
    _seeded,
    _shape,
    _tiny_convs2s,
    exercise,
    form_calls,
    form_value,
)
from convs2s.model.layers import RESIDUAL_SCALE

__all__ = ["masked_softmax", "scaled_context_variance", "attention_macs", "row_entropy"]

MASKED_SOFTMAX = Hint(
    nudge="a softmax gives exp(energy) / Σ exp(energy): which energy makes exp exactly 0? And "
          "a weight set to 0 after the softmax leaves rows that no longer sum to 1",
    closer="for which value of an energy is its weight exactly 0 after the softmax, with the row "
           "still summing to 1? And print the mask's shape beside the energies' shape: do they "
           "line up?")
ROW_SUMS = Hint(nudge="each row is one target position's distribution over the source: which "
                      "dimension should sum to 1?",
                closer="print attention.sum(dim) for each dim: which one gives a row of ones?")


#: Rows that do not sum to 1 although the padding's weights are 0: the softmax came first.
ZEROED_AFTER = Hint(
    nudge="the padding's weights are 0, but the rows no longer sum to 1: a weight set to 0 after "
          "the softmax takes its share away from the row. Where must the mask act, before the "
          "softmax or after it?",
    closer="for which value of an energy does the softmax itself give a weight of exactly 0, so "
           "that it shares the whole 1 among the real positions?")


#: Right on small energies, wrong (inf, NaN or padding's weight) on energies of size 10,000.
LARGE_ENERGIES = Hint(
    nudge="your answer holds for small energies; at 10,000 an exp overflows to inf, and the real "
          "positions' exps underflow to 0 beside the padding's larger ones. Which steps of yours "
          "see the padding's energies, and which of them call exp?",
    closer="print your result for energy * 1e4: where does the first inf or NaN appear? A "
           "softmax that never sees the padding's energies cannot be swamped by them")


def _row_sums_hint(out: Tensor, mask: Tensor) -> Hint:
    """The hint for rows that do not sum to 1, from what the answer did: a softmax over another
    dimension (its columns sum to 1) or the padding zeroed after the softmax."""
    real = mask[:, None, :].expand_as(out)  # [batch, trg_len, src_len]
    column_sums = out.detach().double().sum(1)  # [batch, src_len]
    other_dim = bool(torch.allclose(column_sums[mask], torch.ones_like(column_sums[mask]),
                                    atol=1e-4)) and bool((out[~real] == 0).all())
    return ROW_SUMS if other_dim else ZEROED_AFTER


def _mask_rows(lengths: Sequence[int], width: int) -> Tensor:
    return torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]  # [batch, width]


@exercise(hint=MASKED_SOFTMAX,
          forbidden_names={"scaled_dot_product_attention", "MultiheadAttention"})
def masked_softmax(fn: Callable) -> None:
    """Exercise "masked softmax": exact zeros on padding; equals the package's attention."""
    run = _Run("masked_softmax")
    g = _gen(8)
    energy = torch.randn(3, 4, 7, generator=g)  # energy = [batch, trg_len, src_len]
    mask = _mask_rows([7, 3, 1], 7)  # mask = [3, 7]
    what = "masked_softmax(energy of shape [3, 4, 7], src_mask with 7, 3 and 1 real tokens)"
    with run.case(what):
        out = fn(energy, mask)
        _assert_tensor(out)
        if _shape(out) != [3, 4, 7]:
            raise AssertionError(f"the result has shape {_shape(out)}, expected [3, 4, 7]")
    with run.case(f"{what}: weights on padding"):
        pads = out[~mask[:, None, :].expand_as(out)]
        if not bool((pads == 0).all()):
            raise AssertionError(f"padding gets weight up to {pads.abs().max():.3g}, not exactly 0")
    with run.case(what, _row_sums_hint(out, mask)):
        _assert_close(out.sum(-1), torch.ones(3, 4), name="the row sums", ref="1")
    with run.case(f"{what}: the weights of sentence 1 (3 real tokens)"):
        _assert_close(out[1, :, :3], torch.softmax(energy[1, :, :3], dim=-1),
                      ref="a softmax over its 3 real positions")
    with run.case("masked_softmax(energies of size 10,000, padding larger than the real ones)",
                  LARGE_ENERGIES):
        large = energy * 1e4  # large energies: a softmax must neither overflow nor leak
        large[~mask[:, None, :].expand_as(large)] = 3e4
        out = _assert_tensor(fn(large, mask))
        if not bool((out[~mask[:, None, :].expand_as(out)] == 0).all()):
            raise AssertionError("with large energies, padding gets weight, not exactly 0")
        _assert_close(out, torch.softmax(large.masked_fill(~mask[:, None, :], -math.inf), -1),
                      ref="a softmax over the real positions")
    toy = _tiny_convs2s("causal", layers=2, kernel_size=3, seed=0, dim=16)
    att = toy.decoder.attentions[0]
    src = torch.tensor([[5, 6, 7, _PAD], [8, 9, _PAD, _PAD]])
    h, emb = torch.randn(2, 3, 16, generator=g), torch.randn(2, 3, 16, generator=g)
    with run.case("masked_softmax(d · z, src_mask) vs convs2s.Attention's weights"):
        with torch.no_grad():
            encoded = toy.encode(src)
            d = (att.hid2emb(h) + emb) * RESIDUAL_SCALE  # d = [2, 3, emb_dim]
            _assert_close(fn(d @ encoded.conved.transpose(1, 2), encoded.src_mask),
                          att(h, emb, encoded)[1], ref="the package's attention weights")
    run.done()


def _measured_scaled_variance(weights: Tensor | None = None, samples: int = 200_000,
                               seed: int = 11) -> float:
    """The variance of the package's context ``c·√m`` for fixed weights and unit-variance values.

    An :class:`convs2s.model.attention.Attention` with ``emb_dim = hid_dim = 1`` whose query is
    1 and whose keys are ``log(weights)`` attends with exactly ``weights``; its output
    projection is the identity, so its output is the scaled context itself.
    """
    from convs2s.model.attention import Attention
    from convs2s.model.encoder import EncoderOut

    weights = PREDICT_WEIGHTS if weights is None else weights  # the notebook's
    m = weights.numel()
    att = Attention(1, 1, weight_norm=False).double().eval()
    with torch.no_grad():
        att.hid2emb.weight.zero_()
        att.hid2emb.bias.zero_()
        att.emb2hid.weight.fill_(1.0)
        att.emb2hid.bias.zero_()
        keys = weights.double().log().view(1, m, 1).expand(samples, m, 1)  # d·z_j = log a_j
        values = torch.randn(samples, m, 1, generator=_gen(seed), dtype=torch.float64)
        g = torch.full((samples, 1, 1), 1.0 / RESIDUAL_SCALE, dtype=torch.float64)  # d = 1
        h = torch.zeros(samples, 1, 1, dtype=torch.float64)
        mask = torch.ones(samples, m, dtype=torch.bool)
        out, a = att(h, g, EncoderOut(keys, values, mask))  # out = [samples, 1, 1]
    torch.testing.assert_close(a[0, 0], weights.double(), atol=1e-6, rtol=1e-5)  # as meant
    return out.var().item()


#: Exercise "predict the scaled variance": m = 8, half the weight on one token.
PREDICT_M = 8
PREDICT_WEIGHTS = torch.tensor([0.5] + [0.5 / (PREDICT_M - 1)] * (PREDICT_M - 1))


#: How far a prediction of the scaled variance may be from the measurement (relative).
SCALED_TOLERANCE = 0.03


def accept_scaled_context_variance(predicted, measured: float) -> None:
    """What this exercise accepts (its check and its hidden test alike): a number within
    SCALED_TOLERANCE (3%) of the measurement; AssertionError otherwise."""
    guess = _float(predicted, "the prediction")
    if not abs(guess - measured) <= SCALED_TOLERANCE * measured:
        raise AssertionError(f"your prediction {guess:.3f} did not hold (it must be within "
                             f"{SCALED_TOLERANCE:.0%} of the measurement)")


@exercise(
    hint=Hint(
        nudge="what is the variance of a weighted sum Σ_j a_j v_j of independent values of "
              "variance 1? Check your formula on the two cases section 3 measured (uniform "
              "weights, one-hot weights)",
        closer="work out m = 2 by hand: the variance of a_1 v_1 + a_2 v_2 for weights (1, 0) and "
               "for (1/2, 1/2), with v independent of variance 1; what does multiplying by √2 do "
               "to each? Then write the rule for any weights"),
    form=form_value("number"),
    accept=accept_scaled_context_variance,
    measure=_measured_scaled_variance,
    show=lambda: [f"the variance of √m·Σ a_j v_j for m = 8, weights (1/2, 1/14, ..., 1/14): "
                  f"{_measured_scaled_variance(PREDICT_WEIGHTS):.3f} (convs2s.Attention, "
                  "200,000 draws)"])
def scaled_context_variance(predicted) -> None:
    """Exercise "predict, then measure the √m scale": the variance of √m·Σ a_j v_j."""
    _Run("scaled_context_variance").predicted(
        "your prediction for m = 8, weights (1/2, 1/14, ..., 1/14)", predicted)


ATTENTION_MACS = Hint(
    nudge="a product of an [n, p] matrix with a [p, q] one costs one multiply-add per (row, "
          "column, inner index). Which two products does one layer's attention compute, and "
          "with which shapes?",
    closer="write the shapes of the two matrices in each of the two products of one layer: how "
           "many multiply-adds does each product make? How many layers attend?")


@exercise(hint=ATTENTION_MACS, form=form_calls("int", (2, 3, 4, 5)))
def attention_macs(fn: Callable) -> None:
    """Exercise "the cost of attention" (derive): vs the bmm FLOPs counted in a real Decoder."""
    from torch.utils.flop_counter import FlopCounterMode

    from convs2s.model.decoder import Decoder
    from convs2s.model.encoder import EncoderOut

    run = _Run("attention_macs")
    for n_layers, trg_len, src_len, emb_dim in [(2, 7, 5, 6), (1, 3, 11, 4), (4, 9, 2, 8),
                                                 (3, 1, 1, 5)]:
        what = (f"attention_macs(n_layers={n_layers}, trg_len={trg_len}, src_len={src_len}, "
                f"emb_dim={emb_dim}) vs the multiply-adds counted in a Decoder")
        with run.case(what):
            got = _assert_int(fn(n_layers, trg_len, src_len, emb_dim))
            with _seeded(n_layers):
                decoder = Decoder(20, emb_dim=emb_dim, hid_dim=2 * emb_dim, n_layers=n_layers,
                                  kernel_size=3, dropout=0.0, max_positions=16,
                                  pad_idx=_PAD).eval()
            g = _gen(trg_len)
            z = torch.randn(1, src_len, emb_dim, generator=g)  # z = [1, src_len, emb_dim]
            encoded = EncoderOut(z, z, torch.ones(1, src_len, dtype=torch.bool))
            with torch.no_grad(), FlopCounterMode(display=False) as counter:
                decoder(torch.randint(4, 20, (1, trg_len), generator=g), encoded)
            # What each Attention computes itself, without its two projections (hid2emb,
            # emb2hid): its two matrix products. A FLOP is half a multiply-add.
            counts = {name: sum(ops.values()) for name, ops in counter.get_flop_counts().items()}
            flops = sum(counts.get(f"Decoder.attentions.{i}", 0)
                        - counts.get(f"Decoder.attentions.{i}.hid2emb", 0)
                        - counts.get(f"Decoder.attentions.{i}.emb2hid", 0)
                        for i in range(n_layers))
            if got != flops // 2:
                raise AssertionError(f"you said {got:,}, not the multiply-adds the attentions' "
                                     "matrix products did")
    run.done()


ROW_ENTROPY = Hint(
    nudge="what is log 0, and what is 0 times that in floating point? The entropy's convention "
          "0·log 0 = 0 has to be written into the code",
    closer="print p * p.log() for a row with a zero in it: what stands where p = 0, and what must "
           "stand there under the convention? Then: over which dimension is one row's entropy "
           "summed, and what is averaged?")


#: What counts as the right mean entropy, for this check and for grading (hidden/04.py) alike:
#: ``assert_close``'s float32 tolerances (absolute 1e-5 plus relative 1e-4). The task says so.
ENTROPY_ATOL, ENTROPY_RTOL = 1e-5, 1e-4


def entropy_holds(value: float, expected: float) -> bool:
    """``value`` is the mean entropy ``expected`` to :data:`ENTROPY_ATOL` + :data:`ENTROPY_RTOL`."""
    return abs(value - expected) <= ENTROPY_ATOL + ENTROPY_RTOL * abs(expected)


@exercise(hint=ROW_ENTROPY,
          shortcuts=(Shortcut("convs2s.course.attention_maps:attention_entropy",
                              "attention_maps.attention_entropy",
                              "the exercise is to compute it yourself"),),
          forbidden_names={"entropy", "Categorical"})
def row_entropy(fn: Callable) -> None:
    """Exercise "attention entropy": mean row entropy in nats, 0·log 0 = 0."""
    from convs2s.course import attention_maps

    run = _Run("row_entropy")
    with run.case("row_entropy(uniform rows over 5 positions)"):
        value = _float(fn(torch.full((4, 5), 0.2)))
        if not entropy_holds(value, math.log(5)):
            raise AssertionError(f"got {value:.6f}, not the entropy of a uniform row")
    with run.case("row_entropy(torch.eye(3)) (one-hot rows, with zeros)"):
        value = _float(fn(torch.eye(3)))
        if not entropy_holds(value, 0.0):
            raise AssertionError(f"got {value:.6g}: a one-hot row is not uncertain at all")
    g = _gen(10)
    for trg_len, src_len, n_real in [(6, 9, 9), (4, 7, 3), (5, 2, 1)]:
        energy = torch.randn(trg_len, src_len, generator=g, dtype=torch.float64)
        energy[:, n_real:] = -math.inf  # padding: exact zeros
        a = torch.softmax(energy, dim=-1)  # a = [trg_len, src_len]
        with run.case(f"row_entropy(attention [{trg_len}, {src_len}], {n_real} real positions)"):
            expected = attention_maps.attention_entropy(a).item()
            value = _float(fn(a))
            if not entropy_holds(value, expected):
                raise AssertionError(f"got {value:.6f}, not these rows' mean entropy")
    run.done()
