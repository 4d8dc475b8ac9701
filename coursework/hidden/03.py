"""Hidden tests of notebook 03's exercises.

The conventions are those of ``01.py``. Two cases need more than data crossing into the
sandbox: ``causal_conv1d``'s causality is read from a gradient (``nb03.
probe_causal_conv1d_gradient`` runs the backward pass there and returns the gradient), and
``teacher_forcing_loss`` takes a model (``nb03.probe_teacher_forcing_loss`` builds the seeded
model there; the same model is built here for the expected loss). The ``explain`` exercise
(``incremental_same_as_full``) is graded by hand and has none.
"""

from textwrap import dedent

import torch
import torch.nn.functional as F

from convs2s.course.checks import nb03
from convs2s.course.checks.class_variants import NOTE, Variant, Versions
from convs2s.course.checks.testing import (
    Case,
    Samples,
    as_int,
    as_number,
    as_tensor,
    assert_close,
    assert_equal,
    call,
    probe,
    seeded,
)
from convs2s.model import ConvS2S


def causal_conv1d(variant):
    g = torch.Generator().manual_seed(303)
    cases = []
    for cin, cout, k, length in [(3, 7, 6, 3), (1, 1, 2, 9), (4, 2, 5, 5)]:
        x = torch.randn(2, cin, length, generator=g)
        w = torch.randn(cout, cin, k, generator=g)
        b = torch.randn(cout, generator=g)
        ref = F.conv1d(F.pad(x, (k - 1, 0)), w, b)  # ref = [2, cout, length]
        shapes = f"x of shape {list(x.shape)}, weight of shape {list(w.shape)}"
        cases.append(Case(f"causal_conv1d({shapes}, bias)", call("causal_conv1d", x, w, b),
                          lambda got, e=ref: assert_close(got, e)))
        cases.append(Case(f"causal_conv1d({shapes}, None)", call("causal_conv1d", x, w, None),
                          lambda got, e=ref - b[:, None]: assert_close(got, e)))
    # causal: the gradient of output 3 reaches no input after 3
    x = torch.randn(1, 2, 7, generator=g)
    w = torch.randn(3, 2, 3, generator=g)
    cases.append(Case("causal_conv1d(x of shape [1, 2, 7], weight of shape [3, 2, 3], None): "
                      "the gradient of output 3 must not reach inputs 4, 5, 6",
                      probe("convs2s.course.checks.nb03:probe_causal_conv1d_gradient",
                            x=x, weight=w, output=3),
                      _no_gradient_after(3, list(x.shape))))
    # k = 1 (nothing to cut), as the visible check has it
    x = torch.randn(2, 5, 8, generator=g)
    w, b = torch.randn(10, 5, 1, generator=g), torch.randn(10, generator=g)
    expected = F.conv1d(x, w, b)
    cases.append(Case("causal_conv1d(x of shape [2, 5, 8], weight of shape [10, 5, 1], bias)",
                      call("causal_conv1d", x, w, b), lambda got: assert_close(got, expected)))
    return cases


def _no_gradient_after(t, shape):
    def accept(got):
        if got is None:
            raise AssertionError("no gradient reached x")
        grad = as_tensor(got, "the gradient with respect to x")
        if list(grad.shape) != shape or not bool((grad[0, :, t + 1:] == 0).all()):
            raise AssertionError(f"output {t} depends on a later input")

    return accept


#: The model of teacher_forcing_loss's hidden cases.
_VOCABS = [30, 30]
_MODEL = dict(emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=2, kernel_size=3, dropout=0.0,
              max_positions=16, src_pad_idx=0, trg_pad_idx=0)
_MODEL_SEED = 313


def teacher_forcing_loss(variant):
    with seeded(_MODEL_SEED):
        model = ConvS2S(*_VOCABS, **_MODEL).eval()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    trg = torch.tensor([[2, 11, 12, 13, 3], [2, 14, 3, 0, 0]])  # <bos> ... <eos> padding
    cases = []
    for pad in (0, 7):  # the padding id given, not one written into the answer
        t = torch.where(trg == 0, torch.tensor(pad), trg)
        with torch.no_grad():
            logits, _ = model(src, t[:, :-1])
            ref = F.cross_entropy(logits.reshape(-1, 30), t[:, 1:].reshape(-1),
                                  ignore_index=pad).item()
        cases.append(Case(f"teacher_forcing_loss(a ConvS2S with 2 decoder layers, a batch of 2 "
                          f"sentences, pad_idx={pad})",
                          probe("convs2s.course.checks.nb03:probe_teacher_forcing_loss",
                                seed=_MODEL_SEED, vocab_sizes=_VOCABS, config=_MODEL, src=src,
                                trg=t, pad=pad),
                          lambda got, e=ref: _within(as_number(got, "the loss"), e)))
    return cases


def _within(got, expected):
    if not nb03.loss_holds(got, expected):  # the visible check's rule
        raise AssertionError("the loss is not the teacher-forced one")


def cache_floats(variant):
    beam = variant.get("beam", 1)  # hypotheses per sentence (1 in the notebook)
    cases = []
    for layers, k, hid, steps in [(20, 3, 512, 50), (1, 1, 64, 4), (6, 7, 3, 1), (4, 3, 256, 200)]:
        expected = beam * layers * (k - 1) * hid
        cases.append(Case(f"cache_floats({layers}, {k}, {hid}, {steps})",
                          call("cache_floats", layers, k, hid, steps),
                          lambda got, e=expected: assert_equal(as_int(got), e)))
    return cases


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _cache_floats_version(choice: int | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``beam``."""
    if choice is None:
        return Variant({"beam": 1}, public=True)
    beam = choice
    return Variant({"beam": beam}, note=(
        f"{NOTE}count the floats for one sentence decoded with **a beam of {beam} "
        "hypotheses** (each hypothesis keeps a cache of its own)."), answer_replace=(
        ("cache per sentence after", f"cache per sentence (a beam of {beam} hypotheses) after"),),
        solution=(
        "def cache_floats(n_layers, kernel_size, hid_dim, steps):\n"
        f"    return {beam} * n_layers * (kernel_size - 1) * hid_dim"))


VERSIONS = {
    "cache_floats": Versions(tuple(range(2, 22)), _cache_floats_version),  # hypotheses in a beam
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "causal_conv1d": Samples(right=[
        dedent("""\
        def causal_conv1d(x, weight, bias):
            k = weight.size(-1)
            return F.conv1d(x, weight, bias, padding=k - 1)[..., : x.size(-1)]
        """),
        dedent("""\
        def causal_conv1d(x, weight, bias):
            k = weight.shape[2]
            zeros = x.new_zeros(x.shape[0], x.shape[1], k - 1)
            return F.conv1d(torch.cat([zeros, x], dim=2), weight, bias)
        """),
    ], wrong=[
        dedent("""\
        def causal_conv1d(x, weight, bias):
            k = weight.size(-1)
            return F.conv1d(x, weight, bias, padding=k - 1)[..., k - 1:]
        """),
        dedent("""\
        def causal_conv1d(x, weight, bias):
            k = weight.size(-1)
            return F.conv1d(x, weight, bias, padding=(k - 1) // 2)
        """),
    ], shortcut=[
        dedent("""\
        def causal_conv1d(x, weight, bias):
            return F.conv1d(F.pad(x, (weight.size(-1) - 1, 0)), weight, bias)
        """),
        dedent("""\
        def causal_conv1d(x, weight, bias):
            return F.conv1d(torch._C._nn.pad(x, (weight.size(-1) - 1, 0)), weight, bias)
        """),
        dedent("""\
        def causal_conv1d(x, weight, bias):
            return F.conv1d(torch.constant_pad_nd(x, (weight.size(-1) - 1, 0)), weight, bias)
        """),
    ]),
    "teacher_forcing_loss": Samples(right=[
        dedent("""\
        def teacher_forcing_loss(model, src, trg, pad_idx):
            logits, _ = model(src, trg[:, :-1])
            gold = trg[:, 1:]
            keep = gold != pad_idx
            losses = F.cross_entropy(logits.transpose(1, 2), gold, reduction="none")
            return losses[keep].mean()
        """),
    ], wrong=[
        dedent("""\
        def teacher_forcing_loss(model, src, trg, pad_idx):
            logits, _ = model(src, trg[:, :-1])
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg[:, 1:].reshape(-1))
        """),
        dedent("""\
        def teacher_forcing_loss(model, src, trg, pad_idx):
            logits, _ = model(src, trg[:, 1:])
            return F.cross_entropy(logits.reshape(-1, logits.size(-1)), trg[:, 1:].reshape(-1),
                                   ignore_index=pad_idx)
        """),
    ]),
    "cache_floats": Samples(right=[
        dedent("""\
        def cache_floats(n_layers, kernel_size, hid_dim, steps):
            return n_layers * (kernel_size - 1) * hid_dim
        """),
        dedent("""\
        def cache_floats(n_layers, kernel_size, hid_dim, steps):
            per_layer = 0
            for _column in range(kernel_size - 1):
                per_layer += hid_dim
            return per_layer * n_layers
        """),
    ], wrong=[
        dedent("""\
        def cache_floats(n_layers, kernel_size, hid_dim, steps):
            return n_layers * kernel_size * hid_dim
        """),
        dedent("""\
        def cache_floats(n_layers, kernel_size, hid_dim, steps):
            return n_layers * (kernel_size - 1) * hid_dim * steps
        """),
    ], shortcut=[
        dedent("""\
        def cache_floats(n_layers, kernel_size, hid_dim, steps):
            return torch.nn.Linear(1, 1) and n_layers * (kernel_size - 1) * hid_dim
        """),
        dedent("""\
        def cache_floats(n_layers, kernel_size, hid_dim, steps):
            conv = torch.nn.Conv1d(hid_dim, 2 * hid_dim, kernel_size)  # one decoder layer
            return n_layers * conv.in_channels * (conv.kernel_size[0] - 1)
        """),
    ]),
}
