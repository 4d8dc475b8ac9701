"""Check your exercise solutions: ``convs2s.checks.<exercise>(your_function)``.

Every exercise of the course notebooks has a function here, named like the function the
exercise asks for. It runs the exercise's *visible* tests, the same ones the autograder runs
in the nbgrader coursework (``convs2s.coursework``), and prints one line::

    >>> from convs2s import checks
    >>> checks.my_glu(my_glu)
    ✓ my_glu: all 7 checks passed

or, for a wrong answer, what failed and a hint::

    ✗ my_glu: my_glu(h of shape [2, 8, 5], dim=1): the result: not close to F.glu(h, dim=1)
      (largest difference 1.58, 40 of 40 values off) — hint: split h into two equal halves ...

A failure also raises ``AssertionError``, so the cell (and the autograder) marks it wrong. A
function that still raises ``NotImplementedError`` (the stub of the student version) is reported
as not done, and the ``NotImplementedError`` itself propagates.

The checks are self-contained: they build their own tiny, seeded models and data on the CPU,
take well under a second each, and leave PyTorch's global random state as they found it.
Exercises that ask for two functions take both: ``checks.baseline_parameters(gru_parameters,
baseline_parameters)``, ``checks.separable_params(separable_params, saving)``.
"""

from __future__ import annotations

import contextlib
import math
import operator
from collections.abc import Callable, Iterator, Sequence
from unittest import mock

import torch
import torch.nn.functional as F
from torch import Tensor, nn

__all__ = [
    "EXERCISES",
    # 01
    "my_glu", "causal_left_padding", "my_receptive_field",
    # 02
    "embed", "mask_padding", "measured_receptive_field",
    # 03
    "causal_padding", "causal_conv1d", "moved_positions",
    # 04
    "masked_softmax", "length_scale", "row_entropy",
    # 05
    "shift_for_teacher_forcing", "perplexity_from_loss", "build_itos",
    # 06
    "rerank", "brevity_penalty", "repeats",
    # 07
    "augment_tokens", "augment_batch", "baseline_parameters",
    # 08
    "separable_params", "causal_separable_conv", "lightweight_conv",
]

# --------------------------------------------------------------------------------------------
# The machinery: one run per check function, one case per visible test
# --------------------------------------------------------------------------------------------


class _Run:
    """Counts passing cases; the first failing case prints ``✗`` with a hint and raises."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.passed = 0

    @contextlib.contextmanager
    def case(self, what: str, hint: str) -> Iterator[None]:
        try:
            yield
        except NotImplementedError:
            print(f"✗ {self.name}: not implemented yet — replace `raise NotImplementedError()` "
                  "with your code, then run this check again")
            raise
        except AssertionError as e:
            detail = f": {e}" if str(e) else ""
            message = f"{what}{detail} — hint: {hint}"
            print(f"✗ {self.name}: {message}")
            raise AssertionError(f"{self.name}: {message}") from None
        except Exception as e:  # an error inside the learner's function
            message = f"{what}: raised {type(e).__name__}: {e} — hint: {hint}"
            print(f"✗ {self.name}: {message}")
            raise AssertionError(f"{self.name}: {message}") from e
        self.passed += 1

    def done(self) -> None:
        print(f"✓ {self.name}: all {self.passed} checks passed")


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


@contextlib.contextmanager
def _seeded(seed: int) -> Iterator[None]:
    """Build modules from a fixed seed without touching the caller's random state."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        yield


def _shape(t: Tensor) -> list[int]:
    return list(t.shape)


def _assert_tensor(actual, name: str = "the result") -> None:
    if not isinstance(actual, Tensor):
        raise AssertionError(f"{name} should be a torch.Tensor, got {type(actual).__name__}")


def _assert_close(actual, expected: Tensor, *, name: str = "the result", ref: str = "expected",
                  atol: float = 1e-5, rtol: float = 1e-4) -> None:
    """A one-line message (shape, or the largest difference) instead of assert_close's."""
    _assert_tensor(actual, name)
    if _shape(actual) != _shape(expected):
        raise AssertionError(f"{name} has shape {_shape(actual)}, expected {_shape(expected)}")
    a, b = actual.detach().double(), expected.detach().double()
    diff = (a - b).abs()
    ok = diff <= atol + rtol * b.abs()
    if not bool(ok.all()):
        worst = diff.nan_to_num(nan=math.inf).max().item()
        raise AssertionError(f"{name}: not close to {ref} (largest difference {worst:.3g}, "
                             f"{int((~ok).sum())} of {ok.numel()} values off)")


def _assert_equal(actual, expected, *, name: str = "the result") -> None:
    if actual != expected:
        raise AssertionError(f"{name} is {actual!r}, expected {expected!r}")


def _assert_int(value, name: str = "the result") -> int:
    try:
        return operator.index(value)
    except TypeError:
        raise AssertionError(
            f"{name} should be a whole number (int), got {type(value).__name__} {value!r}"
        ) from None


def _assert_raises(error: type[BaseException], fn: Callable, *args) -> None:
    try:
        fn(*args)
    except error:
        return
    raise AssertionError(f"no {error.__name__} was raised")


@contextlib.contextmanager
def _forbidden(module, name: str, instead: str) -> Iterator[None]:
    def refuse(*_args, **_kwargs):
        raise AssertionError(f"it called {module.__name__.split('.')[-1]}.{name}; {instead}")

    with mock.patch.object(module, name, refuse):
        yield


def _float(value, name: str = "the result") -> float:
    if isinstance(value, Tensor):
        if value.numel() != 1:
            raise AssertionError(f"{name} should be one number, got a tensor of shape "
                                 f"{_shape(value)}")
        return float(value.item())
    try:
        return float(value)
    except (TypeError, ValueError):
        raise AssertionError(f"{name} should be a number, got {type(value).__name__}") from None


# --------------------------------------------------------------------------------------------
# 01 · GLU and padding
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# 02 · The convolutional encoder
# --------------------------------------------------------------------------------------------

_PAD = 1


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


# --------------------------------------------------------------------------------------------
# 03 · The causal decoder
# --------------------------------------------------------------------------------------------


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


def _check_causal(run: _Run, conv: Callable[[Tensor], Tensor], x: Tensor, what: str, hint: str,
                  cut: int) -> None:
    """Changing inputs from ``cut`` on must not change outputs before ``cut``."""
    with run.case(f"{what}: outputs before position {cut} when later inputs change", hint):
        future = x.clone()
        future[:, :, cut:] += torch.randn(future[:, :, cut:].shape, generator=_gen(cut))
        _assert_close(conv(future)[:, :, :cut], conv(x)[:, :, :cut], name="the earlier outputs",
                      ref="the outputs before the change")


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


def _tiny_convs2s(padding: str, *, layers: int, kernel_size: int, seed: int = 5, dim: int = 16):
    from convs2s.model import ConvS2S

    with _seeded(seed):
        return ConvS2S(50, 50, emb_dim=dim, hid_dim=dim, enc_layers=layers, dec_layers=layers,
                       kernel_size=kernel_size, dropout=0.1, max_positions=32, src_pad_idx=_PAD,
                       trg_pad_idx=_PAD, decoder_padding=padding).eval()


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


# --------------------------------------------------------------------------------------------
# 04 · Multi-step attention
# --------------------------------------------------------------------------------------------


def _mask_rows(lengths: Sequence[int], width: int) -> Tensor:
    return torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]  # [batch, width]


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


# --------------------------------------------------------------------------------------------
# 05 · Training on Multi30k
# --------------------------------------------------------------------------------------------

_WORDS = [f"w{i}" for i in range(30)]


def _made_up_sentences(n: int, seed: int, *, min_len: int = 2, max_len: int = 9) -> list[str]:
    """Sentences of made-up words, Zipf-like frequencies (low word ids are frequent)."""
    g = _gen(seed)
    out = []
    weights = 1.0 / torch.arange(1, len(_WORDS) + 1, dtype=torch.float)
    for _ in range(n):
        length = int(torch.randint(min_len, max_len + 1, (1,), generator=g))
        ids = torch.multinomial(weights, length, replacement=True, generator=g).tolist()
        out.append(" ".join(_WORDS[i] for i in ids))
    return out


def shift_for_teacher_forcing(fn: Callable) -> None:
    """Exercise "the teacher-forcing shift": decoder input and target, shifted by one."""
    from convs2s.data import TranslationDataset, Vocab, make_loader

    run = _Run("shift_for_teacher_forcing")
    hint = ("the decoder reads every token but the last (trg[:, :-1]) and must predict every "
            "token but the first (trg[:, 1:])")
    sentences = _made_up_sentences(24, seed=11)
    vocab = Vocab.build([s.split() for s in sentences], min_freq=1)
    ds = TranslationDataset(list(zip(sentences, sentences, strict=True)), str.split, str.split,
                            vocab, vocab)
    _, trg = next(iter(make_loader(ds, batch_size=8, shuffle=False, bucket=False)))
    before = trg.clone()
    what = f"shift_for_teacher_forcing(trg of shape {_shape(trg)})"
    with run.case(what, hint):
        result = fn(trg)
        if not isinstance(result, tuple | list) or len(result) != 2:
            raise AssertionError(f"the result should be a pair (trg_in, trg_out), got "
                                 f"{type(result).__name__}")
        trg_in, trg_out = result
        _assert_tensor(trg_in, "trg_in")
        _assert_tensor(trg_out, "trg_out")
        expected = [trg.size(0), trg.size(1) - 1]
        if _shape(trg_in) != expected or _shape(trg_out) != expected:
            raise AssertionError(f"trg_in {_shape(trg_in)} and trg_out {_shape(trg_out)} should "
                                 f"both be {expected}")
    with run.case(f"{what}: the first decoder input of every row", hint):
        if not bool((trg_in[:, 0] == vocab.bos_idx).all()):
            raise AssertionError("not every row of trg_in starts with <bos>")
    with run.case(f"{what}: <eos> in the targets", hint):
        if not bool(((trg_out == vocab.eos_idx).sum(dim=1) == 1).all()):
            raise AssertionError("each row of trg_out should contain exactly one <eos>")
    with run.case(f"{what}: trg_out vs trg_in", hint):
        if not torch.equal(trg_out[:, :-1], trg_in[:, 1:]):
            raise AssertionError("trg_out is not trg_in shifted by one position")
        if not torch.equal(trg, before):
            raise AssertionError("trg was changed in place")
    run.done()


def perplexity_from_loss(fn: Callable) -> None:
    """Exercise "perplexity from the loss": ``exp`` of the mean cross-entropy in nats."""
    run = _Run("perplexity_from_loss")
    hint = ("the loss is the mean negative log-probability per token in nats (natural log); "
            "undo the log: math.exp(loss)")
    with run.case("perplexity_from_loss(0.0) (a perfectly sure, correct model)", hint):
        _assert_equal(round(_float(fn(0.0)), 12), 1.0)
    with run.case("perplexity_from_loss(log(8000)) (uniform over 8000 words)", hint):
        value = _float(fn(math.log(8000)))
        if not math.isclose(value, 8000, rel_tol=1e-9):
            raise AssertionError(f"got {value:.6g}, expected 8000")
    for loss in (0.5, 2.3, 3.47, 7.0):
        with run.case(f"perplexity_from_loss({loss})", hint):
            value = _float(fn(loss))
            if not math.isclose(value, math.exp(loss), rel_tol=1e-9):
                raise AssertionError(f"got {value:.6g}, expected {math.exp(loss):.6g}")
    run.done()


def build_itos(fn: Callable) -> None:
    """Exercise "a vocabulary by hand": equals ``Vocab.build(...).itos``."""
    from convs2s.data import Vocab

    run = _Run("build_itos")
    hint = ("count with collections.Counter; keep tokens seen >= min_freq times that are not "
            "specials; sort by (-count, token) so ties go alphabetically; specials come first")
    token_lists = [s.split() for s in _made_up_sentences(200, seed=12)]
    for min_freq in (1, 2, 5, 40):
        with run.case(f"build_itos(200 sentences, min_freq={min_freq})", hint):
            _assert_equal(list(fn(token_lists, min_freq)),
                          Vocab.build(token_lists, min_freq=min_freq).itos,
                          name="the token list")
    specials = ("<u>", "<p>", "<s>", "</s>", "w3")
    with run.case(f"build_itos(..., min_freq=2, specials={specials})",
                  "use the specials you are given, and do not list a special a second time"):
        _assert_equal(list(fn(token_lists, 2, specials)),
                      Vocab.build(token_lists, min_freq=2, specials=specials).itos,
                      name="the token list")
    run.done()


# --------------------------------------------------------------------------------------------
# 06 · Inference: beam search and BLEU
# --------------------------------------------------------------------------------------------


def _made_up_hypotheses(n: int, seed: int) -> list[tuple[list[int], float]]:
    """Finished hypotheses as beam_search(..., length_penalty=1, return_all=True) gives them."""
    g = _gen(seed)
    hyps = []
    for _ in range(n):
        length = int(torch.randint(0, 12, (1,), generator=g))
        tokens = torch.randint(4, 100, (length,), generator=g).tolist()
        log_probs = torch.rand(length + 1, generator=g, dtype=torch.float64) * -3.0
        hyps.append((tokens, float(log_probs.sum()) / (length + 1)))  # score with α = 1
    return sorted(hyps, key=lambda h: h[1], reverse=True)


def rerank(fn: Callable) -> None:
    """Exercise "re-rank the finished hypotheses": order by Σ log p / (len + 1) ** α."""
    run = _Run("rerank")
    hint = ("each score is Σ log p / (len(tokens) + 1) (the +1 counts <eos>): multiply it back "
            "to Σ log p, divide by (len(tokens) + 1) ** alpha, sort best (highest) first and "
            "return the token lists")
    for seed in (0, 1, 2):
        hyps = _made_up_hypotheses(6, seed=13 + seed)
        for alpha in (1.0, 0.0, 0.5, 2.0):
            expected = sorted(hyps, key=lambda h: h[1] * (len(h[0]) + 1) / (len(h[0]) + 1)
                              ** alpha, reverse=True)
            with run.case(f"rerank(6 hypotheses, alpha={alpha}) (set {seed})", hint):
                result = [list(t) for t in fn(hyps, alpha)]
                _assert_equal(result, [t for t, _ in expected], name="the order")
    run.done()


def brevity_penalty(fn: Callable) -> None:
    """Exercise "the brevity penalty": as sacreBLEU computes it."""
    import sacrebleu

    run = _Run("brevity_penalty")
    hint = ("c = hyp_len, r = ref_len: return 1.0 when c > r, 0.0 when c == 0, else "
            "math.exp(1 - r / c)")
    for hyp_len, ref_len, expected in [(12, 10, 1.0), (10, 10, 1.0), (5, 10, math.exp(-1)),
                                       (0, 10, 0.0), (9, 10, math.exp(1 - 10 / 9))]:
        with run.case(f"brevity_penalty({hyp_len}, {ref_len})", hint):
            value = _float(fn(hyp_len, ref_len))
            if not math.isclose(value, expected, rel_tol=1e-9, abs_tol=1e-12):
                raise AssertionError(f"got {value:.6g}, expected {expected:.6g}")
    metric = sacrebleu.metrics.BLEU(tokenize="none", smooth_method="none", force=True)
    refs = _made_up_sentences(20, seed=14)
    for name, cut in (("shorter", 0.5), ("slightly shorter", 0.9), ("longer", 1.3)):
        hyps = []
        for s in refs:
            words = s.split()
            n = max(1, round(len(words) * cut))
            hyps.append(" ".join((words * 2)[:n]))
        score = metric.corpus_score(hyps, [refs])
        with run.case(f"brevity_penalty({score.sys_len}, {score.ref_len}) ({name} outputs) vs "
                      "sacreBLEU", hint):
            value = _float(fn(score.sys_len, score.ref_len))
            if not math.isclose(value, score.bp, rel_tol=1e-9):
                raise AssertionError(f"got {value:.6g}, sacreBLEU says {score.bp:.6g}")
    run.done()


def repeats(fn: Callable) -> None:
    """Exercise "stuttering outputs": the same n-gram twice in a row."""
    run = _Run("repeats")
    hint = ("for every start i with i + 2n <= len(tokens), compare tokens[i:i + n] with "
            "tokens[i + n:i + 2n]; True as soon as one pair is equal")
    cases = [
        ((["a", "a"], 1), True),
        ((["a", "b", "a"], 1), False),
        ((["in", "a", "in", "a"], 2), True),
        ((["in", "a", "in", "a"], 1), False),
        (([], 1), False),
        ((["a"], 1), False),
        ((["a", "b", "c"], 2), False),
        (("a man in a red shirt shirt .".split(), 1), True),
        (("a man in a red shirt shirt .".split(), 2), False),
        (("a dog runs on the grass on the grass".split(), 3), True),
        (("a dog runs on the grass on the grass".split(), 2), False),
        (("x y z x y z".split(), 3), True),
    ]
    for (tokens, n), expected in cases:
        with run.case(f"repeats({tokens}, n={n})", hint):
            _assert_equal(bool(fn(tokens, n)), expected)
    run.done()


# --------------------------------------------------------------------------------------------
# 07 · ConvS2S vs an RNN with attention
# --------------------------------------------------------------------------------------------


def augment_tokens(fn: Callable) -> None:
    """Exercise "source-side augmentation": deletion and swaps, seeded, input untouched."""
    run = _Run("augment_tokens")
    hint = ("keep each token when torch.rand(1, generator=generator) >= p_delete (keep ids[0] "
            "if none survive), then n_swaps times swap two positions drawn with torch.randint; "
            "work on a new list")
    sent = [11, 12, 13, 14, 15, 16, 17]
    g = _gen(0)
    with run.case("augment_tokens(sentence, p_delete=0.0, n_swaps=0, g)", hint):
        _assert_equal(list(fn(list(sent), 0.0, 0, g)), sent)
    with run.case("augment_tokens(sentence, p_delete=1.0, n_swaps=0, g)",
                  "when every token is deleted, return [ids[0]]"):
        _assert_equal(list(fn(list(sent), 1.0, 0, g)), [11])
    with run.case("augment_tokens(sentence, p_delete=0.0, n_swaps=3, g)",
                  "swaps only reorder the tokens: no token lost or added"):
        swapped = list(fn(list(sent), 0.0, 3, g))
        _assert_equal(sorted(swapped), sent, name="the sorted result")
    with run.case("augment_tokens(sentence, p_delete=0.5, n_swaps=0, g)",
                  "deleting keeps the order of the remaining tokens"):
        deleted = list(fn(list(sent), 0.5, 0, g))
        if not 1 <= len(deleted) <= 7 or deleted != [t for t in sent if t in deleted]:
            raise AssertionError(f"got {deleted}: not an in-order subsequence of {sent}")
    with run.case("two calls with generators seeded alike", "draw every random number from "
                  "`generator` (never from the global generator)"):
        ids = list(sent)
        a = list(fn(ids, 0.3, 2, _gen(5)))
        b = list(fn(ids, 0.3, 2, _gen(5)))
        _assert_equal(a, b, name="the second result")
        _assert_equal(ids, sent, name="ids after the calls")
    with run.case("the share of tokens deleted with p_delete=0.2 (20 sentences of 100)", hint):
        lengths = [len(fn(list(range(100)), 0.2, 0, g)) for _ in range(20)]
        mean = sum(lengths) / 20
        if not 70 < mean < 90:
            raise AssertionError(f"{mean:.1f} of 100 tokens kept on average, expected about 80")
    run.done()


def augment_batch(fn: Callable) -> None:
    """Exercise "augment a batch": augment each row's real tokens, re-pad on the right."""
    run = _Run("augment_batch")
    hint = ("for each row take row[row != pad_idx].tolist(), augment it with augment_tokens, "
            "then re-pad all rows with torch.nn.utils.rnn.pad_sequence(..., batch_first=True, "
            "padding_value=pad_idx)")
    batch = torch.tensor([[5, 6, 7, 8], [9, 10, 1, 1]])  # pad id 1
    g = _gen(0)
    with run.case("augment_batch(batch, pad_idx=1, p_delete=0.0, n_swaps=0, g)", hint):
        out = fn(batch, 1, 0.0, 0, g)
        _assert_tensor(out)
        if not torch.equal(out, batch):
            raise AssertionError(f"got {out.tolist()}, expected the batch unchanged")
    with run.case("augment_batch(batch, pad_idx=1, p_delete=0.0, n_swaps=2, g)", hint):
        out = fn(batch, 1, 0.0, 2, g)
        if _shape(out) != [2, 4] or sorted(out[1][out[1] != 1].tolist()) != [9, 10]:
            raise AssertionError(f"got {out.tolist()}: row 1 should hold 9 and 10, then pads")
    with run.case("augment_batch(batch, pad_idx=1, p_delete=1.0, n_swaps=0, g)",
                  "the batch gets as long as its longest augmented row, no longer"):
        out = fn(batch, 1, 1.0, 0, g)
        _assert_equal(out.tolist(), [[5], [9]])
    with run.case("augment_batch(batch, pad_idx=0, ...): rows of different lengths",
                  "pad with pad_idx on the right"):
        src = torch.tensor([[3, 4, 5, 0, 0], [6, 0, 0, 0, 0], [7, 8, 9, 10, 11]])
        out = fn(src, 0, 0.0, 0, g)
        if not torch.equal(out, src):
            raise AssertionError(f"got {out.tolist()}, expected {src.tolist()}")
    run.done()


def _rnn_configs() -> list[dict]:
    from convs2s.baselines import RNNAttentionSeq2Seq

    kwargs = [
        dict(emb_dim=8, enc_hid_dim=12, dec_hid_dim=16, attn_dim=10),
        dict(emb_dim=7, enc_hid_dim=9, dec_hid_dim=16, attn_dim=4, out_dim=3),
        dict(emb_dim=16, enc_hid_dim=16, dec_hid_dim=24),
    ]
    configs = []
    for i, kw in enumerate(kwargs):
        model = RNNAttentionSeq2Seq(30 + 7 * i, 40 - 3 * i, dropout=0.0, src_pad_idx=1,
                                    trg_pad_idx=1, **kw)
        configs.append((model.config, sum(p.numel() for p in model.parameters())))
    return configs


def baseline_parameters(gru_fn: Callable, baseline_fn: Callable) -> None:
    """Exercise "count the baseline's parameters": ``gru_parameters``, ``baseline_parameters``."""
    run = _Run("baseline_parameters")
    gru_hint = ("each of the 3 gates has an input matrix [hidden, input], a hidden matrix "
                "[hidden, hidden] and two bias vectors [hidden]")
    for inp, hid in ((3, 4), (16, 32), (128, 5)):
        expected = sum(p.numel() for p in nn.GRU(inp, hid).parameters())
        with run.case(f"gru_parameters({inp}, {hid})", gru_hint):
            _assert_equal(_assert_int(gru_fn(inp, hid)), expected)
    hint = ("add up: both embeddings, 2 GRU directions gru_parameters(E, H), the s_0 layer "
            "(2H -> D with bias), attention (D·A + 2H·A + A + A), the GRUCell on "
            "[embedding; context] (E + 2H inputs), the maxout readout from [s; c; embedding] "
            "to 2·out_dim units with bias, and the output layer out_dim -> V_t with bias")
    for config, expected in _rnn_configs():
        short = {k: config[k] for k in ("emb_dim", "enc_hid_dim", "dec_hid_dim", "attn_dim",
                                        "out_dim")}
        with run.case(f"baseline_parameters(config with {short})", hint):
            _assert_equal(_assert_int(baseline_fn(dict(config))), expected, name="the count")
    run.done()


# --------------------------------------------------------------------------------------------
# 08 · Beyond ConvS2S
# --------------------------------------------------------------------------------------------


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
EXERCISES: dict[str, Callable] = {name: globals()[name] for name in __all__[1:]}
