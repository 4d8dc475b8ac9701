"""What each output can see: dependency maps of conv + GLU stacks and of decoders (one autograd
measurement), what they say, their pictures, and perturbations."""

from __future__ import annotations

import matplotlib
import matplotlib.text

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from convs2s.course import dependency  # noqa: E402
from convs2s.course.dependency import (  # noqa: E402
    perturbation_effect,
    plot_perturbation,
    plot_visible_positions,
    visible_positions,
)
from convs2s.course.receptive_field import receptive_field  # noqa: E402
from convs2s.course.stacks import conv_glu_stack  # noqa: E402
from convs2s.model import ConvS2S  # noqa: E402
from convs2s.model.decoder import Decoder  # noqa: E402
from convs2s.model.encoder import EncoderOut  # noqa: E402

PAD = 0


@pytest.fixture
def ax():
    fig, ax = plt.subplots(figsize=(3, 3))
    yield ax
    plt.close(fig)


def tiny_model(padding: str = "causal", seed: int = 0, dec_layers: int = 3) -> ConvS2S:
    torch.manual_seed(seed)
    return ConvS2S(
        20, 20, emb_dim=16, hid_dim=32, enc_layers=2, dec_layers=dec_layers, kernel_size=3,
        dropout=0.1, max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD,
        decoder_padding=padding,
    )


def random_batch(seed: int = 1, src_len: int = 6, trg_len: int = 12):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 20, (2, src_len), generator=g), torch.randint(3, 20, (2, trg_len),
                                                                          generator=g)


# ------------------------------------------------------------------------------------------
# One measurement: the maps equal those of the two implementations it replaced
# ------------------------------------------------------------------------------------------


def _dependency_map_before_the_merge(kernel_size, n_layers, padding, length, seed):
    """``convs2s.course.viz.dependency_map`` as it was: a batched autograd pass over a stack."""
    blocks = conv_glu_stack(kernel_size, n_layers, padding, seed=seed)
    g = torch.Generator().manual_seed(seed + 1)
    x = torch.randn(1, 4, length, generator=g, dtype=torch.float64)

    def fn(t):
        for block in blocks:
            t = F.glu(block.conv(t), dim=1) if padding == "none" else block(t)
        return t

    with torch.no_grad():
        n_out = fn(x).size(2)
    copies = x.expand(n_out, *x.shape[1:]).clone().requires_grad_(True)
    y = fn(copies)
    rows = torch.arange(n_out)
    picked = y[rows, :, rows]  # [n_out, channels]
    weights = torch.rand(picked.shape, generator=torch.Generator().manual_seed(seed),
                         dtype=torch.float64) + 0.5
    (grad,) = torch.autograd.grad((picked * weights).sum(), copies)
    return grad.ne(0).any(dim=1)


def _visible_positions_before_the_merge(kernel_size, n_layers, padding, length, seed):
    """``convs2s.course.probe.visible_positions`` as it was: one backward pass per output."""
    torch.manual_seed(seed)
    decoder = Decoder(11, emb_dim=8, hid_dim=8, n_layers=n_layers, kernel_size=kernel_size,
                      dropout=0.0, max_positions=length, pad_idx=1, padding=padding).double().eval()
    g = torch.Generator().manual_seed(seed + 1)
    trg_in = torch.randint(2, 11, (1, length), generator=g)
    z = torch.randn(1, 4, 8, generator=g, dtype=torch.float64)
    encoded = EncoderOut(z, z + torch.randn(1, 4, 8, generator=g, dtype=torch.float64),
                         torch.ones(1, 4, dtype=torch.bool))
    captured = []

    def make_leaf(_module, _inputs, output):
        captured.append(output.detach().requires_grad_(True))
        return captured[-1]

    handle = decoder.tok_embedding.register_forward_hook(make_leaf)
    try:
        logits, _ = decoder(trg_in, encoded)  # [1, length, vocab]
    finally:
        handle.remove()
    direction = torch.randn(logits.shape[-1], generator=g, dtype=logits.dtype)
    visible = torch.zeros(length, length, dtype=torch.bool)
    for i in range(length):
        (grad,) = torch.autograd.grad(logits[0, i] @ direction, captured[0], retain_graph=True)
        visible[i] = grad[0].abs().sum(dim=-1) > 0
    return visible


STACK_GRID = [(p, k, n, length, seed)
              for p in ("none", "same", "causal") for k in (1, 2, 3, 5) for n in (0, 1, 2, 3)
              for length in (9, 16) for seed in (0, 3)
              if not (p == "same" and k % 2 == 0)
              and not (p == "none" and length < receptive_field(k, n))]
DECODER_GRID = [(p, k, n, length, seed)
                for p in ("causal", "same") for k in (1, 2, 3, 5) for n in (1, 2, 4)
                for length in (1, 6, 13) for seed in (0, 2) if not (p == "same" and k % 2 == 0)]


def test_stack_maps_equal_those_measured_before_the_merge():
    for padding, k, n_layers, length, seed in STACK_GRID:
        expected = _dependency_map_before_the_merge(k, n_layers, padding, length, seed)
        measured = dependency.dependency_map(k, n_layers, padding, length=length, seed=seed)
        assert torch.equal(measured, expected), (padding, k, n_layers, length, seed)


def test_decoder_maps_equal_those_measured_before_the_merge():
    for padding, k, n_layers, length, seed in DECODER_GRID:
        expected = _visible_positions_before_the_merge(k, n_layers, padding, length, seed)
        measured = visible_positions(k, n_layers, padding, length, seed=seed)
        assert torch.equal(measured, expected), (padding, k, n_layers, length, seed)


def test_visible_positions_seeds_the_global_state_as_before():
    """Notebooks draw random numbers after it: the global state it leaves is part of its
    behaviour."""
    torch.manual_seed(123)
    _visible_positions_before_the_merge(3, 2, "causal", 8, 0)
    expected = torch.rand(4)
    torch.manual_seed(123)
    visible_positions(3, 2, "causal", 8)
    assert torch.equal(torch.rand(4), expected)


def test_decoder_and_stack_maps_agree_on_the_same_padding():
    """The decoder's map has the band of a stack of its depth (its attention reads the source
    only, so it adds no dependence between target positions)."""
    for padding, k, n_layers in [("causal", 3, 2), ("causal", 2, 4), ("same", 5, 2)]:
        assert torch.equal(visible_positions(k, n_layers, padding, 12),
                           dependency.dependency_map(k, n_layers, padding, length=12))


# ------------------------------------------------------------------------------------------
# Stack maps per padding, and what a map says
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("k", "n_layers"), [(2, 1), (3, 3), (5, 2), (4, 3)])
def test_causal_padding_never_leaks_and_sees_exactly_the_last_r_inputs(k, n_layers):
    length = 14
    r = receptive_field(k, n_layers)
    dep = dependency.dependency_map(k, n_layers, "causal", length=length)
    assert dep.shape == (length, length)
    assert not dependency.future_leaks(dep).any()
    s = dependency.dependency_summary(dep)
    assert s["leaking_outputs"] == 0 and s["max_lookahead"] == 0
    assert s["max_lookback"] == r - 1
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    assert torch.equal(dep, (j <= i) & (j > i - r))


@pytest.mark.parametrize(("k", "n_layers"), [(3, 1), (3, 3), (5, 2), (7, 2)])
def test_same_padding_looks_ahead_exactly_half_the_field(k, n_layers):
    length = 20
    dep = dependency.dependency_map(k, n_layers, "same", length=length)
    half = (k - 1) // 2 * n_layers
    s = dependency.dependency_summary(dep)
    assert s["max_lookahead"] == half and s["max_lookback"] == half
    assert s["leaking_outputs"] == length - 1  # every output but the last has a future
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    assert torch.equal(dep, (j - i).abs() <= half)
    assert torch.equal(dependency.future_leaks(dep), (j > i) & (j - i <= half))


def test_valid_convolution_shrinks_the_output_and_row_i_starts_at_input_i():
    k, n_layers, length = 3, 2, 12
    r = receptive_field(k, n_layers)
    dep = dependency.dependency_map(k, n_layers, "none", length=length)
    assert dep.shape == (length - r + 1, length)
    i = torch.arange(length - r + 1)[:, None]
    j = torch.arange(length)[None, :]
    assert torch.equal(dep, (j >= i) & (j < i + r))
    assert dependency.dependency_summary(dep)["max_lookahead"] == r - 1


def test_dependency_map_errors():
    with pytest.raises(ValueError, match="odd"):
        dependency.dependency_map(4, 2, "same")
    with pytest.raises(ValueError, match="padding"):
        dependency.dependency_map(3, 2, "valid")
    with pytest.raises(ValueError, match="too short"):
        dependency.dependency_map(3, 5, "none", length=8)
    with pytest.raises(ValueError):
        dependency.dependency_map(0, 2, "causal")


def test_dependency_map_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(3)
    torch.manual_seed(123)
    a = dependency.dependency_map(3, 2, "same", length=9, seed=4)
    after = torch.rand(3)
    assert torch.equal(before, after)
    assert torch.equal(a, dependency.dependency_map(3, 2, "same", length=9, seed=4))


def test_measure_dependency_on_known_functions():
    x = torch.randn(1, 2, 6)
    shift = dependency.measure_dependency(lambda t: torch.roll(t, shifts=1, dims=2), x)
    assert torch.equal(shift, torch.roll(torch.eye(6, dtype=torch.bool), shifts=1, dims=0))
    total = dependency.measure_dependency(lambda t: t.cumsum(dim=1), x.transpose(1, 2),
                                          channels_last=True)
    assert torch.equal(total, torch.ones(6, 6).tril().bool())
    with pytest.raises(ValueError):
        dependency.measure_dependency(lambda t: t, torch.randn(2, 2, 6))


def test_future_leaks_and_summary_on_a_hand_made_map():
    dep = torch.tensor([[1, 1, 0], [0, 1, 0], [1, 0, 1]], dtype=torch.bool)
    assert torch.equal(dependency.future_leaks(dep),
                       torch.tensor([[0, 1, 0], [0, 0, 0], [0, 0, 0]], dtype=torch.bool))
    s = dependency.dependency_summary(dep)
    assert (s["leaking_outputs"], s["max_lookahead"], s["max_lookback"]) == (1, 1, 2)
    assert s["receptive_field"] == 2
    assert "FUTURE" in dependency.describe_dependency(s)
    empty = dependency.dependency_summary(torch.zeros(2, 2, dtype=torch.bool))
    assert empty["receptive_field"] == 0 and empty["leaking_outputs"] == 0
    with pytest.raises(TypeError):
        dependency.future_leaks(torch.ones(2, 2))


# ------------------------------------------------------------------------------------------
# Decoder maps (visible_positions)
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kernel_size,n_layers", [(3, 1), (3, 2), (5, 3), (2, 2), (1, 4)])
def test_causal_decoder_sees_only_a_band_of_the_past(kernel_size, n_layers):
    length = 12
    v = visible_positions(kernel_size, n_layers, "causal", length)
    assert v.shape == (length, length) and v.dtype == torch.bool
    assert torch.equal(v, torch.tril(v)), "a causal decoder must not see the future"
    assert bool(v.diagonal().all()), "every prediction sees its own input token"
    reach = n_layers * (kernel_size - 1)  # receptive field: reach + 1 tokens
    i, j = torch.meshgrid(torch.arange(length), torch.arange(length), indexing="ij")
    assert torch.equal(v, (j <= i) & (j >= i - reach))


def test_causal_map_is_full_lower_triangle_when_the_receptive_field_covers_the_sentence():
    v = visible_positions(3, 4, "causal", 6)  # reach 8 > 5
    assert torch.equal(v, torch.tril(torch.ones(6, 6, dtype=torch.bool)))


@pytest.mark.parametrize("kernel_size,n_layers", [(3, 1), (3, 2), (5, 2)])
def test_same_padding_leaks_the_future(kernel_size, n_layers):
    length = 10
    v = visible_positions(kernel_size, n_layers, "same", length)
    future = torch.triu(torch.ones(length, length, dtype=torch.bool), diagonal=1)
    assert bool((v & future).any()), "same padding should let predictions see later inputs"
    # In particular every prediction but the last sees the next input: the very token it
    # has to predict.
    assert bool(v.diagonal(offset=1).all())
    half = n_layers * (kernel_size - 1) // 2
    i, j = torch.meshgrid(torch.arange(length), torch.arange(length), indexing="ij")
    assert torch.equal(v, (j - i).abs() <= half)


def test_visible_positions_rejects_bad_arguments():
    with pytest.raises(ValueError, match="padding"):
        visible_positions(3, 2, "valid", 5)
    with pytest.raises(ValueError, match="length"):
        visible_positions(3, 2, "causal", 0)
    with pytest.raises(ValueError, match="odd"):
        visible_positions(4, 2, "same", 5)


# ------------------------------------------------------------------------------------------
# Perturbation
# ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("position", [0, 4, 11])
def test_causal_perturbation_moves_only_later_positions(position):
    model = tiny_model("causal").train()  # the function must switch to eval and back
    src, trg = random_batch()
    effect = perturbation_effect(model, src, trg, position)
    assert effect.shape == (trg.size(1),)
    assert model.training, "the model's mode must be restored"
    assert torch.all(effect[:position] == 0), "earlier positions must not move at all"
    assert effect[position] > 0
    reach = 3 * (3 - 1)
    assert torch.all(effect[position + reach + 1:] == 0), "beyond the receptive field"


def test_same_padding_perturbation_moves_earlier_positions():
    model = tiny_model("same")
    src, trg = random_batch()
    effect = perturbation_effect(model, src, trg, 6)
    assert bool((effect[:6] > 0).any())
    assert effect[5] > 0, "position 5 predicts token 6, and sees it"


def test_perturbation_with_the_same_token_moves_nothing_and_explicit_token_is_used():
    model = tiny_model("causal")
    src, trg = random_batch()
    same = perturbation_effect(model, src[:1], trg[:1], 3, new_token=int(trg[0, 3]))
    assert torch.all(same == 0)
    other = perturbation_effect(model, src[:1], trg[:1], 3, new_token=int(trg[0, 3]) % 19 + 1)
    assert other[3] > 0


def test_perturbation_default_token_never_becomes_padding():
    model = tiny_model("causal")
    src, trg = random_batch()
    trg = trg.clone()
    trg[:, 2] = 19  # 19 + 1 wraps to 0 == PAD: the default must skip it
    effect = perturbation_effect(model, src, trg, 2)
    assert effect[2] > 0


def test_perturbation_effect_rejects_bad_position():
    model = tiny_model("causal")
    src, trg = random_batch()
    with pytest.raises(ValueError, match="position"):
        perturbation_effect(model, src, trg, trg.size(1))
    with pytest.raises(ValueError, match="new_token"):
        perturbation_effect(model, src, trg, 0, new_token=20)


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
    leak = _rgb(dependency.MAP_COLOURS[2])
    dependency.plot_dependency_map(
        ax, dependency.dependency_map(3, 2, "same", length=8), title="same", legend=False
    )
    assert ax.get_xlabel().startswith("input position")
    assert ax.get_ylabel().startswith("output position")
    assert ax.get_title() == "same"
    assert leak in _drawn_colours(ax)
    ax.clear()
    causal = dependency.dependency_map(3, 2, "causal", length=8)
    dependency.plot_dependency_map(ax, causal, legend=False)
    assert leak not in _drawn_colours(ax)


def test_plot_dependency_map_with_token_labels_and_legend(ax):
    tokens = ["a", "b", "c", "d"]
    dependency.plot_dependency_map(ax, dependency.dependency_map(3, 1, "same", length=4),
                                   input_labels=tokens, output_labels=tokens)
    assert [t.get_text() for t in ax.get_xticklabels()] == tokens
    assert ax.get_legend() is not None


def test_explorer_reports_measured_field_and_turns_errors_into_text(ax):
    text = dependency.draw_dependency_explorer(ax, 3, 2, "same", length=10)
    assert "= 5" in text and "FUTURE" in text
    text = dependency.draw_dependency_explorer(ax, 3, 2, "causal", length=10)
    assert "no output sees the future" in text
    text = dependency.draw_dependency_explorer(ax, 4, 2, "same", length=10)
    assert text.startswith("not possible") and "odd" in text


def test_plot_visible_positions_and_perturbation_on_agg():
    fig, (ax1, ax2) = plt.subplots(1, 2)
    v = visible_positions(3, 2, "same", 6)
    plot_visible_positions(v, ax=ax1, highlight=2)
    assert "future" in ax1.get_title()
    effect = torch.tensor([0.0, 0.0, 1.0, 0.5, 0.0])
    plot_perturbation(effect, 2, ax=ax2, tokens=list("abcde"))
    assert len(ax2.patches) == 5
    assert "0 earlier" in ax2.get_title()
    fig.canvas.draw()
    plt.close(fig)


def _font_sizes(fig):
    fig.canvas.draw()
    return [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
            if t.get_visible() and t.get_text()]


def test_plots_use_fonts_of_at_least_9_points():
    fig, (ax1, ax2) = plt.subplots(1, 2)
    plot_visible_positions(visible_positions(3, 2, "causal", 6), ax=ax1)
    plot_perturbation(torch.tensor([0.0, 1.0, 0.5]), 1, ax=ax2, tokens=list("abc"))
    assert min(_font_sizes(fig)) >= 9
    plt.close(fig)
