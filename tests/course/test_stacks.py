"""The small conv + GLU stacks the measurements run on, and the one loop that runs them."""

from __future__ import annotations

import pytest
import torch

from convs2s.course import stacks


@pytest.mark.parametrize(("padding", "added"), [("none", (0, 0)), ("same", (2, 2)),
                                                ("causal", (4, 0))])
def test_pad_sequence_adds_the_zeros_of_each_padding(padding, added):
    x = torch.randn(1, 2, 6)
    padded = stacks.pad_sequence(x, 5, padding)
    left, right = added
    assert padded.shape == (1, 2, 6 + left + right)
    assert torch.equal(padded[..., left:left + 6], x)
    assert not padded[..., :left].any() and not padded[..., left + 6:].any()
    with pytest.raises(ValueError, match="odd"):
        stacks.pad_sequence(x, 4, "same")


def test_conv_glu_stack_is_seeded_and_leaves_the_global_random_state_alone():
    before = torch.random.get_rng_state()
    a = stacks.conv_glu_stack(3, 2, "causal", seed=5)
    assert torch.equal(torch.random.get_rng_state(), before)
    b = stacks.conv_glu_stack(3, 2, "causal", seed=5)
    assert all(torch.equal(p.conv.weight, q.conv.weight) for p, q in zip(a, b, strict=True))
    assert a[0].conv.weight.dtype == torch.float64 and not a[0].training
    with pytest.raises(ValueError, match="padding"):
        stacks.conv_glu_stack(3, 2, "valid")


def test_stack_activations_keeps_every_layer_and_adds_scaled_residuals():
    layers = [lambda t: 2 * t, lambda t: t + 1]
    x = torch.ones(1, 1, 3)
    plain = stacks.stack_activations(layers, x)
    assert [float(t[0, 0, 0]) for t in plain] == [1.0, 2.0, 3.0]
    residual = stacks.stack_activations(layers, x, residual_scale=0.5)
    assert [float(t[0, 0, 0]) for t in residual] == [1.0, 1.5, 2.0]  # (2 + 1)/2, (2.5 + 1.5)/2


def test_stack_activations_zeroes_padding_before_every_layer():
    x = torch.ones(1, 1, 4)
    mask = torch.tensor([[True, True, False, False]])
    outs = stacks.stack_activations([lambda t: t + 1] * 2, x, residual_scale=1.0, mask=mask)
    assert outs[0].flatten().tolist() == [1, 1, 1, 1]  # the input as given
    assert outs[1].flatten().tolist() == [3, 3, 1, 1]  # (x + 1) + x on real tokens, 0 + 1 + 0
    assert outs[2].flatten().tolist() == [7, 7, 1, 1]


def test_run_stack_without_padding_shortens_by_k_minus_1_per_layer():
    blocks = stacks.conv_glu_stack(3, 2, "none")
    x = torch.randn(1, 4, 9, dtype=torch.float64)
    assert stacks.run_stack(blocks, x, "none").shape == (1, 4, 5)
    same = stacks.conv_glu_stack(3, 2, "same")
    expected = same[1](same[0](x))
    torch.testing.assert_close(stacks.run_stack(same, x, "same"), expected)
    with pytest.raises(ValueError, match="padding"):
        stacks.run_stack(blocks, x, "valid")
