"""The course as a static website, built from the committed notebooks and their stored outputs.

``python -m tools.site --out build/site`` (``make site``) runs no notebook: it reads every course
notebook ``notebooks/NN_<name>.ipynb`` as it is (the package runs only to draw the widgets'
flipbooks and to export the shipped translator, below), writes a *site copy* of each into a
temporary Sphinx source folder, and builds that with Sphinx, ``myst-nb`` (notebooks as pages, stored
outputs shown, execution off) and ``sphinx-book-theme``; the maths is written into the pages
as MathML (``tools/site/mathml.py``), which browsers display without a maths library. No step
of the build needs the network (``make site`` installs onnxruntime-web with ``npm ci`` first).

What a site copy changes, and why (the notebooks themselves are never written):

- the first cell's Colab badge (an image from colab.research.google.com, which an offline page
  cannot load) becomes a line of plain links: the committed notebook to download, its source on
  GitHub, and "Open in Colab" (both from ``[project.urls] Repository``, as ``make badges``);
- an exercise's solution code cell is folded behind a "Show the solution" toggle and loses its
  outputs (a solution cell is recognised as ``tools/README.md`` writes it: ``role: solution``
  in ``metadata["convs2s"]``, a first line ``#@title Solution``, or Colab's and JupyterLab's
  hidden-source metadata); an *explain* solution is already a closed ``<details>`` block;
- a widget, which needs a running kernel, becomes one that responds in the page with the
  notebook's controls: notebooks 01's and 08's computed by ``static/live.js``, 03's,
  04's and 05's flipbooks of what the build computed and drew (``flipbooks.py``), 06's
  translator running the shipped model (``translator.py``); each after a note saying where its
  numbers or pictures come from. Each is known by its name and drawn from its declaration in
  the package (``convs2s.course.widgets``: controls, labels, ranges), never matched by its
  labels (``widgets.py`` reads the name from the saved widget state or the cell's builder
  call). A widget the site cannot show in the page is shown as its screenshot from ``images/``
  (the one ``make images`` takes of it, by its name) or the figure its saved state holds,
  after a note saying that it is a picture, not interactive here, and to run the notebook in
  JupyterLab or Colab;
- an exercise's check cell loses its stored output (in a committed notebook: "not implemented
  yet" and ``False``) and is followed by a line on where to run it and the exercise's hints,
  each folded, the nudge before the closer hint (the hints the package's exercises declare,
  what the check prints after a wrong try); its solution follows, folded as above;
- every PNG figure, in an output or from ``images/``, becomes a 256-colour palette image where
  that is smaller (``tools/site/png.py``: the same to the eye, a quarter of the bytes);
- the figures a reader studies that the package can draw again (the architecture picture,
  notebook 07's length sweep) are drawn once more for a phone's column and, the architecture
  picture, for the dark theme, and the page picks the drawing (``figures.py``);
- every figure gets alt text from what the build knows of it (:func:`figure_alt`: what draws
  it, a course function or the kind of plot, the titles and axes its code gives it, and where
  the code says little the notebook's sentence before it; a widget's picture, its controls'
  labels), where myst-nb would write the image's file name; a cell that draws several figures
  is cut into one cell per figure (the later ones without code), so each has its own;
- links to files outside ``notebooks/`` (``../src/...``) point at the repository on GitHub, and
  an image from another site becomes a link to it.

And one change to the pages Sphinx writes: a line a cell printed wraps at the column when it is a
sentence, as JupyterLab wraps every printed line, and a table's row keeps its columns in a box
that scrolls sideways (``output_lines.py``; on a phone the sentences no longer run off the screen).
In the browser, a markdown table wider than its column (on a phone: the notation tables, notebook
06's tables of settings) is shown as one card per row, each cell after its column's heading
(``static/tables.js``); a table that fits stays a table.

The landing page is made from the README's introduction (its text before the first ``##``
heading), the architecture diagram, and each notebook's title, "Estimated time" and "What you
will learn", read from its first cell, so the site follows the notebooks as they change.

Notebooks are trusted input: their markdown, raw HTML and stored outputs (HTML and JavaScript
included) are rendered as Jupyter renders them, on their own page. Titles are the exception:
Sphinx repeats a page's title in every page's navigation, and the landing page lists them, so a
notebook's title (its first ``# `` heading) is made plain text in the site copy
(:func:`plain_markdown`: markup and HTML in it show as the characters typed), and the README's
title, the site's name on every page, must hold no ``<``, ``>`` or ``"``. Nothing rewrites an
``<img>`` or ``<iframe>`` written in raw HTML: the site's offline test fails on any page that
loads something from another site.

The site is built in a temporary folder beside ``--out`` and moved into place only when the
build succeeded. ``--out`` is replaced only if an earlier build made it (it holds the marker
file ``.convs2s-site``); any other folder there is refused, with one line.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import hashlib
import html
import io
import json
import posixpath
import re
import shutil
import sys
import tempfile
import time
import warnings as warnings_module
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from convs2s.course import widgets as declarations  # every notebook widget, declared once
from convs2s.system.arguments import OneLineParser
from tools.site import figures as studied  # figures drawn for a phone, the dark theme
from tools.site import flipbooks  # notebooks 03-05's widgets (flipbooks.py)
from tools.site import widgets as notebook_widgets  # which declared widget a notebook's is
from tools.site.png import notebook_with_smaller_figures, smaller_png, smaller_png_base64
from tools.site.translator import MODELS as TRANSLATOR_MODELS
from tools.site.translator import TranslatorAssetError, write_assets

ROOT = Path(__file__).resolve().parents[2]
CONF_DIR = Path(__file__).resolve().parent
#: The file that marks a folder as a site this tool built (and so may replace).
MARKER = ".convs2s-site"
WIDGET_VIEW = "application/vnd.jupyter.widget-view+json"
WIDGET_STATE = "application/vnd.jupyter.widget-state+json"
#: The toggle of a folded solution (myst-nb's cell-level settings).
SOLUTION_PROMPTS = {"code_prompt_show": "Show the solution",
                    "code_prompt_hide": "Hide the solution"}
#: The toggle of a measurement that answers a predict / explain exercise above it (a cell of
#: role "reveal"): its output is folded, its code shown.
REVEAL_PROMPTS = {"code_prompt_show": "Show the measurement",
                  "code_prompt_hide": "Hide the measurement"}
#: Where the site copies keep the committed notebooks (offered for download, not built), their
#: figures as the pages show them (png.notebook_with_smaller_figures).
ORIGINALS = "_notebooks"


class SiteError(Exception):
    """A problem with the course's files or the command line: one line saying what to fix."""


# --------------------------------------------------------------------------------------------
# Reading the course
# --------------------------------------------------------------------------------------------


def cell_source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def course_notebooks(notebooks_dir: str | Path) -> list[Path]:
    """The course notebooks ``NN_<name>.ipynb``, in order."""
    return sorted(p for p in Path(notebooks_dir).glob("[0-9][0-9]_*.ipynb") if p.is_file())


@dataclass(frozen=True)
class Lesson:
    """One notebook as the landing page lists it, read from its first markdown cell."""

    name: str  # "01_glu_and_padding": the file's stem, and the page's name in the site
    heading: str  # "01 · Gated linear units and padding"
    time: str  # the text after **Estimated time:**
    learn: tuple[str, ...]  # the items under **What you will learn**, as markdown
    prerequisites: str = ""  # the text after **Prerequisites:**, if the cell has one


_HEADING = re.compile(r"^#[ \t]+(.+?)[ \t]*$", re.MULTILINE)
_TIME = re.compile(r"^\*\*Estimated time:?\*\*:?[ \t]*(.+?)\s*(?:\n[ \t]*\n|\Z)",
                   re.MULTILINE | re.DOTALL)
_LEARN = re.compile(r"^\*\*What you will learn[^*\n]*\*\*:?[ \t]*$", re.MULTILINE)
_PREREQUISITES = re.compile(r"^\*\*Prerequisites:?\*\*:?[ \t]*(.+?)\s*(?:\n[ \t]*\n|\Z)",
                            re.MULTILINE | re.DOTALL)


def _learn_items(text: str) -> tuple[str, ...]:
    """The bullet list that follows the "What you will learn" line (continuations joined)."""
    m = _LEARN.search(text)
    if not m:
        return ()
    items: list[str] = []
    for line in text[m.end():].lstrip("\n").splitlines():
        if re.match(r"^[-*]\s+", line):
            items.append(line[2:].strip())
        elif items and line.startswith((" ", "\t")) and line.strip():
            items[-1] += " " + line.strip()
        else:
            break
    return tuple(items)


def read_lesson(path: Path, nb: dict | None = None) -> Lesson:
    """Title, estimated time and what-you-will-learn of a notebook; SiteError if one is missing."""
    nb = load_notebook(path) if nb is None else nb
    first = next((cell_source(c) for c in nb.get("cells", []) if c.get("cell_type") ==
                  "markdown"), "")
    heading = _HEADING.search(first)
    time_ = _TIME.search(first)
    learn = _learn_items(first)
    missing = [what for what, found in (("a '# ' title", heading),
                                        ("an '**Estimated time:**' line", time_),
                                        ("a '**What you will learn**' list", learn)) if not found]
    if missing:
        raise SiteError(f"{path}: the first markdown cell has no {' and no '.join(missing)}; "
                        "the course's notebook contract asks every notebook to open with "
                        "them, and the landing page lists them")
    needs = _PREREQUISITES.search(first)
    return Lesson(path.stem, heading.group(1), " ".join(time_.group(1).split()), learn,
                  " ".join(needs.group(1).split()) if needs else "")


def load_notebook(path: Path, data: bytes | None = None) -> dict:
    """The notebook at ``path`` (or its bytes ``data``, read once), with the shape the site
    reads (``tools.notebook_format``); SiteError, one line, if it is none."""
    from tools.notebook_format import NotebookFormatError, read_notebook

    try:
        return read_notebook(path, data)
    except NotebookFormatError as e:
        raise SiteError(str(e)) from None


# --------------------------------------------------------------------------------------------
# Links and badges
# --------------------------------------------------------------------------------------------


def github_blob(repo_url: str, path: str, branch: str = "main") -> str:
    return f"{repo_url.rstrip('/')}/blob/{branch}/{path}"


# [![alt](https://.../badge.svg)](target): a linked image from another site
_LINKED_IMAGE = re.compile(r"\[!\[([^\]]*)\]\((https?://[^)\s]+)\)\]\(([^)\s]+)\)")
# ![alt](https://...): an image from another site
_REMOTE_IMAGE = re.compile(r"!\[([^\]]*)\]\((https?://[^)\s]+)\)")
_COLAB_BADGE = re.compile(r"[ \t]*\[!\[Open In Colab\]\([^)]*\)\]\([^)]*\)[ \t]*\n?", re.I)
# ](../path): a link from notebooks/ to another part of the repository
_UP_LINK = re.compile(r"\]\(\.\./([^)\s#]+)(#[^)\s]*)?\)")


# ASCII punctuation: every character Markdown, MyST or HTML may read as markup
_PUNCTUATION = re.compile(r"([!-/:-@\[-`{-~])")


def plain_markdown(text: str) -> str:
    """``text`` as Markdown that shows exactly these characters: every ASCII punctuation
    character backslash-escaped (CommonMark), so no emphasis, link, role, maths or HTML tag
    comes of it. Pure."""
    return _PUNCTUATION.sub(r"\\\1", " ".join(text.split()))


def offline_markdown(text: str, repo_url: str, base: str) -> str:
    """Markdown with no image from another site (each becomes a link) and no relative link
    out of the site: ``](../x)`` from the folder ``base`` points at ``x`` on GitHub. Pure."""
    text = _LINKED_IMAGE.sub(lambda m: f"[{m.group(1) or m.group(3)}]({m.group(3)})", text)
    text = _REMOTE_IMAGE.sub(lambda m: f"[{m.group(1) or m.group(2)}]({m.group(2)})", text)

    def up(m: re.Match) -> str:
        target = posixpath.normpath(posixpath.join(base, "..", m.group(1)))
        return f"]({github_blob(repo_url, target)}{m.group(2) or ''})"

    return _UP_LINK.sub(up, text)


def source_links(lesson: Lesson, repo_url: str) -> str:
    """The line under a page's title: the notebook to download, on GitHub, and in Colab."""
    from tools.badges import colab_url

    file = f"{lesson.name}.ipynb"
    return (f"{{download}}`Download {file} <{ORIGINALS}/{file}>` · "
            f"[Notebook source on GitHub]({github_blob(repo_url, 'notebooks/' + file)}) · "
            f"[Open in Colab]({colab_url(repo_url, file)})")


def run_it_line(lesson: Lesson, repo_url: str) -> str:
    from tools.badges import colab_url

    return ("A widget needs a running Python kernel, which a web page does not have: to use it, "
            f"run this notebook in JupyterLab (`make lab`) or [in Colab]"
            f"({colab_url(repo_url, lesson.name + '.ipynb')}).")


# --------------------------------------------------------------------------------------------
# Solutions and widgets
# --------------------------------------------------------------------------------------------


def is_solution(cell: dict) -> bool:
    """An exercise's solution cell, as tools/README.md writes one (any of its three marks)."""
    md = cell.get("metadata", {})
    convs2s = md.get("convs2s")
    if isinstance(convs2s, dict) and convs2s.get("role") == "solution":
        return True
    if cell.get("cell_type") == "code":
        first = cell_source(cell).lstrip().split("\n", 1)[0]
        if re.match(r"#@title\s+Solution\b", first):
            return True
        jupyter = md.get("jupyter")
        return md.get("cellView") == "form" or (isinstance(jupyter, dict)
                                                and bool(jupyter.get("source_hidden")))
    return False


def _children(value) -> Iterator[str]:
    """The model ids a widget's state refers to ("IPY_MODEL_<id>"), in order."""
    if isinstance(value, str):
        if value.startswith("IPY_MODEL_"):
            yield value[len("IPY_MODEL_"):]
    elif isinstance(value, list):
        for v in value:
            yield from _children(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _children(v)


def widget_models(state: dict, model_id: str) -> list[dict]:
    """A widget's model and every model it contains, from the notebook's saved widget state."""
    seen, order, todo = set(), [], [model_id]
    while todo:
        mid = todo.pop(0)
        if mid in seen or mid not in state:
            continue
        seen.add(mid)
        order.append(state[mid])
        todo += list(_children(state[mid].get("state", {})))
    return order


def widget_labels(models: list[dict]) -> set[str]:
    return {m["state"]["description"] for m in models
            if isinstance(m.get("state", {}).get("description"), str)}


def widget_figure(models: list[dict]) -> str | None:
    """The last PNG the widget's output area held when the notebook was saved (base64)."""
    found = None
    for m in models:
        if m.get("model_name") == "OutputModel":
            for out in m.get("state", {}).get("outputs", []):
                png = out.get("data", {}).get("image/png")
                if png:
                    found = png
    return found


def screenshot_for(widget: str) -> str | None:
    """The image file ``make images`` takes of the declared widget ``widget``
    (tools.screenshots.WIDGETS), if any."""
    from tools.screenshots import WIDGETS

    return next((spec.image for spec in WIDGETS.values() if spec.widget == widget), None)


def _markdown_cell(source: str, cell_id: str) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": source}


#: The title of the note that stands, before it, for a widget's picture.
WIDGET_NOTE_TITLE = "Interactive widget: a picture, not interactive here"


def _widget_note(image: str | None, alt: str, lesson: Lesson, repo_url: str, n: int) -> dict:
    """The note on a widget, placed before its picture: the screenshot ``image`` (inside the
    note, after its text) or, without one, the widget's saved figure (the output under the
    code that follows the note)."""
    text = run_it_line(lesson, repo_url)
    if not image:
        text = "Below the code: the widget's figure as the notebook was saved. " + text
    body = [text, "", f"![{plain_markdown(alt)}]({image})"] if image else [text]
    return _markdown_cell("\n".join([f":::{{admonition}} {WIDGET_NOTE_TITLE}",
                                     ":class: widget-static", "", *body, ":::"]),
                          f"site-widget-{n}")


#: Widgets that respond in the page, by name -> their notebook, from their declarations
#: (``convs2s.course.widgets``): computed by ``static/live.js`` (site "live": notebooks 01 and
#: 08) or shown by ``static/flipbook.js`` from what the build computed (site "flipbook":
#: notebooks 03-05, ``flipbooks.py``).
LIVE_WIDGETS = {name: w.notebook for name, w in declarations.WIDGETS.items()
                if w.site in ("live", "flipbook")}


def live_widget_for(widget: declarations.Widget | None) -> str | None:
    """The name of the live.js or flipbook.js widget that stands for this declared notebook
    widget on the site, if it has one."""
    return widget.name if widget and widget.site in ("live", "flipbook") else None
#: Notebook 06's translator widget (its notebook and its controls' labels): on the site,
#: the shipped model in the reader's browser (``translator.py``, ``static/translator.js``).
TRANSLATOR_WIDGET = ("06_inference_beam_search_bleu", "German", "beam size")


def casing_figures() -> str:
    """What typed casing costs the shipped German → English model, greedy sacreBLEU on the
    validation captions, from the package's record (``truecasing_de_en.json``, the record
    notebook 06 prints too): lower case, all capitals, as written."""
    from convs2s.course import reference

    rows = reference.result("truecasing_de_en.json")["splits"]["valid"]["rows"]
    return (f"{rows['lower']['sacrebleu']:.0f} and {rows['upper']['sacrebleu']:.0f} BLEU on the "
            f"validation captions, against {rows['cased']['sacrebleu']:.0f} as written")


#: What the shipped translators were trained on and what they translate well, as the site's
#: note on them says (notebook 06 says the same beside its widget): true of every direction
#: the page offers (translator.py MODELS), each trained on the same captions.
TRANSLATOR_SCOPE = (
    "Both models learned from Multi30k alone: about 29,000 English captions of photos and their "
    "German translations, in cased English (“Two dogs are playing in the snow.”) and cased "
    "German (“Zwei Hunde spielen im Schnee.”); German → English reads the German captions and "
    "writes the English ones, English → German the other way round. Expect good translations "
    "of sentences that describe a picture, written with their usual capitals. Sentences unlike "
    "captions (questions, dialogue, long or technical text) translate badly, and so does "
    f"lower-case or all-caps German (for German → English {casing_figures()}): this page "
    "translates what you type as it is, where the notebook's widget restores the case first.")

#: The title of the note above the translator.
TRANSLATOR_NOTE_TITLE = "Interactive widget: the trained translator, in your browser"


def translator_directions(download_bytes: dict[str, int] | int) -> list[dict]:
    """The directions the page's translator offers (translator.py ``MODELS``, in order), as its
    element lists them for ``static/translator.js``: name, source and target language, the
    sentence its box starts with and the bytes a reader downloads on choosing it first
    (``download_bytes``: by direction, as ``write_assets`` counts them; one number: that for
    each). Pure."""
    from convs2s.data.multi30k import LANGUAGE_NAMES

    out = []
    for name, settings in TRANSLATOR_MODELS.items():
        src, _, trg = name.partition("-")
        value = download_bytes if isinstance(download_bytes, int) else download_bytes[name]
        # write_assets's "directions": the bytes, the weights shipped and their measured scores
        extra = value if isinstance(value, dict) else {"bytes": value}
        out.append({"name": name, "source_lang": src, "target_lang": trg,
                    "source": LANGUAGE_NAMES.get(src, src),
                    "target": LANGUAGE_NAMES.get(trg, trg), "sentence": settings["sentence"],
                    **extra})
    return out


def _translator_widget(n: int, download_bytes: dict[str, int] | int) -> dict:
    """Notebook 06's translator as the page runs it: the note, then the element that
    ``static/translator.js`` fills with a menu of directions (:func:`translator_directions`;
    nothing is downloaded until the reader asks, then only the direction asked for)."""
    directions = translator_directions(download_bytes)
    first = directions[0]
    calls = " and ".join(f"`convs2s.pretrained(\"{d['name']}\")`" for d in directions)
    names = " or ".join(f"{d['source']} → {d['target']}" for d in directions)
    listed = json.dumps(directions, ensure_ascii=False, separators=(",", ":"))
    return _markdown_cell("\n".join([
        f":::{{admonition}} {TRANSLATOR_NOTE_TITLE}", ":class: widget-live", "",
        f"This page runs the course's shipped translators ({calls}; the first is the model "
        "this notebook studies where there is no run of notebook 05), exported to ONNX, in "
        "your browser with onnxruntime-web: choose a "
        "direction, type a sentence and translate, with no Python, greedily (beam size 1) or "
        "with beam search, as the notebook's widget does. Only the direction you choose is "
        "downloaded, when you click into its box or press its button. Each decoder layer's "
        "attention is drawn as in the notebook. Tests compare its translations with the "
        "package's computing with the same weights.", "",
        f"**What to expect.** {TRANSLATOR_SCOPE}", "",
        f'<div class="convs2s-translator" data-download-bytes="{first["bytes"]}" '
        f'data-sentence="{html.escape(first["sentence"], quote=True)}" '
        f'data-models="{html.escape(listed, quote=True)}" role="group" '
        f'aria-label="The translator: {html.escape(names, quote=True)}"></div>', ":::"]),
        f"site-translator-{n}")


#: The title of the note above a live widget.
LIVE_NOTE_TITLE = "Interactive widget: live on this page"
#: Where each live widget's numbers come from, as its note says.
LIVE_SOURCES = {
    "dependency-explorer": "from the rules the notebook measures with autograd",
    "conv-costs": "from the package's parameter and FLOP formulas (`conv_costs`)",
}


def _live_widget(name: str, alt: str, n: int) -> dict:
    """A widget that runs in the reader's browser (``static/live.js``): the note, then the
    element the script fills with the notebook's controls and figure."""
    # notebooks 03-05's flipbooks have their own note (flipbooks.py)
    if name in flipbooks.NOTEBOOKS:
        return _markdown_cell(flipbooks.note(name, plain_text(alt), LIVE_NOTE_TITLE),
                              f"site-live-{n}")
    # its controls as declared (convs2s.course.widgets): live.js draws them from this
    controls = json.dumps([c.as_dict() for c in declarations.declared(name).controls],
                          ensure_ascii=False, separators=(",", ":"))
    return _markdown_cell("\n".join([
        f":::{{admonition}} {LIVE_NOTE_TITLE}", ":class: widget-live", "",
        f"Move the controls: this page computes the figure in your browser, {LIVE_SOURCES[name]}"
        " (a test compares the two across the controls' settings).", "",
        f'<div class="convs2s-live" data-widget="{name}" '
        f'data-controls="{html.escape(controls, quote=True)}" role="group" '
        f'aria-label="{html.escape(plain_text(alt), quote=True)}"></div>', ":::"]),
        f"site-live-{n}")


# A heading of a markdown cell; a figure's title in a plotting call ("suptitle", "set_title",
# "title=") and its axes' labels, as string literals; the course's architecture diagram and the
# part it highlights.
_ANY_HEADING = re.compile(r"^#{1,6}[ \t]+(.+?)[ \t#]*$", re.MULTILINE)
_PLOT_TITLE = re.compile(
    r"""(?:suptitle|set_title|titles?)\s*[(=]\s*\[?\s*(f?)(["'])(.+?)(?<!\\)\2""")
_AXIS_LABEL = re.compile(r"""\b(?:set_)?([xy])label\s*[(=]\s*(f?)(["'])(.+?)(?<!\\)\3""")
_SUBPLOTS = re.compile(r"subplots\(\s*(\d+)\s*,\s*(\d+)")
#: What the course's drawing functions draw (read from their code), for the alt text of the
#: figures a cell makes with them: the call as the notebooks write it -> the words.
DRAWERS = {
    "diagrams.padding": "Diagram of a decoder layer with kernel width k = 3 reading “<bos> a "
                        "dog runs .”: which inputs each output sees under “same” padding, "
                        "where output i also reads input i + 1, the word it must predict, and "
                        "under causal padding, where it reads only inputs up to i",
    "diagrams.conv_glu_block": "Diagram of one convolution + GLU + residual block (encoder and "
                               "decoder), with the tensor's shape after every step",
    "diagrams.multi_step_attention": "Diagram of multi-step attention: every decoder layer "
                                     "looks at the source with its own query, over the "
                                     "encoder's shared keys z and values z + e",
    "plot_dependency_map": "Dependency maps measured with autograd: for each output position "
                           "(rows), the input positions (columns) it depends on, a dependence "
                           "on a later input (the future) in a colour of its own",
    "plot_visible_positions": "Maps of which decoder inputs (columns) each prediction (rows) "
                              "can see: the past and present in blue, a visible future input "
                              "in red",
    "plot_perturbation": "Bar charts of how much each output position's logits move (max |Δ "
                         "logits|) when one decoder input is changed, bars before that input "
                         "in red",
    "plot_attention_grid": "Attention heatmaps, one per panel (a decoder layer's, by default): "
                           "the output tokens in rows, the source tokens in columns, on one "
                           "colour scale",
    "plot_history": "Training curves by epoch: training and validation loss, and validation "
                    "perplexity, with the best epoch marked",
    "plot_parameter_groups": "Horizontal bar charts of the model's parameters by group, in "
                             "millions, with each group's share",
    "plot_bleu_groups": "Bar charts of BLEU by group of test sentences, each bar labelled with "
                        "its number of sentences",
    "plot_attention_epoch": "Attention heatmaps of every decoder layer on the watched sentence "
                            "after one epoch",
    "plot_translation": "Attention heatmaps of every decoder layer behind a translation",
    "length_sweep.plot": "Line charts: “Training speed against sentence length: ConvS2S and "
                         "the matched GRU”, one row of two panels per device measured (titled "
                         "with the device, its threads and the date): the training target "
                         "tokens/s of both models, and ConvS2S / RNN with lines at 1x and the "
                         "exercise's factor, against sentence length on a log-2 axis, a dotted "
                         "line at the mean length of the Multi30k captions",
    "plot_gate_curves": "Line charts: “activation functions”, ReLU, tanh, the sigmoid gate "
                        "σ(x), GLU x·σ(x) and GTU tanh(x)·σ(x) along A = B = x; and “the linear "
                        "path, measured with autograd”, the derivative of the output with "
                        "respect to A of the GLU, σ(B), and of the GTU, tanh'(A)·σ(B), with the "
                        "gate input B fixed at 2",
    "plot_gradient_norms": "Line charts, one per input scale (the encoder's, std 0.14, and "
                           "large inputs, std 1, on a log axis): the gradient's norm at each "
                           "layer l of a 20-layer gated stack without residuals over its norm "
                           "at the output, GLU against GTU, each seed and their median",
    "plot_padding_maps": "Dependency maps, one per padding (none, 'same', causal; k and L in "
                         "each title): which input positions j each output position i depends "
                         "on, a dependence on a later input (j > i) in its own colour, the "
                         "diagonal dashed",
}
_DRAWER_CALL = re.compile(r"\b(diagrams\.\w+|length_sweep\.plot|plot_\w+)\s*\(")
#: The kind of plot a cell draws with matplotlib itself, by the first of these calls it makes.
_PLOT_KINDS = (("imshow", "Heat map"), ("hist", "Histogram"), ("barh", "Bar chart"),
               ("bar", "Bar chart"), ("errorbar", "Plot"), ("step", "Plot"),
               ("scatter", "Scatter plot"), ("plot", "Plot"))


def plain_text(markdown: str) -> str:
    """A heading, a title or a paragraph as words: no maths dollars, TeX backslashes and braces,
    emphasis, code marks or link targets; what a code span holds stays as written
    (``length_sweep_*.json`` keeps its star). Pure."""
    code: list[str] = []

    def keep(m: re.Match) -> str:  # a code span: its characters, set aside from the rest
        code.append(m.group(1))
        return f"\0{len(code) - 1}\0"

    text = re.sub(r"`([^`]+)`", keep, markdown)
    text = re.sub(r"\\n", " ", text)
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # [words](target): the words
    text = re.sub(r"\\sqrt\{([^{}]*)\}", "√\\1", text)
    text = re.sub(r"\\(?:mathbf|mathrm|mathit|boldsymbol|text|operatorname|left|right)\b",
                  "", text)
    text = re.sub(r"\\([A-Za-z]+)", r"\1", text)
    text = re.sub(r"[$*`{}\\]", "", text)
    text = re.sub("\0(\\d+)\0", lambda m: code[int(m.group(1))], text)
    return " ".join(text.split()).strip(" :,;(-")


def _literal_words(literal: str, f_string: bool) -> str | None:
    """A title or label as written in the code; None where it has an f-string placeholder
    that the code fills in when it runs (a value the alt text cannot know: a "…" would stand
    for it), except a parenthesis of placeholders, which is left out. Pure."""
    if f_string:
        literal = literal.replace("{{", "\0").replace("}}", "\1")
        literal = re.sub(r"\{[^{}]*\}", "…", literal)
        literal = literal.replace("\0", "{").replace("\1", "}")
        literal = re.sub(r"\(\s*…\s*\)", "", literal)  # "(…)": nothing to read
    words = " ".join(literal.replace("\\n", " ").split())
    if "…" in words or len(re.findall(r"[^\W\d_]{3,}", words)) < 2:
        return None
    return plain_text(re.sub(r"(?:…\s*){2,}", "… ", words).replace("\\'", "'")
                      .replace('\\"', '"'))


def _sentence(text: str, limit: int = 220) -> str:
    """The first sentence of a paragraph, whole, or its words up to ``limit`` characters and
    "…" (never a word cut in two). Pure."""
    first = re.split(r"(?<=[.!?:])\s+(?=[A-Z(“\"])", text, maxsplit=1)[0].rstrip(":")
    if len(first) <= limit:
        return first
    cut = first[:limit].rsplit(" ", 1)[0].rstrip(",;:(—– ")
    return f"{cut} …"


def _last_paragraph(markdown: str) -> str:
    """The text of a markdown cell's last paragraph that is prose (not a heading, a table, a
    list or code), as words; "" if none. Pure."""
    for block in reversed(re.split(r"\n\s*\n", markdown.strip())):
        block = block.strip()
        if block and not block.startswith(("#", "|", "```", ":::", "<", "-", "* ", ">")):
            return plain_text(block)
    return ""


def _capital(text: str) -> str:
    """``text`` with a capital first letter where it starts with a word (not a unit: "ms")."""
    return text[0].upper() + text[1:] if re.match(r"[a-z]{3}", text) else text


def _finished(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "!", "?", "…")) else text + "."


def figure_alt(heading: str | None, source: str, context: str = "", figure: int = 0,
               figures: int = 1, printed: str = "") -> str:
    """The alt text of a figure a code cell draws: what the build knows it shows. The course's
    architecture diagram says what part it highlights; otherwise what draws it (a course
    function, :data:`DRAWERS`, or the kind of matplotlib plot), its titles and its axes, each
    as a literal of the code (an f-string's placeholders as "…"), and where the code says
    little (no title), the first sentence of ``context``, the notebook's paragraph before the
    cell. The ``figure``-th of ``figures`` figures of one cell is numbered, with the line the
    cell ``printed`` after it. Only ``heading`` where nothing else is known. A whole sentence
    (no word cut). Pure."""
    highlight = studied.architecture_highlight(source)
    if highlight is not ...:  # the course's picture says what it highlights
        from convs2s.course import diagrams

        return diagrams.describe(highlight)
    drawer = next((DRAWERS[m.group(1)] for m in _DRAWER_CALL.finditer(source)
                   if m.group(1) in DRAWERS), None)
    titles = list(dict.fromkeys(t for m in _PLOT_TITLE.finditer(source)
                                if (t := _literal_words(m.group(3), bool(m.group(1))))))
    labels = {"x": [], "y": []}
    for m in _AXIS_LABEL.finditer(source):
        label = _literal_words(m.group(4), bool(m.group(2))) or plain_text(m.group(4))
        if label:
            labels[m.group(1)].append(label)
    pairs = zip(labels["x"], labels["y"], strict=False)  # a label without its pair is left out
    axes = list(dict.fromkeys(f"{y} against {x}" for x, y in pairs))
    if drawer:
        lead = drawer
    else:
        kind = next((name for call, name in _PLOT_KINDS if re.search(rf"\.{call}\(", source)),
                    "Figure")
        grid = _SUBPLOTS.search(source)
        panels = int(grid.group(1)) * int(grid.group(2)) if grid else 1
        lead = f"{kind}s in {panels} panels" if panels > 1 else kind
    lead = f"{lead}: " + "; ".join(f"“{t}”" for t in titles) if titles else lead
    parts = [_capital(lead)]
    if axes:
        parts.append(_capital("; ".join(axes[:3])))
    words = plain_text(context)
    if not drawer and not titles and words:  # the code says little: the notebook's words
        parts.append(_sentence(words))
    if parts == ["Figure"] and heading:  # nothing known but where it is
        parts = [f"Figure under the heading “{plain_text(heading)}”"]
    if figures > 1:
        number = f"Figure {figure + 1} of {figures}"
        line = " ".join(printed.split())
        parts.append(f"{number}, printed below it: {_sentence(line, 120)}" if line else number)
    return " ".join(_finished(p) for p in parts if p)


def widget_alt(heading: str | None, labels: set[str], picture: bool = True) -> str:
    """The alt text of a widget's picture (or, ``picture=False``, the label of a widget that
    responds in the page): the widget's controls, and the heading it is under."""
    where = f" under the heading “{plain_text(heading)}”" if heading else ""
    controls = ", ".join(sorted(labels)) or "none"
    what = "Picture of the interactive widget" if picture else "Interactive widget"
    return f"{what}{where}, with the controls: {controls}"


# --------------------------------------------------------------------------------------------
# The site copy of a notebook, and the landing page
# --------------------------------------------------------------------------------------------


@dataclass
class SiteNotebook:
    notebook: dict
    images: list[str]  # files of images/ the page shows
    solutions: int
    widgets: int
    # the files of its figures drawn for a phone or the dark theme (figures.py), by name
    figures: dict[str, bytes] = dataclasses.field(default_factory=dict)


def is_reveal(cell: dict) -> bool:
    """A code cell whose output is the measurement a predict or explain exercise above it asks
    about (``metadata["convs2s"]["role"] == "reveal"``)."""
    md = cell.get("metadata", {}).get("convs2s")
    return cell.get("cell_type") == "code" and isinstance(md, dict) and md.get("role") == "reveal"


def check_role(cell: dict) -> str | None:
    """The exercise a check cell checks (``metadata["convs2s"]``: role "check"), or None."""
    md = cell.get("metadata", {}).get("convs2s")
    if cell.get("cell_type") == "code" and isinstance(md, dict) and md.get("role") == "check":
        return str(md.get("exercise", ""))
    return None


def course_hints() -> dict[str, tuple[str, str]]:
    """{exercise: (nudge, closer hint)}: what the package's checks print, and checks.hint();
    the project's (notebook 09) from ``convs2s.course.project.HINTS``."""
    from convs2s.course import project
    from convs2s.course.checks import EXERCISES

    hints = {name: (ex.hint.nudge, ex.hint.closer) for name, ex in EXERCISES.items()}
    return {**hints, project.EXERCISE: project.HINTS}


def _check_help(exercise: str, hints: dict[str, tuple[str, str]], lesson: Lesson,
                repo_url: str, n: int) -> dict:
    """What stands under a check cell on the site, where nothing runs: where to run the check,
    then the exercise's hints, each folded (the nudge, then the closer hint)."""
    from tools.badges import colab_url

    lines = [f"**To check your answer, run the cell above** in the notebook, in JupyterLab "
             f"(`make lab`) or [in Colab]({colab_url(repo_url, lesson.name + '.ipynb')}): "
             "this page runs no code. Stuck? Open the hints one at a time, then the solution."]
    if exercise in hints:
        for title, text in zip(("Hint", "A closer hint"), hints[exercise], strict=True):
            lines += ["", f'<details class="exercise-hint"><summary>{title}</summary>', "",
                      plain_markdown(text), "", "</details>"]  # as the check prints it
    return _markdown_cell("\n".join(lines), f"site-check-{n}")


def site_notebook(nb: dict, lesson: Lesson, repo_url: str, available_images: set[str],
                  hints: dict[str, tuple[str, str]] | None = None,
                  translator_bytes: dict[str, int] | int | None = None) -> SiteNotebook:
    """The copy of ``nb`` that the site renders (see the module docstring), and the files of
    the figures it draws again (``figures.py``). Pure, given ``hints`` (by default the
    package's, :func:`course_hints`). ``translator_bytes``: the site
    has the translator's files (``translator.py``), which weigh that much for each direction
    (``write_assets``'s ``"models"``): notebook 06's translator widget becomes the one that
    runs in the page."""
    hints = course_hints() if hints is None else hints
    nb = copy.deepcopy(nb)
    state = (nb.get("metadata", {}).pop("widgets", None) or {}).get(WIDGET_STATE, {})
    state = state.get("state", {}) if isinstance(state, dict) else {}
    cells, images, solutions, widgets, checks = [], [], 0, 0, 0
    drawn: dict[str, bytes] = {}
    titled, heading, context = False, None, ""
    made = notebook_widgets.widget_cells(nb)  # the widgets each cell's code makes, by name
    earlier = studied.Earlier()  # what the code cells before printed and set (figures.py)
    for index, cell in enumerate(nb["cells"]):
        cells.append(cell)
        kind = cell.get("cell_type")
        if kind == "markdown":
            text = cell_source(cell)
            headings = _ANY_HEADING.findall(text)
            heading = headings[-1] if headings else heading
            context = _last_paragraph(text)  # what the notebook says just before a figure
            if not titled:  # the first markdown cell: title, then the source links
                text, titled = _title_cell(text, lesson, repo_url), True
            if is_solution(cell):
                solutions += 1
                if "<details" not in text:
                    text = f"<details><summary>Solution</summary>\n\n{text}\n\n</details>"
            cell["source"] = offline_markdown(text, repo_url, "notebooks")
            continue
        if kind != "code":
            continue
        said = "".join(_text(out) for out in cell.get("outputs", []))
        if is_solution(cell):
            earlier.add(cell_source(cell), said)
            solutions += 1
            md = cell.setdefault("metadata", {})
            md["tags"] = [*md.get("tags", []), "hide-input"]
            md["mystnb"] = {**md.get("mystnb", {}), **SOLUTION_PROMPTS}
            cell["outputs"] = []
            # Colab's form title: the toggle already says "solution"
            cell["source"] = re.sub(r"\A\s*#@title\b[^\n]*\n?", "", cell_source(cell))
            continue
        if is_reveal(cell):  # the evidence an exercise above asks you to predict: folded
            md = cell.setdefault("metadata", {})
            md["tags"] = [*md.get("tags", []), "hide-output"]
            md["mystnb"] = {**md.get("mystnb", {}), **REVEAL_PROMPTS}
        exercise = check_role(cell)
        if exercise is not None:  # its output on the site would be "not implemented yet"
            cell["outputs"] = []
            cell["execution_count"] = None
            checks += 1
            cells.append(_check_help(exercise, hints, lesson, repo_url, checks))
            continue
        before, context = context, ""
        outputs, alt, widget = [], figure_alt(heading, cell_source(cell), before), False
        shown_here = 0  # the widgets this cell has shown so far
        for out in cell.get("outputs", []):
            view = out.get("data", {}).get(WIDGET_VIEW)
            if view is None:
                if "image/png" in out.get("data", {}):
                    out["data"]["image/png"] = smaller_png_base64(out["data"]["image/png"])
                outputs.append(out)
                continue
            widgets += 1
            widget = True
            models = widget_models(state, str(view.get("model_id", "")))
            labels = widget_labels(models)
            # which declared widget it is: by name (its saved class or its cell's builder call),
            # never by its labels; its labels are the declaration's
            declared = notebook_widgets.declared_for(lesson.name, index, shown_here, models, made)
            shown_here += 1
            alt = widget_alt(heading, set(declared.labels) if declared else labels)
            if translator_bytes and lesson.name == TRANSLATOR_WIDGET[0] and \
                    set(TRANSLATOR_WIDGET[1:]) <= labels:
                cells.append(_translator_widget(widgets, translator_bytes))
                continue
            live = live_widget_for(declared)
            if live:  # computed in the page: live, no picture needed
                cells.append(_live_widget(live, widget_alt(heading, set(declared.labels),
                                                           picture=False), widgets))
                continue
            image = screenshot_for(declared.name) if declared else None
            if image and image in available_images:
                images.append(image)
                cells.append(_widget_note(f"images/{image}", alt, lesson, repo_url, widgets))
                continue
            figure = widget_figure(models)
            if figure:
                outputs.append({"output_type": "display_data", "metadata": {},
                                "data": {"image/png": smaller_png_base64(figure),
                                         "text/plain": ["<the widget's figure>"]}})
            # the note before the code whose output shows the figure
            cells.insert(len(cells) - 1, _widget_note(None, alt, lesson, repo_url, widgets))
        cell["outputs"] = outputs
        redrawn = not widget and _redraw_studied_figure(cell, before, heading, drawn, earlier)
        earlier.add(cell_source(cell), said)
        if redrawn:
            continue
        chunks = _one_figure_each(outputs)
        if len(chunks) > 1 and not widget and not is_reveal(cell):
            # a cell that draws several figures: each its own alt text (myst-nb gives a cell's
            # figures one), so each after the first goes into a cell of its own whose code is
            # not shown (myst-nb skips a cell with no code at all)
            cell["outputs"] = chunks[0]
            for i, chunk in enumerate(chunks[1:], 1):
                cells.append({"cell_type": "code", "execution_count": None,
                              "id": f"{cell.get('id', 'cell')}-figure-{i + 1}",
                              "metadata": {"tags": ["remove-input"]}, "outputs": chunk,
                              "source": f"# figure {i + 1} of the cell above"})
            for i, (part, chunk) in enumerate(zip(cells[-len(chunks):], chunks, strict=True)):
                printed = "".join(_text(out) for out in chunk[_image_index(chunk) + 1:])
                _set_alt(part, figure_alt(heading, cell_source(cell), before, i, len(chunks),
                                          printed))
        elif any(k.startswith("image/") for out in outputs for k in out.get("data", {})):
            _set_alt(cell, alt)
    nb["cells"] = cells
    return SiteNotebook(nb, images, solutions, widgets, drawn)


def _redraw_studied_figure(cell: dict, context: str, heading: str | None,
                           drawn: dict[str, bytes], earlier: studied.Earlier | None = None) -> bool:
    """A cell whose one figure the package can draw again (``figures.py``): its figure output
    becomes the page's ``<picture>`` of the drawings (their files added to ``drawn``); False,
    the cell as it was, for any other. ``earlier``: what the notebook's code cells before it
    printed and set (notebook 01's figures read their arguments there; notebook 06's attention
    maps, which may be several in one cell, that its ``translator`` is the shipped one)."""
    outputs = cell.get("outputs", [])
    shown = [i for i, out in enumerate(outputs) if _is_image(out)]
    source = cell_source(cell)
    maps = studied.attention_maps(source, outputs, earlier) if shown and earlier else None
    if maps:
        for at, figure in maps.items():
            outputs[at] = {"output_type": "display_data", "metadata": {},
                           "data": {"text/html": figure.html, "text/plain": ["<the figure>"]}}
            drawn.update(figure.files)
        return True
    if len(shown) != 1:
        return False
    at = shown[0]
    highlight = studied.architecture_highlight(source)
    if highlight is not ...:
        figure = studied.architecture(highlight)
    else:
        png = outputs[at].get("data", {}).get("image/png")
        printed = "".join(_text(out) for out in outputs[at + 1:])
        alt = figure_alt(heading, source, context)
        figure = None if not png else studied.length_sweep(
            source, printed, base64_bytes(png), alt) or studied.gate_plot(
            source, printed, earlier or studied.Earlier(), base64_bytes(png), alt)
    if figure is None:
        return False
    outputs[at] = {"output_type": "display_data", "metadata": {},
                   "data": {"text/html": figure.html, "text/plain": ["<the figure>"]}}
    drawn.update(figure.files)
    return True


def base64_bytes(data: str | list[str]) -> bytes:
    import base64

    return base64.b64decode("".join(data) if isinstance(data, list) else data)


def _is_image(out: dict) -> bool:
    return any(k.startswith("image/") for k in out.get("data", {}))


def _image_index(outputs: list[dict]) -> int:
    return next(i for i, out in enumerate(outputs) if _is_image(out))


def _one_figure_each(outputs: list[dict]) -> list[list[dict]]:
    """A cell's outputs cut before each figure after the first: each part holds one figure and
    what the cell printed after it (the first part, what it printed before too)."""
    chunks: list[list[dict]] = [[]]
    seen = False
    for out in outputs:
        if _is_image(out) and seen:
            chunks.append([])
        seen = seen or _is_image(out)
        chunks[-1].append(out)
    return chunks


def _text(out: dict) -> str:
    text = out.get("text", "") if out.get("output_type") == "stream" else ""
    return "".join(text) if isinstance(text, list) else text


def _set_alt(cell: dict, alt: str) -> None:
    mystnb = cell.setdefault("metadata", {}).setdefault("mystnb", {})
    mystnb["image"] = {**mystnb.get("image", {}), "alt": alt}


def _title_cell(text: str, lesson: Lesson, repo_url: str) -> str:
    """The first cell without its Colab badge, its title as plain text (Sphinx repeats it in
    every page's navigation), with the source links under the title."""
    text = _COLAB_BADGE.sub("", text)
    m = _HEADING.search(text)
    links = source_links(lesson, repo_url)
    if not m:
        return f"{links}\n\n{text}"
    title = f"# {plain_markdown(m.group(1))}"
    return f"{text[:m.start()]}{title}\n\n{links}\n\n{text[m.end():].lstrip()}"


def readme_intro(readme: str) -> tuple[str, str]:
    """(title, introduction): the README's first heading and its text up to the first ``##``."""
    m = _HEADING.search(readme)
    if not m:
        raise SiteError("README.md has no '# ' title: the landing page takes its title from it")
    rest = readme[m.end():]
    end = re.search(r"^##\s", rest, re.MULTILINE)
    intro = (rest[:end.start()] if end else rest).strip()
    return m.group(1), _COLAB_BADGE.sub("", intro).strip()


#: The paper the course rebuilds.
PAPER_URL = "https://arxiv.org/abs/1705.03122"


def lesson_minutes(time: str) -> int | None:
    """The minutes a notebook's "Estimated time" gives: the numbers of its first clause
    ("40 minutes of reading and 30 for the exercises." -> 70; "50 minutes: about 25 to read"
    -> 50); None if that clause names no minutes. Pure."""
    head = re.split(r"[.:;(]", time, maxsplit=1)[0]
    numbers = [int(n) for n in re.findall(r"\d+", head)]
    return sum(numbers) if numbers and "minute" in head else None


def course_time(lessons: list[Lesson]) -> str:
    """The course's length as the notebooks estimate it, in words."""
    minutes = [lesson_minutes(lesson.time) for lesson in lessons]
    known = [m for m in minutes if m is not None]
    if not known:
        return ""
    total = sum(known)
    hours, rest = divmod(total, 60)
    length = f"about {hours} h {rest:02d} min" if hours else f"about {total} minutes"
    which = ("the notebooks' own estimates" if len(known) == len(lessons) else
             f"the estimates of {len(known)} of the {len(lessons)} notebooks")
    return f"{length} in all, by {which} ({min(known)}–{max(known)} minutes each)"


def _at_a_glance(lessons: list[Lesson]) -> list[str]:
    """The landing page's first screen: what the course is, for whom, how long it takes, what
    it needs, and where to start."""
    first = lessons[0]
    lines = [":::{container} course-glance", "",
             f"**What:** the paper [*Convolutional Sequence to Sequence Learning*]({PAPER_URL}) "
             f"(Gehring et al., ICML 2017) rebuilt in {len(lessons)} notebooks, up to a "
             "German→English translator.", "",
             "**For:** students (a laptop or a free Colab GPU), instructors (exercises marked "
             "for grading), engineers (a ConvS2S checked against fairseq's `fconv`).", ""]
    length = course_time(lessons)
    if length:
        lines += [f"**Time:** {length}.", ""]
    lines += [f"[**Start with {plain_markdown(first.heading)} →**]({first.name}.ipynb)"
              "{.start-here}", ""]
    if first.prerequisites:
        number = first.heading.split()[0]
        lines += [f"**Before {plain_markdown(number)} you need:** {first.prerequisites}", ""]
    lines += [":::", ""]
    return lines


def landing_page(readme: str, lessons: list[Lesson], repo_url: str) -> str:
    """The site's index page (MyST markdown): the title, the course at a glance with the link
    to its first notebook, then the README's introduction, the model, and the notebooks."""
    from tools.badges import colab_url

    title, intro = readme_intro(readme)
    out = [f"# {plain_markdown(title)}", "", *_at_a_glance(lessons),
           "## About this course", "", offline_markdown(intro, repo_url, "."), "",
           "Read the course here, with the outputs the notebooks store (widgets live or as "
           "pictures, the exercises' checks left to the notebooks). To run the code, "
           "use the notebooks: in JupyterLab (`make lab`, see the "
           f"[README]({github_blob(repo_url, 'README.md')})) or "
           f"[in Colab]({colab_url(repo_url, lessons[0].name + '.ipynb')}).",
           "", "## The model", "",
           studied.architecture(None).html, "", "## The notebooks", ""]
    for lesson in lessons:
        out += [f"### [{plain_markdown(lesson.heading)}]({lesson.name}.ipynb)", "",
                f"**Estimated time:** {lesson.time}", "", "**What you will learn**", "",
                *(f"- {item}" for item in lesson.learn), ""]
    out += ["```{toctree}", ":hidden:", ":maxdepth: 1", "",
            *(lesson.name for lesson in lessons), "```", ""]
    return "\n".join(out)


# --------------------------------------------------------------------------------------------
# Building
# --------------------------------------------------------------------------------------------


@dataclass
class Staged:
    lessons: list[Lesson]
    solutions: int
    widgets: int
    digests: dict[str, str]  # notebook file -> sha256 of the bytes the site was built from


def check_inputs(notebooks_dir: Path, root: Path) -> None:
    """:class:`SiteError` (one line) for a missing or malformed input: the notebooks folder, a
    notebook (its shape, its first cell's title, time and what-you-will-learn), the README or
    the architecture image. What :func:`build` checks before it makes anything, and before the
    minutes of the translator's export (:func:`stage` reads them again, each file once)."""
    paths, _, _ = _sources(notebooks_dir, root)
    for path in paths:
        read_lesson(path, load_notebook(path, _read_bytes(path)))


def _sources(notebooks_dir: Path, root: Path) -> tuple[list[Path], str, set[str]]:
    """The course notebooks, the README's text and the names of the images in ``root/images``,
    or :class:`SiteError` (one line) for a missing one."""
    notebooks_dir = Path(notebooks_dir)
    if not notebooks_dir.is_dir():
        raise SiteError(f"--notebooks {notebooks_dir}: no such folder (run from the repository "
                        "root, or give the course's notebooks folder)")
    paths = course_notebooks(notebooks_dir)
    if not paths:
        raise SiteError(f"no course notebooks (NN_<name>.ipynb) in {notebooks_dir}: give "
                        "--notebooks the course's notebooks folder")
    images_dir = root / "images"
    available = {p.name for p in images_dir.glob("*.png")} if images_dir.is_dir() else set()
    if "architecture.png" not in available:
        raise SiteError(f"{images_dir / 'architecture.png'} is missing: run `make images`")
    try:
        readme = (root / "README.md").read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise SiteError(f"cannot read the README for the landing page: {e}") from None
    odd = sorted(set(readme_intro(readme)[0]) & set('<>"'))
    if odd:
        raise SiteError(f"README.md's title holds {' and '.join(odd)}: it is the site's name on "
                        "every page, written there as it is: make it plain text")
    return paths, readme, available


def stage(src: Path, notebooks_dir: Path, root: Path, repo_url: str,
          translator_bytes: dict[str, int] | int | None = None) -> Staged:
    """Write the Sphinx source folder ``src``: the landing page, the notebooks' site copies,
    the committed notebooks (for download, their figures as the pages show them) and the
    images the pages show.
    ``translator_bytes``: see :func:`site_notebook`."""
    paths, readme, available = _sources(notebooks_dir, root)
    images_dir = root / "images"
    # each file read once: the page and its download come from the same bytes, even while
    # someone saves the notebook
    raw = {p: _read_bytes(p) for p in paths}
    notebooks = [(p, load_notebook(p, raw[p])) for p in paths]
    lessons = [read_lesson(p, nb) for p, nb in notebooks]  # every problem before any writing
    (src / ORIGINALS).mkdir(parents=True)
    (src / "images").mkdir()
    shown, solutions, widgets = {"architecture.png"}, 0, 0
    for (path, nb), lesson in zip(notebooks, lessons, strict=True):
        site = site_notebook(nb, lesson, repo_url, available, translator_bytes=translator_bytes)
        (src / path.name).write_text(json.dumps(site.notebook, ensure_ascii=False),
                                     encoding="utf-8")
        (src / ORIGINALS / path.name).write_bytes(notebook_with_smaller_figures(raw[path]))
        shown.update(site.images)
        _write_figures(src / studied.STAGED, site.figures)
        solutions += site.solutions
        widgets += site.widgets
    for name in sorted(shown):
        (src / "images" / name).write_bytes(smaller_png(_read_bytes(images_dir / name)))
    # the data and frames of notebooks 03-05's flipbooks (flipbooks.py)
    flipbooks.stage(src / flipbooks.STAGED, {p.stem: nb for p, nb in notebooks})
    (src / "index.md").write_text(landing_page(readme, lessons, repo_url), encoding="utf-8")
    _write_figures(src / studied.STAGED, studied.architecture(None).files)
    digests = {p.name: hashlib.sha256(raw[p]).hexdigest() for p in paths}
    return Staged(lessons, solutions, widgets, digests)


def _write_figures(folder: Path, files: dict[str, bytes]) -> None:
    folder.mkdir(exist_ok=True)
    for name, data in files.items():
        (folder / name).write_bytes(data)


def _read_bytes(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError as e:
        raise SiteError(f"{path}: cannot read it ({e})") from None


def _out_problem(out: Path) -> str | None:
    """Why the site cannot be written to ``out`` (one line), or None. Leaves nothing behind
    (whether it can be written is found by making a file, removed at once)."""
    from convs2s.system.arguments import dangling_link_problem
    from convs2s.system.atomic_files import cannot_write_in

    dangling = dangling_link_problem(out, "--out")
    if dangling:  # the site would replace the link, or fail to make its folder at the end
        return dangling
    if out.exists() and not out.is_dir():
        return f"--out {out} is a file, not a folder"
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file():
        return (f"--out {out} is a folder this tool did not build (no {MARKER} in it): "
                "choose an empty or new folder, so nothing of yours is replaced")
    parent = out.parent
    while not parent.exists():
        parent = parent.parent
    if not parent.is_dir():
        return f"--out {out} is inside {parent}, which is a file, not a folder"
    why = cannot_write_in(parent)
    if why:
        return f"cannot write into {parent} (for --out {out}: {why}); choose another folder"
    return None


@contextlib.contextmanager
def _no_network() -> Iterator[None]:
    """Any connection the build tries raises: the site must build offline."""
    import socket

    def refuse(*args, **kwargs):
        raise OSError("the site build tried to use the network")

    saved = socket.socket.connect, socket.socket.connect_ex, socket.create_connection
    socket.socket.connect = refuse
    socket.socket.connect_ex = refuse
    socket.create_connection = refuse
    try:
        yield
    finally:
        socket.socket.connect, socket.socket.connect_ex, socket.create_connection = saved


@dataclass
class BuildResult:
    out: Path
    staged: Staged
    seconds: float
    warnings: list[str]

    def as_record(self) -> dict:
        """What ``--record`` writes: the result as JSON (paths as strings)."""
        return {"out": str(self.out.resolve()), "seconds": self.seconds, "warnings": self.warnings,
                "staged": dataclasses.asdict(self.staged)}

    @classmethod
    def from_record(cls, record: dict) -> BuildResult:
        """The result :meth:`as_record` wrote (the tests read the site ``make test`` built)."""
        staged = dict(record["staged"])
        staged["lessons"] = [Lesson(**{**lesson, "learn": tuple(lesson["learn"])})
                             for lesson in staged["lessons"]]
        return cls(Path(record["out"]), Staged(**staged), record["seconds"],
                   list(record["warnings"]))


def sphinx_build(src: Path, html: Path, doctrees: Path) -> list[str]:
    """Sphinx's HTML build of ``src`` with ``tools/site/conf.py``, one process; its warnings."""
    from sphinx.application import Sphinx
    from sphinx.errors import SphinxError
    from sphinx.util.console import nocolor

    nocolor()  # plain warnings, for the log and for the tests
    warnings = io.StringIO()
    try:
        # the theme's and myst's uses of Sphinx APIs due to change: theirs to fix, not ours
        with _no_network(), warnings_module.catch_warnings():
            warnings_module.simplefilter("ignore", DeprecationWarning)
            warnings_module.simplefilter("ignore", PendingDeprecationWarning)
            app = Sphinx(str(src), str(CONF_DIR), str(html), str(doctrees), "html",
                         status=None, warning=warnings, freshenv=True, parallel=1)
            app.build()
    except SphinxError as e:
        raise SiteError(f"Sphinx failed: {e}\n{warnings.getvalue()}".strip()) from None
    if app.statuscode:
        raise SiteError(f"Sphinx failed (status {app.statuscode}):\n{warnings.getvalue()}")
    return [line for line in warnings.getvalue().splitlines() if line.strip()]


def build(out: str | Path, notebooks: str | Path = "notebooks", root: str | Path = ROOT,
          log: Callable[[str], None] = print) -> BuildResult:
    """Build the site into ``out`` (see the module docstring); raises SiteError."""
    from tools.badges import read_repository_url

    t0 = time.monotonic()
    out, root, notebooks = Path(out), Path(root), Path(notebooks)
    problem = _out_problem(out)
    if problem:
        raise SiteError(problem)
    try:
        repo_url = read_repository_url(root / "pyproject.toml").rstrip("/")
    except (OSError, ValueError) as e:
        raise SiteError(str(e)) from None
    check_inputs(notebooks, root)  # a bad input before anything is made or exported
    made = [p for p in out.parents if not p.exists()]  # the folders above --out it makes
    out.parent.mkdir(parents=True, exist_ok=True)
    try:
        warnings, staged = _build_in(out, notebooks, root, repo_url, log)
    except BaseException:  # a failed build leaves no folder it made (only while empty)
        for folder in made:  # the innermost first
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise
    seconds = time.monotonic() - t0
    for line in warnings:
        log(f"warning: {line}")
    return BuildResult(out, staged, seconds, warnings)


def _build_in(out: Path, notebooks: Path, root: Path, repo_url: str,
              log: Callable[[str], None]) -> tuple[list[str], Staged]:
    """:func:`build`'s work, in a temporary folder beside ``out``: Sphinx's warnings and what
    was staged."""
    with tempfile.TemporaryDirectory(prefix=".site-build-", dir=out.parent) as tmp:
        work = Path(tmp)
        # the shipped model for notebook 06's page (translator.py), before the pages: the
        # translator's note says how much it downloads
        try:
            assets = write_assets(work / "translator", log)
        except TranslatorAssetError as e:
            raise SiteError(str(e)) from None
        staged = stage(work / "src", notebooks, root, repo_url,
                       translator_bytes=assets["directions"])
        html = work / "html"
        warnings = sphinx_build(work / "src", html, work / "doctrees")
        # the translator's and the flipbooks' files beside the site's other static files
        shutil.move(work / "translator", html / "_static" / "translator")
        shutil.copytree(work / "src" / flipbooks.STAGED, html / flipbooks.STATIC)
        shutil.copytree(work / "src" / studied.STAGED, html / studied.STATIC)
        (html / MARKER).write_text("built by `python -m tools.site` (make site); "
                                   "a rebuild replaces this folder\n", encoding="utf-8")
        _replace(out, html, work / "old")
    return warnings, staged


def _replace(out: Path, new: Path, old: Path) -> None:
    """Put the folder ``new`` at ``out``; an earlier site there is moved aside, then removed."""
    if out.exists():
        out.rename(old)  # only a folder _out_problem accepted: ours, or empty
    new.rename(out)
    if old.exists():
        shutil.rmtree(old)


def _record_folder_ok(record: Path, out: Path) -> bool:
    """The record's folder exists, or the build makes it: it holds --out, or is above it (a
    fresh clone has no build/ until `make site` writes build/site and build/site.json)."""
    folder = record.parent.resolve()
    return folder.is_dir() or folder in out.resolve().parents


def _record_problem(text: str, out: Path) -> str | None:
    """Why ``--record`` (``text``) cannot be written after the build (one line), or None:
    checked before the build, which takes minutes. Creates nothing."""
    from convs2s.system.arguments import dangling_link_problem

    if not text.strip():
        return "--record is an empty name: give a file, e.g. build/site.json"
    record = Path(text)
    if record.is_dir():
        return (f"--record {record} is a folder: give a file to write, e.g. "
                f"{record / 'site.json'}")
    dangling = dangling_link_problem(record, "--record", "remove the link, or give another "
                                     "file") if record.is_symlink() else \
        dangling_link_problem(record.parent, "--record's folder")
    if dangling:
        return dangling
    if record.exists() and not record.is_file():
        return f"--record {record} is not a regular file (a device or a pipe): give a file"
    if not _record_folder_ok(record, out):
        return (f"--record {record}: its folder does not exist; give a file in a folder that "
                "does (or in the folder that holds --out)")
    return None


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(
        prog="python -m tools.site",
        description="Build the course as a static website from the committed notebooks and "
                    "their stored outputs (nothing is executed; no network needed).")
    parser.add_argument("--out", default="build/site", help="folder for the site "
                        "(default: build/site); replaced only if an earlier build made it")
    parser.add_argument("--notebooks", default="notebooks", help="the course's notebooks folder")
    parser.add_argument("--record", metavar="FILE", help="also write what was built (the pages, "
                        "the notebooks' digests, Sphinx's warnings) to FILE as JSON: how make "
                        "test's tests read the site it built (tests/shared_site.py)")
    args = parser.parse_args(argv)
    problem = _record_problem(args.record, Path(args.out)) if args.record is not None else None
    if problem:
        print(f"error: {problem}", file=sys.stderr)
        return 2
    try:
        result = build(args.out, args.notebooks, Path.cwd())
    except (SiteError, flipbooks.FlipbookError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.record:
        from convs2s.system.atomic_files import atomic_write

        record = json.dumps(result.as_record(), indent=1).encode()
        try:
            atomic_write(args.record, lambda f: f.write(record))
        except OSError as e:
            print(f"error: the site is built, but its record could not be written to "
                  f"{args.record} ({e.strerror or e}): give --record a file in a folder that "
                  "exists", file=sys.stderr)
            return 2
    staged = result.staged
    print(f"built {len(staged.lessons)} notebook pages ({staged.solutions} solutions folded, "
          f"{staged.widgets} widgets) in {result.seconds:.0f} s: "
          f"open {result.out / 'index.html'}")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback. The build runs in a temporary folder (removed on the way out), so the site in
    ``--out`` is the earlier one, whole."""
    from convs2s.system.signals import run_command

    return run_command(lambda: main(argv), ": the earlier site (if any) is left as it was, and "
                       "the half-built one removed; run it again")
