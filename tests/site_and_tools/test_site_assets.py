"""What makes the site light: maths as MathML written at build time, the
theme's icons as a small style sheet and subset fonts, figures as palette PNGs. Pure functions on
made-up input; tests/site_and_tools/test_site.py checks the built site in Chromium."""

import io

import numpy as np
import pytest
from PIL import Image

from tools.site import icons, png
from tools.site.mathml import to_mathml

# --------------------------------------------------------------------------------------------
# Maths
# --------------------------------------------------------------------------------------------


def test_a_formula_becomes_one_math_element():
    inline = to_mathml(r"v([A\,B]) = A \otimes \sigma(B)", display=False)
    block = to_mathml(r"\mathbf{z} = \sqrt{0.5}\,\sum_j a_{ij}", display=True)
    assert inline.startswith("<math") and 'display="inline"' in inline
    assert 'display="block"' in block and "<msqrt>" in block and "\\" not in block


def test_arg_max_is_an_operator_not_raw_tex():
    mathml = to_mathml(r"\hat y_{i+1} = \arg\max p(\cdot)", display=False)
    assert ">arg<" in mathml and "\\" not in mathml


@pytest.mark.parametrize("tex", [r"a^", r"\begin{foo} x", r"\undefinedcommand x", "{"])
def test_tex_it_cannot_write_is_an_error_not_a_silent_raw_command(tex):
    """latex2mathml writes an unknown command as its own name: refused, so the build warns
    (and the site tests fail) instead of showing ``\\undefinedcommand`` to a reader."""
    with pytest.raises(ValueError):
        to_mathml(tex, display=False)


# --------------------------------------------------------------------------------------------
# Icons
# --------------------------------------------------------------------------------------------

# The shape of Font Awesome's JS bundle: each family's icons, then the call that registers them.
BUNDLE = ('var a={moon:[512,512,[],"f186","M1 1L2 2z"],"arrow-up":[384,512,[8593],"f062",'
          '"M3 3z"]};(function(){p("far",a)});var b={moon:[512,512,[],"f186","M9 9z"],'
          'bars:[448,512,["navicon"],"f0c9","M0 96z"],duo:[512,512,[],"e000",["M1z","M2z"]]};'
          '(function(){p("fas",b)});var c={github:[496,512,[],"f09b","M7 7z"]};'
          '(function(){p("fab",c)})')


def test_icon_shapes_are_read_by_family():
    shapes = icons.icon_shapes(BUNDLE)
    assert shapes[("far", "moon")] == (512, 512, "M1 1L2 2z")
    assert shapes[("fas", "moon")] == (512, 512, "M9 9z")  # solid's own, not regular's
    assert shapes[("fas", "bars")] == (448, 512, "M0 96z")
    assert shapes[("fas", "duo")] == (512, 512, "M1z M2z")
    assert shapes[("fab", "github")] == (496, 512, "M7 7z")
    assert ("fab", "moon") not in shapes


def test_the_icons_named_in_pages_and_scripts():
    html = ('<i class="fa-solid fa-bars fa-lg"></i><span class="fa-brands fa-github"></span>'
            '<i class="fa-regular fa-moon"></i><i class="fas fa-arrow-up fa-fw"></i>')
    script = 'f.classList="fa-solid fa-xmark",p.onclick=T'
    assert icons.icons_named(html) == {("fas", "bars"), ("fab", "github"), ("far", "moon"),
                                       ("fas", "arrow-up")}
    assert icons.icons_named(script) == {("fas", "xmark")}


def test_the_style_sheet_holds_only_the_wanted_icons_with_the_licence():
    css = icons.icon_css(icons.icon_shapes(BUNDLE), {("fas", "bars"), ("fab", "github")})
    assert ".fa-solid.fa-bars::before" in css and ".fa-brands.fa-github::before" in css
    assert "fa-moon" not in css and "M9 9z" not in css
    assert "width:0.875em" in css  # bars: 448 / 512 of the height
    assert "CC BY 4.0" in css


def test_shrink_replaces_the_bundle_and_reports_unknown_icons(tmp_path):
    static = tmp_path / "_static"
    (static / "scripts").mkdir(parents=True)
    (static / "scripts" / "fontawesome.js").write_text(BUNDLE)
    (static / "scripts" / "fontawesome.js.map").write_text("{}")
    (static / "scripts" / "theme.js").write_text('x.classList="fa-solid fa-bars"')
    page = tmp_path / "index.html"
    page.write_text('<i class="fa-brands fa-github"></i><i class="fa-solid fa-nothing"></i>')
    missing = icons.shrink(static, [page])
    assert missing == {("fas", "nothing")}
    assert len((static / "scripts" / "fontawesome.js").read_text()) < 100
    assert not (static / "scripts" / "fontawesome.js.map").exists()
    css = (static / "icons.css").read_text()
    assert "fa-bars" in css and "fa-github" in css


# --------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------


def _figure_png() -> bytes:
    """A matplotlib figure as the notebooks make them: a heat map, lines and text."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (a, b) = plt.subplots(1, 2, figsize=(6, 3), dpi=100)
    a.imshow(np.random.default_rng(0).random((12, 12)), cmap="viridis")
    b.plot(np.linspace(0, 6, 50), np.sin(np.linspace(0, 6, 50)), label="sin")
    b.legend()
    fig.suptitle("a figure")
    out = io.BytesIO()
    fig.savefig(out, format="png")
    plt.close(fig)
    return out.getvalue()


def test_a_figure_becomes_a_smaller_palette_png_that_looks_the_same():
    data = _figure_png()
    smaller = png.smaller_png(data)
    assert len(smaller) < len(data)
    with Image.open(io.BytesIO(data)) as a, Image.open(io.BytesIO(smaller)) as b:
        assert b.mode == "P" and a.size == b.size
        before = np.asarray(a.convert("RGB"), int)
        after = np.asarray(b.convert("RGBA").convert("RGB"), int)
    diff = np.abs(before - after)
    assert diff.mean() < 4 and diff.max() < 48
    assert png.smaller_png(data) == smaller  # deterministic


def test_what_is_no_png_or_already_small_is_left_as_it_is():
    assert png.smaller_png(b"not an image") == b"not an image"
    out = io.BytesIO()
    Image.new("P", (4, 4)).save(out, "PNG")
    assert png.smaller_png(out.getvalue()) == out.getvalue()
