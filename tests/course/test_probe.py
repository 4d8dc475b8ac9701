"""Tests of convs2s.course.probe: the measurements behind the decoder and attention notebooks."""

from __future__ import annotations

import math

import matplotlib
import matplotlib.text

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from convs2s.course.probe import (  # noqa: E402
    attention_entropy,
    perturbation_effect,
    plot_attention_grid,
    plot_perturbation,
    plot_visible_positions,
    visible_positions,
)
from convs2s.model import ConvS2S  # noqa: E402

PAD = 0


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


# --- visible_positions -----------------------------------------------------------------------


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


# --- perturbation_effect -----------------------------------------------------------------------


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


# --- attention_entropy -------------------------------------------------------------------------


def test_entropy_of_uniform_attention_is_log_src_len():
    src_len = 7
    a = torch.full((3, 5, src_len), 1.0 / src_len)
    torch.testing.assert_close(attention_entropy(a), torch.full((3,), math.log(src_len),
                                                                dtype=torch.float64))


def test_entropy_of_one_hot_is_zero_and_zeros_are_ignored():
    a = torch.zeros(2, 4, 6)
    a[..., 2] = 1.0
    torch.testing.assert_close(attention_entropy(a), torch.zeros(2, dtype=torch.float64))
    half = torch.zeros(4, 6)
    half[:, :2] = 0.5  # two tokens, the rest padding with weight 0
    torch.testing.assert_close(attention_entropy(half), torch.tensor(math.log(2),
                                                                     dtype=torch.float64))


def test_entropy_per_row_and_shape_checks():
    a = torch.softmax(torch.randn(3, 5, 4), dim=-1)
    rows = attention_entropy(a, per_row=True)
    assert rows.shape == (3, 5)
    torch.testing.assert_close(rows.mean(dim=-1), attention_entropy(a))
    assert torch.all(rows <= math.log(4) + 1e-9) and torch.all(rows >= 0)
    with pytest.raises(ValueError, match="layers"):
        attention_entropy(torch.ones(2, 2, 2, 2))


def test_entropy_of_model_attention_is_bounded_by_log_of_real_source_length():
    model = tiny_model("causal").eval()
    src, trg = random_batch()
    src[1, 4:] = PAD
    with torch.no_grad():
        _, attention = model(src, trg)  # [batch, layers, trg_len, src_len]
    h = attention_entropy(attention[1])
    assert h.shape == (3,)
    assert torch.all(h <= math.log(4) + 1e-6)


# --- plotting ----------------------------------------------------------------------------------


def test_plot_attention_grid_on_agg():
    a = torch.softmax(torch.randn(3, 4, 5), dim=-1)
    src, trg = ["a", "b", "c", "d", "e"], ["w", "x", "y", "z"]
    fig = plot_attention_grid(a, src, trg, ncols=2)
    heatmaps = [ax for ax in fig.axes if ax.get_visible() and ax.images]
    assert len(heatmaps) == 3
    assert [t.get_text() for t in heatmaps[0].get_xticklabels()] == src
    assert [t.get_text() for t in heatmaps[0].get_yticklabels()] == trg
    limits = {im.get_clim() for ax in heatmaps for im in ax.images}
    assert len(limits) == 1, "all layers must share one colour scale"
    fig.canvas.draw()
    plt.close(fig)

    fig, axes = plt.subplots(1, 4)
    out = plot_attention_grid(a, src, trg, axes=axes)
    assert out is fig and not axes[3].get_visible()
    plt.close(fig)
    with pytest.raises(ValueError, match="labels"):
        plot_attention_grid(a, src[:-1], trg)


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
    a = torch.softmax(torch.randn(2, 4, 5), dim=-1)
    fig = plot_attention_grid(a, list("abcde"), list("wxyz"))
    assert min(_font_sizes(fig)) >= 9
    plt.close(fig)
    fig, (ax1, ax2) = plt.subplots(1, 2)
    plot_visible_positions(visible_positions(3, 2, "causal", 6), ax=ax1)
    plot_perturbation(torch.tensor([0.0, 1.0, 0.5]), 1, ax=ax2, tokens=list("abc"))
    assert min(_font_sizes(fig)) >= 9
    plt.close(fig)
