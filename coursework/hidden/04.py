"""Hidden tests of notebook 04's exercises (the autograder runs them after the visible checks).

One function per exercise id; its parameters are the names the learner defines, its body plain
asserts that the course builder copies into the grade cell (so every local name starts with
``_``: the body must not overwrite the learner's variables). The ``explain`` exercise
(``attention_in_every_layer``) is graded by hand and has none.
"""


def masked_softmax(masked_softmax):
    import torch as _torch

    _g = _torch.Generator().manual_seed(404)
    _e = _torch.randn(2, 3, 5, generator=_g) * 1e4  # large energies: no NaN, no overflow
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


def scaled_context_variance(predicted_variance):
    # m · Σ a² for m = 8 and weights (1/2, 1/14, ..., 1/14): 8 · (1/4 + 7/196) = 16/7
    assert abs(float(predicted_variance) - 16 / 7) < 0.02, predicted_variance


def attention_macs(attention_macs):
    for _layers, _n, _m, _d in [(20, 30, 25, 256), (1, 1, 1, 1), (4, 50, 3, 128)]:
        assert attention_macs(_layers, _n, _m, _d) == 2 * _layers * _n * _m * _d


def row_entropy(row_entropy):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _row_entropy = _guarded("row_entropy", row_entropy)

    import math as _math

    import torch as _torch

    _a = _torch.tensor([[0.5, 0.5, 0.0, 0.0], [1.0, 0.0, 0.0, 0.0], [0.25] * 4])
    _expected = (_math.log(2) + 0.0 + _math.log(4)) / 3
    assert abs(float(_row_entropy(_a)) - _expected) < 1e-6
    _b = _torch.softmax(_torch.randn(6, 9, generator=_torch.Generator().manual_seed(405)), -1)
    _ref = -(_b * _b.log()).sum(-1).mean().item()
    assert abs(float(_row_entropy(_b)) - _ref) < 1e-5
