"""Checks for notebook 03 · The causal decoder."""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.nn.functional as F

from convs2s.course.checks._core import (
    _PAD,
    MODULE_BUILDING,
    Hint,
    Shortcut,
    _assert_close,
    _assert_int,
    _assert_tensor,
    _check_causal,
    _float,
    _gen,
    _Run,
    _seeded,
    _tiny_convs2s,
    exercise,
    form_calls,
)

__all__ = ["causal_conv1d", "teacher_forcing_loss", "cache_floats"]

CAUSAL_CONV1D = Hint(
    nudge="with k - 1 zeros on both sides, how many outputs does the convolution give, and which "
          "inputs does output t read? Print the output's length for a small example, and "
          "change one late input to see which outputs move",
    closer="for k = 3 and an input of 5 positions, write which inputs each output of the both-"
           "sides-padded convolution reads: which outputs read an input from their future, and do "
           "they sit at the start or at the end? How many outputs should you return?")
WITHOUT_F_PAD = Hint(
    nudge="the exercise is the paper's recipe: the convolution pads both sides itself, so your "
          "function may not call F.pad",
    closer="F.conv1d has a padding argument of its own: what does it give when it pads both sides,"
           " and which of its outputs do you need?")
BIAS_NONE = Hint(
    nudge="the bias may be None: what does F.conv1d do with a bias of None?",
    closer="read F.conv1d's signature: what is its bias argument's default?")


@exercise(hint=CAUSAL_CONV1D,
          shortcuts=tuple(
              Shortcut(target, label, "the exercise is to let F.conv1d pad both sides itself",
                       stated_as="F.pad")
              for target, label in (("torch.nn.functional:pad", "F.pad"),
                                    ("torch._C._nn:pad", "torch._C._nn.pad"),
                                    ("torch:constant_pad_nd", "torch.constant_pad_nd"))),
          forbidden_names={"pad", "ConstantPad1d", "ZeroPad1d", "Conv1d"},
          shortcut_hint=WITHOUT_F_PAD)
def causal_conv1d(fn: Callable) -> None:
    """Exercise "a causal convolution, the paper's way": same length, matches the package,
    causal, and built from F.conv1d's own symmetric padding (F.pad is not called)."""
    from convs2s.model.layers import ConvGLUBlock

    run = _Run("causal_conv1d")
    g = _gen(7)
    for k in (1, 3, 4):
        with _seeded(10 + k):
            blk = ConvGLUBlock(5, k, padding="causal", residual=False).eval()
        x = torch.randn(2, 5, 8, generator=g)  # x = [2, 5, 8]
        what = f"causal_conv1d(x of shape [2, 5, 8], weight of width {k}, bias)"

        def conv(t, blk=blk):
            return fn(t, blk.conv.weight, blk.conv.bias)  # [2, 10, 8]

        with run.case(what), torch.no_grad():
            out = conv(x)
            _assert_tensor(out)
            _assert_close(F.glu(out, dim=1), blk(x), name="GLU of the result",
                          ref='ConvGLUBlock(padding="causal")')
        with torch.no_grad():
            _check_causal(run, conv, x, what, CAUSAL_CONV1D, cut=5)
    with run.case("causal_conv1d(x, weight, bias=None)", BIAS_NONE):
        x = torch.randn(1, 3, 6, generator=g)
        w = torch.randn(4, 3, 2, generator=g)
        _assert_close(fn(x, w, None), F.conv1d(F.pad(x, (1, 0)), w), ref="a causal conv1d")
    with run.case("causal_conv1d(x of shape [2, 3, 7], weight of width 3, bias) without F.pad",
                  WITHOUT_F_PAD):
        x = torch.randn(2, 3, 7, generator=g)
        w, b = torch.randn(4, 3, 3, generator=g), torch.randn(4, generator=g)
        expected = F.conv1d(F.pad(x, (2, 0)), w, b)  # computed before F.pad is refused
        _assert_close(fn(x, w, b), expected, ref="a causal conv1d")
    run.done()


# --------------------------------------------------------------------------------------------
# The cheating decoder: a loss whose decoder input is not shifted
# --------------------------------------------------------------------------------------------


def _loss(model, src: torch.Tensor, trg_in: torch.Tensor, trg_out: torch.Tensor) -> torch.Tensor:
    logits, _ = model(src, trg_in)  # logits = [batch, trg_len, vocab]
    return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg_out.reshape(-1),
                           ignore_index=_PAD)


def _batch(seed: int, lengths: list[int]) -> tuple[torch.Tensor, torch.Tensor]:
    """A made-up batch: src [batch, 6]; trg [batch, max(lengths) + 2] = <bos> ... <eos> pads."""
    g = _gen(seed)
    src = torch.randint(4, 50, (len(lengths), 6), generator=g)
    trg = torch.full((len(lengths), max(lengths) + 2), _PAD)
    for b, n in enumerate(lengths):
        trg[b, 0], trg[b, n + 1] = 2, 3  # <bos>, <eos>
        trg[b, 1 : n + 1] = torch.randint(4, 50, (n,), generator=g)
    return src, trg


TEACHER_FORCING_LOSS = Hint(
    nudge="write out, for one short sentence, which token the decoder reads at position i and "
          "which token position i is scored against. Can a causal convolution see its own "
          "position?",
    closer="for the sentence <bos> a b <eos>, write the decoder's input and the target position by"
           " position as your code builds them: at position i, has the decoder already read the "
           "token it is scored against?")


#: What counts as the right teacher-forced loss, for this check and for grading (hidden/03.py)
#: alike: within 1e-5, relative for losses above 1.
LOSS_TOLERANCE = 1e-5


def loss_holds(value: float, right: float) -> bool:
    """``value`` is the loss ``right`` to :data:`LOSS_TOLERANCE` (relative above 1)."""
    return abs(value - right) <= LOSS_TOLERANCE * max(1.0, abs(right))


@exercise(hint=TEACHER_FORCING_LOSS)
def teacher_forcing_loss(fn: Callable) -> None:
    """Exercise "the cheating decoder" (debug): compared with a correct teacher-forced loss."""
    run = _Run("teacher_forcing_loss")
    for seed, lengths in [(0, [5, 3, 7]), (1, [4, 4]), (2, [9, 1, 6, 2])]:
        model = _tiny_convs2s("causal", layers=2, kernel_size=3, seed=seed)  # eval mode
        src, trg = _batch(seed, lengths)
        what = f"teacher_forcing_loss(a causal model, a batch of {len(lengths)} sentences)"
        with run.case(what), torch.no_grad():
            value = fn(model, src, trg, _PAD)
            right = _loss(model, src, trg[:, :-1], trg[:, 1:]).item()
            planted = _loss(model, src, trg[:, 1:], trg[:, 1:]).item()
            got = _float(value, "the loss")
            if abs(got - planted) <= 1e-5 * max(1.0, abs(planted)) and abs(right - planted) > 1e-3:
                run.not_answered("the planted bug is still there (the loss equals the buggy "
                                 "one): find which word each position reads and which word it "
                                 "is scored against, fix the cell above, run it, then run this "
                                 "check again")
            if not loss_holds(got, right):
                raise AssertionError(f"the loss is {got:.4f}, not the honest teacher-forced "
                                     "loss")
    run.done()


# --------------------------------------------------------------------------------------------
# The memory of the incremental cache
# --------------------------------------------------------------------------------------------


def _measured_cache_floats(n_layers: int, kernel_size: int, hid_dim: int, steps: int) -> int:
    """Floats per sentence in a real Decoder's incremental cache after ``steps`` tokens."""
    from convs2s.model.decoder import Decoder
    from convs2s.model.encoder import EncoderOut

    batch, emb_dim, src_len = 3, 4, 5
    with _seeded(n_layers * 100 + kernel_size):
        decoder = Decoder(20, emb_dim=emb_dim, hid_dim=hid_dim, n_layers=n_layers,
                          kernel_size=kernel_size, dropout=0.0, max_positions=32,
                          pad_idx=_PAD).eval()
    g = _gen(steps)
    z = torch.randn(batch, src_len, emb_dim, generator=g)  # z = [batch, src_len, emb_dim]
    encoded = EncoderOut(z, z, torch.ones(batch, src_len, dtype=torch.bool))
    state: dict = {}
    with torch.no_grad():
        for _ in range(steps):
            decoder(torch.randint(4, 20, (batch, 1), generator=g), encoded, state)
    tensors = state.get("conv_inputs", [])
    return sum(t.numel() for t in tensors) // batch


CACHE_FLOATS = Hint(
    nudge="to compute the newest output of one layer, which of that layer's past inputs does "
          "its convolution still need? Does that depend on how many tokens came before?",
    closer="for one layer with k = 3, list the inputs its convolution reads to produce output t: "
           "which of them arrive at step t, and which must have been kept from earlier steps? Does"
           " that number change as t grows?")


@exercise(hint=CACHE_FLOATS, form=form_calls("int", (2, 3, 4, 5)), shortcuts=(MODULE_BUILDING,),
          forbidden_names={"Module"})
def cache_floats(fn: Callable) -> None:
    """Exercise "the memory of the incremental cache" (derive): vs a real Decoder's cache."""
    run = _Run("cache_floats")
    for n_layers, k, hid_dim, steps in [(2, 3, 8, 1), (3, 5, 6, 7), (1, 2, 10, 12),
                                        (4, 3, 4, 20), (2, 1, 8, 3)]:
        what = (f"cache_floats(n_layers={n_layers}, kernel_size={k}, hid_dim={hid_dim}, "
                f"steps={steps}) vs a Decoder's cache after {steps} tokens")
        with run.case(what):
            got = _assert_int(fn(n_layers, k, hid_dim, steps))
            measured = _measured_cache_floats(n_layers, k, hid_dim, steps)
            if got != measured:
                raise AssertionError(f"you said {got:,} floats, not what the decoder's "
                                     "state['conv_inputs'] holds per sentence")
    run.done()


# --------------------------------------------------------------------------------------------
# Probes of the hidden tests (``coursework/hidden/03.py``): run in the grading sandbox
# --------------------------------------------------------------------------------------------


def probe_causal_conv1d_gradient(answers: dict, *, x: torch.Tensor, weight: torch.Tensor,
                                 output: int):
    """The gradient of ``causal_conv1d(x, weight, None)[0, :, output].sum()`` with respect to
    ``x`` (a tensor of x's shape), or None when no gradient reaches ``x``."""
    fn = answers.get("causal_conv1d")
    if fn is None:
        raise NameError("the answer cell does not define causal_conv1d")
    x = x.detach().clone().requires_grad_(True)
    fn(x, weight, None)[0, :, output].sum().backward()
    return None if x.grad is None else x.grad.detach()


def probe_teacher_forcing_loss(answers: dict, *, seed: int, vocab_sizes: list, config: dict,
                               src: torch.Tensor, trg: torch.Tensor, pad: int):
    """What the answer's ``teacher_forcing_loss(model, src, trg, pad)`` returns (as it is), for
    ``ConvS2S(*vocab_sizes, **config)`` built from ``seed`` (eval mode, no gradient). The hidden
    test builds the same model outside and compares with the teacher-forced loss."""
    from convs2s.model import ConvS2S

    fn = answers.get("teacher_forcing_loss")
    if fn is None:
        raise NameError("the answer cell does not define teacher_forcing_loss")
    with _seeded(seed):
        model = ConvS2S(*vocab_sizes, **config).eval()
    with torch.no_grad():
        return fn(model, src, trg, pad)
