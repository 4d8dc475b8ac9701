"""The §3.4-3.5 measurements of notebook 02: the encoder's scaled gradient, the GLU's variance,
variance through residual stacks, initialisation, weight normalisation."""

from __future__ import annotations

import math

import pytest
import torch

from convs2s.course import normalisation
from convs2s.course.stacks import conv_glu_stack
from convs2s.model.encoder import Encoder
from convs2s.model.layers import ConvGLUBlock, make_conv1d, make_linear

# --- §3.4: the encoder's gradient -------------------------------------------------------------


@pytest.fixture(scope="module")
def grads():
    small = dict(enc_layers=2, emb_dim=8, hid_dim=16, batch=4, src_len=6, trg_len=5)
    return {(n, s): normalisation.encoder_gradient(n, scaled=s, **small)
            for n in (1, 3) for s in (True, False)}


@pytest.mark.parametrize("n", [1, 3])
def test_scaling_multiplies_only_the_encoder_stack_gradient_by_one_over_2n(grads, n):
    scaled, plain = grads[(n, True)], grads[(n, False)]
    assert scaled["grad_scale"] == pytest.approx(1 / (2 * n))
    assert plain["grad_scale"] == 1.0
    # what arrives at z and what the decoder gets do not depend on the scaling ...
    assert scaled["at_z"] == pytest.approx(plain["at_z"], rel=1e-6)
    assert scaled["decoder_blocks"] == pytest.approx(plain["decoder_blocks"], rel=1e-6)
    # ... what enters the encoder's convolution stack is exactly scaled ...
    assert scaled["into_stack"] == pytest.approx(scaled["at_z"] / (2 * n), rel=1e-5)
    assert plain["into_stack"] == pytest.approx(plain["at_z"], rel=1e-5)
    assert scaled["encoder_blocks"] == pytest.approx(plain["encoder_blocks"] / (2 * n), rel=1e-5)
    # ... and the source embeddings, which also get gradient through e (never scaled), are
    # scaled less than 1/(2n)
    ratio = scaled["source_embeddings"] / plain["source_embeddings"]
    assert 1 / (2 * n) < ratio < 1


def test_keys_and_values_add_up_to_the_gradient_at_z(grads):
    for result in grads.values():
        assert result["keys_plus_values"] == pytest.approx(result["at_z"], rel=1e-4)
        assert result["via_keys"] > 0 and result["via_values"] > 0


def test_encoder_gradient_rejects_a_model_without_decoder_layers():
    with pytest.raises(ValueError, match="dec_layers"):
        normalisation.encoder_gradient(0)


def test_encoder_gradient_leaves_the_global_random_state_alone():
    before = torch.random.get_rng_state()
    normalisation.encoder_gradient(1, enc_layers=1, emb_dim=4, hid_dim=4, batch=2, src_len=3,
                             trg_len=3)
    assert torch.equal(torch.random.get_rng_state(), before)


# --- §3.5: initialisation ---------------------------------------------------------------------


def test_glu_passes_a_quarter_of_small_inputs_variance_and_more_of_large():
    assert normalisation.glu_variance_ratio(0.01) == pytest.approx(0.25, abs=0.005)
    small, large = normalisation.glu_variance_ratio(0.14), normalisation.glu_variance_ratio(1.0)
    assert small < large
    assert large > 0.28  # E[σ(B)²] for B ~ N(0, 1) is about 0.29


@pytest.mark.parametrize("bad", [0.0, -1.0])
def test_glu_variance_ratio_rejects_a_non_positive_scale(bad):
    with pytest.raises(ValueError, match="input_std"):
        normalisation.glu_variance_ratio(bad)


def test_the_factor_4_keeps_the_variance_and_without_it_a_glu_stack_loses_3_quarters():
    paper = normalisation.glu_stack_variances("paper", n_layers=6, residual=False)
    no_four = normalisation.glu_stack_variances("paper without the 4", n_layers=6, residual=False)
    assert paper.shape == (7,) and paper[0] == 1.0
    assert 0.7 < float(paper.min()) and float(paper.max()) < 1.4
    for layer in range(1, 7):  # ≈ (1/4)^layer
        assert no_four[layer] == pytest.approx(0.25**layer, rel=0.35)


def test_the_residual_sqrt_half_keeps_the_variance_only_with_equal_summands():
    paper = normalisation.glu_stack_variances("paper", n_layers=8, residual=True)
    no_four = normalisation.glu_stack_variances("paper without the 4", n_layers=8, residual=True)
    assert 0.8 < float(paper.min()) and float(paper.max()) < 1.25
    # (1/4 + 1)/2 = 0.625 per block when the GLU branch has a quarter of the variance
    assert no_four[8] == pytest.approx(0.625**8, rel=0.4)


def test_residual_scale_keeps_variance_and_its_absence_doubles_it():
    scaled = normalisation.glu_stack_variances("paper", n_layers=8, residual=True)
    unscaled = normalisation.glu_stack_variances("paper", n_layers=8, residual=True, scale=False)
    assert ((scaled > 0.8) & (scaled < 1.25)).all()
    # Without the scale every block adds a term of about the same variance: x2 per block or more.
    assert (unscaled[1:] / unscaled[:-1] > 1.8).all()


@pytest.mark.parametrize("scale", [True, False])
def test_glu_stack_variances_measure_the_blocks_of_residual_stack_activations(scale):
    """One measurement: the paper-initialised stack of glu_stack_variances has the weights of
    conv_glu_stack, and its variances are those of residual_stack_activations on them."""
    blocks = conv_glu_stack(3, 5, "same", hid_dim=8, seed=4)
    g = torch.Generator().manual_seed(5)
    x = 0.3 * torch.randn(2, 8, 11, generator=g, dtype=torch.float64)
    with torch.no_grad():
        outs = normalisation.residual_stack_activations(blocks, x, scale=scale)
    v = torch.stack([o.var() for o in outs])
    measured = normalisation.glu_stack_variances("paper", n_layers=5, residual=True, scale=scale,
                                                 input_std=0.3, hid_dim=8, length=11, batch=2,
                                                 seed=4)
    torch.testing.assert_close(measured, (v / v[0]).float())


def test_residual_stack_activations_equal_the_real_residual_block():
    torch.manual_seed(0)
    blocks = [ConvGLUBlock(8, 3, padding="same", residual=True).eval() for _ in range(3)]
    x = torch.randn(2, 8, 7)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    expected = x
    for block in blocks:
        expected = block(expected, mask=mask)
    outs = normalisation.residual_stack_activations(blocks, x, scale=True, mask=mask)
    assert len(outs) == 4
    torch.testing.assert_close(outs[-1], expected)
    unscaled = normalisation.residual_stack_activations(blocks, x, scale=False, mask=mask)
    assert not torch.allclose(unscaled[-1], expected)


def test_pytorch_default_init_shrinks_a_glu_stack():
    torch_default = normalisation.glu_stack_variances("pytorch", n_layers=6, residual=True)
    assert float(torch_default[6]) < 0.2


def test_glu_stack_variances_rejects_unknown_inits_and_even_kernels():
    with pytest.raises(ValueError, match="conv_init"):
        normalisation.glu_stack_variances("xavier")
    with pytest.raises(ValueError, match="odd"):
        normalisation.glu_stack_variances(kernel_size=4)


def test_the_paper_conv_init_is_make_conv1d_with_the_glu_factor():
    with normalisation._seeded(3):
        conv = normalisation._glu_conv(16, 3, "paper")
    with normalisation._seeded(3):
        reference = make_conv1d(16, 32, 3, glu=True)
    torch.testing.assert_close(conv.weight, reference.weight)
    assert conv.weight.std().item() == pytest.approx(math.sqrt(4 / (3 * 16)), rel=0.1)


def test_encoder_depth_profile_is_the_encoders_own_pass():
    profile = normalisation.encoder_depth_profile("paper", n_layers=3, seed=4, batch=2, src_len=7)
    with normalisation._seeded(4):
        enc = Encoder(100, emb_dim=32, hid_dim=64, n_layers=3, kernel_size=3, dropout=0.0,
                      max_positions=7, pad_idx=1, init="paper")
    src = torch.randint(4, 100, (2, 7), generator=torch.Generator().manual_seed(5))
    with torch.no_grad():
        torch.testing.assert_close(profile["z"], enc(src).conved)
    assert profile["forward_std"].shape == (4,) and profile["backward"].shape == (4,)
    assert profile["backward"][-1] == pytest.approx(1.0)


def test_paper_init_keeps_the_encoder_scale_and_pytorch_init_does_not():
    paper = normalisation.encoder_depth_profile("paper", n_layers=8)
    torch_default = normalisation.encoder_depth_profile("pytorch", n_layers=8)
    assert paper["embedding_std"] == pytest.approx(math.sqrt(0.02), rel=0.1)
    assert torch_default["embedding_std"] == pytest.approx(math.sqrt(2), rel=0.1)
    ratio = paper["forward_std"].max() / paper["forward_std"].min()
    assert float(ratio) < 1.3
    assert float(torch_default["forward_std"][-1] / torch_default["forward_std"][0]) < 0.2
    assert float(torch_default["backward"][0]) < 0.2  # the gradient shrinks on the way down
    assert 0.7 < float(paper["backward"][0]) < 1.5


# --- weight normalisation ---------------------------------------------------------------------


@pytest.mark.parametrize("module", [
    make_linear(6, 4, weight_norm=True), make_conv1d(3, 5, 2, weight_norm=True)])
def test_weight_norm_parts_rebuild_the_weight(module):
    g, v = normalisation.weight_norm_parts(module)
    assert g.numel() == module.weight.size(0)  # one gain per output unit
    torch.testing.assert_close(normalisation.weight_from_parts(g, v), module.weight)


def test_weight_norm_parts_refuses_a_plain_layer():
    with pytest.raises(ValueError, match="weight_norm=True"):
        normalisation.weight_norm_parts(make_linear(3, 2))


@pytest.mark.parametrize("module, x", [
    (make_linear(6, 4, weight_norm=True), torch.randn(5, 6)),
    (make_conv1d(3, 5, 2, weight_norm=True), torch.randn(2, 3, 7)),
])
def test_weight_norm_gradients(module, x):
    one = normalisation.weight_norm_gradients(module, x)
    two = normalisation.weight_norm_gradients(module, x, v_scale=2.0)
    # scaling v leaves w (so the layer's output) unchanged and halves v's gradient
    torch.testing.assert_close(one["weight"], module.weight.detach())
    torch.testing.assert_close(two["weight"], one["weight"])
    torch.testing.assert_close(two["grad_v"], one["grad_v"] / 2)
    torch.testing.assert_close(two["grad_g"], one["grad_g"])
    # v's gradient is orthogonal to v: a step turns v and cannot lengthen it
    assert one["cosine"].abs().max() < 1e-5
    # g's gradient is the plain gradient along each row's direction v/‖v‖
    g, v = normalisation.weight_norm_parts(module)
    direction = (v / v.norm(dim=tuple(range(1, v.dim())), keepdim=True)).detach()
    along = (one["grad_w"] * direction).flatten(1).sum(dim=1)
    torch.testing.assert_close(one["grad_g"].flatten(), along)
    # the module itself is untouched
    torch.testing.assert_close(normalisation.weight_norm_parts(module)[1], v)


def test_weight_norm_gradients_rejects_a_bad_scale():
    with pytest.raises(ValueError, match="v_scale"):
        normalisation.weight_norm_gradients(make_linear(2, 2, weight_norm=True), torch.ones(1, 2),
                                      v_scale=0.0)
