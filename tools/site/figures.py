"""The course's studied figures as the website shows them: a drawing for a phone's column and,
for the architecture picture, a drawing for the dark theme, each picked by the page.

A figure that a notebook's stored output shows only as one PNG, drawn for a wide screen, is
shrunk into a phone's 320-345 px column to a quarter of its size or less, its text to 3-10 px.
Here the site's build draws such figures again with the package's own drawing functions and
data (never running a notebook; notebook 06's attention cell alone is run again, below), and
the page picks the drawing by the window's width (``<picture>`` with a ``<source media>``)
and, for the architecture picture, by the theme (the theme's ``only-light`` / ``only-dark``
classes, so the reader's choice with the theme's switch wins over the system's):

- the architecture picture at the top of every notebook and on the landing page
  (``convs2s.course.diagrams.architecture``, the highlight the cell's code asks for): a wide
  PNG and a narrow SVG, each in the light and the dark theme (every text at 4.5:1 or more in
  both, ``diagrams.Palette``);
- notebook 07's length sweep (``convs2s.course.length_sweep.plot`` of the package's records,
  with the Multi30k mean length that the cell printed): the stored PNG on a wide screen, and
  on a phone the same drawing with its panels one above the other, 3.3 inches wide, its titles
  wrapped to that width and each legend under its panel (``restack``);
- notebook 01's GLU and padding figures (``convs2s.course.gate_plots``, their narrow form);
- the notebooks' attention maps: the stored PNG on a wide screen, and on a phone the layers one
  above the other (``attention_figures``), drawn from the numbers the stored output carries
  beside the PNG (notebooks 04 and 07's maps, of models those notebooks train), or, for
  notebook 06's three maps of the shipped translator, from the figure cell's own code run again
  (drawn only where what it prints and displays is the stored output's).

A narrow drawing is an SVG whose text stays text (``svg.fonttype: none``), 9 pt or more in a
figure 3.5 inches wide (the architecture picture) or 3.3 (the length sweep, whose output is
folded in a narrower box): at least 11 CSS px as a 375 px phone shows it (what the site's
browser test measures). The files go to the site's ``_static/figures/``.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import html
import io
import re
from dataclasses import dataclass, field

from tools.site.png import smaller_png

#: Where the staged files are, in the Sphinx source folder, and where the site has them.
STAGED = "_figures"
STATIC = "_static/figures"
#: The windows that get the narrow drawing (the theme's own phone layout starts below 720 px).
NARROW_MEDIA = "(max-width: 719.98px)"
#: The narrow drawings' width in inches: 9 pt text is 11 CSS px in a 320 px column at 3.6;
#: a folded output's column on a 375 px phone is 305 px (3.3 inches keep 11.5 px there).
NARROW_INCHES = 3.3
DPI = 100


@dataclass
class Figure:
    """A figure the page shows as ``html``, with the files it names (under ``STATIC``)."""

    html: str
    files: dict[str, bytes] = field(default_factory=dict)


def _png(fig) -> bytes:
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=DPI, facecolor=fig.get_facecolor())
    return smaller_png(out.getvalue())


def matplotlib_svg(fig) -> bytes:
    """The figure as matplotlib writes it as SVG with its text as text (the browser draws it,
    a test can measure it), no date or random ids (the same figure, the same bytes)."""
    import matplotlib

    out = io.BytesIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "convs2s",
                                "svg.id": None}):
        fig.savefig(out, format="svg", dpi=DPI, facecolor=fig.get_facecolor(),
                    metadata={"Date": None})
    return out.getvalue()


def svg(fig) -> bytes:
    """:func:`matplotlib_svg` made lighter by :func:`tools.site.svg.compact` (the same
    drawing in about half the bytes)."""
    from tools.site.svg import compact

    return compact(matplotlib_svg(fig))


def _name(stem: str, data: bytes, ext: str) -> str:
    return f"{stem}-{hashlib.sha256(data).hexdigest()[:12]}.{ext}"


def _size(data: bytes, ext: str) -> tuple[int, int]:
    """(width, height) in CSS px of a PNG (its pixels) or of a matplotlib SVG (its pt)."""
    if ext == "png":
        import struct

        return struct.unpack(">II", data[16:24])
    m = re.search(rb'<svg[^>]*\swidth="([\d.]+)pt"[^>]*\sheight="([\d.]+)pt"', data)
    return round(float(m.group(1)) * 96 / 72), round(float(m.group(2)) * 96 / 72)


def picture(wide: tuple[str, bytes], narrow: tuple[str, bytes], alt: str,
            theme: str | None = None, base: str = "") -> str:
    """A ``<picture>``: the narrow file below :data:`NARROW_MEDIA`, else the wide one (each
    ``(name, bytes)``); ``theme`` "light" / "dark": shown in that theme only. Pure."""
    only = f' class="only-{theme}"' if theme else ""
    (wname, wdata), (nname, ndata) = wide, narrow
    ww, wh = _size(wdata, wname.rsplit(".", 1)[1])
    nw, nh = _size(ndata, nname.rsplit(".", 1)[1])
    kind = "image/svg+xml" if nname.endswith(".svg") else "image/png"
    return (f'<picture{only}><source media="{NARROW_MEDIA}" srcset="{base}{STATIC}/{nname}" '
            f'type="{kind}" width="{nw}" height="{nh}">'
            f'<img{only} src="{base}{STATIC}/{wname}" width="{ww}" height="{wh}" '
            f'alt="{html.escape(alt, quote=True)}" loading="lazy"></picture>')


def _figure_html(pictures: list[str], what: str) -> str:
    return (f'<div class="site-figure site-figure-{what}">' + "".join(pictures) + "</div>")


# --------------------------------------------------------------------------------------------
# The architecture picture
# --------------------------------------------------------------------------------------------


def architecture_highlight(source: str):
    """The ``highlight`` a cell's ``diagrams.architecture(...)`` call asks for, as written
    (None, a part's name, or a tuple of them), or ``...`` where the cell makes no such call or
    gives no literal value. Pure."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return ...
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and \
                node.func.attr == "architecture":
            args = {k.arg: k.value for k in node.keywords}
            value = args.get("highlight", node.args[0] if node.args else None)
            if value is None:
                return None
            try:
                found = ast.literal_eval(value)
            except ValueError:
                return ...
            return tuple(found) if isinstance(found, list) else found
    return ...


def architecture(highlight, base: str = "") -> Figure:
    """The architecture picture with ``highlight``: light and dark, wide and narrow."""
    import matplotlib.pyplot as plt

    from convs2s.course import diagrams

    alt = diagrams.describe(highlight)
    parts = "all" if highlight is None else "-".join(
        [highlight] if isinstance(highlight, str) else list(highlight))
    files, pictures = {}, []
    for theme in ("light", "dark"):
        drawn = {}
        for narrow in (False, True):
            fig = diagrams.architecture(highlight, theme=theme, narrow=narrow)
            try:
                data = svg(fig) if narrow else _png(fig)
            finally:
                plt.close(fig)
            ext = "svg" if narrow else "png"
            name = _name(f"architecture-{parts}-{theme}-{'narrow' if narrow else 'wide'}",
                         data, ext)
            files[name] = data
            drawn[narrow] = (name, data)
        pictures.append(picture(drawn[False], drawn[True], alt, theme, base))
    return Figure(_figure_html(pictures, "architecture"), files)


# --------------------------------------------------------------------------------------------
# Notebook 07's length sweep
# --------------------------------------------------------------------------------------------

_SWEEP_CALL = re.compile(r"length_sweep\.plot\(")
_FACTOR = re.compile(r"^FACTOR\s*=\s*([\d.]+)", re.MULTILINE)
_MARK_LABEL = re.compile(r"mark=\(\s*\w+\s*,\s*([\"'])(.+?)\1\s*\)")
_MEAN = re.compile(r"training captions: ([\d.]+) target positions")


#: Characters per line of a panel's 10 pt title in a narrow drawing (3.3 inches).
TITLE_CHARACTERS = 38
#: Inches a legend's entry takes below its panel in a narrow drawing (a 9 pt line and a gap).
LEGEND_ENTRY_INCHES = 0.2
#: How far below its panel's axes a legend starts: past the tick labels and the axis label.
LEGEND_OFFSET_INCHES = 0.55


def restack(fig, width: float = NARROW_INCHES, panel_height: float = 3.0) -> None:
    """Lay a figure's panels (a grid of axes, read row by row) one above the other in a
    figure ``width`` inches wide, each ``panel_height`` tall, the figure's title and each
    panel's wrapped to the width, each legend under its panel (in a narrow panel it would lie
    on the curves). The drawing, labels and legends' entries stay the package's."""
    import textwrap

    from matplotlib.gridspec import GridSpec
    from matplotlib.transforms import offset_copy

    axes = [ax for ax in fig.axes if ax.get_subplotspec() is not None]
    entries = []
    for ax in axes:
        title = ax.title.get_text()
        if title:
            ax.set_title("\n".join(textwrap.fill(line, TITLE_CHARACTERS)
                                   for line in title.split("\n")),
                         fontsize=ax.title.get_fontsize())
        legend = ax.get_legend()
        entries.append(len(legend.get_texts()) if legend is not None else 0)
    heights = [panel_height + (LEGEND_OFFSET_INCHES + LEGEND_ENTRY_INCHES * n if n else 0.0)
               for n in entries]
    grid = GridSpec(len(axes), 1, figure=fig, height_ratios=heights)
    for i, ax in enumerate(axes):
        ax.set_subplotspec(grid[i])
    fig.set_size_inches(width, sum(heights) + 0.9)
    for ax, n in zip(axes, entries, strict=True):
        if n:  # centred under the panel's tick labels and axis label
            size = ax.get_legend().get_texts()[0].get_fontsize()
            below = offset_copy(ax.transAxes, fig=fig, y=-LEGEND_OFFSET_INCHES, units="inches")
            ax.legend(*ax.get_legend_handles_labels(), fontsize=size, loc="upper center",
                      bbox_to_anchor=(0.5, 0.0), bbox_transform=below)
    title = getattr(fig, "_suptitle", None)  # matplotlib keeps it there (no public getter)
    if title is not None:
        title.set_wrap(True)
    fig.tight_layout()


def length_sweep(source: str, printed: str, wide_png: bytes, alt: str,
                 base: str = "") -> Figure | None:
    """Notebook 07's length sweep: the stored PNG, and on a phone the package's drawing of the
    same records with its panels stacked; None where the cell does not draw the sweep or its
    printed output lacks the mean caption length it marks."""
    if not _SWEEP_CALL.search(source):
        return None
    import matplotlib.pyplot as plt

    from convs2s.course import length_sweep as sweep

    factor = _FACTOR.search(source)
    label = _MARK_LABEL.search(source)
    mean = _MEAN.search(printed)
    records = sweep.records()
    if not (factor and mean and records):
        return None
    mark = (float(mean.group(1)), label.group(2)) if label else None
    fig = sweep.plot(records, factor=float(factor.group(1)), mark=mark)
    try:
        restack(fig)
        narrow = svg(fig)
    finally:
        plt.close(fig)
    wide = smaller_png(wide_png)
    wide_name = _name("length-sweep-wide", wide, "png")
    narrow_name = _name("length-sweep-narrow", narrow, "svg")
    html_ = _figure_html([picture((wide_name, wide), (narrow_name, narrow), alt, None, base)],
                         "length-sweep")
    return Figure(html_, {wide_name: wide, narrow_name: narrow})


# --------------------------------------------------------------------------------------------
# Notebook 01's GLU and padding figures
# --------------------------------------------------------------------------------------------


@dataclass
class Earlier:
    """What a notebook's code cells before a figure's cell printed, and the names they set to a
    literal value (``k, n_layers, length = 3, 3, 12``): what a redrawn figure's arguments are
    read from (never by running the notebook's code)."""

    printed: list[str] = field(default_factory=list)
    literals: dict[str, object] = field(default_factory=dict)
    #: each cell's code, as ``printed`` (which cell set a name: ``attention_figures``)
    sources: list[str] = field(default_factory=list)

    def add(self, source: str, printed: str) -> None:
        """A code cell's ``source`` and the text its outputs show, after the cells before it."""
        self.printed.append(printed)
        self.sources.append(source)
        try:
            tree = ast.parse(source)
        except SyntaxError:  # a cell with IPython magics: no literal of ours there
            return
        for stmt in tree.body:
            if not isinstance(stmt, ast.Assign):
                continue
            for target in stmt.targets:
                names = [target] if isinstance(target, ast.Name) else \
                    list(target.elts) if isinstance(target, ast.Tuple) else []
                try:
                    value = ast.literal_eval(stmt.value)
                except ValueError:
                    value = ...
                values = [value] if isinstance(target, ast.Name) else \
                    list(value) if isinstance(value, tuple) and len(value) == len(names) \
                    else [...] * len(names)
                for name, v in zip(names, values, strict=True):
                    if isinstance(name, ast.Name):
                        self.literals[name.id] = v  # ...: set to what only running knows


_GATE_CURVES = re.compile(r"gate_plots\.plot_gate_curves\(")
_GATE_CURVES_DEFAULT = re.compile(r"gate_plots\.gate_curves\(\s*\)")
_GRADIENT_NORMS = re.compile(r"gate_plots\.plot_gradient_norms\(")
_SEEDS = re.compile(r"median of (\d+) seeds")
_RATIO = re.compile(r"^\s*(.+?)\s+(GLU|GTU):\s+(\S+)\s+=", re.MULTILINE)
_PADDING_MAPS = re.compile(r"gate_plots\.plot_padding_maps\(")
_MAPS_CALL = re.compile(r"gate_plots\.padding_maps\(\s*(\w+)\s*,\s*(\w+)\s*,\s*(\w+)\s*\)")


def _gate_curves_narrow(source: str, printed: str, earlier: Earlier):
    from convs2s.course import gate_plots

    if not _GATE_CURVES_DEFAULT.search(source):
        return None  # curves other than the package's default ones
    return gate_plots.plot_gate_curves(gate_plots.gate_curves(), narrow=True)


def _gradient_norms_narrow(source: str, printed: str, earlier: Earlier):
    """The gradient norms of the seeds the notebook printed it measured, drawn again only
    where each median ratio it printed is the one measured now (3 significant digits)."""
    from convs2s.course import gate_plots

    said = "\n".join(earlier.printed)
    seeds = _SEEDS.findall(said)
    if not seeds:
        return None
    norms = gate_plots.gradient_norms(int(seeds[-1]))
    printed_ratios = {(scale, kind.lower()): value for scale, kind, value in _RATIO.findall(said)}
    for (scale, kind), n in norms.items():
        measured = float(f"{float(n[:, 0].median()):.3g}")
        try:
            if float(printed_ratios[(scale, kind)]) != measured:
                return None
        except (KeyError, ValueError):
            return None
    return gate_plots.plot_gradient_norms(norms, narrow=True)


def _padding_maps_narrow(source: str, printed: str, earlier: Earlier):
    """The maps of the notebook's k, L and length (literals of its earlier cells), drawn again
    only where the lines the cell printed describe these maps."""
    from convs2s.course import dependency, gate_plots

    call = _MAPS_CALL.search(source)
    if not call:
        return None
    values = [earlier.literals.get(name, ...) for name in call.groups()]
    if not all(type(v) is int for v in values):
        return None
    k, n_layers, length = values
    maps = gate_plots.padding_maps(k, n_layers, length)
    for dep in maps.values():
        described = dependency.describe_dependency(dependency.dependency_summary(dep))
        if f"map {tuple(dep.shape)}  {described}" not in printed:
            return None
    return gate_plots.plot_padding_maps(maps, k, n_layers, narrow=True)


#: Notebook 01's figures the package draws (convs2s.course.gate_plots): the call a cell
#: makes -> (the files' stem, what draws the narrow drawing or None).
_NOTEBOOK_01 = ((_GATE_CURVES, "gate-curves", _gate_curves_narrow),
                (_GRADIENT_NORMS, "gradient-norms", _gradient_norms_narrow),
                (_PADDING_MAPS, "padding-maps", _padding_maps_narrow))


def gate_plot(source: str, printed: str, earlier: Earlier, wide_png: bytes, alt: str,
              base: str = "") -> Figure | None:
    """Notebook 01's GLU and padding figures: the stored PNG, and on a phone the package's
    ``gate_plots`` drawing of the same measurement with its panels one above the other; None
    where the cell draws none of them or its data cannot be told to be the notebook's."""
    found = next(((stem, draw) for call, stem, draw in _NOTEBOOK_01 if call.search(source)),
                 None)
    if found is None:
        return None
    import matplotlib.pyplot as plt

    stem, draw = found
    fig = draw(source, printed, earlier)
    if fig is None:
        return None
    try:
        narrow = svg(fig)
    finally:
        plt.close(fig)
    wide = smaller_png(wide_png)
    wide_name = _name(f"{stem}-wide", wide, "png")
    narrow_name = _name(f"{stem}-narrow", narrow, "svg")
    html_ = _figure_html([picture((wide_name, wide), (narrow_name, narrow), alt, None, base)],
                         stem)
    return Figure(html_, {wide_name: wide, narrow_name: narrow})


# --------------------------------------------------------------------------------------------
# The notebooks' attention maps
# --------------------------------------------------------------------------------------------


def attention_maps(source: str, outputs: list[dict], earlier: Earlier,
                   alt=None, base: str = "") -> dict[int, Figure] | None:
    """A cell's attention maps: {the index in ``outputs`` of each figure: its stored PNG, and on
    a phone the same maps drawn again, the layers one above the other
    (``attention_figures``)}. The numbers are computed again with the shipped translator where
    the notebook studied it and the result is what its stored run showed (notebook 06), or else
    read from the stored outputs (``attention_figures.stored_maps``: notebooks 04 and 07, and
    notebook 06 where the site has no Multi30k data); None where neither gives the notebook's
    own numbers.
    ``alt(figure, figures, printed)``: a figure's alt text, by default
    ``attention_figures.stored_alt_text`` or ``attention_figures.alt_text``."""
    if alt is None:  # the same cell after the same cells: drawn once per process
        import json

        found = _attention_maps_once(source, json.dumps(outputs, sort_keys=True),
                                     tuple(earlier.printed), tuple(earlier.sources), base)
        return None if found is None else dict(found)
    return _attention_maps(source, outputs, earlier, alt, base)


@functools.lru_cache(maxsize=4)
def _attention_maps_once(source: str, outputs: str, printed: tuple, sources: tuple,
                         base: str) -> tuple | None:
    import json

    found = _attention_maps(source, json.loads(outputs), Earlier(list(printed), {},
                                                                  list(sources)), None, base)
    return None if found is None else tuple(found.items())


def _attention_maps(source: str, outputs: list[dict], earlier: Earlier, alt,
                    base: str) -> dict[int, Figure] | None:
    import base64

    from tools.site import attention_figures

    # the shipped translator's maps computed again and checked against the stored run first
    # (their alt text can then name the model), else the numbers the stored outputs carry
    drawn = attention_figures.notebook_maps(source, outputs, earlier)
    describe = attention_figures.alt_text
    if drawn is None:
        drawn = attention_figures.stored_maps(outputs)
        describe = attention_figures.stored_alt_text
    if drawn is None:
        return None
    at = [i for i, out in enumerate(outputs) if "image/png" in out.get("data", {})]
    found = {}
    for n, (i, d) in enumerate(zip(at, drawn, strict=True)):
        following = next((j for j in at if j > i), len(outputs))
        printed = "".join(_stdout(out) for out in outputs[i + 1:following])
        text = describe(d, n, len(at), printed) if alt is None else \
            alt(n, len(at), printed)
        png = outputs[i]["data"]["image/png"]
        found[i] = _attention_figure(d, base64.b64decode(
            "".join(png) if isinstance(png, list) else png), text, n, base)
    return found


def _stdout(out: dict) -> str:
    text = out.get("text", "") if out.get("output_type") == "stream" else ""
    return "".join(text) if isinstance(text, list) else text


def _attention_figure(d, wide_png: bytes, alt: str, index: int, base: str) -> Figure:
    import matplotlib.pyplot as plt

    from tools.site.attention_figures import layers_figure

    fig = layers_figure(d.attention, d.src_tokens, d.trg_tokens, d.titles, d.title)
    try:
        narrow = svg(fig)
    finally:
        plt.close(fig)
    wide = smaller_png(wide_png)
    stem = f"attention-{index + 1}"
    wide_name = _name(f"{stem}-wide", wide, "png")
    narrow_name = _name(f"{stem}-narrow", narrow, "svg")
    html_ = _figure_html([picture((wide_name, wide), (narrow_name, narrow), alt, None, base)],
                         "attention")
    return Figure(html_, {wide_name: wide, narrow_name: narrow})
