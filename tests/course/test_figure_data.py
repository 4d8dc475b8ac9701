"""A figure's numbers beside its PNG in a notebook's output (convs2s.course.figure_data): the
attention maps ``plot_attention_grid`` draws carry what they draw, which the course's website
draws again for a phone (tools/site/attention_figures.stored_maps).

In a real kernel, as a notebook runs: the displayed output holds the PNG (what Jupyter and
Colab show), its text, and the numbers, equal to the attention drawn, its labels, its titles and
the figure's title set after drawing. Negative controls: a plain matplotlib figure, and a map
drawn onto a figure the caller made (which may hold anything else), carry no numbers.
"""

from __future__ import annotations

import json

import pytest
import torch

from convs2s.course import figure_data

DRAW = """
%matplotlib inline
import json, torch
import matplotlib.pyplot as plt
from convs2s.course.attention_maps import plot_attention_grid
a = torch.tensor(json.loads({attention!r}))
fig = plot_attention_grid(a, ["ein", "Hund", "."], ["a", "dog"], titles=["first", "second"])
fig.suptitle("a title set after drawing")
plt.show()
plt.plot([1, 2, 3])
plt.show()
fig = plt.figure()
plot_attention_grid(a, ["ein", "Hund", "."], ["a", "dog"], fig=fig)
plt.show()
"""


def _attention() -> torch.Tensor:
    g = torch.Generator().manual_seed(0)
    return torch.softmax(torch.randn(2, 2, 3, generator=g), dim=-1)  # [layers, trg, src]


def test_in_a_kernel_an_attention_figure_s_output_carries_its_numbers_beside_the_png(tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    a = _attention()
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(
        DRAW.format(attention=json.dumps(a.tolist())))])
    nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    shown = [o for o in nb.cells[0].outputs if o.output_type == "display_data"]
    assert len(shown) == 3, nb.cells[0].outputs
    maps, plain, onto = (dict(o["data"]) for o in shown)
    assert set(maps) == {"image/png", "text/plain", figure_data.MIMETYPE}
    numbers = figure_data.numbers(shown[0], "attention")
    assert numbers is not None
    torch.testing.assert_close(torch.tensor(numbers["attention"]), a, atol=0.5e-4, rtol=0)
    assert numbers["src_tokens"] == ["ein", "Hund", "."]
    assert numbers["trg_tokens"] == ["a", "dog"]
    assert numbers["titles"] == ["first", "second"]
    assert numbers["title"] == "a title set after drawing"
    assert set(plain) == {"image/png", "text/plain"}  # a plain figure: no numbers
    assert set(onto) == {"image/png", "text/plain"}  # drawn onto the caller's figure: none


def test_numbers_are_read_only_for_the_kind_asked():
    out = {"output_type": "display_data",
           "data": {"image/png": "AA", figure_data.MIMETYPE: {"kind": "attention", "x": 1}}}
    assert figure_data.numbers(out, "attention") == {"kind": "attention", "x": 1}
    assert figure_data.numbers(out, "length sweep") is None
    assert figure_data.numbers({"data": {"image/png": "AA"}}, "attention") is None
    assert figure_data.numbers({"data": {figure_data.MIMETYPE: [1, 2]}}, "attention") is None


def test_floats_are_kept_to_four_decimals_and_registering_needs_a_shell():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure()
    try:
        figure_data.attach(fig, "attention", attention=[[0.123456789, 1.0]], labels=["x"])
        assert figure_data.payload(fig) == {"kind": "attention",
                                            "attention": [[0.1235, 1.0]], "labels": ["x"],
                                            "title": ""}
    finally:
        plt.close(fig)
    assert figure_data.register(object()) is False  # no display formatter: nothing to do
