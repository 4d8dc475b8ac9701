"""A model's attention per layer: its entropy, and one heatmap per layer on a shared scale."""

from __future__ import annotations

import math

import matplotlib
import matplotlib.text

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from convs2s.course import figure_data  # noqa: E402
from convs2s.course.attention_maps import (  # noqa: E402
    attention_entropy,
    entropy_titles,
    plot_attention_grid,
    plot_sentence_attention,
)
from convs2s.model import ConvS2S  # noqa: E402
from convs2s.run.translator import Translation  # noqa: E402

PAD = 0


def tiny_model(seed: int = 0) -> ConvS2S:
    torch.manual_seed(seed)
    return ConvS2S(
        20, 20, emb_dim=16, hid_dim=32, enc_layers=2, dec_layers=3, kernel_size=3,
        dropout=0.1, max_positions=32, src_pad_idx=PAD, trg_pad_idx=PAD,
    )


def random_batch(seed: int = 1, src_len: int = 6, trg_len: int = 12):
    g = torch.Generator().manual_seed(seed)
    return torch.randint(3, 20, (2, src_len), generator=g), torch.randint(3, 20, (2, trg_len),
                                                                          generator=g)


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
    model = tiny_model().eval()
    src, trg = random_batch()
    src[1, 4:] = PAD
    with torch.no_grad():
        _, attention = model(src, trg)  # [batch, layers, trg_len, src_len]
    h = attention_entropy(attention[1])
    assert h.shape == (3,)
    assert torch.all(h <= math.log(4) + 1e-6)


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


def test_attention_grid_uses_fonts_of_at_least_9_points():
    a = torch.softmax(torch.randn(2, 4, 5), dim=-1)
    fig = plot_attention_grid(a, list("abcde"), list("wxyz"))
    fig.canvas.draw()
    sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
             if t.get_visible() and t.get_text()]
    assert min(sizes) >= 9
    plt.close(fig)


def test_entropy_titles_number_the_layers_with_their_entropy():
    a = torch.zeros(3, 2, 4)
    a[0] = 0.25  # uniform over 4 tokens: log 4 = 1.386...
    a[1, :, 0] = 1.0  # one token: 0
    a[2, :, :2] = 0.5  # two tokens: log 2 = 0.693...
    assert entropy_titles(a) == ["layer 1: H = 1.39", "layer 2: H = 0.00", "layer 3: H = 0.69"]
    assert entropy_titles(a[2]) == ["layer 1: H = 0.69"]  # one layer, [trg_len, src_len]


def test_plot_sentence_attention_is_notebook_04s_figure():
    """Notebook 04's widget: every layer in one row, each titled with its entropy, under the
    translation and its reference; the figure carries those numbers (the site's phone drawing
    reads them from the stored output)."""
    a = torch.softmax(torch.randn(4, 3, 5), dim=-1)
    t = Translation(["▁ein", "▁hund", "▁läuft", ".", "<eos>"], ["▁a", "▁dog", "<eos>"],
                    "a dog", a)
    fig = plot_sentence_attention(t, "A dog runs.")
    try:
        heatmaps = [ax for ax in fig.axes if ax.images]
        assert [ax.get_title() for ax in heatmaps] == entropy_titles(a)
        assert len({round(ax.get_position().y0, 3) for ax in heatmaps}) == 1, "one row"
        assert fig.get_suptitle() == "a dog\n(reference: A dog runs.)"
        assert fig._suptitle.get_fontsize() == 9 and fig._suptitle.get_position()[1] == 1.06
        # cell=0.22 inches per token: 4 panels of max(2.5, 0.22·5 + 1.2) = 2.5 inches
        assert tuple(fig.get_size_inches()) == pytest.approx((10.0, 2.0))
        stored = figure_data.payload(fig)
        assert stored["titles"] == entropy_titles(a) and stored["title"] == fig.get_suptitle()
        assert stored["src_tokens"] == t.source_tokens and stored["trg_tokens"] == t.tokens
        fig.canvas.draw()
    finally:
        plt.close(fig)
