"""Tests of convs2s.course.viz: measured dependency maps, leaks, pictures and signal-flow helpers."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from convs2s.course import viz  # noqa: E402
from convs2s.model.layers import ConvGLUBlock  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")  # conftest.py: tiny tensors, one thread


@pytest.fixture
def ax():
    fig, ax = plt.subplots(figsize=(3, 3))
    yield ax
    plt.close(fig)


# ------------------------------------------------------------------------------------------
# Receptive field
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("k", "n_layers", "expected"),
    [(3, 1, 3), (3, 2, 5), (5, 3, 13), (2, 4, 5), (1, 7, 1), (3, 0, 1)],
)
def test_receptive_field_formula(k, n_layers, expected):
    assert viz.receptive_field(k, n_layers) == expected


@pytest.mark.parametrize("bad", [(0, 2), (3, -1), (2.0, 1), (True, 1)])
def test_receptive_field_rejects_bad_arguments(bad):
    with pytest.raises(ValueError):
        viz.receptive_field(*bad)


STACKS = [(1, 3), (3, 1), (3, 2), (3, 4), (5, 2), (2, 3), (4, 2)]
CASES = [(p, k, n) for p in viz.PADDINGS for k, n in STACKS if not (p == "same" and k % 2 == 0)]


@pytest.mark.parametrize(("padding", "k", "n_layers"), CASES)
def test_measured_receptive_field_equals_formula(padding, k, n_layers):
    r = viz.receptive_field(k, n_layers)
    dep = viz.dependency_map(k, n_layers, padding, length=r + 5)
    assert viz.dependency_summary(dep)["receptive_field"] == r
    # Every output's dependencies are one contiguous run of inputs.
    for row in dep:
        cols = row.nonzero().flatten()
        assert cols.numel() and int(cols[-1] - cols[0]) + 1 == cols.numel()


# ------------------------------------------------------------------------------------------
# Dependency maps per padding
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n_layers"), [(2, 1), (3, 3), (5, 2), (4, 3)])
def test_causal_padding_never_leaks_and_sees_exactly_the_last_r_inputs(k, n_layers):
    length = 14
    r = viz.receptive_field(k, n_layers)
    dep = viz.dependency_map(k, n_layers, "causal", length=length)
    assert dep.shape == (length, length)
    assert not viz.future_leaks(dep).any()
    s = viz.dependency_summary(dep)
    assert s["leaking_outputs"] == 0 and s["max_lookahead"] == 0
    assert s["max_lookback"] == r - 1
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    assert torch.equal(dep, (j <= i) & (j > i - r))


@pytest.mark.parametrize(("k", "n_layers"), [(3, 1), (3, 3), (5, 2), (7, 2)])
def test_same_padding_looks_ahead_exactly_half_the_field(k, n_layers):
    length = 20
    dep = viz.dependency_map(k, n_layers, "same", length=length)
    half = (k - 1) // 2 * n_layers
    s = viz.dependency_summary(dep)
    assert s["max_lookahead"] == half and s["max_lookback"] == half
    assert s["leaking_outputs"] == length - 1  # every output but the last has a future
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    assert torch.equal(dep, (j - i).abs() <= half)
    assert torch.equal(viz.future_leaks(dep), (j > i) & (j - i <= half))


def test_valid_convolution_shrinks_the_output_and_row_i_starts_at_input_i():
    k, n_layers, length = 3, 2, 12
    r = viz.receptive_field(k, n_layers)
    dep = viz.dependency_map(k, n_layers, "none", length=length)
    assert dep.shape == (length - r + 1, length)
    i = torch.arange(length - r + 1)[:, None]
    j = torch.arange(length)[None, :]
    assert torch.equal(dep, (j >= i) & (j < i + r))
    assert viz.dependency_summary(dep)["max_lookahead"] == r - 1


def test_dependency_map_errors():
    with pytest.raises(ValueError, match="odd"):
        viz.dependency_map(4, 2, "same")
    with pytest.raises(ValueError, match="padding"):
        viz.dependency_map(3, 2, "valid")
    with pytest.raises(ValueError, match="too short"):
        viz.dependency_map(3, 5, "none", length=8)
    with pytest.raises(ValueError):
        viz.dependency_map(0, 2, "causal")


def test_dependency_map_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = viz.dependency_map(3, 2, "same", length=9, seed=4)
    after = torch.rand(3)
    assert torch.equal(before, after)
    assert torch.equal(a, viz.dependency_map(3, 2, "same", length=9, seed=4))


def test_measure_dependency_on_known_functions():
    x = torch.randn(1, 2, 6)
    shift = viz.measure_dependency(lambda t: torch.roll(t, shifts=1, dims=2), x)
    assert torch.equal(shift, torch.roll(torch.eye(6, dtype=torch.bool), shifts=1, dims=0))
    total = viz.measure_dependency(lambda t: t.cumsum(dim=1), x.transpose(1, 2), channels_last=True)
    assert torch.equal(total, torch.ones(6, 6).tril().bool())
    with pytest.raises(ValueError):
        viz.measure_dependency(lambda t: t, torch.randn(2, 2, 6))


def test_future_leaks_and_summary_on_a_hand_made_map():
    dep = torch.tensor([[1, 1, 0], [0, 1, 0], [1, 0, 1]], dtype=torch.bool)
    assert torch.equal(
        viz.future_leaks(dep), torch.tensor([[0, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=torch.bool)
    )
    s = viz.dependency_summary(dep)
    assert (s["leaking_outputs"], s["max_lookahead"], s["max_lookback"]) == (1, 1, 2)
    assert s["receptive_field"] == 2
    assert "FUTURE" in viz.describe_dependency(s)
    empty = viz.dependency_summary(torch.zeros(2, 2, dtype=torch.bool))
    assert empty["receptive_field"] == 0 and empty["leaking_outputs"] == 0
    with pytest.raises(TypeError):
        viz.future_leaks(torch.ones(2, 2))


# ------------------------------------------------------------------------------------------
# Pictures
# ------------------------------------------------------------------------------------------


def _drawn_colours(ax):
    fig = ax.figure
    fig.canvas.draw()
    rgb = torch.from_numpy(np.asarray(fig.canvas.buffer_rgba())[..., :3].copy()).reshape(-1, 3)
    return {tuple(c) for c in rgb.unique(dim=0).tolist()}


def _rgb(hex_colour):
    return tuple(int(hex_colour[i : i + 2], 16) for i in (1, 3, 5))


def test_plot_dependency_map_highlights_leaks_only_when_there_are_some(ax):
    leak = _rgb(viz.MAP_COLOURS[2])
    viz.plot_dependency_map(
        ax, viz.dependency_map(3, 2, "same", length=8), title="same", legend=False
    )
    assert ax.get_xlabel().startswith("input position")
    assert ax.get_ylabel().startswith("output position")
    assert ax.get_title() == "same"
    assert leak in _drawn_colours(ax)
    ax.clear()
    viz.plot_dependency_map(ax, viz.dependency_map(3, 2, "causal", length=8), legend=False)
    assert leak not in _drawn_colours(ax)


def test_plot_dependency_map_with_token_labels_and_legend(ax):
    tokens = ["a", "b", "c", "d"]
    viz.plot_dependency_map(
        ax, viz.dependency_map(3, 1, "same", length=4), input_labels=tokens, output_labels=tokens
    )
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert ax.get_legend() is not None


def test_explorer_reports_measured_field_and_turns_errors_into_text(ax):
    text = viz.draw_dependency_explorer(ax, 3, 2, "same", length=10)
    assert "= 5" in text and "FUTURE" in text
    text = viz.draw_dependency_explorer(ax, 3, 2, "causal", length=10)
    assert "no output sees the future" in text
    text = viz.draw_dependency_explorer(ax, 4, 2, "same", length=10)
    assert text.startswith("not possible") and "odd" in text


# ------------------------------------------------------------------------------------------
# Signal flow
# ------------------------------------------------------------------------------------------


def test_gate_matches_definitions():
    h = torch.randn(2, 6, 5)
    a, b = h[:, :3], h[:, 3:]
    torch.testing.assert_close(viz.gate(h, "glu"), torch.nn.functional.glu(h, dim=1))
    torch.testing.assert_close(viz.gate(h, "gtu"), torch.tanh(a) * torch.sigmoid(b))
    with pytest.raises(ValueError):
        viz.gate(h, "relu")


def test_gtu_loses_gradient_that_glu_keeps():
    glu = viz.gate_gradient_norms("glu", n_layers=20)
    gtu = viz.gate_gradient_norms("gtu", n_layers=20)
    assert glu.shape == (21,) and glu[-1] == 1.0
    assert gtu[0] < 0.8 * glu[0]
    assert 0.5 < glu[0] < 2.0  # at the encoder's scale GLU passes the gradient through intact
    big_gtu = viz.gate_gradient_norms("gtu", n_layers=20, input_std=1.0)
    assert big_gtu[0] < gtu[0]  # larger activations saturate tanh more


def test_glu_gradient_grows_with_large_inputs_and_so_do_its_activations():
    """The measurement behind notebook 01's claim: the GLU passes more than it receives."""
    big_glu = viz.gate_gradient_norms("glu", n_layers=20, input_std=1.0)
    assert big_glu[0] > 1e4  # grows by orders of magnitude on the way down
    small = viz.gate_activation_stds("glu", n_layers=20)
    big = viz.gate_activation_stds("glu", n_layers=20, input_std=1.0)
    assert small.shape == (21,)
    assert small[0] == pytest.approx(viz.ENCODER_INPUT_STD, rel=0.05)
    assert 0.7 < float(small[-1] / small[0]) < 1.6  # about constant at the encoder's scale
    assert float(big[-1] / big[0]) > 50  # grows with large inputs
    gtu = viz.gate_activation_stds("gtu", n_layers=20, input_std=1.0)
    assert float(gtu[-1]) < 1.0  # |tanh(A)·σ(B)| < 1
    with pytest.raises(ValueError):
        viz.gate_activation_stds("relu")


def test_gate_activation_stds_is_the_forward_pass_of_gate_gradient_norms():
    blocks = viz.conv_glu_stack(3, 4, "same", hid_dim=6, residual=False, seed=2)
    g = torch.Generator().manual_seed(3)
    h = 0.5 * torch.randn(2, 6, 9, generator=g, dtype=torch.float64)
    stds = [h.std()]
    for block in blocks:
        h = viz.gate(block.conv(viz.pad_sequence(h, 3, "same")), "glu")
        stds.append(h.std())
    measured = viz.gate_activation_stds("glu", n_layers=4, input_std=0.5, hid_dim=6, length=9,
                                        batch=2, seed=2)
    torch.testing.assert_close(measured, torch.stack(stds).float().detach())


def test_residual_scale_keeps_variance_and_its_absence_doubles_it():
    scaled = viz.activation_variances(8, scale=True)
    unscaled = viz.activation_variances(8, scale=False)
    ratio_scaled = scaled / scaled[0]
    assert ((ratio_scaled > 0.8) & (ratio_scaled < 1.25)).all()
    # Without the scale every block adds a term of about the same variance: x2 per block or more.
    assert (unscaled[1:] / unscaled[:-1] > 1.8).all()


def test_residual_stack_activations_equal_the_real_residual_block():
    torch.manual_seed(0)
    blocks = [ConvGLUBlock(8, 3, padding="same", residual=True).eval() for _ in range(3)]
    x = torch.randn(2, 8, 7)
    mask = torch.tensor([[True] * 7, [True] * 4 + [False] * 3])
    expected = x
    for block in blocks:
        expected = block(expected, mask=mask)
    outs = viz.residual_stack_activations(blocks, x, scale=True, mask=mask)
    assert len(outs) == 4
    torch.testing.assert_close(outs[-1], expected)
    unscaled = viz.residual_stack_activations(blocks, x, scale=False, mask=mask)
    assert not torch.allclose(unscaled[-1], expected)
