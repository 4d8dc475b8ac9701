"""Hidden tests of notebook 02's exercises.

The conventions are those of ``01.py``: one function per exercise id, given this copy's
``variant`` (``{}`` for the notebook's own numbers), returning its cases; only the calls run in
the sandbox, the judgement runs outside with the checks' own readers and comparisons. The debug
exercise ``mask_source_padding`` takes an encoder's pieces, which are not data: its probe
(``nb02.probe_mask_source_padding``) builds the seeded encoder in the sandbox and returns z;
the same encoder is built here for the expected value. The ``explain`` exercise
(``keys_and_values``) is graded by hand and has none.
"""

import torch

from convs2s.course.checks import nb02
from convs2s.course.checks.testing import (
    Case,
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
    return predicted("variance_ratio", nb02.accept_residual_variance, variant)


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
