"""Hidden tests of notebook 02's exercises (autograding runs them after the visible checks).

The conventions are those of ``01.py``: one function per exercise, its imports inside it,
``_variant`` for this copy's version, the checks' own comparisons. The ``explain`` exercise
(``keys_and_values``) is graded by hand and has none.
"""


def residual_variance(variance_ratio):
    from convs2s.course.checks import nb02

    nb02.accept_residual_variance(variance_ratio, _variant["expected"])  # noqa: F821


def mask_source_padding(conv_stack):
    import torch

    from convs2s.course.checks import _core
    from convs2s.model.encoder import Encoder

    with _core._seeded(202):
        enc = Encoder(40, emb_dim=6, hid_dim=10, n_layers=5, kernel_size=5, dropout=0.0,
                      max_positions=16, pad_idx=0).eval()
    src = torch.tensor([[5, 6, 7, 8, 9, 10, 11], [12, 13, 0, 0, 0, 0, 0],
                        [14, 15, 16, 17, 0, 0, 0]])  # padding id 0 this time
    with torch.no_grad():
        e = enc.tok_embedding(src) + enc.pos_embedding(torch.arange(7))
        z = conv_stack(e, src != 0, enc.emb2hid, [b.conv for b in enc.blocks], enc.hid2emb)
        _core._assert_close(z, enc(src).conved, name="z", ref="the package's Encoder")


def block_parameters(block_parameters):
    from convs2s.course.checks import _core, guarded

    fn = guarded("block_parameters", block_parameters)
    groups = _variant["groups"]  # noqa: F821 - 1: the notebook's block
    for hid, k in [(256, 3), (8, 7), (96, 1), (16, 25)]:
        expected = 2 * hid * (hid // groups) * k + 4 * hid
        _core._assert_equal(_core._assert_int(fn(hid, k)), expected,
                            name=f"block_parameters({hid}, {k})")
