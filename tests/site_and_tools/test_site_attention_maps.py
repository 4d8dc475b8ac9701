"""The notebooks' attention maps as the website draws them for a phone (issue 63), with no
browser: tools/site/attention_figures.py and figures.attention_maps.

- notebook 06's three maps are drawn again from the shipped translator only because the site's
  numbers are the notebook's: each layer's entropy the stored output printed, the uniform
  entropy (the number of source tokens) and the figure's size (the numbers of source and target
  tokens), computed here from the attention the site draws;
- notebooks 04 and 07's maps (of models they train) are drawn from the numbers their stored
  outputs carry beside the PNG, and those are the numbers the notebook printed about (each
  map's entropy, to the printed decimals);
- the negative controls: notebooks 04 and 07's cells are not run again with the shipped
  translator, notebook 06's cell asked for other sentences, and notebook 06 whose
  stored run studied another model than the shipped one are not drawn again; stored numbers
  missing from one figure, of another kind or of the wrong shape are not drawn;
- the drawing: every layer one above the other, each the package's map of that layer with its
  title, on one colour scale, 3.3 inches wide, text 9 pt or more.
"""

from __future__ import annotations

import copy
import html
import json
import math
import re
from pathlib import Path

import pytest

from tools import site
from tools.site import attention_figures, figures

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = ROOT / "notebooks"
#: notebook 06's cell that draws the maps, by what its code does
MAPS_CELL = "translator.translate_with_attention(sentence)"


def _needs_data() -> None:
    from convs2s.data.multi30k import DataError, load_multi30k

    try:
        load_multi30k(download=False)
    except (DataError, OSError) as e:
        pytest.skip(f"needs the Multi30k files (CONVS2S_DATA_DIR): {e}")


def _notebook(stem: str) -> dict:
    return json.loads(next(NOTEBOOKS.glob(f"{stem}_*.ipynb")).read_text(encoding="utf-8"))


def _upto(nb: dict, found) -> tuple[dict, figures.Earlier]:
    """The first code cell for which ``found(source)`` holds, and what the code cells before
    it printed and set, as the site's build reads them."""
    earlier = figures.Earlier()
    for cell in nb["cells"]:
        if cell["cell_type"] != "code":
            continue
        source = site.cell_source(cell)
        if found(source):
            return cell, earlier
        earlier.add(source, "".join(site._text(out) for out in cell.get("outputs", [])))
    raise AssertionError("no such cell")


def _stored(cell: dict) -> tuple[list[str], list[str]]:
    """(each figure's text/plain, each printed line) of a cell's stored outputs."""
    sizes = ["".join(out["data"]["text/plain"]) for out in cell["outputs"]
             if "image/png" in out.get("data", {})]
    lines = [line for out in cell["outputs"] if out.get("output_type") == "stream"
             for line in "".join(out["text"]).splitlines()]
    return sizes, lines


@pytest.mark.slow
def test_notebook_06s_maps_are_the_shipped_translators_numbers_the_notebook_printed():
    _needs_data()
    cell, earlier = _upto(_notebook("06"), lambda s: MAPS_CELL in s)
    drawn = attention_figures.notebook_maps(site.cell_source(cell), cell["outputs"], earlier)
    sizes, lines = _stored(cell)
    assert drawn is not None and len(drawn) == len(sizes) == len(lines) == 3
    for d, size, line in zip(drawn, sizes, lines, strict=True):
        from convs2s.course.attention_maps import attention_entropy

        n, trg_len, src_len = d.attention.shape
        assert (len(d.trg_tokens), len(d.src_tokens)) == (trg_len, src_len)
        # the line the notebook printed under the figure, from the numbers the site draws
        entropy = " ".join(f"{h:.2f}" for h in attention_entropy(d.attention).tolist())
        assert line == (f"attention entropy per layer (nats): {entropy} | uniform over the "
                        f"source: {math.log(src_len):.2f}"), (line, entropy)
        # the figure's size: the package's cell=0.22 inches per token, a layer per panel
        width = round(100 * n * max(2.5, 0.22 * src_len + 1.2))
        height = round(100 * max(2.0, 0.22 * trg_len + 1.0))
        assert size == f"<Figure size {width}x{height} with {n + 1} Axes>", size
        assert d.titles == [f"layer {i + 1}" for i in range(n)]
        # the figure's title is the translation of the tokens drawn
        from convs2s import pretrained

        assert d.title == pretrained("de-en", device="cpu").detokenize(d.trg_tokens)

    # figures.attention_maps: a <picture> for each of the stored figures, in their places
    found = figures.attention_maps(site.cell_source(cell), cell["outputs"], earlier)
    shown = [i for i, out in enumerate(cell["outputs"]) if "image/png" in out.get("data", {})]
    assert sorted(found) == shown
    for figure in found.values():
        assert figure.html.count("<picture") == 1
        assert re.search(r'srcset="_static/figures/attention-\d-narrow-\w+\.svg"', figure.html)
        assert sorted(name.rsplit(".", 1)[1] for name in figure.files) == ["png", "svg"]
        assert "shipped translator" in figure.html and "Figure " in figure.html


@pytest.mark.slow
def test_notebook_06s_stored_numbers_are_those_the_site_computes(monkeypatch):
    """Notebook 06's stored run carries the numbers it drew (``convs2s.course.figure_data``):
    they are the shipped translator's, as the site computes them again; where the site has no
    Multi30k data to pick the notebook's sentences, it draws those stored numbers."""
    import torch

    _needs_data()
    cell, earlier = _upto(_notebook("06"), lambda s: MAPS_CELL in s)
    source = site.cell_source(cell)
    computed = attention_figures.notebook_maps(source, cell["outputs"], earlier)
    stored = attention_figures.stored_maps(cell["outputs"])
    assert computed is not None and stored is not None and len(stored) == len(computed) == 3
    for c, s in zip(computed, stored, strict=True):
        assert (s.src_tokens, s.trg_tokens, s.titles, s.title) == \
            (c.src_tokens, c.trg_tokens, c.titles, c.title)
        torch.testing.assert_close(s.attention, c.attention.to(s.attention.dtype),
                                   atol=1e-4, rtol=0)  # stored to 4 decimals

    with_data = figures._attention_maps(source, cell["outputs"], earlier, None, "")
    monkeypatch.setattr(attention_figures, "_test_sources", lambda: None)  # no Multi30k here
    assert attention_figures.notebook_maps(source, cell["outputs"], earlier) is None
    without = figures._attention_maps(source, cell["outputs"], earlier, None, "")
    assert sorted(with_data) == sorted(without) and len(without) == 3
    for i in without:
        assert "shipped translator" in with_data[i].html
        assert "the notebook's own run" in html.unescape(without[i].html)


@pytest.mark.slow
def test_maps_of_another_model_or_sentence_are_not_drawn_again():
    _needs_data()
    # notebooks 04 and 07: the models they train (the site trains none)
    cell, earlier = _upto(_notebook("04"), lambda s: "plot_attention_grid(tr.attention" in s)
    assert attention_figures.notebook_maps(site.cell_source(cell), cell["outputs"],
                                           earlier) is None
    cell, earlier = _upto(_notebook("07"), lambda s: "plot_attention_grid(both" in s)
    assert attention_figures.notebook_maps(site.cell_source(cell), cell["outputs"],
                                           earlier) is None

    nb = _notebook("06")
    cell, earlier = _upto(nb, lambda s: MAPS_CELL in s)
    source = site.cell_source(cell)
    # the positive case, for the controls below to mean something
    assert attention_figures.notebook_maps(source, cell["outputs"], earlier) is not None
    # other sentences than those whose maps the stored output shows
    other = source.replace("<= 11][:3]", "<= 11][3:6]")
    assert other != source
    assert attention_figures.notebook_maps(other, cell["outputs"], earlier) is None
    # a cell that makes its own translator
    own = "translator = Translator.from_checkpoint('runs/05_cpu_subword/best.pt')\n" + source
    assert attention_figures.notebook_maps(own, cell["outputs"], earlier) is None
    # a stored run that studied the learner's own model (notebook 05's run), not the shipped
    ran_own = copy.deepcopy(earlier)
    ran_own.printed = [re.sub(r"no run of notebook 05 here: .*", "your run of notebook 05: "
                              "runs/05_cpu_subword/final.pt (36 epochs)", p)
                       for p in ran_own.printed]
    assert ran_own.printed != earlier.printed
    assert attention_figures.notebook_maps(source, cell["outputs"], ran_own) is None


def test_a_figures_stored_outputs_are_read_in_order():
    outputs = [{"output_type": "display_data", "data": {"image/png": "AA",
                                                        "text/plain": ["<Figure size 1x2>"]}},
               {"output_type": "stream", "name": "stdout", "text": ["a\n"]},
               {"output_type": "stream", "name": "stdout", "text": "b\n"},
               {"output_type": "stream", "name": "stderr", "text": "warning\n"}]
    assert attention_figures.stored_events(outputs) == [
        ("figure", "<Figure size 1x2>"), ("text", "a\nb\n"),
        ("other", json.dumps(outputs[3], sort_keys=True))]


def test_the_layers_one_above_the_other_are_the_packages_maps_on_one_scale():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    torch.manual_seed(0)
    for src_len, staggered in ((11, False), (26, True)):
        attention = torch.softmax(torch.randn(4, 9, src_len), dim=-1)
        src = [f"▁tok{i}" for i in range(src_len)]
        trg = [f"▁out{i}" for i in range(9)]
        titles = [f"layer {i + 1}" for i in range(4)]
        fig = attention_figures.layers_figure(attention, src, trg, titles,
                                              "A long translation that is wrapped to the width")
        try:
            fig.canvas.draw()
            assert fig.get_size_inches()[0] == pytest.approx(attention_figures.NARROW_INCHES)
            maps = [ax for ax in fig.get_axes() if ax.images]
            assert [ax.get_title() for ax in maps] == titles
            for layer, ax in enumerate(maps):
                assert torch.allclose(torch.as_tensor(ax.images[0].get_array().data),
                                      attention[layer])
                assert ax.images[0].get_clim() == (0.0, pytest.approx(float(attention.max())))
                labels = [t.get_text() for t in ax.get_xticklabels()]
                tops = [t.get_text() for a in ax.child_axes for t in a.get_xticklabels()]
                assert (labels, tops) == ((src[0::2], src[1::2]) if staggered else (src, []))
            # one above the other, in order
            tops_px = [ax.get_window_extent().y0 for ax in maps]
            assert tops_px == sorted(tops_px, reverse=True)
            assert "\n" in fig._suptitle.get_text()  # wrapped to the width
            sizes = [t.get_fontsize() for t in fig.findobj(matplotlib.text.Text)
                     if t.get_visible() and t.get_text().strip()]
            assert min(sizes) >= 9
        finally:
            plt.close(fig)


def _entropies(line: str) -> list[float]:
    return [float(x) for x in re.findall(r"\d+\.\d\d", line)]


@pytest.mark.parametrize("stem, found", [("04", "plot_attention_grid(tr.attention"),
                                         ("07", "plot_attention_grid(both")])
def test_notebooks_04_and_07s_maps_are_drawn_from_the_numbers_their_outputs_carry(stem, found):
    from convs2s.course.attention_maps import attention_entropy

    cell, earlier = _upto(_notebook(stem), lambda s: found in s)
    drawn = attention_figures.stored_maps(cell["outputs"])
    assert drawn is not None and len(drawn) == 1, "the stored run carries no numbers: re-run it"
    d = drawn[0]
    n, trg_len, src_len = d.attention.shape
    entropy = [round(h, 2) for h in attention_entropy(d.attention).tolist()]
    _, lines = _stored(cell)
    if stem == "04":  # "entropy per layer (nats): ['1.76', ...] uniform over 11 tokens: 2.40"
        line = next(x for x in lines if x.startswith("entropy per layer"))
        assert _entropies(line) == pytest.approx(entropy + [round(math.log(src_len), 2)],
                                                 abs=0.011), (line, entropy)
        assert d.titles == [f"layer {i + 1}" for i in range(n)]
        assert d.title == "Attention of each decoder layer (greedy translation)"
    else:  # a line per map: "GRU: its one attention   mean attention entropy 1.39 nats (...)"
        printed = [x for x in lines if "mean attention entropy" in x]
        assert [x.split("  ")[0].strip() for x in printed] == d.titles
        assert [_entropies(x)[0] for x in printed] == pytest.approx(entropy, abs=0.011)
    found_ = figures.attention_maps(site.cell_source(cell), cell["outputs"], earlier)
    assert found_ is not None and len(found_) == 1
    (figure,) = found_.values()
    assert figure.html.count("<picture") == 1
    alt = html.unescape(figure.html)
    assert "of the notebook's own run" in alt and " × " in alt
    assert sorted(name.rsplit(".", 1)[1] for name in figure.files) == ["png", "svg"]


def _output(numbers=None):
    from convs2s.course import figure_data

    data = {"image/png": "AA", "text/plain": ["<Figure size 1x2>"]}
    if numbers is not None:
        data[figure_data.MIMETYPE] = numbers
    return {"output_type": "display_data", "data": data, "metadata": {}}


def test_stored_numbers_are_drawn_only_when_every_figure_has_them_of_the_right_shape():
    good = {"kind": "attention", "attention": [[[0.5, 0.5]], [[1.0, 0.0]]],
            "src_tokens": ["a", "b"], "trg_tokens": ["x"], "titles": ["l1", "l2"],
            "title": "t"}
    text = {"output_type": "stream", "name": "stdout", "text": "printed\n"}
    drawn = attention_figures.stored_maps([_output(good), text, _output(good)])
    assert drawn is not None and len(drawn) == 2
    assert drawn[0].titles == ["l1", "l2"] and drawn[0].title == "t"
    assert tuple(drawn[0].attention.shape) == (2, 1, 2)
    assert attention_figures.stored_maps([_output(good), _output()]) is None  # one without
    assert attention_figures.stored_maps([text]) is None  # no figure at all
    for wrong in ({"kind": "length sweep"}, {"titles": ["l1"]}, {"src_tokens": ["a"]},
                  {"trg_tokens": ["x", "y"]}, {"attention": [0.5, 0.5]},
                  {"attention": [[["a", "b"]], [[1.0, 0.0]]]}):
        assert attention_figures.stored_maps([_output({**good, **wrong})]) is None, wrong
    missing = {k: v for k, v in good.items() if k != "titles"}
    assert attention_figures.stored_maps([_output(missing)]) is None
    alt = attention_figures.stored_alt_text(drawn[0], 0, 2, "printed\n")
    assert alt == ("Attention maps “t” of the notebook's own run, l1, l2: 2 source tokens (a b) "
                   "× 1 target tokens (x). Figure 1 of 2, printed below it: printed.")
