"""Hidden tests of notebook 02's exercises.

The conventions are those of ``01.py``: one function per exercise id, given this copy's
``variant`` (``{}`` for the notebook's own numbers), returning its cases; only the calls run in
the sandbox, the judgement runs outside with the checks' own readers and comparisons. The debug
exercise ``mask_source_padding`` takes an encoder's pieces, which are not data: its probe
(``nb02.probe_mask_source_padding``) builds the seeded encoder in the sandbox and returns z;
the same encoder is built here for the expected value. The ``explain`` exercise
(``keys_and_values``) is graded by hand and has none.
"""

from fractions import Fraction
from textwrap import dedent

import torch

from convs2s.course.checks import EXERCISES, nb02
from convs2s.course.checks.class_variants import NOTE, Variant, Versions, tex
from convs2s.course.checks.testing import (
    Case,
    Samples,
    as_int,
    assert_close,
    assert_equal,
    call,
    predicted,
    probe,
    seeded,
)
from convs2s.model.encoder import Encoder


def residual_variance(variant):
    return predicted("variance_ratio", "residual_variance", variant)


#: The encoder of mask_source_padding's hidden case: padding id 0 this time.
_ENCODER = dict(vocab_size=40, emb_dim=6, hid_dim=10, n_layers=5, kernel_size=5, dropout=0.0,
                max_positions=16, pad_idx=0)
_ENCODER_SEED, _PAD = 202, 0


def mask_source_padding(variant):
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [12, 13, 0, 0, 0, 0, 0],
                        [14, 15, 16, 17, 0, 0, 0]])  # padding id 0 this time
    with seeded(_ENCODER_SEED):
        enc = Encoder(**_ENCODER).eval()
    with torch.no_grad():
        expected = enc(src).conved  # z = [3, 7, emb_dim]
    return [Case("conv_stack(e, src != 0, emb2hid, convs, hid2emb) of a 5-layer encoder (k = 5) "
                 "on a batch of lengths [7, 2, 4] whose padding id is 0",
                 probe("convs2s.course.checks.nb02:probe_mask_source_padding",
                       seed=_ENCODER_SEED, config=_ENCODER, src=src, pad=_PAD),
                 lambda got: assert_close(got, expected, name="z"))]


def block_parameters(variant):
    groups = variant.get("groups", 1)  # the convolution's groups (1: the notebook's block)
    cases = []
    # m = 24: hid_dim // groups at least 22 apart from any other class's groups (2..21)
    for m, k in [(16, 3), (1, 7), (12, 1), (2, 25), (24, 3)]:
        hid = groups * m  # a multiple of groups
        expected = 2 * hid * (hid // groups) * k + 4 * hid
        cases.append(Case(f"block_parameters({hid}, {k})", call("block_parameters", hid, k),
                          lambda got, e=expected: assert_equal(as_int(got), e)))
    return cases


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _residual_variance_version(choice: tuple | None) -> Variant:
    """predict: new numbers; the expected value measured with the package, as the check does."""
    if choice is None:
        blocks = nb02.VARIANCE_BLOCKS
        return Variant({"blocks": blocks,
                        "expected": EXERCISES["residual_variance"].measure(blocks)},
                       public=True)
    scale, blocks = choice
    measured = EXERCISES["residual_variance"].measure(blocks, scale)  # as the check measures
    params = {"blocks": blocks, "scale": str(scale), "expected": measured}
    replace = (("freshly initialised 10-block", f"freshly initialised {blocks}-block"),
               ("output of block 10", f"output of block {blocks}"))
    why = ("# At initialisation GLU(conv(x)) has about the variance of x (the factor 4 of §3.5, "
           "section 8)\n# and the two are nearly independent: GLU(conv(x)) + x has twice the "
           "variance of x.\n")
    if scale == 1:
        return Variant(params, replace=replace, solution=(
            f"{why}# Every block doubles the variance, {blocks} blocks give 2**{blocks}.\n"
            f"variance_ratio = 2**{blocks}"))
    s = tex(scale)
    return Variant(params, replace=(
        ("the variance without $\\sqrt{0.5}$", f"the variance with ${s}$ in place of "
                                               "$\\sqrt{0.5}$"),
        ("run its blocks **without** the $\\sqrt{0.5}$, i.e. $\\text{GLU}(\\text{conv}(x)) + x$",
         f"run its blocks with ${s}$ **in place of** the $\\sqrt{{0.5}}$, i.e. "
         f"$(\\text{{GLU}}(\\text{{conv}}(x)) + x)\\cdot{s}$"),
        *replace,
    ), solution=(
        f"{why}# The factor {scale} multiplies a variance by ({scale})², so every block "
        f"multiplies it by\n# 2 · ({scale})² = {2 * scale**2}, and {blocks} blocks by "
        f"({2 * scale**2})**{blocks}.\n"
        f"variance_ratio = (2 * ({scale.numerator} / {scale.denominator}) ** 2) ** {blocks}"))


def _block_parameters_version(choice: int | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``groups``."""
    if choice is None:
        return Variant({"groups": 1}, public=True)
    groups = choice
    return Variant({"groups": groups}, note=(
        f"{NOTE}the block's convolution is a **grouped** convolution with `groups={groups}` "
        f"(each output channel reads only `hid_dim / {groups}` input channels); `hid_dim` is a "
        f"multiple of {groups}. Bias and weight normalisation as in the package's block."),
        answer_replace=(
        ("Parameters of ConvGLUBlock(hid_dim, kernel_size, weight_norm=True).",
         f"Parameters of ConvGLUBlock(hid_dim, kernel_size, weight_norm=True) whose convolution "
         f"has groups={groups}."),),
        solution=(
        "def block_parameters(hid_dim, kernel_size):\n"
        "    out_channels = 2 * hid_dim\n"
        f"    v = out_channels * (hid_dim // {groups}) * kernel_size  # grouped kernels\n"
        "    return v + out_channels + out_channels  # + bias + weight norm's g"))


VERSIONS = {
    # (residual factor s, blocks N): (2 s²)^N = 2^6, 2^3, 2^-3, 2^-6, ..., 2^-60, each 8 times
    # the next. s = 1 is the notebook's "without √0.5": its 2^N holds within the factor 5 only
    # up to ~10 blocks (GLU saturates as the activations grow), so the other choices shrink
    # them, with s = 1/2, 1/4 or 1/8 in place of √0.5 (measured within 1.4x of (2 s²)^N)
    "residual_variance": Versions(tuple((Fraction(s), blocks) for s, blocks in (
        (1, 6), (1, 3), ("1/2", 3), ("1/2", 6), ("1/4", 3), ("1/2", 12), ("1/8", 3), ("1/4", 6),
        ("1/4", 7), ("1/4", 8), ("1/4", 9), ("1/8", 6), ("1/4", 11), ("1/4", 12), ("1/4", 13),
        ("1/4", 14), ("1/8", 9), ("1/4", 16), ("1/4", 17), ("1/4", 18), ("1/4", 19),
        ("1/8", 12))), _residual_variance_version,
        public_answers=(2**10,)),  # the public solution: 2**10
    # the convolution's groups
    "block_parameters": Versions(tuple(range(2, 22)), _block_parameters_version),
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "residual_variance": Samples(right=[
        "variance_ratio = 2 ** 10",
        "variance_ratio = 4000.0",
        "variance_ratio = torch.tensor(1024.0)",
        "import numpy as np\nvariance_ratio = np.float64(2 ** 10)",
        "variance_ratio = torch.tensor([1024.0])",
        # right, though the static read flags them (advisory: grading flags them for the
        # instructor and takes no marks)
        "import os\nvariance_ratio = 2 ** 10",
    ], wrong=[
        "variance_ratio = 10",
        "variance_ratio = 1.0",
        "variance_ratio = -4000",
    ]),
    "mask_source_padding": Samples(right=[
        dedent("""\
        def conv_stack(e, src_mask, emb2hid, convs, hid2emb):
            keep = src_mask.unsqueeze(1).float()
            x = emb2hid(e).transpose(1, 2)
            for conv in convs:
                x = x * keep
                p = (conv.kernel_size[0] - 1) // 2
                x = (F.glu(conv(F.pad(x, (p, p))), dim=1) + x) * math.sqrt(0.5)
            z = hid2emb(x.transpose(1, 2))
            return z * src_mask.unsqueeze(-1)
        """),
    ], wrong=[
        dedent("""\
        def conv_stack(e, src_mask, emb2hid, convs, hid2emb):
            x = emb2hid(e).transpose(1, 2)
            x = x.masked_fill(~src_mask.unsqueeze(1), 0.0)
            for conv in convs:
                p = (conv.kernel_size[0] - 1) // 2
                x = (F.glu(conv(F.pad(x, (p, p))), dim=1) + x) * math.sqrt(0.5)
            z = hid2emb(x.transpose(1, 2))
            return z.masked_fill(~src_mask.unsqueeze(-1), 0.0)
        """),
    ]),
    "block_parameters": Samples(right=[
        dedent("""\
        def block_parameters(hid_dim, kernel_size):
            return 2 * hid_dim * (hid_dim * kernel_size + 2)
        """),
        dedent("""\
        def _weights(h, k):
            return 2 * h * h * k

        def block_parameters(hid_dim, kernel_size):
            total = _weights(hid_dim, kernel_size)
            total += 2 * hid_dim  # bias
            total += 2 * hid_dim  # g
            return total
        """),
        # right, though the static read flags them (advisory: grading flags them for the
        # instructor and takes no marks)
        dedent("""\
        import os

        def block_parameters(hid_dim, kernel_size):
            return 2 * hid_dim * (hid_dim * kernel_size + 2)
        """),
    ], wrong=[
        dedent("""\
        def block_parameters(hid_dim, kernel_size):
            return 2 * hid_dim * hid_dim * kernel_size + 2 * hid_dim
        """),
        dedent("""\
        def block_parameters(hid_dim, kernel_size):
            return hid_dim * hid_dim * kernel_size + 2 * hid_dim
        """),
    ], shortcut=[
        dedent("""\
        from convs2s.model.layers import ConvGLUBlock

        def block_parameters(hid_dim, kernel_size):
            block = ConvGLUBlock(hid_dim, kernel_size, padding="same")
            return sum(p.numel() for p in block.parameters())
        """),
        dedent("""\
        def block_parameters(hid_dim, kernel_size):
            conv = torch.nn.Conv1d(hid_dim, 2 * hid_dim, kernel_size)
            return sum(p.numel() for p in conv.parameters()) + 2 * hid_dim  # and the gains g
        """),
        dedent("""\
        from convs2s.model.convs2s import count_parameters
        from convs2s.model.layers import ConvGLUBlock

        def block_parameters(hid_dim, kernel_size):
            return count_parameters(ConvGLUBlock(hid_dim, kernel_size, padding="same"))
        """),
        dedent("""\
        from types import SimpleNamespace

        from convs2s.model.convs2s import count_parameters

        def block_parameters(hid_dim, kernel_size):
            shapes = [(2 * hid_dim, hid_dim, kernel_size), (2 * hid_dim,), (2 * hid_dim,)]
            weights = SimpleNamespace(parameters=lambda: [torch.empty(s) for s in shapes])
            return count_parameters(weights, trainable_only=False)  # no module built
        """),
    ]),
}
