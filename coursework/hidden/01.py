"""Hidden tests of notebook 01's exercises (the autograder runs them after the visible checks).

One function per exercise id; its parameters are the names the learner defines, its body plain
asserts that the course builder copies into the grade cell (so every local name starts with
``_``: the body must not overwrite the learner's variables). The ``explain`` exercise
(``glu_vs_gtu``) is graded by hand and has none.
"""


def my_glu(my_glu):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _my_glu = _guarded("my_glu", my_glu)

    import torch as _torch
    import torch.nn.functional as _F

    _g = _torch.Generator().manual_seed(101)
    for _shape, _dim in [((3, 10, 2, 4), 1), ((2, 2), -2), ((1, 12), 1)]:
        _h = _torch.randn(_shape, generator=_g, dtype=_torch.float64)
        _out = _my_glu(_h, _dim)
        assert _out.dtype == _torch.float64, "keep the input's dtype"
        _torch.testing.assert_close(_out, _F.glu(_h, dim=_dim))
    _h = _torch.randn(4, 6, generator=_g).requires_grad_()
    _my_glu(_h, 1).sum().backward()
    assert _h.grad is not None and _h.grad.abs().sum() > 0, "gradients must flow"
    try:
        _my_glu(_torch.randn(3, 7, 4), -2)
    except ValueError:
        pass
    else:
        raise AssertionError("an odd size along dim=-2 must raise ValueError")


def same_padding_moves(moved_outputs):
    # 3 'same' blocks of width 3 reach 3 positions each way: 8 - 3 ... 8 + 3, cut at 9
    assert sorted({int(_p) for _p in moved_outputs}) == [5, 6, 7, 8, 9], moved_outputs


def my_receptive_field(my_receptive_field):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _my_receptive_field = _guarded("my_receptive_field", my_receptive_field)

    for _k, _layers in [(9, 6), (4, 10), (2, 15), (13, 1), (3, 20), (5, 0)]:
        assert _my_receptive_field(_k, _layers) == 1 + _layers * (_k - 1), (_k, _layers)
