"""Hidden tests of notebook 03's exercises (the autograder runs them after the visible checks).

One function per exercise id; its parameters are the names the learner defines, its body plain
asserts that the course builder copies into the grade cell (so every local name starts with
``_``: the body must not overwrite the learner's variables). The ``explain`` exercise
(``incremental_same_as_full``) is graded by hand and has none.
"""


def causal_conv1d(causal_conv1d):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _causal_conv1d = _guarded("causal_conv1d", causal_conv1d)

    import torch as _torch
    import torch.nn.functional as _F

    _g = _torch.Generator().manual_seed(303)
    for _cin, _cout, _k, _len in [(3, 7, 6, 3), (1, 1, 2, 9), (4, 2, 5, 5)]:
        _x = _torch.randn(2, _cin, _len, generator=_g, dtype=_torch.float64)
        _w = _torch.randn(_cout, _cin, _k, generator=_g, dtype=_torch.float64)
        _b = _torch.randn(_cout, generator=_g, dtype=_torch.float64)
        _ref = _F.conv1d(_F.pad(_x, (_k - 1, 0)), _w, _b)  # _ref = [2, _cout, _len]
        _torch.testing.assert_close(_causal_conv1d(_x, _w, _b), _ref)
        _torch.testing.assert_close(_causal_conv1d(_x, _w, None), _ref - _b[:, None])
    # Causal: the gradient of output t reaches no input after t.
    _x = _torch.randn(1, 2, 7, generator=_g, requires_grad=True)
    _w = _torch.randn(3, 2, 3, generator=_g)
    _causal_conv1d(_x, _w, None)[0, :, 3].sum().backward()
    assert (_x.grad[0, :, 4:] == 0).all(), "output 3 must not depend on inputs 4, 5, 6"
    assert (_x.grad[0, :, 1:4] != 0).any(), "output 3 must read inputs 1 ... 3"


def teacher_forcing_loss(teacher_forcing_loss):
    import torch as _torch
    import torch.nn.functional as _F

    from convs2s.model import ConvS2S as _ConvS2S

    _torch.manual_seed(313)
    _model = _ConvS2S(30, 30, emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=2, kernel_size=3,
                      dropout=0.0, max_positions=16, src_pad_idx=0, trg_pad_idx=0).eval()
    _src = _torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    _trg = _torch.tensor([[2, 11, 12, 13, 3], [2, 14, 3, 0, 0]])  # <bos> ... <eos> padding
    with _torch.no_grad():
        _logits, _ = _model(_src, _trg[:, :-1])
        _ref = _F.cross_entropy(_logits.reshape(-1, 30), _trg[:, 1:].reshape(-1),
                                ignore_index=0)
        _got = teacher_forcing_loss(_model, _src, _trg, 0)
    assert abs(float(_got) - _ref.item()) < 1e-5, (float(_got), _ref.item())
    # A different padding id is honoured (not hard-coded).
    _trg7 = _torch.where(_trg == 0, _torch.tensor(7), _trg)
    with _torch.no_grad():
        _logits7, _ = _model(_src, _trg7[:, :-1])
        _ref7 = _F.cross_entropy(_logits7.reshape(-1, 30), _trg7[:, 1:].reshape(-1),
                                 ignore_index=7)
        _got7 = teacher_forcing_loss(_model, _src, _trg7, 7)
    assert abs(float(_got7) - _ref7.item()) < 1e-5


def cache_floats(cache_floats):
    from convs2s.course.checks import guarded as _guarded

    # the learner's functions, with their shortcuts refused (checks.SHORTCUTS)
    _cache_floats = _guarded("cache_floats", cache_floats)

    for _layers, _k, _hid, _steps in [(20, 3, 512, 50), (1, 1, 64, 4), (6, 7, 3, 1)]:
        assert _cache_floats(_layers, _k, _hid, _steps) == _layers * (_k - 1) * _hid
    # It does not grow with the number of tokens decoded.
    assert _cache_floats(4, 3, 256, 1) == _cache_floats(4, 3, 256, 200)
