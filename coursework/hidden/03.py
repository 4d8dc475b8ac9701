"""Hidden tests of notebook 03's exercises (autograding runs them after the visible checks).

The conventions are those of ``01.py``. The ``explain`` exercise (``incremental_same_as_full``)
is graded by hand and has none.
"""


def causal_conv1d(causal_conv1d):
    import torch
    import torch.nn.functional as F

    from convs2s.course.checks import _core, guarded

    fn = guarded("causal_conv1d", causal_conv1d)
    g = torch.Generator().manual_seed(303)
    for cin, cout, k, length in [(3, 7, 6, 3), (1, 1, 2, 9), (4, 2, 5, 5)]:
        x = torch.randn(2, cin, length, generator=g)
        w = torch.randn(cout, cin, k, generator=g)
        b = torch.randn(cout, generator=g)
        ref = F.conv1d(F.pad(x, (k - 1, 0)), w, b)  # ref = [2, cout, length], before refusal
        _core._assert_close(fn(x, w, b), ref, ref="a causal conv1d")
        _core._assert_close(fn(x, w, None), ref - b[:, None], ref="a causal conv1d, no bias")
    # causal: the gradient of output 3 reaches no input after 3
    x = torch.randn(1, 2, 7, generator=g, requires_grad=True)
    fn(x, torch.randn(3, 2, 3, generator=g), None)[0, :, 3].sum().backward()
    assert x.grad is not None and bool((x.grad[0, :, 4:] == 0).all()), \
        "output 3 must not depend on inputs 4, 5, 6"


def teacher_forcing_loss(teacher_forcing_loss):
    import torch
    import torch.nn.functional as F

    from convs2s.course.checks import _core
    from convs2s.model import ConvS2S

    with _core._seeded(313):
        model = ConvS2S(30, 30, emb_dim=8, hid_dim=8, enc_layers=1, dec_layers=2, kernel_size=3,
                        dropout=0.0, max_positions=16, src_pad_idx=0, trg_pad_idx=0).eval()
    src = torch.tensor([[5, 6, 7, 8], [9, 10, 0, 0]])
    trg = torch.tensor([[2, 11, 12, 13, 3], [2, 14, 3, 0, 0]])  # <bos> ... <eos> padding
    for pad in (0, 7):  # the padding id given, not one written into the answer
        t = torch.where(trg == 0, torch.tensor(pad), trg)
        with torch.no_grad():
            logits, _ = model(src, t[:, :-1])
            ref = F.cross_entropy(logits.reshape(-1, 30), t[:, 1:].reshape(-1),
                                  ignore_index=pad)
            got = _core._float(teacher_forcing_loss(model, src, t, pad), "the loss")
        assert abs(got - ref.item()) < 1e-5, f"the loss with padding id {pad} is not the " \
                                             "teacher-forced one"


def cache_floats(cache_floats):
    from convs2s.course.checks import _core, guarded

    fn = guarded("cache_floats", cache_floats)
    beam = _variant["beam"]  # noqa: F821 - hypotheses per sentence (1 in the notebook)
    for layers, k, hid, steps in [(20, 3, 512, 50), (1, 1, 64, 4), (6, 7, 3, 1), (4, 3, 256, 200)]:
        _core._assert_equal(_core._assert_int(fn(layers, k, hid, steps)),
                            beam * layers * (k - 1) * hid,
                            name=f"cache_floats({layers}, {k}, {hid}, {steps})")
