"""Tests of convs2s.course.worked_attention: the helpers behind notebook 04's worked example."""

from __future__ import annotations

import math

import pytest
import torch

from convs2s.course.worked_attention import (
    attention_with_weights,
    describe_per_layer,
    measured_context_variance,
)
from convs2s.model.encoder import EncoderOut

# --- attention_with_weights -------------------------------------------------------------------


def test_attention_with_weights_holds_exactly_the_given_weights():
    W_d = [[1.0, 0.0, 2.0], [0.0, -1.0, 0.5]]  # [emb_dim 2, hid_dim 3]
    W_out = [[1.0, 0.0], [0.0, 1.0], [2.0, -1.0]]  # [hid_dim 3, emb_dim 2]
    att = attention_with_weights(W_d, [0.1, 0.2], W_out, [0.0, 0.5, -0.5])
    assert not att.training
    torch.testing.assert_close(att.hid2emb.weight, torch.tensor(W_d))
    torch.testing.assert_close(att.emb2hid.bias, torch.tensor([0.0, 0.5, -0.5]))
    assert not any("parametrizations" in name for name, _ in att.named_parameters())


def test_attention_with_weights_computes_the_paper_equations_by_hand():
    """One query, 3 real source tokens and a padded one: every step of §3.3 by hand."""
    att = attention_with_weights(torch.eye(2), [0.0, 0.0], torch.eye(2), [0.0, 0.0])
    z = torch.tensor([[[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [0.0, 0.0]]])  # [1, 4, 2]
    e = torch.tensor([[[0.5, 0.0], [0.0, 0.5], [-0.5, 0.5], [0.0, 0.0]]])
    mask = torch.tensor([[True, True, True, False]])
    h, g = torch.tensor([[[2.0, 1.0]]]), torch.tensor([[[0.5, -0.5]]])
    d = (h + g) * math.sqrt(0.5)  # the query, fairseq's √0.5 included
    energy = (d @ z.transpose(1, 2))[0, 0, :3]
    a = torch.softmax(energy, dim=-1)
    c = (a[:, None] * (z[0, :3] + e[0, :3])).sum(0) * math.sqrt(0.5)  # values (z+e)·√0.5
    with torch.no_grad():
        attended, weights = att(h, g, EncoderOut(z, (z + e) * math.sqrt(0.5), mask))
    torch.testing.assert_close(weights[0, 0], torch.cat([a, torch.zeros(1)]))
    torch.testing.assert_close(attended[0, 0], c * math.sqrt(3))


def test_attention_with_weights_rejects_shapes_that_do_not_fit():
    with pytest.raises(ValueError, match="W_out must be"):
        attention_with_weights(torch.eye(2), [0, 0], torch.ones(3, 2), [0, 0, 0])
    with pytest.raises(ValueError, match="b_d must have 2"):
        attention_with_weights(torch.eye(2), [0, 0, 0], torch.eye(2), [0, 0])
    with pytest.raises(ValueError, match="matrix"):
        attention_with_weights(torch.ones(2), [0, 0], torch.eye(2), [0, 0])


# --- measured_context_variance ----------------------------------------------------------------


def test_scaled_context_variance_is_about_1_for_uniform_and_m_for_one_hot():
    m = 8
    uniform = torch.full((200, m), 1.0 / m)
    one_hot = torch.zeros(200, m)
    one_hot[:, 3] = 1.0
    assert abs(measured_context_variance(uniform, draws=4096).mean().item() - 1.0) < 0.05
    assert abs(measured_context_variance(one_hot, draws=4096).mean().item() - m) < 0.05 * m


def test_scaled_context_variance_agrees_with_m_sum_of_squares_and_keeps_leading_dims():
    a = torch.softmax(3 * torch.randn(3, 50, 6, generator=torch.Generator().manual_seed(1)), -1)
    measured = measured_context_variance(a, draws=20_000)
    assert measured.shape == (3, 50)
    exact = 6 * (a.double() ** 2).sum(-1)  # the formula, used only to test the measurement
    assert torch.allclose(measured.mean(-1), exact.mean(-1), rtol=0.03)


def test_scaled_context_variance_rejects_bad_input():
    with pytest.raises(ValueError, match="rows, m"):
        measured_context_variance(torch.ones(4))
    with pytest.raises(ValueError, match="draws"):
        measured_context_variance(torch.ones(2, 2), draws=1)


# --- describe_per_layer -----------------------------------------------------------------------


def test_describe_per_layer_says_falls_only_when_every_step_falls():
    assert describe_per_layer([2.0, 1.5, 1.0]).startswith("entropy falls with every layer")
    assert describe_per_layer([1.0, 1.2]).startswith("entropy rises with every layer")


def test_describe_per_layer_reports_a_non_monotonic_series_without_a_trend_claim():
    text = describe_per_layer([2.02, 1.57, 1.07, 1.28])
    assert "lowest in layer 3 and highest in layer 1" in text
    assert "does not change monotonically" in text
    assert "2.02 → 1.57 → 1.07 → 1.28 nats" in text
    assert "falls with every" not in text


def test_describe_per_layer_edge_cases():
    assert "one layer" in describe_per_layer([0.5])
    assert describe_per_layer([1.0, 1.0]).startswith("entropy is the same in every layer")
    with pytest.raises(ValueError, match="one number per layer"):
        describe_per_layer([])


def test_describe_per_layer_judges_the_values_as_it_shows_them():
    """Notebook 04 once printed "falls with every layer (2.31 → 2.31 → …)": two values that
    differ only past the second decimal are level in the sentence, so it does not say "every"."""
    text = describe_per_layer([2.312, 2.308, 1.9])
    assert text.startswith("entropy falls overall, not at every layer (2.31 → 2.31 → 1.90")
    assert describe_per_layer([1.0, 1.0, 1.3]).startswith("entropy rises overall, not at every")
    assert describe_per_layer([2.312, 2.308]).startswith("entropy is the same in every layer")
    for values in ([2.0, 1.5, 1.0], [1.0, 1.2], [2.312, 2.308, 1.9], [1.0, 1.0], [2.0, 1.0, 2.0]):
        text = describe_per_layer(values)
        shown = [round(x, 2) for x in values]
        if "with every layer" in text:  # every shown step moves the way it says
            steps = [b - a for a, b in zip(shown, shown[1:], strict=False)]
            assert all(s < 0 for s in steps) or all(s > 0 for s in steps), (values, text)
