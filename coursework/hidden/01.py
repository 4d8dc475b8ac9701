"""Hidden tests of notebook 01's exercises.

One function per exercise id, given this copy's ``variant`` (a dict: a class's numbers from
``tools/variants.py``, or ``{}`` for the notebook's own), returning its cases
(:mod:`convs2s.course.checks.testing`). Grading runs only each case's call in the sandbox, with
the student's answer; the judgement (``accept`` or ``raises``) runs outside it, where the
expected values are. The comparisons are the checks' own (the same readers and tolerances).
The ``explain`` exercise (``glu_vs_gtu``) is graded by hand and has none.
"""

import torch
import torch.nn.functional as F

from convs2s.course.checks import nb01
from convs2s.course.checks.testing import (
    Case,
    as_int,
    assert_close,
    assert_equal,
    call,
    predicted,
)


def my_glu(variant):
    g = torch.Generator().manual_seed(101)
    cases = []
    for shape, dim in [((3, 10, 2, 4), 1), ((2, 2), -2), ((1, 12), 1), ((2, 4, 6), -1)]:
        h = torch.randn(shape, generator=g)
        expected = F.glu(h, dim=dim)
        cases.append(Case(f"my_glu(h of shape {list(shape)}, dim={dim})", call("my_glu", h, dim),
                          lambda got, e=expected: assert_close(got, e)))
    cases.append(Case("my_glu(h of shape [3, 7, 4], dim=-2) (size 7 is odd)",
                      call("my_glu", torch.randn(3, 7, 4, generator=g), -2), raises="ValueError"))
    return cases


def same_padding_moves(variant):
    return predicted("moved_outputs", nb01.accept_same_padding_moves, variant)


def my_receptive_field(variant):
    convs = variant.get("convs_per_layer", 1)  # convolutions per layer (1 in the notebook)
    cases = []
    for k, layers in [(9, 6), (4, 10), (2, 15), (13, 1), (3, 20), (3, 1), (5, 2), (1, 4)]:
        expected = 1 + convs * layers * (k - 1)
        cases.append(Case(f"my_receptive_field({k}, {layers})",
                          call("my_receptive_field", k, layers),
                          lambda got, e=expected: assert_equal(as_int(got), e)))
    return cases
