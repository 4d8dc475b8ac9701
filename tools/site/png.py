"""Figures made lighter for the website: each PNG as at most 256 colours, if that is smaller.

A matplotlib figure holds a few hundred to a few thousand colours, nearly all of them the
anti-aliased edges of lines and text; as a 256-colour palette image (Pillow's octree, no
dithering) it looks the same to a reader and weighs about a quarter as much (the course's 54
figures: 3.2 MB -> 0.9 MB). The notebooks keep their figures as they are; only the site's copies
change, so that a page with all its figures stays within its weight (tests/site_and_tools) —
the notebook a page offers for download too (:func:`notebook_with_smaller_figures`: its cells
and outputs as committed, its figures as the page shows them), so that the whole site stays
within its own.
"""

from __future__ import annotations

import base64
import io
import json


def smaller_png(data: bytes) -> bytes:
    """``data`` (a PNG) as a palette PNG of at most 256 colours, or ``data`` itself where that
    is not smaller or it is no image Pillow reads. Deterministic."""
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(io.BytesIO(data)) as image:
            image.load()
            if image.mode == "P":
                return data
            rgba = image.convert("RGBA")
    except (UnidentifiedImageError, OSError, ValueError):
        return data
    palette = rgba.quantize(colors=256, method=Image.Quantize.FASTOCTREE,
                            dither=Image.Dither.NONE)
    out = io.BytesIO()
    palette.save(out, "PNG", optimize=True)
    smaller = out.getvalue()
    return smaller if len(smaller) < len(data) else data


def smaller_png_base64(text: str | list[str]) -> str:
    """A notebook's base64 PNG (a string or its list of lines) made smaller, as base64."""
    data = base64.b64decode("".join(text) if isinstance(text, list) else text)
    return base64.b64encode(smaller_png(data)).decode("ascii")


def notebook_with_smaller_figures(raw: bytes) -> bytes:
    """A committed notebook's bytes (nbformat's JSON) with each output's PNG made smaller
    (:func:`smaller_png_base64`) and everything else as it was, written as nbformat writes
    (one-space indent, sorted keys, a last newline); ``raw`` itself where no figure changes or
    it is not a notebook this reads. Pure."""
    try:
        nb = json.loads(raw)
        outputs = [out for cell in nb["cells"] for out in cell.get("outputs", [])]
    except (ValueError, KeyError, TypeError, AttributeError):
        return raw
    changed = False
    for out in outputs:
        data = out.get("data") if isinstance(out, dict) else None
        png = data.get("image/png") if isinstance(data, dict) else None
        if isinstance(png, (str, list)):
            smaller = smaller_png_base64(png)
            if smaller != ("".join(png) if isinstance(png, list) else png):
                data["image/png"] = smaller
                changed = True
    if not changed:
        return raw
    return (json.dumps(nb, indent=1, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8")
