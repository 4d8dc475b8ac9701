"""Hidden tests of notebook 01's exercises.

One function per exercise id, given this copy's ``variant`` (a dict: a class's numbers, drawn
from the exercise's ``VERSIONS`` below, or ``{}`` for the notebook's own), returning its cases
(:mod:`convs2s.course.checks.testing`). Grading runs only each case's call in the sandbox, with
the student's answer; the judgement (``accept`` or ``raises``) runs outside it, where the
expected values are. The comparisons are the checks' own (the same readers and tolerances).
The ``explain`` exercise (``glu_vs_gtu``) is graded by hand and has none.

``VERSIONS`` (at the end of each file) declares a class's own versions of the notebook's predict
and derive exercises (:mod:`convs2s.course.checks.class_variants`): the choices a class draws
from, and how each choice changes the task, the values its hidden test reads and the
instructor's solution. A builder's name and its helpers' start with ``_``: only the hidden tests
are public names of this file.

``SAMPLES`` (after it) holds sample answers to each autograded exercise
(:class:`convs2s.course.checks.testing.Samples`, each the text of an answer cell, run after the
notebook's exercise-setup cell): right ones written in different styles, which the visible check
and grading must both accept, and typical wrong ones and ones that call what the exercise
declares as a shortcut, which both must refuse (a shortcut one for that call).
``python -m tools.coursework --check-hidden`` and ``tests/coursework/
test_check_and_grading_agree.py`` run every one through both.
"""

from textwrap import dedent

import torch
import torch.nn.functional as F

from convs2s.course.checks import EXERCISES, nb01
from convs2s.course.checks.class_variants import NOTE, Variant, Versions
from convs2s.course.checks.testing import (
    Case,
    Samples,
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
    return predicted("moved_outputs", "same_padding_moves", variant)


def my_receptive_field(variant):
    convs = variant.get("convs_per_layer", 1)  # convolutions per layer (1 in the notebook)
    cases = []
    for k, layers in [(9, 6), (4, 10), (2, 15), (13, 1), (3, 20), (3, 1), (5, 2), (1, 4)]:
        expected = 1 + convs * layers * (k - 1)
        cases.append(Case(f"my_receptive_field({k}, {layers})",
                          call("my_receptive_field", k, layers),
                          lambda got, e=expected: assert_equal(as_int(got), e)))
    return cases


# --------------------------------------------------------------------------------------------
# A class's own versions (convs2s.course.checks.class_variants)
# --------------------------------------------------------------------------------------------


def _moved_outputs(k: int, layers: int, length: int, changed: int) -> list[int]:
    """The outputs of ``layers`` "same"-padded blocks of width ``k`` over ``length`` positions
    that move when input ``changed`` changes: those within layers·(k - 1)/2 of it (the formula
    that the exercise's declared ``measure`` measures)."""
    reach = layers * (k - 1) // 2
    return list(range(max(0, changed - reach), min(length - 1, changed + reach) + 1))


def _same_padding_moves_version(choice: tuple | None) -> Variant:
    """predict: new numbers; the expected value measured with the package, as the check does."""
    k, layers, length, changed = (nb01.SAME_K, nb01.SAME_LAYERS, nb01.SAME_LENGTH,
                                  nb01.SAME_CHANGED) if choice is None else choice
    moved = EXERCISES["same_padding_moves"].measure(changed, k, layers, length)
    params = {"k": k, "layers": layers, "length": length, "changed": changed, "expected": moved}
    if choice is None:
        return Variant(params, public=True)
    step, reach = (k - 1) // 2, layers * (k - 1) // 2
    return Variant(params, replace=(
        ("$L = 3$ blocks", f"$L = {layers}$ blocks"),
        ("kernel width $k = 3$", f"kernel width $k = {k}$"),
        ("10 positions, $0, \\dots, 9$", f"{length} positions, $0, \\dots, {length - 1}$"),
        ("position **8**", f"position **{changed}**"),
    ), solution=(
        f"# Each \"same\" block of width {k} reaches ({k} - 1)/2 = {step} to each side, {layers} "
        f"blocks reach\n# {layers} · {step} = {reach}: inputs {changed} - {reach} ... {changed} "
        f"+ {reach}, cut at the sentence's ends 0 and {length - 1}.\n"
        f"moved_outputs = list(range(max(0, {changed} - {reach}), "
        f"min({length - 1}, {changed} + {reach}) + 1))"))


def _my_receptive_field_version(choice: int | None) -> Variant:
    """derive: the thing counted changes; the hidden test computes with ``convs_per_layer``."""
    if choice is None:
        return Variant({"convs_per_layer": 1}, public=True)
    c = choice
    return Variant({"convs_per_layer": c}, note=(
        f"{NOTE}each of the `n_layers` layers is a block of **{c} stacked width-`k` "
        "convolutions** (as a residual block holds several), so `n_layers` blocks hold "
        f"{c}·`n_layers` convolutions. Count the input positions one output of the whole stack "
        "depends on."), answer_replace=(
        ("one output of n_layers stacked width-k convolutions depends on",
         f"one output of n_layers blocks of {c} stacked width-k convolutions depends on"),),
        solution=(
        "def my_receptive_field(k, n_layers):\n"
        f"    return 1 + {c} * n_layers * (k - 1)  # every convolution adds k - 1 positions"))


VERSIONS = {
    # (kernel width k, blocks L, sentence length, changed position, not at an end): 1,081
    # stacks whose window reaches past at most one end of the sentence and whose moved outputs
    # are not the public [5, ..., 9]; 140 different moved sets
    "same_padding_moves": Versions(tuple(
        (k, layers, length, changed)
        for k in (3, 5, 7) for layers in (2, 3, 4) for length in range(11, 21)
        for changed in range(1, length - 1)
        if (changed >= layers * (k - 1) // 2 or changed + layers * (k - 1) // 2 < length)
        and _moved_outputs(k, layers, length, changed) != [5, 6, 7, 8, 9]),
        _same_padding_moves_version),
    # convolutions per block
    "my_receptive_field": Versions(tuple(range(2, 22)), _my_receptive_field_version),
}


# --------------------------------------------------------------------------------------------
# Sample answers, each the text of an answer cell: right ones both the check and grading
# accept, wrong ones and ones that take a shortcut both refuse (--check-hidden runs them)
# --------------------------------------------------------------------------------------------

SAMPLES = {
    "my_glu": Samples(right=[
        dedent("""\
        def my_glu(h, dim=-1):
            if h.shape[dim] % 2 == 1:
                raise ValueError("odd")
            half = h.shape[dim] // 2
            a = h.narrow(dim, 0, half)
            b = h.narrow(dim, half, half)
            return a * torch.sigmoid(b)
        """),
        dedent("""\
        def _halves(t, d):
            n = t.size(d)
            if n % 2:
                raise ValueError(f"size {n} is odd")
            return torch.split(t, n // 2, dim=d)

        def my_glu(h, dim=-1):
            content, gate = _halves(h, dim)
            return content * (1 / (1 + torch.exp(-gate)))
        """),
    ], wrong=[
        "def my_glu(h, dim=-1):\n    a, b = h.chunk(2, dim)\n    return a * torch.sigmoid(b)",
        dedent("""\
        def my_glu(h, dim=-1):
            a, b = h.chunk(2, dim)
            if h.size(dim) % 2:
                raise ValueError()
            return torch.sigmoid(a) * b
        """),
        "def my_glu(h, dim=-1):\n    return F.glu(h, dim)",
        "def my_glu(h, dim=-1):\n    return torch._C._nn.glu(h, dim)",
        "def my_glu(h, dim=-1):\n    return torch.ops.aten.glu(h, dim)",
        "def my_glu(h, dim=-1):\n    return torch.nn.GLU(dim)(h)",
    ], shortcut=[
        dedent("""\
        def my_glu(h, dim=-1):
            if h.shape[dim] % 2:
                raise ValueError("odd size")
            return F.glu(h, dim)
        """),
        dedent("""\
        glu = F.glu  # an alias, made before the check runs

        def my_glu(h, dim=-1):
            if h.size(dim) % 2 == 1:
                raise ValueError(f"size {h.size(dim)} is odd")
            return glu(h, dim=dim)
        """),
        dedent("""\
        def my_glu(h, dim=-1):
            if h.shape[dim] % 2:
                raise ValueError("odd size")
            return torch._C._nn.glu(h, dim)
        """),
        dedent("""\
        def my_glu(h, dim=-1):
            if h.shape[dim] % 2:
                raise ValueError("odd size")
            return torch.ops.aten.glu(h, dim)
        """),
    ]),
    "same_padding_moves": Samples(right=[
        "moved_outputs = [5, 6, 7, 8, 9]",
        "moved_outputs = (9, 8, 7, 6, 5)",
        "moved_outputs = list(range(5, 10))",
        "import numpy as np\nmoved_outputs = [np.int64(p) for p in range(5, 10)]",
        "import numpy as np\nmoved_outputs = np.arange(5, 10)",
        "moved_outputs = torch.arange(5, 10)",
    ], wrong=[
        "moved_outputs = [5, 6, 7, 8, 9, 10, 11]",
        "moved_outputs = [7, 8, 9]",
        "moved_outputs = '5 6 7 8 9'",
    ]),
    "my_receptive_field": Samples(right=[
        "def my_receptive_field(k, n_layers):\n    return (k - 1) * n_layers + 1",
        dedent("""\
        def my_receptive_field(k, n_layers):
            field = 1
            for _layer in range(n_layers):
                field += k - 1
            return field
        """),
        # right, though the static read flags them (advisory: grading flags them for the
        # instructor and takes no marks)
        dedent("""\
        import importlib.util
        def my_receptive_field(k, n_layers):
            return 1 + n_layers * (k - 1)
        """),
        dedent("""\
        import os

        def my_receptive_field(k, n_layers):
            return 1 + n_layers * (k - 1)
        """),
    ], wrong=[
        "def my_receptive_field(k, n_layers):\n    return n_layers * k",
        "def my_receptive_field(k, n_layers):\n    return float(1 + n_layers * (k - 1))",
    ], shortcut=[
        dedent("""\
        from convs2s.course.receptive_field import receptive_field

        def my_receptive_field(k, n_layers):
            return receptive_field(k, n_layers)
        """),
        dedent("""\
        from convs2s.course.receptive_field import receptive_field

        def my_receptive_field(k, n_layers):  # the shortcut, its error caught
            try:
                return receptive_field(k, n_layers)
            except Exception:
                return 1 + n_layers * (k - 1)
        """),
        dedent("""\
        from convs2s.course.dependency import dependency_map

        def my_receptive_field(k, n_layers):
            deps = dependency_map(k, n_layers, "causal", length=n_layers * k + 1)
            return int(deps[-1].sum())  # the inputs the last output depends on
        """),
        dedent("""\
        from convs2s.course.dependency import measure_dependency

        def my_receptive_field(k, n_layers):
            weight = torch.ones(1, 1, k)

            def stack(x):
                for _layer in range(n_layers):
                    x = F.conv1d(x, weight)
                return x

            length = n_layers * (k - 1) + 1
            return int(measure_dependency(stack, torch.randn(1, 1, length))[0].sum())
        """),
    ]),
}
