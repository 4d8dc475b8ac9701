"""Matplotlib's SVG made lighter for the website, drawing for drawing.

Matplotlib writes every ``<text>`` with its whole font fallback list (about 200 bytes each),
every coordinate to six decimals, a ``<g>`` with an ``id`` around every element, its metadata
and an indented layout. The site's drawings (the narrow figures, every layer of the flipbooks)
are 40-60% of that: :func:`compact` writes the font list once for all text, coordinates to a
ten-thousandth of a point, no group that groups nothing, no ``id`` that nothing refers to, no
metadata and no layout whitespace. What a browser draws is the same, pixel for pixel
(tests/site_and_tools/test_site_svg.py); each text keeps its size and anchor in its own
``style``, where tests/site_and_tools/test_site_phone.py reads them. Pure and deterministic.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET

SVG_NS = "http://www.w3.org/2000/svg"
XLINK_NS = "http://www.w3.org/1999/xlink"
_SVG = f"{{{SVG_NS}}}"
#: What matplotlib writes before the drawing (kept: the flipbooks' cache check reads it).
PROLOG = (b'<?xml version="1.0" encoding="utf-8" standalone="no"?>\n<!DOCTYPE svg PUBLIC '
          b'"-//W3C//DTD SVG 1.1//EN"\n  "http://www.w3.org/Graphics/SVG/1.1/DTD/svg11.dtd">\n')
#: The attributes whose numbers are coordinates, rounded to :data:`DECIMALS`.
_COORDINATES = {"d", "x", "y", "x1", "x2", "y1", "y2", "width", "height", "transform",
                "viewBox", "points", "cx", "cy", "r"}
#: A ten-thousandth of a point: Chromium draws the very same pixels (a thousandth still moved
#: a few anti-aliased edges by a few levels of 255; tests/site_and_tools/test_site_svg.py
#: compares them). Two decimals fewer than matplotlib's six: 2% of the bytes.
DECIMALS = 4
_NUMBER = re.compile(r"-?\d+\.\d+")
_FONT_FAMILY = re.compile(r"(?:^|;)\s*font-family:\s*([^;]+?)\s*(?=;|$)")
_NO_ROTATION = re.compile(r"^rotate\(-?0 [-\d.]+ [-\d.]+\)$")

ET.register_namespace("", SVG_NS)
ET.register_namespace("xlink", XLINK_NS)


def _rounded(value: str) -> str:
    def one(m: re.Match) -> str:
        text = f"{float(m.group(0)):.{DECIMALS}f}".rstrip("0").rstrip(".")
        return "0" if text in ("-0", "") else text

    return re.sub(r"\s+", " ", _NUMBER.sub(one, value)).strip()


def _flatten(parent: ET.Element) -> None:
    """Replace each child ``<g>`` with no attributes by its children (depth first)."""
    children = []
    for child in list(parent):
        _flatten(child)
        if child.tag == f"{_SVG}g" and not child.attrib:
            children.extend(child)
        else:
            children.append(child)
    parent[:] = children


def _family(e: ET.Element) -> str | None:
    found = _FONT_FAMILY.search(e.get("style", ""))
    return found.group(1) if found else None


def _own_characters(text: ET.Element) -> bool:
    return bool((text.text or "").strip()) or any((c.tail or "").strip() for c in text)


def _hoisted_font(root: ET.Element, kind: str) -> str:
    """The font family most ``<kind>`` elements name, taken out of their ``style`` into one
    CSS rule (returned; "" where that would change what is drawn). An element naming another
    family keeps its own, which wins over the rule. Where an element names none, it inherits
    its family: then the rule would change a ``<tspan>``, or a ``<text>`` with characters of
    its own, so nothing is taken out of that kind."""
    elements = list(root.iter(f"{_SVG}{kind}"))
    named = [f for f in map(_family, elements) if f is not None]
    if not named or any(_family(e) is None and (kind == "tspan" or _own_characters(e))
                        for e in elements):
        return ""
    common = max(sorted(set(named)), key=named.count)
    for e in elements:
        if _family(e) == common:
            style = _FONT_FAMILY.sub("", e.get("style")).strip("; ")
            if style:
                e.set("style", style)
            else:
                del e.attrib["style"]
    return f"{kind}{{font-family:{common}}}"


def compact(data: bytes) -> bytes:
    """``data`` (a matplotlib SVG) as the same drawing in fewer bytes; ``data`` itself where
    it is not an SVG this reads (nothing is lost by trying)."""
    try:
        root = ET.fromstring(data)
    except ET.ParseError:
        return data
    if root.tag != f"{_SVG}svg":
        return data
    for metadata in root.findall(f"{_SVG}metadata"):
        root.remove(metadata)
    for e in root.iter():
        for key in _COORDINATES & set(e.attrib):
            e.set(key, _rounded(e.get(key)))
        if _NO_ROTATION.match(e.get("transform", "")):
            del e.attrib["transform"]
    rules = "".join(_hoisted_font(root, kind) for kind in ("text", "tspan"))
    text = ET.tostring(root, encoding="unicode")
    referred = set(re.findall(r"#([^\s\"')]+)", text))
    for e in root.iter():
        if e.get("id") is not None and e.get("id") not in referred:
            del e.attrib["id"]
    _flatten(root)
    for e in root.iter():  # the layout's whitespace; a text's own characters stay
        if e.text is not None and not e.text.strip() and e.tag != f"{_SVG}tspan":
            e.text = None
        if e.tail is not None and not e.tail.strip():
            e.tail = None
    if rules:
        style = root.find(f"{_SVG}defs/{_SVG}style")
        if style is None:
            defs = ET.Element(f"{_SVG}defs")
            ET.SubElement(defs, f"{_SVG}style", {"type": "text/css"}).text = rules
            root.insert(0, defs)
        else:
            style.text = (style.text or "") + rules
    for image in root.iter(f"{_SVG}image"):  # base64 split over lines by matplotlib
        href = f"{{{XLINK_NS}}}href"
        if image.get(href, "").startswith("data:"):
            image.set(href, re.sub(r"\s+", "", image.get(href)))
    return PROLOG + ET.tostring(root, encoding="unicode").encode("utf-8")
