"""Hidden tests of notebook 04's exercises (autograding runs them after the visible checks).

The conventions are those of ``01.py``. The ``explain`` exercise (``attention_in_every_layer``)
is graded by hand and has none.
"""


def masked_softmax(masked_softmax):
    import torch

    from convs2s.course.checks import _core, guarded

    fn = guarded("masked_softmax", masked_softmax)
    g = torch.Generator().manual_seed(404)
    energy = torch.randn(2, 3, 5, generator=g) * 1e4  # large energies: no NaN, no overflow
    mask = torch.tensor([[True, True, False, False, False], [True] * 5])
    expected = torch.softmax(energy.masked_fill(~mask[:, None, :], float("-inf")), dim=-1)
    out = fn(energy, mask)
    _core._assert_close(out, expected, ref="the masked softmax")
    assert bool((out[0, :, 2:] == 0).all()), "the weights on padding must be exactly 0"
    one = torch.randn(1, 1, 4, generator=g)
    _core._assert_close(fn(one, torch.tensor([[False, True, False, False]])),
                        torch.tensor([[[0.0, 1.0, 0.0, 0.0]]]), ref="one real token")


def scaled_context_variance(predicted_variance):
    from convs2s.course.checks import nb04

    nb04.accept_scaled_context_variance(predicted_variance, _variant["expected"])  # noqa: F821


def attention_macs(attention_macs):
    from convs2s.course.checks import _core, guarded

    fn = guarded("attention_macs", attention_macs)
    every = _variant["every"]  # noqa: F821 - 1: every layer attends, as in the notebook
    for layers, n, m, d in [(20, 30, 25, 256), (1, 1, 1, 1), (4, 50, 3, 128), (9, 7, 11, 16)]:
        _core._assert_equal(_core._assert_int(fn(layers, n, m, d)),
                            (layers // every) * 2 * n * m * d,
                            name=f"attention_macs({layers}, {n}, {m}, {d})")


def row_entropy(row_entropy):
    import math

    import torch

    from convs2s.course.checks import _core, guarded

    fn = guarded("row_entropy", row_entropy)
    a = torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25] * 4])
    expected = torch.tensor((math.log(2) + 0.0 + math.log(4)) / 3)
    _core._assert_close(fn(a), expected, name="row_entropy(a)", ref="the mean entropy")
    b = torch.softmax(torch.randn(6, 9, generator=torch.Generator().manual_seed(405)), -1)
    _core._assert_close(fn(b), -(b * b.log()).sum(-1).mean(), name="row_entropy(b)",
                        ref="the mean entropy")
