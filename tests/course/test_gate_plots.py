"""convs2s.course.gate_plots: notebook 01's GLU and padding figures, wide (the notebook) and
narrow (a phone's column on the course's website)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from convs2s.course import dependency, gate_plots, gates, stacks  # noqa: E402


@pytest.fixture(scope="module")
def norms():
    return gate_plots.gradient_norms(2)


def test_the_gate_curves_are_the_functions_and_their_measured_slopes():
    data = gate_plots.gate_curves()
    x = data.x
    torch.testing.assert_close(data.curves["GLU  x·σ(x)"], x * torch.sigmoid(x))
    torch.testing.assert_close(data.curves["GTU  tanh(x)·σ(x)"], torch.tanh(x) * torch.sigmoid(x))
    b = torch.sigmoid(torch.tensor(2.0))
    glu, gtu = data.slopes.values()
    torch.testing.assert_close(glu, torch.full_like(data.a, float(b)))  # the linear path: σ(B)
    torch.testing.assert_close(gtu, (1 - torch.tanh(data.a) ** 2) * b)
    assert not data.a.requires_grad


def test_gradient_norms_are_the_gates_per_seed(norms):
    assert set(norms) == {(s, k) for s in gate_plots.SCALES for k in gates.GATES}
    for (scale, kind), n in norms.items():
        assert n.shape == (2, 21)
        torch.testing.assert_close(n[1], gates.gate_gradient_norms(
            kind, n_layers=20, input_std=gate_plots.SCALES[scale], seed=1))


def test_padding_maps_are_the_dependency_maps():
    maps = gate_plots.padding_maps(3, 2, 8)
    assert list(maps) == list(stacks.PADDINGS)
    for padding, dep in maps.items():
        assert torch.equal(dep, dependency.dependency_map(3, 2, padding, length=8))


def _drawings(norms):
    data = gate_plots.gate_curves()
    maps = gate_plots.padding_maps(3, 3, 12)
    return {"curves": lambda narrow: gate_plots.plot_gate_curves(data, narrow=narrow),
            "norms": lambda narrow: gate_plots.plot_gradient_norms(norms, narrow=narrow),
            "maps": lambda narrow: gate_plots.plot_padding_maps(maps, 3, 3, narrow=narrow)}


@pytest.mark.parametrize("name, panels", [("curves", 2), ("norms", 2), ("maps", 3)])
def test_wide_panels_side_by_side_narrow_ones_stacked_in_3_3_inches(norms, name, panels):
    draw = _drawings(norms)[name]
    for narrow in (False, True):
        fig = draw(narrow)
        try:
            fig.canvas.draw()
            boxes = [ax.get_position() for ax in fig.axes if ax.get_visible()][:panels]
            assert len(boxes) == panels
            if narrow:
                assert tuple(fig.get_size_inches())[0] == pytest.approx(gate_plots.NARROW_INCHES)
                assert all(a.y0 > b.y1 for a, b in zip(boxes, boxes[1:], strict=False))
            else:
                assert all(a.x1 < b.x0 for a, b in zip(boxes, boxes[1:], strict=False))
        finally:
            plt.close(fig)


@pytest.mark.parametrize("name", ["curves", "norms", "maps"])
def test_every_narrow_text_is_9_pt_without_sub_or_superscripts_and_inside_the_figure(
        norms, name):
    """9 pt is 12 CSS px at the drawing's own size (3.3 inches are 317 px): what a 375 px
    phone shows. A log axis's ticks are written 1e8 (a superscript would be 0.7 of 9 pt)."""
    fig = _drawings(norms)[name](True)
    try:
        fig.canvas.draw()
        renderer = fig.canvas.get_renderer()
        width, height = fig.bbox.width, fig.bbox.height
        hidden = set()  # the labels of ticks outside an axis's view (not drawn)
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                lo, hi = sorted(axis.get_view_interval())
                hidden |= {id(t.label1) for t in axis.get_major_ticks()
                           if not lo - 1e-9 <= t.get_loc() <= hi + 1e-9}
        texts = [t for t in fig.findobj(matplotlib.text.Text)
                 if t.get_visible() and t.get_text().strip() and id(t) not in hidden]
        assert len(texts) > 10
        small = [(t.get_text(), t.get_fontsize()) for t in texts
                 if t.get_fontsize() < gate_plots.NARROW_TEXT]
        assert small == []
        assert not [t.get_text() for t in texts if "$" in t.get_text()]
        out = [t.get_text() for t in texts
               if not (-1 <= (b := t.get_window_extent(renderer)).x0 and b.x1 <= width + 1
                       and -1 <= b.y0 and b.y1 <= height + 1)]
        assert out == [], f"cut off by the figure's edge: {out}"
    finally:
        plt.close(fig)


def test_a_log_axis_tick_is_written_as_a_power_of_ten():
    assert gate_plots._power_of_ten(1e8) == "1e8"
    assert gate_plots._power_of_ten(1.0) == "1"
    assert gate_plots._power_of_ten(0.01) == "1e-2"
