"""GLU against GTU: the gates, and gradients and activations through a deep gated stack."""

from __future__ import annotations

import pytest
import torch

from convs2s.course import gates
from convs2s.course.normalisation import ENCODER_INPUT_STD
from convs2s.course.stacks import conv_glu_stack, pad_sequence


def test_gate_matches_definitions():
    h = torch.randn(2, 6, 5)
    a, b = h[:, :3], h[:, 3:]
    torch.testing.assert_close(gates.gate(h, "glu"), torch.nn.functional.glu(h, dim=1))
    torch.testing.assert_close(gates.gate(h, "gtu"), torch.tanh(a) * torch.sigmoid(b))
    with pytest.raises(ValueError):
        gates.gate(h, "relu")


def test_gtu_loses_gradient_that_glu_keeps():
    glu = gates.gate_gradient_norms("glu", n_layers=20)
    gtu = gates.gate_gradient_norms("gtu", n_layers=20)
    assert glu.shape == (21,) and glu[-1] == 1.0
    assert gtu[0] < 0.8 * glu[0]
    assert 0.5 < glu[0] < 2.0  # at the encoder's scale GLU passes the gradient through intact
    big_gtu = gates.gate_gradient_norms("gtu", n_layers=20, input_std=1.0)
    assert big_gtu[0] < gtu[0]  # larger activations saturate tanh more


def test_glu_gradient_grows_with_large_inputs_and_so_do_its_activations():
    """The measurement behind notebook 01's claim: the GLU passes more than it receives."""
    big_glu = gates.gate_gradient_norms("glu", n_layers=20, input_std=1.0)
    assert big_glu[0] > 1e4  # grows by orders of magnitude on the way down
    small = gates.gate_activation_stds("glu", n_layers=20)
    big = gates.gate_activation_stds("glu", n_layers=20, input_std=1.0)
    assert small.shape == (21,)
    assert small[0] == pytest.approx(ENCODER_INPUT_STD, rel=0.05)
    assert 0.7 < float(small[-1] / small[0]) < 1.6  # about constant at the encoder's scale
    assert float(big[-1] / big[0]) > 50  # grows with large inputs
    gtu = gates.gate_activation_stds("gtu", n_layers=20, input_std=1.0)
    assert float(gtu[-1]) < 1.0  # |tanh(A)·σ(B)| < 1
    with pytest.raises(ValueError):
        gates.gate_activation_stds("relu")


def test_gate_activation_stds_is_the_forward_pass_of_gate_gradient_norms():
    blocks = conv_glu_stack(3, 4, "same", hid_dim=6, residual=False, seed=2)
    g = torch.Generator().manual_seed(3)
    h = 0.5 * torch.randn(2, 6, 9, generator=g, dtype=torch.float64)
    stds = [h.std()]
    for block in blocks:
        h = gates.gate(block.conv(pad_sequence(h, 3, "same")), "glu")
        stds.append(h.std())
    measured = gates.gate_activation_stds("glu", n_layers=4, input_std=0.5, hid_dim=6, length=9,
                                          batch=2, seed=2)
    torch.testing.assert_close(measured, torch.stack(stds).float().detach())


@pytest.mark.parametrize("kind", gates.GATES)
def test_gate_gradient_norms_equal_a_loop_written_out(kind):
    """As notebook 01 checks it: the gradient at every layer's input, over the one at the
    output, of a loop over the same weights and input."""
    blocks = conv_glu_stack(3, 5, "same", hid_dim=6, residual=False, seed=1)
    g = torch.Generator().manual_seed(2)
    x = 0.3 * torch.randn(4, 6, 10, generator=g, dtype=torch.float64).requires_grad_(True)
    hs = [x]
    for block in blocks:
        a, b = block.conv(torch.nn.functional.pad(hs[-1], (1, 1))).chunk(2, dim=1)
        hs.append((a if kind == "glu" else torch.tanh(a)) * torch.sigmoid(b))
    loss = (hs[-1] * torch.randn(hs[-1].shape, generator=g, dtype=torch.float64)).sum()
    norms = torch.stack([gr.norm() for gr in torch.autograd.grad(loss, hs)])
    measured = gates.gate_gradient_norms(kind, n_layers=5, input_std=0.3, hid_dim=6, length=10,
                                         batch=4, seed=1)
    torch.testing.assert_close(measured, (norms / norms[-1]).float())
