"""Notebooks 03, 04 and 05's widgets on the website, responding with no kernel.

Each widget keeps the notebook's controls: their names, kinds and labels as the package declares
them (``convs2s.course.widgets``), their ranges and starting values as the notebook saved them
(the notebook gives some of them, :func:`saved_controls`); what they show is made by the site's
build, with the package and the notebooks' own code, and ``static/flipbook.js`` shows it:

- notebook 03's decoder explorer (``show_decoder``): for every setting of padding, kernel size
  and layers, ``dependency.visible_positions`` (the left panel) and, for every changed token,
  ``dependency.perturbation_effect`` of the notebook's ``widget_model`` (the right panel),
  written as one small script of numbers that flipbook.js draws in SVG. ``widget_model`` and
  the ``tiny_model`` it calls are the notebook's own cells' code, run here (:func:`notebook_code`),
  with the vocabulary sizes the notebook printed (its model needs only their sizes);
- notebook 04's attention maps (``show_attention``): one PNG per validation sentence of
  ``data/04_validation_sentences.json``, drawn as the notebook draws it. The model
  the notebook trains (3 epochs, in a temporary folder) is not available to the build, so the
  frames come from the course's shipped translator (``convs2s.pretrained("de-en")``, notebook
  06's model), as the note above the widget says; the figure is the notebook's
  (``attention_maps.plot_sentence_attention``);
- notebook 05's attention by epoch (``show_epoch``): one PNG per recorded epoch with
  ``analysis.plot_attention_epoch`` and the line the widget prints
  (``analysis.attention_epoch_line``), from
  ``data/05_attention_by_epoch.json``, the records of the training run that produced the
  notebook's stored outputs (``python -m tools.site.flipbook_data`` writes both JSON files).

The notebook's figure puts every decoder layer side by side (04: 1,268 px wide) or one above
the other (05: 2,117 px tall), which a phone shows at a quarter of its size or scrolls. So each
04 and 05 frame also comes as one SVG per decoder layer (:func:`layer_figure`: the package's
``plot_attention_grid`` of that layer alone, on the colour scale of all the layers, 3.3 inches
wide with its text as text), and the page offers a layer selector: a phone shows one layer at a
time, a wide screen the notebook's figure or one layer (flipbook.js).

A frame is a file under the site's ``_static/flipbooks/``; the page loads the one shown only
(flipbook.js switches the image's ``src``), so a page weighs one frame, not all of them.
Nothing here needs a GPU, the network or the Multi30k data.
"""

from __future__ import annotations

import ast
import functools
import hashlib
import html
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from convs2s.course import widgets as declarations
from tools.site import widgets as notebook_widgets
from tools.site.attention_figures import (  # a layer for a phone, shared with figures.py
    NARROW_INCHES,  # noqa: F401 (how wide a layer's drawing is: the tests read it here)
    layer_figure,
)
from tools.site.png import smaller_png

DATA_DIR = Path(__file__).resolve().parent / "data"
SENTENCES_04 = DATA_DIR / "04_validation_sentences.json"
EPOCHS_05 = DATA_DIR / "05_attention_by_epoch.json"
#: Where the staged frames are, in the Sphinx source folder, and where the site has them.
STAGED = "_flipbooks"
STATIC = "_static/flipbooks"
#: The notebooks' figures as the inline backend saves them: 100 dpi, cropped to the drawing.
DPI = 100

#: The flipbooks, by their declared widget's name (site "flipbook" in convs2s.course.widgets)
#: -> its notebook.
NOTEBOOKS = {name: w.notebook for name, w in declarations.WIDGETS.items()
             if w.site == "flipbook"}


class FlipbookError(Exception):
    """A notebook or data file that no longer holds what a flipbook needs: one line."""


# --------------------------------------------------------------------------------------------
# What the notebooks hold: their code, their controls, their stored outputs
# --------------------------------------------------------------------------------------------


def _source(cell: dict) -> str:
    source = cell.get("source", "")
    return "".join(source) if isinstance(source, list) else source


def _outputs_text(nb: dict) -> Iterator[str]:
    """Every stored text output of the notebook's code cells (the widgets' ones included)."""
    for cell in nb.get("cells", []):
        for out in cell.get("outputs", []):
            text = out.get("text", out.get("data", {}).get("text/plain", ""))
            yield "".join(text) if isinstance(text, list) else text
    state = nb.get("metadata", {}).get("widgets", {})
    state = state.get("application/vnd.jupyter.widget-state+json", {}).get("state", {})
    for model in state.values():
        for out in model.get("state", {}).get("outputs", []) or []:
            text = out.get("text", "")
            yield "".join(text) if isinstance(text, list) else text


def stored_output(nb: dict, pattern: str) -> re.Match:
    """The first stored output line of ``nb`` that matches ``pattern``; FlipbookError if none."""
    for text in _outputs_text(nb):
        for line in text.splitlines():
            found = re.search(pattern, line)
            if found:
                return found
    raise FlipbookError(f"no stored output matches {pattern!r}: run the notebook again "
                        "(the site's flipbooks read what it printed)")


def notebook_code(nb: dict, names: set[str]) -> ast.Module:
    """The notebook's top-level statements (in its code cells) that define ``names``, each its
    last definition, in the order they run; cells with IPython magics are skipped. Serves
    notebook 03: the build runs its ``tiny_model`` and ``widget_model`` as written there."""
    found: dict[str, ast.stmt] = {}
    for cell in nb.get("cells", []):
        if cell.get("cell_type") != "code":
            continue
        try:
            tree = ast.parse(_source(cell))
        except SyntaxError:  # "%pip ..." and other magics: no definition of ours there
            continue
        for stmt in tree.body:
            if isinstance(stmt, ast.FunctionDef):
                defined = {stmt.name}
            elif isinstance(stmt, ast.Assign):
                defined = {t.id for t in stmt.targets if isinstance(t, ast.Name)}
            else:
                continue
            for name in defined & names:
                found.pop(name, None)
                found[name] = stmt
    missing = sorted(names - set(found))
    if missing:
        raise FlipbookError(f"the notebook defines no {', '.join(missing)}: the site's "
                            "flipbook runs them as the notebook writes them")
    return ast.Module(body=list(dict.fromkeys(found.values())), type_ignores=[])


#: The ipywidgets model of each kind of declared control.
_MODELS = {"slider": "IntSliderModel", "dropdown": "DropdownModel", "text": "TextModel"}


def saved_controls(nb: dict, widget: str) -> dict[str, declarations.Control]:
    """{name: control} of the declared widget ``widget`` as the notebook saved it: each declared
    control (its name, kind, label) with the range and value the notebook's saved widget had.
    The saved widget is found by its name (``tools/site/widgets.py``) and its controls by their
    order, the declaration's (the builder makes them so), never by their labels."""
    declared = declarations.declared(widget)
    models = notebook_widgets.saved_models(nb, widget)
    if not models:
        raise FlipbookError(f"{declared.notebook} shows no saved widget {widget!r}: run the "
                            "notebook again and save it with its widget state")
    children = notebook_widgets.saved_children(nb, models[0])
    saved = [m for m in children if m.get("model_name") in _MODELS.values()]
    kinds = [m.get("model_name") for m in saved]
    if kinds != [_MODELS[c.kind] for c in declared.controls]:
        raise FlipbookError(f"{declared.notebook}'s saved widget {widget!r} has the controls "
                            f"{kinds}, not the {len(declared.controls)} declared: run the "
                            "notebook again and save it with its widget state")
    controls = {}
    for c, model in zip(declared.controls, saved, strict=True):
        s = model.get("state", {})
        try:
            if c.kind == "slider":
                c = c.given(value=s["value"], min=s["min"], max=s["max"], step=s.get("step", 1))
            elif c.kind == "dropdown":
                c = c.given(value=s["_options_labels"][s.get("index") or 0])
            else:
                c = c.given(value=s["value"])
        except (KeyError, IndexError, TypeError, ValueError) as e:
            raise FlipbookError(f"{declared.notebook}'s saved widget {widget!r}: control "
                                f"{c.name!r} does not fit its declaration ({e}): run the "
                                "notebook again") from None
        controls[c.name] = c
    return controls


def read_json(path: Path) -> dict:
    """A committed data file of ``data/``; FlipbookError (one line) if it cannot be read."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise FlipbookError(f"{path}: cannot read it ({e}); write it again with "
                            "`python -m tools.site.flipbook_data`") from None


# --------------------------------------------------------------------------------------------
# Notebook 03: the decoder explorer's numbers
# --------------------------------------------------------------------------------------------

class _VocabSize:
    """What ``tiny_model`` reads of a vocabulary: its size and padding id."""

    def __init__(self, size: int, pad_idx: int):
        self.size, self.pad_idx = size, pad_idx

    def __len__(self) -> int:
        return self.size


def decoder_setup(nb: dict) -> dict:
    """Notebook 03's widget code, run as the notebook runs it: {"W_LEN", "w_src", "w_trg",
    "widget_model"}. The vocabularies are stand-ins of the sizes the notebook printed ("de
    3,257 / en 2,955 tokens"): the model, its seeded weights and the random sentences depend
    on nothing else of them."""
    import torch

    from convs2s.data import Vocab
    from convs2s.model import ConvS2S

    sizes = stored_output(nb, r"vocabularies: de ([\d,]+) / en ([\d,]+) tokens")
    de, en = (int(n.replace(",", "")) for n in sizes.groups())
    pad = Vocab.build([]).pad_idx  # the specials come first, in the same order in every Vocab
    scope = {"torch": torch, "functools": functools, "ConvS2S": ConvS2S,
             "src_vocab": _VocabSize(de, pad), "trg_vocab": _VocabSize(en, pad)}
    code = notebook_code(nb, {"tiny_model", "W_LEN", "w_src", "w_trg", "widget_model"})
    exec(compile(code, "<notebook 03>", "exec"), scope)  # noqa: S102 (the course's own notebook)
    return scope


def rounded(x: float) -> float:
    """4 significant digits (the bars' heights; an exact 0 stays 0): a third of the bytes."""
    return float(f"{x:.4g}")


def decoder_numbers(nb: dict) -> dict:
    """Every setting of notebook 03's widget: {"controls": [...], "length": W_LEN, "settings":
    {"padding,k,layers": {"visible": rows of "0"/"1", "effect": [position][output]}}}, with
    what ``show_decoder`` computes (effects to 4 significant digits, :func:`rounded`)."""
    import torch

    from convs2s.course import dependency

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same sums in every process: 2 threads round 92 of them apart
    try:
        return _decoder_numbers(nb, dependency)
    finally:
        torch.set_num_threads(threads)


def _decoder_numbers(nb: dict, dependency) -> dict:
    controls = saved_controls(nb, "decoder-explorer")
    scope = decoder_setup(nb)
    length, model = scope["W_LEN"], scope["widget_model"]
    settings = {}
    for padding in controls["padding"].values():
        for k in controls["kernel_size"].values():
            for layers in controls["n_layers"].values():
                visible = dependency.visible_positions(k, layers, padding, length)
                m = model(padding, k, layers)
                # a 0 (half the bars: a causal decoder's past) written "0", not "0.0"
                effects = [[rounded(e) or 0 for e in dependency.perturbation_effect(
                    m, scope["w_src"], scope["w_trg"], position).tolist()]
                    for position in controls["position"].values()]
                settings[f"{padding},{k},{layers}"] = {
                    "visible": ["".join("1" if v else "0" for v in row)
                                for row in visible.tolist()],
                    "effect": effects}
    return {"controls": [c.as_dict() for c in controls.values()], "length": length,
            "settings": settings}


# --------------------------------------------------------------------------------------------
# Notebooks 04 and 05: the frames
# --------------------------------------------------------------------------------------------


def _png(fig) -> bytes:
    """The figure as the notebook shows it (the inline backend's 100 dpi, cropped), then as a
    palette PNG (tools/site/png.py), and closed."""
    import matplotlib.pyplot as plt

    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return smaller_png(buffer.getvalue())


def layer_svgs(attention, src_tokens, trg_tokens, titles) -> tuple[bytes, ...]:
    """Every decoder layer of ``attention`` drawn by :func:`layer_figure` (titled ``titles``),
    as SVG (``figures.svg``: text as text, the same bytes for the same figure)."""
    import matplotlib.pyplot as plt

    from tools.site import figures

    drawn = []
    for layer, title in enumerate(titles):
        fig = layer_figure(attention, layer, src_tokens, trg_tokens, title)
        try:
            drawn.append(figures.svg(fig))
        finally:
            plt.close(fig)
    return tuple(drawn)


def attention_frame(translator, german: str, english: str) -> tuple[bytes, str, tuple]:
    """Notebook 04's ``show_attention`` for one sentence, with ``translator``: (the PNG, the
    translation, each layer's drawing for a phone)."""
    from convs2s.course import attention_maps

    t = translator.translate_with_attention(german)
    fig = attention_maps.plot_sentence_attention(t, english)  # the notebook's figure
    titles = attention_maps.entropy_titles(t.attention)  # its layers' titles, for a phone
    return _png(fig), t.text, layer_svgs(t.attention, t.source_tokens, t.tokens, titles)


@dataclass
class Frame:
    """One picture of a flipbook and what the page says with it; where it has them, its
    layers drawn one by one for a phone (SVG, :func:`layer_figure`), their alt texts and the
    caption the page shows above a single layer (what the notebook's figure titles)."""
    value: int  # the control's value that shows it
    file: str
    alt: str
    text: str
    png: bytes
    caption: str = ""
    layer_alts: tuple[str, ...] = ()
    layers: tuple[bytes, ...] = ()

    def layer_file(self, layer: int) -> str:
        """The file of layer ``layer`` (0-based): the frame's name, ``_layer<n>.svg``."""
        return f"{self.file.removesuffix('.png')}_layer{layer + 1}.svg"


def sentence_frames(data: dict, translator) -> list[Frame]:
    """Notebook 04's frames: one per sentence of ``data`` (04_validation_sentences.json)."""
    frames = []
    for s in data["sentences"]:
        png, translation, layers = attention_frame(translator, s["german"], s["english"])
        about = (f"of the course's shipped translator on validation sentence {s['index']}, "
                 f"“{s['german']}”, translated “{translation}”")
        frames.append(Frame(
            s["index"], f"04_sentence_{s['index']:04d}.png",
            f"Attention of each decoder layer {about}",
            f"validation sentence {s['index']}: {s['german']}", png,
            f"{translation}\n(reference: {s['english']})",
            tuple(f"Attention of decoder layer {i + 1} of {len(layers)} {about}"
                  for i in range(len(layers))), layers))
    return frames


def epoch_frames(data: dict) -> list[Frame]:
    """Notebook 05's frames: one per recorded epoch of ``data`` (05_attention_by_epoch.json)."""
    from convs2s.course import analysis

    history, watched = data["history"], data["watched"]
    recorded = analysis.attention_by_epoch(history)
    frames = []
    for index, (epoch, maps) in enumerate(recorded):
        value = index + 1  # the slider's: the notebook's show_epoch draws record value - 1
        fig = analysis.plot_attention_epoch(history, watched, index)
        title = fig._suptitle.get_text()  # matplotlib keeps it there (no public getter)
        png = _png(fig)
        loss = next(r["valid_loss"] for r in history if r["epoch"] == epoch)
        about = (f"on the watched validation sentence after epoch {epoch} of "
                 f"{recorded[-1][0]} (validation loss {loss:.3f})")
        layers = layer_svgs(maps, watched["src"], watched["trg"],
                            [f"layer {i + 1}" for i in range(maps.shape[0])])
        frames.append(Frame(
            value, f"05_epoch_{value:02d}.png", f"Attention of each decoder layer {about}",
            analysis.attention_epoch_line(recorded, index), png, title,
            tuple(f"Attention of decoder layer {i + 1} of {len(layers)} {about}"
                  for i in range(len(layers))), layers))
    return frames


def _flipbook_script(widget: str, payload: dict) -> str:
    """The script a page loads for a widget: its data, for flipbook.js."""
    return (f"window.convs2sFlipbooks = window.convs2sFlipbooks || {{}};\n"
            f"window.convs2sFlipbooks[{json.dumps(widget)}] = "
            f"{json.dumps(payload, ensure_ascii=False, separators=(',', ':'))};\n")


def _shown(f: Frame) -> dict:
    """A frame as the page's data has it: its picture, alt text and line, and where it has
    them, its caption and each layer's drawing and alt text."""
    shown = {"value": f.value, "src": f"{STATIC}/{f.file}", "alt": f.alt, "text": f.text}
    if f.layer_alts:
        shown["caption"] = f.caption
        shown["layers"] = [{"src": f"{STATIC}/{f.layer_file(i)}", "alt": alt}
                           for i, alt in enumerate(f.layer_alts)]
    return shown


def _frames_payload(control: declarations.Control, frames: list[Frame]) -> dict:
    """What flipbook.js needs: the notebook's control, and the frames; ``over_values`` where
    there is a frame for every value of the control (05), so the slider takes its values."""
    return {"name": control.name, "label": control.label, "value": control.value,
            "over_values": [f.value for f in frames] == control.values(),
            "frames": [_shown(f) for f in frames]}


def stage(out: Path, notebooks: dict[str, dict]) -> dict[str, int]:
    """Write into ``out`` the scripts and frames of the flipbooks whose notebook is among
    ``notebooks`` ({name: notebook}); {widget: bytes written}."""
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for widget, name in NOTEBOOKS.items():
        if name not in notebooks:
            continue
        data = {"attention-by-sentence": SENTENCES_04, "attention-by-epoch": EPOCHS_05}.get(widget)
        script, frames = _made(widget, json.dumps(notebooks[name], sort_keys=True),
                               data.read_bytes() if data and data.is_file() else b"")
        (out / f"{widget}.js").write_bytes(script)
        for f in frames:
            names = [f.file, *(f.layer_file(i) for i in range(len(f.layers)))]
            if not all(_frame_name(n, widget) for n in names):  # _made checked them: never a
                raise FlipbookError(f"flipbook {widget!r}: frame {f.file!r} is not a plain "
                                    "file name")  # path out of `out`
            for name, data in zip(names, (f.png, *f.layers), strict=True):
                (out / name).write_bytes(data)
        written[widget] = len(script) + sum(len(f.png) + sum(map(len, f.layers))
                                            for f in frames)
    return written


@functools.lru_cache(maxsize=6)
def _made(widget: str, notebook: str, data: bytes) -> tuple[bytes, tuple[Frame, ...]]:
    """One flipbook's script and frames, from its notebook (as JSON text) and its data file's
    bytes: made once per process for the same inputs, and kept on disk for the next build
    (``build_cache``: a test run builds the site several times; rendering 04's frames takes
    seconds). What the cache gives back is checked as data (:func:`_parsed`): an entry that
    does not pass is made again; the page's script is made here from the data, never read."""
    from tools.site import build_cache

    key = {"widget": widget, "notebook": hashlib.sha256(notebook.encode("utf-8")).hexdigest(),
           "data": hashlib.sha256(data).hexdigest()}
    files = build_cache.cached("flipbook", key, lambda: _stored(*_make(widget, notebook)),
                               check=lambda files: _parsed(widget, files))
    return _parsed(widget, files)


#: What a PNG file starts with; what a layer's SVG (matplotlib's) starts with.
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_SVG_START = b'<?xml version="1.0" encoding="utf-8" standalone="no"?>\n<!DOCTYPE svg'


def _frame_name(name, widget: str) -> bool:
    """Whether ``name`` may name a frame of ``widget`` in the site's folder: a plain ``.png``
    or ``.svg`` file name (build_cache.plain_name: no folder, no ``..``, not absolute, no NUL),
    not the widget's script."""
    from tools.site.build_cache import plain_name

    return plain_name(name) and name.endswith((".png", ".svg")) and name != f"{widget}.js"


def _is_svg(data: bytes) -> bool:
    """A layer's drawing as :func:`layer_svgs` writes it: matplotlib's SVG, and nothing a
    browser would run or fetch where the file is opened itself (the flipbook's link opens it):
    no script or foreign element, no ``on...`` attribute, no link but to the file's own parts
    or an embedded image."""
    import xml.etree.ElementTree as ET

    if not data.startswith(_SVG_START):
        return False
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return False
    allowed = {"svg", "g", "defs", "style", "path", "use", "image", "clipPath", "rect", "text",
               "tspan", "metadata", "RDF", "Work", "type", "date", "creator", "Agent", "title",
               "format", "linearGradient", "stop"}
    for e in root.iter():
        if e.tag.rsplit("}", 1)[-1] not in allowed or e.tag.endswith("style") and re.search(
                r"@import|url\(", e.text or ""):
            return False
        for key, value in e.attrib.items():
            name = key.rsplit("}", 1)[-1].lower()
            if name.startswith("on") or name == "href" and not value.startswith(
                    ("#", "data:image/png;base64,")) or "url(" in value and not re.fullmatch(
                    r"url\(#[\w-]+\)", value.strip()):
                return False
    return True


def _parsed(widget: str, files: dict[str, bytes]) -> tuple[bytes, tuple[Frame, ...]]:
    """A flipbook from the cache's files (:func:`_stored`): the page's script, made from the
    stored data, and the frames. ``ValueError`` where the files are not what :func:`_stored`
    writes: another set of files, data that is not JSON of the right shape, a frame name that
    is not a plain ``.png`` file name (or twice the same), a frame that is not a PNG, or page
    data whose frames are not the listed ones."""
    payload = json.loads(files["payload.json"])
    listed = json.loads(files["frames.json"])
    if not isinstance(payload, dict) or not isinstance(listed, list):
        raise ValueError("not a flipbook's data")
    fields = {"value", "file", "alt", "text", "caption", "layer_alts"}
    if not all(isinstance(f, dict) and set(f) == fields and isinstance(f["layer_alts"], list)
               for f in listed):
        raise ValueError("not a flipbook's frames")
    if set(files) != {"payload.json", "frames.json", *(
            name for i, f in enumerate(listed) for name in [f"frame-{i}.png", *(
                f"frame-{i}-layer-{j}.svg" for j in range(len(f["layer_alts"])))])}:
        raise ValueError("not a flipbook's files")
    frames = []
    for i, f in enumerate(listed):
        if type(f["value"]) is not int or not _frame_name(f["file"], widget) or \
                not f["file"].endswith(".png") or not all(
                isinstance(f[k], str) for k in ("alt", "text", "caption")) or \
                not all(isinstance(a, str) for a in f["layer_alts"]):
            raise ValueError(f"frame {i} is not a frame")
        png = files[f"frame-{i}.png"]
        if not png.startswith(_PNG_SIGNATURE):
            raise ValueError(f"frame {i} is not a PNG")
        layers = tuple(files[f"frame-{i}-layer-{j}.svg"] for j in range(len(f["layer_alts"])))
        if not all(_is_svg(svg) for svg in layers):
            raise ValueError(f"frame {i}: a layer is not a drawing's SVG")
        frames.append(Frame(**{**f, "layer_alts": tuple(f["layer_alts"])}, png=png,
                            layers=layers))
    if len({f.file for f in frames}) != len(frames):
        raise ValueError("two frames of one name")
    shown = [_shown(f) for f in frames]
    if payload.get("frames", []) != shown:
        raise ValueError("the page's frames are not the listed ones")
    return _flipbook_script(widget, payload).encode("utf-8"), tuple(frames)


def _stored(payload: dict, frames: tuple[Frame, ...]) -> dict[str, bytes]:
    """A flipbook as the cache's files: the page's data (JSON, from which :func:`_parsed` makes
    the script), its frames' fields and each frame's PNG."""
    listed = [{"value": f.value, "file": f.file, "alt": f.alt, "text": f.text,
               "caption": f.caption, "layer_alts": list(f.layer_alts)} for f in frames]
    return {"payload.json": json.dumps(payload, ensure_ascii=False).encode("utf-8"),
            "frames.json": json.dumps(listed).encode("utf-8"),
            **{f"frame-{i}.png": f.png for i, f in enumerate(frames)},
            **{f"frame-{i}-layer-{j}.svg": svg for i, f in enumerate(frames)
               for j, svg in enumerate(f.layers)}}


def _make(widget: str, notebook: str) -> tuple[dict, tuple[Frame, ...]]:
    """:func:`_made`'s work: the page's data and the frames, rendered now."""
    nb = json.loads(notebook)
    frames: list[Frame] = []
    if widget == "decoder-explorer":
        payload = decoder_numbers(nb)
    elif widget == "attention-by-sentence":
        import convs2s

        control = saved_controls(nb, widget)["sentence"]
        frames = sentence_frames(read_json(SENTENCES_04),
                                 convs2s.pretrained("de-en", device="cpu"))
        payload = _frames_payload(control, frames)
    else:
        control = saved_controls(nb, widget)["epoch"]
        frames = epoch_frames(read_json(EPOCHS_05))
        payload = _frames_payload(control, frames)
    return payload, tuple(frames)


# --------------------------------------------------------------------------------------------
# The note and the element on the page
# --------------------------------------------------------------------------------------------


def _covered(data: dict) -> str:
    indices = [s["index"] for s in data["sentences"]]
    return (f"{len(indices)} of the {data['total']:,} validation sentences: "
            f"{', '.join(map(str, indices))} (evenly spaced, with sentence "
            f"{data['notebook_sentence']}, the one the notebook picks)")


def note_text(widget: str) -> str:
    """The sentence above a flipbook: what the page shows and where it comes from."""
    if widget == "decoder-explorer":
        return ("Move the controls: this page draws the figure in your browser from numbers the "
                "site's build computed for every setting with the package "
                "(`dependency.visible_positions`, `dependency.perturbation_effect`) and this "
                "notebook's own `widget_model` (its `tiny_model`, seed 0, dim 16); the bar "
                "heights are rounded to 4 significant digits (a test compares them with the "
                "package's).")
    if widget == "attention-by-sentence":
        return ("Move the slider: these attention maps come from the course's **shipped "
                "translator** (`convs2s.pretrained(\"de-en\")`, notebook 06's model), not from "
                "the 3-epoch model this notebook trains (the site runs no training), drawn by "
                "the site's build with this notebook's plotting call. The slider covers "
                f"{_covered(read_json(SENTENCES_04))}.")
    data = read_json(EPOCHS_05)
    return ("Move the slider: each picture is this notebook's figure for that epoch "
            "(`analysis.plot_attention_epoch`), drawn by the site's build from the attention "
            f"recorded by the training run whose outputs this page shows (run "
            f"`{data['run_id']}`, preset `{data['preset']}`, {data['epochs']} epochs; "
            "`tools/site/data/05_attention_by_epoch.json`, its weights rounded to 4 decimals).")


def note(widget: str, label: str, title: str) -> str:
    """The markdown that stands for the widget: the note (admonition ``title``, class
    widget-live, as live.js's widgets), the element flipbook.js fills, and the script with the
    widget's data. ``label`` is the widget's accessible name."""
    src = f"{STATIC}/{widget}.js"
    return "\n".join([
        f":::{{admonition}} {title}", ":class: widget-live", "", note_text(widget), "",
        f'<div class="convs2s-flipbook" data-widget="{widget}" role="group" '
        f'aria-label="{html.escape(label, quote=True)}"></div>',
        f'<script src="{src}"></script>', ":::"])
