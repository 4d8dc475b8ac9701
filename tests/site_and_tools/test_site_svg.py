"""The site's drawings made lighter (tools/site/svg.py) draw what matplotlib drew, and the
notebooks offered for download (tools/site/png.py) hold what was committed, figures lighter."""

from __future__ import annotations

import base64
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from tools.site import png
from tools.site.svg import compact

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
SVG = "{http://www.w3.org/2000/svg}"


def _drawings() -> dict[str, bytes]:
    """Matplotlib's own SVG of two of the site's drawings: the narrow architecture (formulas:
    <tspan>s in two fonts) and one flipbook layer (an embedded image, rotated labels)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import torch

    from convs2s.course import diagrams
    from tools.site import figures, flipbooks

    drawn = {}
    fig = diagrams.architecture("attention", theme="dark", narrow=True)
    drawn["architecture"] = figures.matplotlib_svg(fig)
    plt.close(fig)
    attention = torch.softmax(torch.randn(2, 9, 11, generator=torch.Generator().manual_seed(0)),
                              dim=-1)
    fig = flipbooks.layer_figure(attention, 1, [f"▁Wort{i}" for i in range(11)],
                                 [f"▁word{i}" for i in range(9)], "layer 2: H = 1.00")
    drawn["layer"] = figures.matplotlib_svg(fig)
    plt.close(fig)
    return drawn


def _texts(svg: bytes) -> list[tuple[str, str]]:
    """(characters, font size) of every text and tspan, in order."""
    out = []
    for e in ET.fromstring(svg).iter():
        if e.tag in (f"{SVG}text", f"{SVG}tspan") and (e.text or "").strip():
            size = re.search(r"font-size:\s*([\d.]+)px", e.get("style", ""))
            out.append((e.text.strip(), size.group(1) if size else ""))
    return out


def test_a_compact_drawing_keeps_every_text_image_and_shape_in_under_two_thirds_the_bytes():
    for name, raw in _drawings().items():
        small = compact(raw)
        assert len(small) < 2 / 3 * len(raw), (name, len(raw), len(small))
        assert _texts(small) == _texts(raw), name
        for tag in ("path", "use", "image", "clipPath", "rect"):
            assert small.count(b"<" + tag.encode()) == raw.count(b"<" + tag.encode()), tag
        assert b"<metadata" not in small and b"\n " not in small.split(b"<svg", 1)[1]
        assert compact(small) == small, name  # nothing more to take out


def test_a_font_is_taken_out_only_where_what_inherits_it_would_not_change():
    """A <tspan> naming no font inherits its <text>'s: a rule for tspans would change it."""
    svg = (b'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 10 10">'
           b'<text style="font-size: 9px; font-family: A">x<tspan>y</tspan></text>'
           b'<text style="font-family: B"><tspan style="font-family: A">z</tspan></text>'
           b'<text style="font-family: A">w</text></svg>')
    small = compact(svg).decode()
    assert "text{font-family:A}" in small and "tspan{" not in small
    assert '<text style="font-family: B">' in small  # another font: its own, which wins
    assert '<tspan style="font-family: A">z</tspan>' in small
    assert '<text style="font-size: 9px">x<tspan>y</tspan></text>' in small
    plain = b'<svg xmlns="http://www.w3.org/2000/svg"><text>own characters</text>' \
            b'<text style="font-family: A">a</text></svg>'
    assert b"font-family: A" in compact(plain)  # the first text would take the rule's font


def test_what_is_not_an_svg_is_returned_as_it_is():
    for data in (b"", b"not xml", b"<html><body/></html>", b"\x89PNG\r\n\x1a\n"):
        assert compact(data) == data


@pytest.mark.browser
@pytest.mark.slow
def test_chromium_draws_a_compact_drawing_pixel_for_pixel_as_matplotlibs():
    """The reader's view: each drawing shown as an <img>, as the site shows it. The negative
    control (a label's characters gone) shows that the comparison sees one word."""
    from PIL import Image, ImageChops
    from test_browser import _require_browser

    from tools import screenshots

    _require_browser()

    def shown(page, svg: bytes):
        url = "data:image/svg+xml;base64," + base64.b64encode(svg).decode()
        page.set_content(f'<body style="margin:0;background:#fff"><img src="{url}"></body>')
        page.wait_for_function("document.images[0].complete && "
                               "document.images[0].naturalWidth > 0")
        return Image.open(io.BytesIO(page.locator("img").screenshot())).convert("RGB")

    with screenshots.Browser() as browser:
        page = browser.browser.new_page()
        for name, raw in _drawings().items():
            small = compact(raw)
            before = shown(page, raw)
            assert ImageChops.difference(before, shown(page, small)).getbbox() is None, name
            unlabelled = re.sub(rb"(<text[^>]*>)[^<]+(</text>)", rb"\1\2", small, count=1)
            assert ImageChops.difference(before, shown(page, unlabelled)).getbbox(), name


def _pngs(nb: dict) -> list[str]:
    return ["".join(p) if isinstance(p, list) else p
            for cell in nb["cells"] for out in cell.get("outputs", [])
            if (p := out.get("data", {}).get("image/png")) is not None]


def _without_pngs(nb: dict) -> dict:
    nb = json.loads(json.dumps(nb))
    for cell in nb["cells"]:
        for out in cell.get("outputs", []):
            out.get("data", {}).pop("image/png", None)
    return nb


def test_a_downloaded_notebook_is_the_committed_one_with_lighter_figures_of_the_same_size():
    from PIL import Image

    path = NOTEBOOKS / "01_glu_and_padding.ipynb"
    raw = path.read_bytes()
    copy = png.notebook_with_smaller_figures(raw)
    committed, offered = json.loads(raw), json.loads(copy)
    assert _without_pngs(offered) == _without_pngs(committed)
    before, after = _pngs(committed), _pngs(offered)
    assert len(before) == len(after) > 0
    for old, new in zip(before, after, strict=True):
        with Image.open(io.BytesIO(base64.b64decode(old))) as a, \
                Image.open(io.BytesIO(base64.b64decode(new))) as b:
            assert a.size == b.size
    assert len(copy) < 0.7 * len(raw)
    # written as nbformat writes: what is left unchanged is byte for byte the same text
    assert copy.decode().split('"cells": [', 1)[0] == raw.decode().split('"cells": [', 1)[0]


def test_a_notebook_without_figures_or_that_is_not_one_is_offered_as_it_is():
    plain = (json.dumps({"cells": [{"cell_type": "code", "outputs": [
        {"output_type": "stream", "text": "x"}]}]}, indent=1) + "\n").encode()
    for data in (plain, b"not json", b'{"cells": 3}', b"[]"):
        assert png.notebook_with_smaller_figures(data) == data
