"""Turn the course notebooks' exercises into nbgrader assignments.

``python -m convs2s.coursework --out coursework/source`` writes, for every course notebook
``notebooks/NN_<name>.ipynb`` (01-08), a self-contained assignment notebook
``coursework/source/NN_<name>/NN_<name>.ipynb`` in nbgrader's *source* format (solutions in):

- a header (title, link to the course notebook, how to work and be graded) and a setup cell
  with the imports the exercises need, both read-only;
- per exercise: the task (read-only markdown), a solution cell (the function's signature and
  docstring stay visible; its body sits between ``### BEGIN SOLUTION`` / ``### END SOLUTION``
  and becomes ``raise NotImplementedError()`` in the student version), and an autograded test
  cell (locked, with points) that runs ``convs2s.checks.<exercise>(...)`` -- the visible checks
  self-learners run too -- followed by hidden tests between ``### BEGIN HIDDEN TESTS`` /
  ``### END HIDDEN TESTS``.

The task text and the solution code come from the course notebook (its "### Exercise N: ..."
markdown cell and the following cell tagged ``solution``), so the coursework follows the
notebooks. Everything else is defined here, in :data:`ASSIGNMENTS`: which exercises are graded,
their points, docstrings, hidden tests, the setup imports, and a complete fallback (task and
solution) used when a course notebook, or one of its exercises, is missing. The exercise tests
of the notebooks themselves use the notebook's state (trained models, data), so the coursework
grades with the self-contained :mod:`convs2s.checks` instead.

nbgrader (``nbgrader generate_assignment``, run by ``make student``) then makes the student
versions in ``coursework/release/``; see ``coursework/README.md``.
"""

from __future__ import annotations

import argparse
import ast
import io
import json
import re
import shutil
import sys
import textwrap
import tokenize
from dataclasses import dataclass, field
from pathlib import Path

from convs2s import checks

SCHEMA_VERSION = 3
BEGIN_SOLUTION, END_SOLUTION = "### BEGIN SOLUTION", "### END SOLUTION"
BEGIN_HIDDEN, END_HIDDEN = "### BEGIN HIDDEN TESTS", "### END HIDDEN TESTS"
DEFAULT_REPOSITORY = "https://github.com/convs2s-course/convs2s"
#: How many graded exercises each assignment must have at least (issue: 3 for 01-04, 1 after).
MIN_EXERCISES = {"01": 3, "02": 3, "03": 3, "04": 3, "05": 1, "06": 1, "07": 1, "08": 1}


@dataclass(frozen=True)
class Exercise:
    """One graded exercise.

    Attributes:
        id: the name of its check, ``convs2s.checks.<id>`` (= the function it asks for).
        title: the exercise's title (the notebook's, when the notebook has it).
        functions: the functions the student writes, in the order the check takes them.
        points: what the autograded test cell is worth.
        prompt: the task (markdown, without the heading); the fallback for the notebook's.
        solution: a solution defining ``functions``; the fallback for the notebook's.
        hidden: hidden tests (asserts), run by the autograder after the visible checks.
        docstrings: per function, shown to students above the code they write.
        notebook_prompt: False where the notebook's task text refers to its own state (an
            experiment, its outputs) and ``prompt`` is the self-contained version.
    """

    id: str
    title: str
    functions: tuple[str, ...]
    points: int
    prompt: str
    solution: str
    hidden: str
    docstrings: dict[str, str] = field(default_factory=dict)
    notebook_prompt: bool = True

    def check_call(self) -> str:
        return f"checks.{self.id}({', '.join(self.functions)})"


@dataclass(frozen=True)
class Assignment:
    """The graded exercises of one course notebook ``notebooks/<name>.ipynb``."""

    name: str
    title: str
    setup: str
    exercises: tuple[Exercise, ...]

    @property
    def number(self) -> str:
        return self.name[:2]

    @property
    def points(self) -> int:
        return sum(ex.points for ex in self.exercises)


def _src(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


# --------------------------------------------------------------------------------------------
# The exercises
# --------------------------------------------------------------------------------------------

_A01 = Assignment(
    name="01_glu_and_padding",
    title="Gated linear units and padding",
    setup=_src("""
        import torch
        import torch.nn.functional as F

        from convs2s import checks
    """),
    exercises=(
        Exercise(
            id="my_glu", title="GLU by hand", functions=("my_glu",), points=2,
            prompt=_src("""
                Write `my_glu(h, dim)` that splits `h` into two equal halves along `dim` and
                returns $A \\otimes \\sigma(B)$, without calling `F.glu`. It must work for any
                dimension (also negative ones) and raise a `ValueError` when that dimension has
                an odd size.
            """),
            solution=_src("""
                def my_glu(h, dim=-1):
                    if h.size(dim) % 2:
                        raise ValueError(f"dimension {dim} has odd size {h.size(dim)}")
                    a, b = h.chunk(2, dim=dim)  # a, b = h's shape with size(dim) halved
                    return a * torch.sigmoid(b)
            """),
            hidden=_src("""
                import torch as _torch
                import torch.nn.functional as _F

                _g = _torch.Generator().manual_seed(101)
                for _shape, _dim in [((3, 10, 2, 4), 1), ((2, 2), -2), ((1, 12), 1)]:
                    _h = _torch.randn(_shape, generator=_g, dtype=_torch.float64)
                    _out = my_glu(_h, _dim)
                    assert _out.dtype == _torch.float64, "keep the input's dtype"
                    _torch.testing.assert_close(_out, _F.glu(_h, dim=_dim))
                _h = _torch.randn(4, 6, generator=_g).requires_grad_()
                my_glu(_h, 1).sum().backward()
                assert _h.grad is not None and _h.grad.abs().sum() > 0, "gradients must flow"
                try:
                    my_glu(_torch.randn(3, 7, 4), -2)
                except ValueError:
                    pass
                else:
                    raise AssertionError("an odd size along dim=-2 must raise ValueError")
            """),
            docstrings={"my_glu": "A ⊗ σ(B) for the two halves A, B of h along dim (ValueError "
                                  "if that size is odd)."},
        ),
        Exercise(
            id="causal_left_padding", title="how much causal padding?",
            functions=("causal_left_padding",), points=1,
            prompt=_src("""
                Write `causal_left_padding(k)`: the number of zeros to put on the **left** of the
                sequence so that a width-`k` convolution (a) keeps the sequence length and (b)
                never lets output $i$ see an input $j > i$. The test checks both properties by
                measurement, and that `ConvGLUBlock(padding="causal")` computes the same thing.
            """),
            solution=_src("""
                def causal_left_padding(k):
                    return k - 1
            """),
            hidden=_src("""
                for _k in range(1, 12):
                    assert causal_left_padding(_k) == _k - 1, _k
            """),
            docstrings={"causal_left_padding": "Zeros on the left so that a width-k "
                                               "convolution keeps the length and is causal."},
        ),
        Exercise(
            id="my_receptive_field", title="the receptive field formula",
            functions=("my_receptive_field",), points=2,
            prompt=_src("""
                Write `my_receptive_field(k, n_layers)`: how many input positions one output of
                `n_layers` stacked width-`k` convolutions depends on. The test compares it with
                the field **measured** by `viz.dependency_map`, so derive it, do not guess: one
                layer sees $k$ inputs; how much does each further layer add?
            """),
            solution=_src("""
                def my_receptive_field(k, n_layers):
                    return 1 + n_layers * (k - 1)  # each layer adds k-1 new positions
            """),
            hidden=_src("""
                from convs2s import viz as _viz

                for _k, _layers in [(9, 6), (4, 10), (2, 15), (13, 1), (3, 20)]:
                    assert my_receptive_field(_k, _layers) == _viz.receptive_field(_k, _layers)
            """),
            docstrings={"my_receptive_field": "Input positions one output of n_layers stacked "
                                              "width-k convolutions depends on."},
        ),
    ),
)

_A02 = Assignment(
    name="02_convolutional_encoder",
    title="The convolutional encoder",
    setup=_src("""
        import torch

        from convs2s import checks, viz
    """),
    exercises=(
        Exercise(
            id="embed", title="the input embeddings", functions=("embed",), points=2,
            prompt=_src("""
                Write `embed(src, tok_embedding, pos_embedding)` that returns
                $\\mathbf{e} = \\mathbf{w} + \\mathbf{p}$ for `src = [batch, src_len]` (positions
                $0, \\dots, \\text{src\\_len}-1$). The test uses a fact from the course notebook:
                the package returns `combined` $= (\\mathbf{z} + \\mathbf{e})\\sqrt{0.5}$ and
                `conved` $= \\mathbf{z}$, so $\\mathbf{e}$ = `combined / √0.5 − conved`.
            """),
            solution=_src("""
                def embed(src, tok_embedding, pos_embedding):
                    positions = torch.arange(src.size(1), device=src.device)  # [src_len]
                    return tok_embedding(src) + pos_embedding(positions)  # [batch, src_len, emb]
            """),
            hidden=_src("""
                import torch as _torch

                _g = _torch.Generator().manual_seed(202)
                _tok, _pos = _torch.nn.Embedding(30, 5), _torch.nn.Embedding(12, 5)
                for _shape in [(4, 12), (1, 1), (3, 7)]:
                    _s = _torch.randint(0, 30, _shape, generator=_g)
                    _expected = _tok.weight[_s] + _pos.weight[: _shape[1]].unsqueeze(0)
                    _torch.testing.assert_close(embed(_s, _tok, _pos), _expected)
            """),
            docstrings={"embed": "e = w + p: token plus position embeddings, [batch, src_len, "
                                 "emb_dim]."},
        ),
        Exercise(
            id="mask_padding", title="mask the padding", functions=("mask_padding",), points=2,
            prompt=_src("""
                Write `mask_padding(x, src_mask)` for `x = [batch, hid_dim, src_len]` and a bool
                `src_mask = [batch, src_len]` (True on real tokens) that returns `x` with every
                padding position set to zero, without changing `x` in place. The test checks
                that a `convs2s.ConvGLUBlock` given your masked input (and no mask) computes what
                it computes when it masks by itself.
            """),
            solution=_src("""
                def mask_padding(x, src_mask):
                    return x.masked_fill(~src_mask.unsqueeze(1), 0.0)  # [batch, hid, src_len]
            """),
            hidden=_src("""
                import torch as _torch

                _g = _torch.Generator().manual_seed(203)
                _x = _torch.randn(2, 3, 5, generator=_g, dtype=_torch.float64)
                _all = _torch.ones(2, 5, dtype=_torch.bool)
                assert _torch.equal(mask_padding(_x, _all), _x), "no padding: nothing changes"
                _m = _torch.tensor([[True, True, False, False, False], [False] * 5])
                _out = mask_padding(_x, _m)
                assert _out.dtype == _torch.float64 and _out.shape == _x.shape
                assert (_out[1] == 0).all() and (_out[0, :, 2:] == 0).all()
                assert _torch.equal(_out[0, :, :2], _x[0, :, :2])
            """),
            docstrings={"mask_padding": "x [batch, hid_dim, src_len] with padding positions "
                                        "zeroed (a new tensor)."},
        ),
        Exercise(
            id="measured_receptive_field", title="a receptive-field meter",
            functions=("measured_receptive_field",), points=3,
            prompt=_src("""
                The course notebook found an encoder bug by measuring how far each output sees.
                Turn that into a tool: write `measured_receptive_field(stack, e)` that takes a
                function `stack` mapping embeddings `[1, src_len, emb_dim]` to outputs
                `[1, src_len, emb_dim]` and one input `e`, and returns the largest number of input
                positions any output depends on. Use `viz.measure_dependency` (channels last)
                and count. It must give $1 + L(k-1)$ for a correct encoder with $L$ blocks and
                $k$ for the buggy one (whose blocks all read the stack's input).
            """),
            solution=_src("""
                def measured_receptive_field(stack, e):
                    dep = viz.measure_dependency(stack, e, channels_last=True)  # [len, len]
                    return int(dep.sum(dim=1).max())
            """),
            hidden=_src("""
                import torch as _torch

                _e = _torch.randn(1, 9, 4, generator=_torch.Generator().manual_seed(204))
                assert measured_receptive_field(lambda t: t * 2.0, _e) == 1
                assert measured_receptive_field(lambda t: t.cumsum(dim=1), _e) == 9
                assert measured_receptive_field(lambda t: t + t.mean(dim=1, keepdim=True), _e) == 9
                assert isinstance(measured_receptive_field(lambda t: t, _e), int)
            """),
            docstrings={"measured_receptive_field": "The most input positions any output of "
                                                    "stack depends on, measured at e."},
        ),
    ),
)

_A03 = Assignment(
    name="03_causal_decoder",
    title="The causal decoder",
    setup=_src("""
        import torch
        import torch.nn.functional as F

        from convs2s import checks
    """),
    exercises=(
        Exercise(
            id="causal_padding", title="How much causal padding?", functions=("causal_padding",),
            points=1,
            prompt=_src("""
                Write `causal_padding(kernel_size)` returning `(left, right)`: how many zeros to
                add on each side of a sequence so that a convolution of width `kernel_size` (no
                built-in padding) keeps the length and output $i$ sees inputs
                $i-k+1 \\dots i$ only.
            """),
            solution=_src("""
                def causal_padding(kernel_size):
                    return kernel_size - 1, 0
            """),
            hidden=_src("""
                for _k in range(1, 10):
                    assert tuple(causal_padding(_k)) == (_k - 1, 0), _k
            """),
            docstrings={"causal_padding": "(left, right) zeros for a causal width-kernel_size "
                                          "convolution."},
        ),
        Exercise(
            id="causal_conv1d", title="A causal convolution with `F.pad`",
            functions=("causal_conv1d",), points=2,
            prompt=_src("""
                Write `causal_conv1d(x, weight, bias)` for `x = [batch, in_channels, length]` and
                `weight = [out_channels, in_channels, k]`: pad with `F.pad`, then `F.conv1d`.
                The output must have the input's length, and must not change when future inputs
                change.
            """),
            solution=_src("""
                def causal_conv1d(x, weight, bias):
                    k = weight.size(-1)
                    x = F.pad(x, (k - 1, 0))  # x = [batch, in_channels, length + k - 1]
                    return F.conv1d(x, weight, bias)  # [batch, out_channels, length]
            """),
            hidden=_src("""
                import torch as _torch
                import torch.nn.functional as _F

                _g = _torch.Generator().manual_seed(303)
                for _cin, _cout, _k, _len in [(3, 7, 6, 3), (1, 1, 2, 9), (4, 2, 5, 5)]:
                    _x = _torch.randn(2, _cin, _len, generator=_g, dtype=_torch.float64)
                    _w = _torch.randn(_cout, _cin, _k, generator=_g, dtype=_torch.float64)
                    _b = _torch.randn(_cout, generator=_g, dtype=_torch.float64)
                    _ref = _F.conv1d(_F.pad(_x, (_k - 1, 0)), _w, _b)
                    _torch.testing.assert_close(causal_conv1d(_x, _w, _b), _ref)
                    _torch.testing.assert_close(causal_conv1d(_x, _w, None), _ref - _b[:, None])
            """),
            docstrings={"causal_conv1d": "A convolution whose output t sees inputs <= t only, "
                                         "same length as x."},
        ),
        Exercise(
            id="moved_positions", title="Predict which predictions a perturbation moves",
            functions=("moved_positions",), points=3,
            prompt=_src("""
                Write `moved_positions(t, kernel_size, n_layers, length, padding)`: the sorted
                list of output positions whose logits change when decoder input $t$ changes, for
                `padding` `"causal"` or `"same"` (odd `kernel_size`). Use the receptive field,
                not the model; the test compares with the measurement on tiny ConvS2S models.
            """),
            solution=_src("""
                def moved_positions(t, kernel_size, n_layers, length, padding):
                    reach = n_layers * (kernel_size - 1)
                    if padding == "causal":
                        return [i for i in range(length) if t <= i <= t + reach]
                    return [i for i in range(length) if abs(i - t) <= reach // 2]
            """),
            hidden=_src("""
                for _t, _k, _l, _n in [(0, 3, 4, 20), (19, 3, 4, 20), (6, 7, 2, 10), (3, 1, 5, 8)]:
                    _reach = _l * (_k - 1)
                    assert list(moved_positions(_t, _k, _l, _n, "causal")) == [
                        _i for _i in range(_n) if _t <= _i <= _t + _reach]
                    assert list(moved_positions(_t, _k, _l, _n, "same")) == [
                        _i for _i in range(_n) if abs(_i - _t) <= _reach // 2]
            """),
            docstrings={"moved_positions": "Sorted output positions whose logits move when "
                                           "decoder input t changes."},
        ),
    ),
)

_A04 = Assignment(
    name="04_multi_step_attention",
    title="Multi-step attention",
    setup=_src("""
        import math

        import torch

        from convs2s import checks
    """),
    exercises=(
        Exercise(
            id="masked_softmax", title="Masked softmax", functions=("masked_softmax",),
            points=2,
            prompt=_src("""
                Write `masked_softmax(energy, src_mask)` for `energy = [batch, trg_len, src_len]`
                and `src_mask = [batch, src_len]` (True on real tokens): a softmax over the last
                dimension in which padding gets weight exactly 0.
            """),
            solution=_src("""
                def masked_softmax(energy, src_mask):
                    energy = energy.masked_fill(~src_mask[:, None, :], float("-inf"))
                    return torch.softmax(energy, dim=-1)  # [batch, trg_len, src_len]
            """),
            hidden=_src("""
                import torch as _torch

                _g = _torch.Generator().manual_seed(404)
                _e = _torch.randn(2, 3, 5, generator=_g) * 1e4  # large energies: no NaN
                _m = _torch.tensor([[True, True, False, False, False], [True] * 5])
                _out = masked_softmax(_e, _m)
                assert not _out.isnan().any()
                assert (_out[0, :, 2:] == 0).all()
                _torch.testing.assert_close(_out.sum(-1), _torch.ones(2, 3))
                _torch.testing.assert_close(_out[1], _torch.softmax(_e[1], dim=-1))
                _one = _torch.randn(1, 1, 4, generator=_g)
                _torch.testing.assert_close(
                    masked_softmax(_one, _torch.tensor([[False, True, False, False]])),
                    _torch.tensor([[[0.0, 1.0, 0.0, 0.0]]]))
            """),
            docstrings={"masked_softmax": "Softmax over src_len with exactly 0 weight on "
                                          "padding, [batch, trg_len, src_len]."},
        ),
        Exercise(
            id="length_scale", title="The length-scaling factor", functions=("length_scale",),
            points=2,
            prompt=_src("""
                Write `length_scale(src_mask)` returning the factor the context is multiplied by,
                shaped `[batch, 1, 1]` so that it broadcasts over `[batch, trg_len, emb_dim]`:
                $m\\sqrt{1/m} = \\sqrt{m}$ with $m$ the number of real tokens of each sentence.
            """),
            solution=_src("""
                def length_scale(src_mask):
                    m = src_mask.sum(dim=1).float()  # m = [batch]
                    return (m * torch.rsqrt(m)).view(-1, 1, 1)  # [batch, 1, 1]
            """),
            hidden=_src("""
                import torch as _torch

                _g = _torch.Generator().manual_seed(405)
                _lengths = _torch.randint(1, 30, (12,), generator=_g)
                _mask = _torch.arange(30)[None, :] < _lengths[:, None]
                _out = length_scale(_mask)
                assert _out.shape == (12, 1, 1) and _out.is_floating_point()
                _torch.testing.assert_close(_out.flatten(), _lengths.float().sqrt())
                assert length_scale(_torch.ones(1, 1, dtype=_torch.bool)).shape == (1, 1, 1)
            """),
            docstrings={"length_scale": "√m per sentence (m = real tokens), shaped [batch, 1, "
                                        "1]."},
        ),
        Exercise(
            id="row_entropy", title="Attention entropy", functions=("row_entropy",), points=2,
            prompt=_src("""
                Write `row_entropy(a)` for attention `a = [trg_len, src_len]` (rows sum to 1, some
                entries may be exactly 0): the mean over rows of $-\\sum_j a_{ij}\\log a_{ij}$, in
                nats, treating $0\\log 0$ as 0.
            """),
            solution=_src("""
                def row_entropy(a):
                    plogp = torch.where(a > 0, a * torch.log(a), torch.zeros_like(a))
                    return -plogp.sum(dim=-1).mean()  # scalar
            """),
            hidden=_src("""
                import math as _math

                import torch as _torch

                _a = _torch.tensor([[1.0, 0.0, 0.0, 0.0], [0.5, 0.5, 0.0, 0.0]],
                                   dtype=_torch.float64)
                assert abs(float(row_entropy(_a)) - _math.log(2) / 2) < 1e-9
                _g = _torch.Generator().manual_seed(406)
                _a = _torch.softmax(_torch.randn(10, 20, generator=_g), -1)
                _a[:, 5] = 0.0
                _a = _a / _a.sum(-1, keepdim=True)
                _expected = float(-(_a * _a.clamp_min(1e-30).log()).sum(-1).mean())
                assert abs(float(row_entropy(_a)) - _expected) < 1e-5
            """),
            docstrings={"row_entropy": "Mean over rows of the entropy (nats) of attention a "
                                       "[trg_len, src_len]."},
        ),
    ),
)

_A05 = Assignment(
    name="05_training_on_multi30k",
    title="Training on Multi30k",
    setup=_src("""
        import math
        from collections import Counter

        import torch

        from convs2s import checks
    """),
    exercises=(
        Exercise(
            id="shift_for_teacher_forcing", title="the teacher-forcing shift",
            functions=("shift_for_teacher_forcing",), points=2,
            prompt=_src("""
                Write `shift_for_teacher_forcing(trg)` that takes a batch `trg = [batch, trg_len]`
                of `<bos> … <eos> <pad>…` rows and returns `(trg_in, trg_out)`: what the decoder
                reads and what it must predict at each position.
            """),
            solution=_src("""
                def shift_for_teacher_forcing(trg):
                    trg_in = trg[:, :-1]  # trg_in = [batch, trg_len - 1]
                    trg_out = trg[:, 1:]  # trg_out = [batch, trg_len - 1]
                    return trg_in, trg_out
            """),
            hidden=_src("""
                import torch as _torch

                _t = _torch.arange(45).view(5, 9)
                _in, _out = shift_for_teacher_forcing(_t)
                assert _torch.equal(_in, _t[:, :-1]) and _torch.equal(_out, _t[:, 1:])
                _in, _out = shift_for_teacher_forcing(_torch.tensor([[2, 3], [2, 3]]))
                assert _in.tolist() == [[2], [2]] and _out.tolist() == [[3], [3]]
            """),
            docstrings={"shift_for_teacher_forcing": "(trg_in, trg_out): the decoder's input "
                                                     "and its targets, [batch, trg_len - 1] "
                                                     "each."},
        ),
        Exercise(
            id="perplexity_from_loss", title="perplexity from the loss",
            functions=("perplexity_from_loss",), points=1,
            prompt=_src("""
                Training reports the validation loss per epoch (mean cross-entropy per token, in
                nats). Write `perplexity_from_loss(loss)` that turns it into a perplexity. (What
                does a perplexity of 20 mean? The model is as unsure as if it picked uniformly
                among 20 words.)
            """),
            solution=_src("""
                def perplexity_from_loss(loss):
                    return math.exp(loss)
            """),
            hidden=_src("""
                import math as _math

                for _loss in (1e-9, 1.0, 4.6, 20.0):
                    assert _math.isclose(perplexity_from_loss(_loss), _math.exp(_loss),
                                         rel_tol=1e-9)
                assert _math.isclose(perplexity_from_loss(_math.log(20)), 20.0, rel_tol=1e-9)
            """),
            docstrings={"perplexity_from_loss": "The perplexity of a mean per-token "
                                                "cross-entropy loss in nats."},
        ),
        Exercise(
            id="build_itos", title="a vocabulary by hand", functions=("build_itos",), points=3,
            prompt=_src("""
                Write `build_itos(token_lists, min_freq, specials)` that returns the id → token
                list of a vocabulary: the specials first, then every other token seen at least
                `min_freq` times, most frequent first, ties in alphabetical order. It must equal
                `Vocab.build(...).itos`.
            """),
            solution=_src("""
                def build_itos(token_lists, min_freq,
                               specials=("<unk>", "<pad>", "<bos>", "<eos>")):
                    counts = Counter(t for tokens in token_lists for t in tokens)
                    kept = [t for t, n in counts.items() if n >= min_freq and t not in specials]
                    kept.sort(key=lambda t: (-counts[t], t))
                    return list(specials) + kept
            """),
            hidden=_src("""
                _sp = ("<unk>", "<pad>", "<bos>", "<eos>")
                assert list(build_itos([["b", "a"], ["a", "b"], ["c"]], 1)) == [*_sp, "a", "b", "c"]
                assert list(build_itos([["b", "a"], ["a", "b"], ["c"]], 2)) == [*_sp, "a", "b"]
                assert list(build_itos([["x", "y"]], 3)) == list(_sp)
                assert list(build_itos([["<pad>", "z", "z"]], 1)) == [*_sp, "z"]
                _itos = build_itos([["b", "c", "c", "a", "c", "b"]], 1)
                assert list(_itos) == [*_sp, "c", "b", "a"]
            """),
            docstrings={"build_itos": "id -> token list: specials, then tokens seen >= min_freq "
                                      "times by (-count, token)."},
        ),
    ),
)

_A06 = Assignment(
    name="06_inference_beam_search_bleu",
    title="Inference: beam search and BLEU",
    setup=_src("""
        import math

        from convs2s import checks
    """),
    exercises=(
        Exercise(
            id="rerank", title="re-rank the finished hypotheses", functions=("rerank",),
            points=3,
            prompt=_src("""
                The length penalty α only changes how *finished* hypotheses are compared, not
                which ones the search finds. Write `rerank(hypotheses, alpha)`: given
                `beam_search(..., return_all=True)` output made with α = 1, i.e.
                `(tokens, score)` pairs with `score = Σ log p / (len + 1)` (the + 1 counts
                `<eos>`), return the token lists ordered by `Σ log p / (len + 1) ** alpha`, best
                first.
            """),
            solution=_src("""
                def rerank(hypotheses, alpha):
                    rescored = []
                    for tokens, score in hypotheses:
                        length = len(tokens) + 1  # the generated tokens plus <eos>
                        total = score * length  # undo the α = 1 normalisation: Σ log p
                        rescored.append((total / length**alpha, tokens))
                    rescored.sort(key=lambda r: r[0], reverse=True)  # best first
                    return [tokens for _, tokens in rescored]
            """),
            hidden=_src("""
                _h = [([1, 2, 3], -1.0), ([4], -1.5), ([], -2.5)]  # totals -4, -3, -2.5
                assert [list(t) for t in rerank(_h, 0.0)] == [[], [4], [1, 2, 3]]
                assert [list(t) for t in rerank(_h, 1.0)] == [[1, 2, 3], [4], []]
                assert [list(t) for t in rerank(_h, 2.0)] == [[1, 2, 3], [4], []]
                assert [list(t) for t in rerank(_h[:1], 0.7)] == [[1, 2, 3]]
            """),
            docstrings={"rerank": "Token lists ordered by Σ log p / (len + 1) ** alpha, best "
                                  "first."},
        ),
        Exercise(
            id="brevity_penalty", title="the brevity penalty", functions=("brevity_penalty",),
            points=2,
            prompt=_src("""
                Write `brevity_penalty(hyp_len, ref_len)` for corpus lengths (total tokens of all
                outputs and of all references): 1 when the outputs are longer than the
                references, else $e^{1 - r/c}$. An empty output (`hyp_len == 0`) gets 0.
            """),
            solution=_src("""
                def brevity_penalty(hyp_len, ref_len):
                    if hyp_len == 0:
                        return 0.0
                    return 1.0 if hyp_len > ref_len else math.exp(1 - ref_len / hyp_len)
            """),
            hidden=_src("""
                import math as _math

                assert brevity_penalty(100, 100) == 1.0 and brevity_penalty(20, 19) == 1.0
                assert _math.isclose(brevity_penalty(1, 4), _math.exp(-3), rel_tol=1e-12)
                assert _math.isclose(brevity_penalty(999, 1000), _math.exp(1 - 1000 / 999))
                assert brevity_penalty(0, 1) == 0.0
            """),
            docstrings={"brevity_penalty": "BLEU's brevity penalty for corpus lengths c = "
                                           "hyp_len, r = ref_len."},
        ),
        Exercise(
            id="repeats", title="stuttering outputs", functions=("repeats",), points=2,
            notebook_prompt=False,
            prompt=_src("""
                A common failure of neural translators is repetition ("a man in a shirt shirt
                shirt"). Write `repeats(tokens, n=1)` that returns True when the same n-gram
                occurs twice in a row (`["a", "a"]` for n = 1; `["in", "a", "in", "a"]` for
                n = 2).
            """),
            solution=_src("""
                def repeats(tokens, n=1):
                    for i in range(len(tokens) - 2 * n + 1):
                        if tokens[i: i + n] == tokens[i + n: i + 2 * n]:
                            return True
                    return False
            """),
            hidden=_src("""
                assert repeats([1, 2, 3, 4, 5, 6, 7, 8, 9, 9])
                assert not repeats([1, 2, 3, 1, 2, 3, 4], 2) and repeats([1, 2, 3, 1, 2, 3], 3)
                assert repeats([5, 6, 7, 8, 5, 6, 7, 8], 4) and not repeats([5, 6, 7, 8], 4)
                assert not repeats([1, 2], 2) and not repeats([3, 4, 3], 1)
            """),
            docstrings={"repeats": "True when some n-gram of tokens is immediately repeated."},
        ),
    ),
)

_A07 = Assignment(
    name="07_convs2s_vs_rnn_attention",
    title="ConvS2S vs an RNN with attention",
    setup=_src("""
        import torch

        from convs2s import checks
    """),
    exercises=(
        Exercise(
            id="augment_tokens", title="Source-side augmentation", functions=("augment_tokens",),
            points=3,
            prompt=_src("""
                A cheap way to make a translator robust is to perturb its *input* during training
                (e.g. Wei & Zou, 2019, "EDA"). Write `augment_tokens(ids, p_delete, n_swaps,
                generator)` for one source sentence given as a list of token ids: first delete
                every token independently with probability `p_delete` (draw with
                `torch.rand(1, generator=generator)`, one draw per token; if everything would be
                deleted, keep the first token), then swap `n_swaps` random pairs of positions
                (pick two positions with `torch.randint`). Return a new list; don't modify
                `ids`.
            """),
            solution=_src("""
                def augment_tokens(ids, p_delete, n_swaps, generator):
                    kept = [t for t in ids if float(torch.rand(1, generator=generator)) >= p_delete]
                    if not kept:
                        kept = [ids[0]]
                    for _ in range(n_swaps if len(kept) > 1 else 0):
                        i, j = torch.randint(len(kept), (2,), generator=generator).tolist()
                        kept[i], kept[j] = kept[j], kept[i]
                    return kept
            """),
            hidden=_src("""
                import torch as _torch

                _g = _torch.Generator().manual_seed(707)
                assert list(augment_tokens([42], 1.0, 3, _g)) == [42]
                assert list(augment_tokens([42], 0.0, 5, _g)) == [42]
                _ids = [1, 2]
                _out = augment_tokens(_ids, 0.0, 1, _g)
                assert list(_out) in ([1, 2], [2, 1]) and _ids == [1, 2]
                _ids = [7, 8, 9]
                assert augment_tokens(_ids, 0.0, 0, _g) is not _ids, "return a new list"
                _kept = [len(augment_tokens(list(range(50)), 0.5, 0, _g)) for _ in range(40)]
                assert 20 < sum(_kept) / 40 < 30
            """),
            docstrings={"augment_tokens": "ids with tokens deleted (prob. p_delete) and n_swaps "
                                          "random swaps, as a new list."},
        ),
        Exercise(
            id="augment_batch", title="Augment a padded batch", functions=("augment_batch",),
            points=2, notebook_prompt=False,
            prompt=_src("""
                Write `augment_batch(src, pad_idx, p_delete, n_swaps, generator)`: apply your
                `augment_tokens` (the exercise above) to the real tokens of every row of a
                right-padded source batch `src = [batch, src_len]`, row by row in order, and
                return a new right-padded batch (it may be shorter). In the course notebook you
                then train two identical ConvS2S models side by side, one on augmented sources,
                and compare their validation perplexity.
            """),
            solution=_src("""
                def augment_batch(src, pad_idx, p_delete, n_swaps, generator):
                    rows = [augment_tokens(row[row != pad_idx].tolist(), p_delete, n_swaps,
                                           generator) for row in src]
                    return torch.nn.utils.rnn.pad_sequence([torch.tensor(r) for r in rows],
                                                           batch_first=True, padding_value=pad_idx)
            """),
            hidden=_src("""
                import torch as _torch

                _src = _torch.tensor([[4, 5, 6, 7, 8, 0], [9, 10, 11, 0, 0, 0],
                                      [12, 13, 14, 15, 16, 17]])
                _out = augment_batch(_src, 0, 0.3, 2, _torch.Generator().manual_seed(708))
                _g = _torch.Generator().manual_seed(708)
                _rows = [augment_tokens(_r[_r != 0].tolist(), 0.3, 2, _g) for _r in _src]
                assert _out.dtype == _torch.long and _out.size(1) == max(len(_r) for _r in _rows)
                for _r, _o in zip(_rows, _out, strict=True):
                    assert _o[: len(_r)].tolist() == list(_r) and (_o[len(_r):] == 0).all()
            """),
            docstrings={"augment_batch": "src [batch, src_len] with each row's real tokens "
                                         "augmented, re-padded on the right."},
        ),
        Exercise(
            id="baseline_parameters", title="Count the baseline's parameters",
            functions=("gru_parameters", "baseline_parameters"), points=3,
            prompt=_src("""
                Write `gru_parameters(input_size, hidden_size)`: the parameters of one direction
                of `torch.nn.GRU` (three gates, each with an input matrix, a hidden matrix and
                two bias vectors). Then write `baseline_parameters(config)` for an
                `RNNAttentionSeq2Seq` config (`model.config`): embeddings, the bidirectional
                encoder GRU, the layer that makes $s_0$ from both final states, the attention
                ($W_a$ without bias, $U_a$ with bias, $v_a$ without bias), the decoder `GRUCell`
                (input: embedding and context), the maxout readout (to `2 * out_dim` units, with
                bias) and the output layer (with bias).
            """),
            solution=_src("""
                def gru_parameters(input_size, hidden_size):
                    return 3 * hidden_size * (input_size + hidden_size) + 6 * hidden_size


                def baseline_parameters(config):
                    E, H, D = config["emb_dim"], config["enc_hid_dim"], config["dec_hid_dim"]
                    A, O = config["attn_dim"], config["out_dim"]
                    Vs, Vt = config["src_vocab_size"], config["trg_vocab_size"]
                    encoder = Vs * E + 2 * gru_parameters(E, H) + (2 * H * D + D)
                    attention = D * A + (2 * H * A + A) + A
                    decoder = Vt * E + gru_parameters(E + 2 * H, D)
                    output = (D + 2 * H + E) * 2 * O + 2 * O + O * Vt + Vt
                    return encoder + attention + decoder + output
            """),
            hidden=_src("""
                from convs2s.baselines import rnn_parameter_count as _count

                assert gru_parameters(1, 1) == 12 and gru_parameters(10, 20) == 3 * 20 * 30 + 120
                for _cfg in (dict(src_vocab_size=1000, trg_vocab_size=1200, emb_dim=256,
                                  enc_hid_dim=512, dec_hid_dim=512, attn_dim=512, out_dim=256),
                             dict(src_vocab_size=5, trg_vocab_size=6, emb_dim=1, enc_hid_dim=2,
                                  dec_hid_dim=3, attn_dim=4, out_dim=5)):
                    assert baseline_parameters(_cfg) == _count(**_cfg), _cfg
            """),
            docstrings={
                "gru_parameters": "Parameters of one direction of torch.nn.GRU(input_size, "
                                  "hidden_size).",
                "baseline_parameters": "Parameters of RNNAttentionSeq2Seq(**config).",
            },
        ),
    ),
)

_A08 = Assignment(
    name="08_beyond_convs2s",
    title="Beyond ConvS2S",
    setup=_src("""
        import torch
        import torch.nn.functional as F

        from convs2s import checks
    """),
    exercises=(
        Exercise(
            id="separable_params", title="Count a separable convolution's parameters",
            functions=("separable_params", "saving"), points=2,
            prompt=_src("""
                Write `separable_params(c_in, c_out, k, bias=True)`: the parameters of a
                depthwise convolution without bias (`c_in` filters of width `k`) followed by a
                1x1 convolution from `c_in` to `c_out` channels with (optionally) a bias. Then
                write `saving(c_in, c_out, k)`: how many times fewer parameters than
                `nn.Conv1d(c_in, c_out, k)` (with bias).
            """),
            solution=_src("""
                def separable_params(c_in, c_out, k, bias=True):
                    return c_in * k + c_in * c_out + (c_out if bias else 0)


                def saving(c_in, c_out, k):
                    return (c_in * c_out * k + c_out) / separable_params(c_in, c_out, k)
            """),
            hidden=_src("""
                assert separable_params(1, 1, 1) == 3 and separable_params(1, 1, 1, bias=False) == 2
                assert separable_params(512, 1024, 5, bias=False) == 512 * 5 + 512 * 1024
                assert 2.9 < saving(1024, 2048, 3) < 3.0  # about k for many channels
                assert abs(saving(2, 3, 4) - 27 / 17) < 1e-12
            """),
            docstrings={
                "separable_params": "Parameters of depthwise (no bias) + pointwise (bias "
                                    "optional) convolutions.",
                "saving": "How many times fewer parameters than nn.Conv1d(c_in, c_out, k).",
            },
        ),
        Exercise(
            id="causal_separable_conv", title="A causal separable convolution with `F.conv1d`",
            functions=("causal_separable_conv",), points=2,
            prompt=_src("""
                Write `causal_separable_conv(x, depthwise_weight, pointwise_weight,
                pointwise_bias)` for `x = [batch, c_in, len]`, `depthwise_weight = [c_in, 1, k]`,
                `pointwise_weight = [c_out, c_in, 1]`: pad $k-1$ zeros on the left with `F.pad`,
                then two `F.conv1d` calls (the first with `groups=c_in`). The output must have
                the input's length and must not change when future inputs change.
            """),
            solution=_src("""
                def causal_separable_conv(x, depthwise_weight, pointwise_weight, pointwise_bias):
                    k = depthwise_weight.size(-1)
                    x = F.pad(x, (k - 1, 0))  # x = [batch, c_in, len + k - 1]
                    x = F.conv1d(x, depthwise_weight, groups=x.size(1))  # x = [batch, c_in, len]
                    return F.conv1d(x, pointwise_weight, pointwise_bias)  # [batch, c_out, len]
            """),
            hidden=_src("""
                import torch as _torch

                from convs2s.variants import DepthwiseSeparableConv1d as _DSC

                _ref = _DSC(3, 5, 6, padding="causal", init="pytorch").double()
                _x = _torch.randn(1, 3, 4, generator=_torch.Generator().manual_seed(808),
                                  dtype=_torch.float64)
                _out = causal_separable_conv(_x, _ref.depthwise.weight, _ref.pointwise.weight,
                                             _ref.pointwise.bias)
                assert _out.shape == (1, 5, 4)
                _torch.testing.assert_close(_out, _ref(_x).detach())
            """),
            docstrings={"causal_separable_conv": "Causal depthwise-then-pointwise convolution, "
                                                 "[batch, c_out, len]."},
        ),
        Exercise(
            id="lightweight_conv", title="A lightweight convolution (Wu et al., 2019)",
            functions=("lightweight_conv",), points=3,
            prompt=_src("""
                Write `lightweight_conv(x, weight)` for `x = [batch, channels, len]` and
                `weight = [H, k]` ($H$ heads; `channels` divisible by $H$): normalise each head's
                kernel with a softmax over its $k$ taps; channel $c$ uses head
                `c // (channels // H)`; apply it as a **causal** depthwise convolution (left
                padding $k-1$). It has only $H \\cdot k$ weights, and because each kernel sums to
                1, every output is a weighted average of past inputs of its channel.
            """),
            solution=_src("""
                def lightweight_conv(x, weight):
                    heads, k = weight.shape
                    channels = x.size(1)
                    kernel = torch.softmax(weight, dim=-1)  # kernel = [H, k], rows sum to 1
                    kernel = kernel.repeat_interleave(channels // heads, dim=0).unsqueeze(1)
                    x = F.pad(x, (k - 1, 0))  # x = [batch, channels, len + k - 1]
                    return F.conv1d(x, kernel, groups=channels)  # [batch, channels, len]
            """),
            hidden=_src("""
                import torch as _torch
                import torch.nn.functional as _F

                _g = _torch.Generator().manual_seed(809)
                _x = _torch.randn(3, 8, 6, generator=_g, dtype=_torch.float64)
                _w = _torch.zeros(2, 1, dtype=_torch.float64)  # k = 1: every output is its input
                _torch.testing.assert_close(lightweight_conv(_x, _w), _x)
                for _heads, _k in [(1, 3), (8, 2), (4, 4)]:
                    _w = _torch.randn(_heads, _k, generator=_g, dtype=_torch.float64)
                    _taps = _torch.softmax(_w, -1).repeat_interleave(8 // _heads, dim=0)  # [8, k]
                    _win = _F.pad(_x, (_k - 1, 0)).unfold(2, _k, 1)  # [3, 8, 6, k]
                    _expected = (_win * _taps[None, :, None, :]).sum(-1)  # [3, 8, 6]
                    _torch.testing.assert_close(lightweight_conv(_x, _w), _expected)
            """),
            docstrings={"lightweight_conv": "Causal depthwise convolution with softmax-normalised "
                                            "kernels shared by heads."},
        ),
    ),
)

#: The coursework: one assignment per course notebook 01-08.
ASSIGNMENTS: tuple[Assignment, ...] = (_A01, _A02, _A03, _A04, _A05, _A06, _A07, _A08)


def exercise_by_id(exercise_id: str) -> Exercise:
    for assignment in ASSIGNMENTS:
        for ex in assignment.exercises:
            if ex.id == exercise_id:
                return ex
    raise KeyError(f"no exercise {exercise_id!r}; known: {sorted(checks.EXERCISES)}")


# --------------------------------------------------------------------------------------------
# Reading the course notebooks
# --------------------------------------------------------------------------------------------

_HEADING = re.compile(r"^###\s+Exercise\s+(\d+)\s*:\s*(.+?)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class NotebookExercise:
    """An exercise as a course notebook writes it (prompt, solution cell, test cell)."""

    number: int
    title: str
    prompt: str  # the markdown after the "### Exercise N: title" line
    solution: str
    test: str
    functions: tuple[str, ...]  # the functions the solution cell defines


def _cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _tags(cell: dict) -> list[str]:
    return list(cell.get("metadata", {}).get("tags", []))


def defined_functions(source: str) -> tuple[str, ...]:
    """Names of the top-level functions ``source`` defines (empty if it does not parse)."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ()
    return tuple(n.name for n in tree.body if isinstance(n, ast.FunctionDef))


def read_notebook_exercises(path: str | Path) -> list[NotebookExercise]:
    """The exercises of a course notebook: a markdown "### Exercise N: title" cell, then a code
    cell tagged ``solution`` and a code cell tagged ``exercise-test``."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    cells = nb.get("cells", [])
    found = []
    for i, cell in enumerate(cells):
        if cell.get("cell_type") != "code" or "solution" not in _tags(cell):
            continue
        heading = None
        for prev in reversed(cells[:i]):
            if prev.get("cell_type") == "markdown":
                text = _cell_source(prev)
                matches = list(_HEADING.finditer(text))
                if matches:
                    heading = (matches[-1], text)
                break
        if heading is None:
            continue
        match, text = heading
        test = ""
        for nxt in cells[i + 1:]:
            if nxt.get("cell_type") == "code" and "exercise-test" in _tags(nxt):
                test = _cell_source(nxt)
                break
            if nxt.get("cell_type") == "code" and "solution" in _tags(nxt):
                break
        solution = _cell_source(cell)
        found.append(NotebookExercise(
            number=int(match.group(1)), title=match.group(2).strip(),
            prompt=text[match.end():].strip("\n"), solution=solution, test=test,
            functions=defined_functions(solution),
        ))
    return found


def notebook_title(path: str | Path) -> str | None:
    """The course notebook's title: its first heading, without "# NN ·"."""
    nb = json.loads(Path(path).read_text(encoding="utf-8"))
    for cell in nb.get("cells", []):
        if cell.get("cell_type") == "markdown":
            m = re.match(r"^#\s+(?:\d+\s*·\s*)?(.+?)\s*$", _cell_source(cell), re.MULTILINE)
            return m.group(1) if m else None
    return None


def find_notebook(notebooks_dir: str | Path, number: str) -> Path | None:
    """``notebooks/<number>_*.ipynb``, or None when the course notebook does not exist (yet)."""
    matches = sorted(Path(notebooks_dir).glob(f"{number}_*.ipynb"))
    return matches[0] if matches else None


# --------------------------------------------------------------------------------------------
# Rendering nbgrader cells
# --------------------------------------------------------------------------------------------


def _signature_end(lines: list[str], def_line: int) -> int:
    """Index of the line holding the ':' that ends the ``def`` starting at ``lines[def_line]``."""
    text = "\n".join(lines[def_line:]) + "\n"
    depth = 0
    for tok in tokenize.generate_tokens(io.StringIO(text).readline):
        if tok.type == tokenize.OP:
            if tok.string in "([{":
                depth += 1
            elif tok.string in ")]}":
                depth -= 1
            elif tok.string == ":" and depth == 0:
                return def_line + tok.start[0] - 1
    raise ValueError("could not find the end of the function signature")


def solution_cell_source(solution: str, functions: tuple[str, ...],
                         docstrings: dict[str, str]) -> str:
    """The nbgrader solution cell: imports, then each function with its signature and docstring
    outside and its body inside ``### BEGIN SOLUTION`` / ``### END SOLUTION``.

    Top-level statements other than imports and the listed functions (a notebook's experiment
    code, helper definitions for it) are left out.
    """
    tree = ast.parse(solution)
    lines = solution.splitlines()
    defs = {n.name: n for n in tree.body if isinstance(n, ast.FunctionDef)}
    missing = [name for name in functions if name not in defs]
    if missing:
        raise ValueError(f"the solution does not define {', '.join(missing)}")
    parts = []
    imports = [n for n in tree.body if isinstance(n, ast.Import | ast.ImportFrom)]
    if imports:
        parts.append("\n".join("\n".join(lines[n.lineno - 1:n.end_lineno]) for n in imports))
    for node in sorted((defs[name] for name in functions), key=lambda n: n.lineno):
        start = min([node.lineno] + [d.lineno for d in node.decorator_list]) - 1
        head_end = _signature_end(lines, node.lineno - 1)
        body = node.body
        has_doc = (isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                   and isinstance(body[0].value.value, str))
        if has_doc:
            head_end = body[0].end_lineno - 1
            body = body[1:]
        if not body:
            raise ValueError(f"{node.name} has no body to turn into a solution region")
        first = lines[body[0].lineno - 1]
        indent = first[: len(first) - len(first.lstrip())]
        head = lines[start:head_end + 1]
        if not has_doc and node.name in docstrings:
            doc = textwrap.fill(docstrings[node.name], width=96 - len(indent),
                                break_long_words=False)
            doc_lines = doc.splitlines()
            if len(doc_lines) == 1:
                head.append(f'{indent}"""{doc_lines[0]}"""')
            else:
                head.append(f'{indent}"""{doc_lines[0]}')
                head += [f"{indent}{line}" for line in doc_lines[1:]]
                head.append(f'{indent}"""')
        body_lines = lines[head_end + 1:node.end_lineno]
        while body_lines and not body_lines[0].strip():
            body_lines.pop(0)
        parts.append("\n".join(head + [indent + BEGIN_SOLUTION] + body_lines
                               + [indent + END_SOLUTION]))
    return "\n\n\n".join(parts)


def grade_cell_source(ex: Exercise) -> str:
    """The autograded test cell: the visible check, then the hidden tests."""
    return "\n".join([
        f"# Autograded test ({ex.points} point{'s' if ex.points != 1 else ''}): the visible "
        f"checks of convs2s.checks.{ex.id};",
        "# the grader also runs hidden tests. Do not edit this cell.",
        ex.check_call(),
        BEGIN_HIDDEN,
        ex.hidden,
        END_HIDDEN,
    ])


def _nbgrader(grade_id: str, *, solution: bool = False, grade: bool = False,
              locked: bool = False, points: int | None = None) -> dict:
    meta = {"grade": grade, "grade_id": grade_id, "locked": locked,
            "schema_version": SCHEMA_VERSION, "solution": solution, "task": False}
    if points is not None:
        meta["points"] = points
    return meta


def _cell(cell_type: str, source: str, cell_id: str, nbgrader: dict) -> dict:
    cell = {"cell_type": cell_type, "id": cell_id, "metadata": {"nbgrader": nbgrader},
            "source": source.splitlines(keepends=True)}
    if cell_type == "code":
        cell["execution_count"] = None
        cell["outputs"] = []
    return cell


def repository_url(root: str | Path | None = None) -> str:
    """The course's GitHub URL from ``[project.urls] Repository`` (as ``make badges`` uses)."""
    if root is not None:
        try:
            from convs2s.badges import read_repository_url

            return read_repository_url(Path(root) / "pyproject.toml").rstrip("/")
        except (OSError, ValueError):
            pass
    return DEFAULT_REPOSITORY


@dataclass
class BuiltAssignment:
    """A generated source notebook and where its parts came from."""

    name: str
    notebook: dict
    from_notebook: list[str]  # exercise ids whose task/solution came from the course notebook
    from_module: list[str]  # exercise ids built from this module's fallback
    ungraded: list[str]  # course notebook exercises with no check (not in the coursework)


def build_assignment(assignment: Assignment, notebooks_dir: str | Path,
                     repo_url: str = DEFAULT_REPOSITORY) -> BuiltAssignment:
    """The nbgrader source notebook of ``assignment`` (a notebook JSON dict)."""
    path = find_notebook(notebooks_dir, assignment.number)
    name = path.stem if path else assignment.name
    title = (notebook_title(path) if path else None) or assignment.title
    nb_exercises = read_notebook_exercises(path) if path else []
    link = f"{repo_url}/blob/main/notebooks/{name}.ipynb"
    total = assignment.points
    header = "\n".join([
        f"# Coursework {assignment.number} · {title}",
        "",
        f"Graded exercises of the course notebook [`{name}.ipynb`]({link}) (Convolutional "
        "Sequence to Sequence Learning, Gehring et al., 2017). Work through the notebook first; "
        "the exercises here run on their own, on a CPU, in seconds.",
        "",
        "How to work:",
        "",
        "1. Run the setup cell below once.",
        "2. For each exercise, write the function's body where it says `# YOUR CODE HERE`, in "
        "place of `raise NotImplementedError()`. Keep the function's name and signature.",
        "3. Run the test cell under it: it runs `convs2s.checks.<exercise>`, the same visible "
        "checks you can run anywhere, and prints ✓, or ✗ with a hint.",
        "4. Grading runs every test cell again, followed by hidden tests, so make each function "
        "right in general, not only for the visible cases. Do not edit the test cells: they are "
        "restored before grading.",
        "5. Before you submit: restart the kernel and run all cells.",
        "",
        f"This assignment has {len(assignment.exercises)} exercises worth {total} points.",
    ])
    prefix = f"cw{assignment.number}"
    cells = [
        _cell("markdown", header, f"{prefix}-header", _nbgrader("header", locked=True)),
        _cell("code", assignment.setup, f"{prefix}-setup", _nbgrader("setup", locked=True)),
    ]
    used_numbers, from_nb, from_module = set(), [], []
    for n, ex in enumerate(assignment.exercises, start=1):
        match = next((e for e in nb_exercises if set(ex.functions) <= set(e.functions)), None)
        if match is not None:
            used_numbers.add(match.number)
            from_nb.append(ex.id)
            # Where the notebook's task refers to its own experiment, so may its title.
            ex_title = match.title if ex.notebook_prompt else ex.title
            prompt = match.prompt if ex.notebook_prompt else ex.prompt
            solution = match.solution
        else:
            from_module.append(ex.id)
            ex_title, prompt, solution = ex.title, ex.prompt, ex.solution
        points = f"{ex.points} point{'s' if ex.points != 1 else ''}"
        task = f"### Exercise {n}: {ex_title} ({points})\n\n{prompt.strip()}"
        cells += [
            _cell("markdown", task, f"{prefix}-{ex.id}-task",
                  _nbgrader(f"{ex.id}_task", locked=True)),
            _cell("code", solution_cell_source(solution, ex.functions, ex.docstrings),
                  f"{prefix}-{ex.id}-solution", _nbgrader(ex.id, solution=True)),
            _cell("code", grade_cell_source(ex), f"{prefix}-{ex.id}-tests",
                  _nbgrader(f"{ex.id}_tests", grade=True, locked=True, points=ex.points)),
        ]
    ungraded = [f"Exercise {e.number}: {e.title} ({', '.join(e.functions) or 'no function'})"
                for e in nb_exercises if e.number not in used_numbers]
    notebook = {
        "cells": cells,
        "metadata": {
            "kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                           "name": "python3"},
            "language_info": {"name": "python"},
        },
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    return BuiltAssignment(name, notebook, from_nb, from_module, ungraded)


def write_assignments(out_dir: str | Path, notebooks_dir: str | Path = "notebooks", *,
                      repo_url: str | None = None, clean: bool = False,
                      only: set[str] | None = None) -> list[BuiltAssignment]:
    """Write ``out_dir/<name>/<name>.ipynb`` for every assignment (or those numbered in ``only``).

    ``clean`` first removes ``out_dir`` (so renamed assignments leave nothing behind).
    """
    out_dir = Path(out_dir)
    if repo_url is None:
        repo_url = repository_url(Path(notebooks_dir).resolve().parent)
    if clean and out_dir.exists():
        shutil.rmtree(out_dir)
    built = []
    for assignment in ASSIGNMENTS:
        if only and assignment.number not in only and assignment.name not in only:
            continue
        result = build_assignment(assignment, notebooks_dir, repo_url)
        target = out_dir / result.name / f"{result.name}.ipynb"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(json.dumps(result.notebook, indent=1, ensure_ascii=False) + "\n",
                          encoding="utf-8")
        built.append(result)
    return built


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m convs2s.coursework",
        description="Write the nbgrader source notebooks of the coursework from the course "
                    "notebooks' exercises.")
    parser.add_argument("--out", default="coursework/source",
                        help="nbgrader's source folder (default: coursework/source)")
    parser.add_argument("--notebooks", default="notebooks",
                        help="the course notebooks (default: notebooks)")
    parser.add_argument("--clean", action="store_true", help="empty --out first")
    parser.add_argument("--only", nargs="*", default=None,
                        help="assignment numbers or names to write (default: all)")
    args = parser.parse_args(argv)
    built = write_assignments(args.out, args.notebooks, clean=args.clean,
                              only=set(args.only) if args.only else None)
    for b in built:
        where = (f"{len(b.from_notebook)} from the course notebook"
                 + (f", {len(b.from_module)} from convs2s.coursework" if b.from_module else ""))
        n = len(b.from_notebook) + len(b.from_module)
        print(f"{b.name}: {n} exercises ({where}) -> {Path(args.out) / b.name}")
        for item in b.ungraded:
            print(f"  warning: {b.name} {item} has no check in convs2s.checks; not graded",
                  file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
