"""convs2s.course.diagrams: the architecture pictures every notebook opens with."""

import os
import struct
import subprocess
import sys
import zlib
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.colors import to_rgba  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from convs2s.course import diagrams  # noqa: E402

DRAWINGS = {
    "architecture": diagrams.architecture,
    "conv_glu_block": diagrams.conv_glu_block,
    "padding": diagrams.padding,
    "multi_step_attention": diagrams.multi_step_attention,
}
FILES = ("architecture.png", "conv_glu_block.png", "padding.png", "multi_step_attention.png")


@pytest.fixture(autouse=True)
def _close_figures():
    yield
    plt.close("all")


def _texts(fig: Figure) -> list[Text]:
    """Every piece of text a reader sees (non-empty, visible; not the hidden axes' ticks)."""
    hidden = set()
    for ax in fig.axes:
        if not ax.axison:
            hidden |= set(ax.xaxis.findobj(Text)) | set(ax.yaxis.findobj(Text))
    return [t for t in fig.findobj(Text)
            if t.get_visible() and t.get_text().strip() and t not in hidden]


def _named_patches(fig: Figure) -> dict[str, tuple]:
    """{gid: facecolor} of every named patch of the architecture figure."""
    found = {}
    for ax in fig.axes:
        for patch in ax.patches:
            gid = patch.get_gid()
            if gid and gid != "you-are-here":
                found.setdefault(gid, patch.get_facecolor())
    return found


def _parts(gid: str) -> set[str]:
    return set(gid.split(":", 1)[0].split("+"))


def _render_text_boxes(fig: Figure) -> list:
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    return [(t.get_text(), t.get_window_extent(renderer)) for t in _texts(fig)]


@pytest.mark.parametrize("name", DRAWINGS)
def test_each_diagram_is_a_readable_figure(name):
    fig = DRAWINGS[name]()
    assert isinstance(fig, Figure)
    assert fig.dpi >= 100
    texts = _texts(fig)
    assert len(texts) >= 5, "a diagram without labels"
    small = [(t.get_text(), t.get_fontsize()) for t in texts if t.get_fontsize() < 9]
    assert not small, f"text under 9 pt: {small}"


@pytest.mark.parametrize("name", DRAWINGS)
def test_no_text_runs_off_the_figure(name):
    fig = DRAWINGS[name]()
    width, height = fig.canvas.get_width_height()
    for text, box in _render_text_boxes(fig):
        assert box.x0 >= -1 and box.y0 >= -1, f"{text!r} runs off the figure"
        assert box.x1 <= width + 1 and box.y1 <= height + 1, f"{text!r} runs off the figure"


def test_architecture_labels_do_not_overlap():
    """No two labels of the whole-model diagram overlap, with every part highlighted."""
    fig = diagrams.architecture(highlight=diagrams.PARTS)
    boxes = _render_text_boxes(fig)
    for i, (a, ba) in enumerate(boxes):
        for b, bb in boxes[i + 1:]:
            overlap_w = min(ba.x1, bb.x1) - max(ba.x0, bb.x0)
            overlap_h = min(ba.y1, bb.y1) - max(ba.y0, bb.y0)
            assert overlap_w <= 1 or overlap_h <= 1, f"{a!r} overlaps {b!r}"


def test_architecture_draws_every_part_of_the_model():
    fig = diagrams.architecture()
    text = " ".join(t.get_text() for t in _texts(fig))
    for words in ("embeddings", "encoder block 1", "decoder block L", "attention 1",
                  "attention L", "causal padding", "same padding", "softmax", "<bos>", "keys",
                  "values", "√0.5"):
        assert words in text, f"the diagram does not mention {words!r}"
    names = _named_patches(fig)
    for part in ("embeddings", "encoder", "attention", "decoder", "output", "blocks"):
        assert any(part in _parts(gid) for gid in names), f"no patch belongs to {part}"
    assert not [t for t in _texts(fig) if t.get_text() == "you are here"]


@pytest.mark.parametrize("part", diagrams.PARTS)
def test_highlight_colours_exactly_the_named_part(part):
    """The named part's patches change colour against the plain drawing; the rest are greyed
    alike whatever else is highlighted, and a "you are here" badge appears."""
    plain = _named_patches(diagrams.architecture())
    one = _named_patches(diagrams.architecture(highlight=part))
    assert plain.keys() == one.keys()
    inside = {gid for gid in one if part in _parts(gid)}
    assert inside
    # highlighted patches all differ from the plain drawing and from greyed ones
    grey = {one[g] for g in one if g not in inside}
    for gid in inside:
        assert one[gid] != plain[gid], f"{gid} is drawn as without highlight"
        assert one[gid] not in grey, f"{gid} looks like a greyed part"
    badges = [t for t in _texts(diagrams.architecture(highlight=part))
              if t.get_text() == "you are here"]
    assert badges, "no 'you are here' marker"


def test_adding_a_part_to_the_highlight_changes_only_that_part():
    base = _named_patches(diagrams.architecture(highlight="encoder"))
    more = _named_patches(diagrams.architecture(highlight=("encoder", "attention")))
    changed = {gid for gid in base if base[gid] != more[gid]}
    expected = {gid for gid in base if "attention" in _parts(gid)
                and not _parts(gid) & {"encoder"}}
    assert changed == expected, f"changed {sorted(changed)}, expected {sorted(expected)}"
    # highlighting is independent of order and of a str versus a one-element tuple
    assert _named_patches(diagrams.architecture(highlight=("attention", "encoder"))) == more
    assert _named_patches(diagrams.architecture(highlight=("encoder",))) == base


def test_blocks_means_the_conv_glu_blocks_of_both_stacks():
    fig = _named_patches(diagrams.architecture(highlight="blocks"))
    strong = to_rgba(diagrams.COLOURS["encoder"])
    enc_blocks = [g for g in fig if _parts(g) >= {"encoder", "blocks"}]
    dec_blocks = [g for g in fig if _parts(g) >= {"decoder", "blocks"}]
    assert len(enc_blocks) >= 2 and len(dec_blocks) >= 2
    assert all(fig[g] == strong for g in enc_blocks if "block" in g.split(":")[1])
    assert fig["encoder:z and z+e"] != strong, "the encoder output is not a conv-GLU block"


def _badges(fig: Figure) -> list[str]:
    return [t.get_text() for t in _texts(fig) if t.get_text().startswith("you are here")]


@pytest.mark.parametrize("highlight", [
    *diagrams.PARTS, ("embeddings", "encoder"), ("encoder", "decoder"), ("decoder", "output"),
    ("embeddings", "encoder", "attention", "decoder", "output"), diagrams.PARTS,
    ("blocks", "output")])
def test_exactly_one_marker_whatever_is_highlighted(highlight):
    """One "you are here" badge (notebook 05 once showed six), with an arrow to each highlighted
    part it can reach, or naming the whole model."""
    fig = diagrams.architecture(highlight=highlight)
    assert len(_badges(fig)) == 1, _badges(fig)
    arrows = [p for ax in fig.axes for p in ax.patches if p.get_gid() == "you-are-here"]
    if _badges(fig) == ["you are here"]:
        assert arrows, "a badge pointing at nothing"
    else:
        assert _badges(fig) == ["you are here: the whole model"] and not arrows


def test_the_target_embeddings_feed_every_query_and_the_context_is_scaled_by_sqrt_m():
    """d = W h + b + g (eq. 1): a line from g to the queries; c carries √m (§3.4)."""
    for fig in (diagrams.architecture(), diagrams.multi_step_attention()):
        lines = [ln for ax in fig.axes for ln in ax.lines if "g into the queries" in
                 (ln.get_gid() or "")]
        assert lines, "no path from the target embeddings g to the queries"
        assert any("sqrt{m}" in t.get_text() for t in _texts(fig)), "no √m on the context"


def test_the_attention_picture_names_the_glu_output_and_the_layer_output_apart():
    """h (the GLU output, the query's input) is not also the layer's output."""
    text = " ".join(t.get_text() for t in _texts(diagrams.multi_step_attention()))
    assert "GLU: $h^1_i$" in text and "residual: $x^1_i$" in text
    assert "output $h" not in text


@pytest.mark.parametrize("bad", ["decoders", ("encoder", "head"), 3, (), ("encoder", None)])
def test_unknown_highlight_names_the_valid_parts(bad):
    with pytest.raises(ValueError) as err:
        diagrams.architecture(highlight=bad)
    message = str(err.value)
    for part in diagrams.PARTS:
        assert repr(part) in message


def _png_info(path: Path) -> tuple[int, int, float | None]:
    """(width, height, dpi from the pHYs chunk or None) of a PNG file."""
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path.name} is not a PNG"
    width, height = struct.unpack(">II", data[16:24])
    dpi, pos = None, 8
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        assert zlib.crc32(kind + body) == struct.unpack(">I", data[pos + 8 + length:
                                                                    pos + 12 + length])[0]
        if kind == b"pHYs":
            x, _, unit = struct.unpack(">IIB", body)
            assert unit == 1, "pHYs not in pixels per metre"
            dpi = x * 0.0254
        pos += 12 + length
    return width, height, dpi


def _cli(*args, cwd=None):
    env = dict(os.environ, MPLBACKEND="Agg")
    return subprocess.run([sys.executable, "-m", "convs2s.course.diagrams", *args],
                          capture_output=True, text=True, cwd=cwd, env=env, timeout=300)


@pytest.mark.slow
def test_cli_writes_the_four_pngs_at_100_dpi(tmp_path):
    out = tmp_path / "new" / "images"
    result = _cli("--out", str(out))
    assert result.returncode == 0, result.stderr
    assert sorted(p.name for p in out.iterdir()) == sorted(FILES), "stray or missing files"
    for name in FILES:
        width, height, dpi = _png_info(out / name)
        assert dpi is not None and dpi >= 99.5, f"{name}: {dpi} dpi"
        fig = DRAWINGS[name.removesuffix(".png")]()
        w_in, h_in = fig.get_size_inches()
        assert (width, height) == (round(w_in * 100), round(h_in * 100)), name
        assert width >= 800, f"{name} is too small to read"
        assert oct((out / name).stat().st_mode & 0o777) != oct(0o600), "mkstemp's mode leaked"


def test_cli_refuses_a_bad_out_in_one_line(tmp_path):
    a_file = tmp_path / "images"
    a_file.write_text("not a folder")
    result = _cli("--out", str(a_file))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "error:" in lines[0] and "not a folder" in lines[0], result.stderr
    assert "Traceback" not in result.stderr
    assert a_file.read_text() == "not a folder", "the file given as --out was touched"

    under_file = a_file / "sub"
    result = _cli("--out", str(under_file))
    assert result.returncode == 2
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


@pytest.mark.parametrize("args, said", [(["--ouut", "x"], "unrecognized arguments: --ouut x"),
                                        (["--out", ""],
                                         "argument --out: expected a folder, not an empty name")])
def test_cli_mistyped_flags_are_one_line_and_write_nothing(args, said, tmp_path):
    """A typo or an empty --out (which wrote the PNGs into the current folder) is one line."""
    result = _cli(*args, cwd=tmp_path)
    assert result.returncode == 2 and result.stderr.strip().splitlines() == [
        f"python -m convs2s.course.diagrams: error: {said} (see --help)"], result.stderr
    assert list(tmp_path.iterdir()) == []
