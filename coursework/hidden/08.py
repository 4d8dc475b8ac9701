"""Hidden grading tests of notebook 08 (beyond ConvS2S).

One function per exercise id; its parameters are the names the learner's answer defines, its
body plain asserts (the course builder copies the body into the exercise's grade cell).
"""


def separable_params(separable_params, saving):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _separable_params = _guarded("separable_params", separable_params)
    _saving = _guarded("separable_params", saving)

    assert _separable_params(1, 1, 1) == 3 and _separable_params(1, 1, 1, bias=False) == 2
    assert _separable_params(512, 1024, 5, bias=False) == 512 * 5 + 512 * 1024
    assert 2.9 < _saving(1024, 2048, 3) < 3.0  # about k for many channels
    assert abs(_saving(2, 3, 4) - 27 / 17) < 1e-12


def attention_vs_conv(prediction):
    assert abs(float(prediction) - 768) <= 0.02 * 768  # k·d = 3·256 positions


def lightweight_conv(lightweight_conv):
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
