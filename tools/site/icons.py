"""The theme's few icons as a small style sheet, in place of its 1.5 MB ``fontawesome.js``.

pydata-sphinx-theme draws its icons (the menu, search, dark-mode and arrow buttons: about fifteen)
with Font Awesome's JavaScript, which carries all ~2,000 of them and weighed more than a page's
whole content. After the build, :func:`shrink` reads which icons the pages and the theme's scripts
name (``<i class="fa-solid fa-bars">``), takes just those shapes from the theme's own copy of
Font Awesome Free, and writes them as CSS masks (``icons.css``, a few kB, painted in the text's
colour); ``fontawesome.js`` becomes a one-line file. The theme's style sheets also draw a few
icons with Font Awesome's web fonts (the admonitions' and the download links' marks: the
private-use characters written in them); :func:`subset_fonts` cuts each font (235 kB) to those
characters with fontTools. Font Awesome Free's icons are CC BY 4.0 and its fonts SIL OFL 1.1
(https://fontawesome.com/license/free): the style sheet says so, and the fonts keep their
own licence notes.
"""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import quote

#: Font Awesome's family classes and the registration prefix each one's icons carry.
FAMILIES = {"fa-solid": "fas", "fas": "fas", "fa-regular": "far", "far": "far",
            "fa-brands": "fab", "fab": "fab"}
#: Classes that style an icon, not name one.
_MODIFIERS = {"fa-fw", "fa-lg", "fa-xs", "fa-sm", "fa-xl", "fa-2x", "fa-3x", "fa-spin",
              "fa-pulse", "fa-inverse", "fa-border", "fa-flip"}
# a family's block of definitions ends where it registers them: p("fab",b)
_REGISTER = re.compile(r'\(function\(\)\{\w+\("(fa[a-z]+)",\w+\)')
# name:[width,height,[aliases],"unicode","path"] (or a list of paths, for duotone icons)
_ICON = re.compile(r'(?:"([a-z0-9-]+)"|(?<![\w$."-])([a-z][a-z0-9]*)):\[(\d+),(\d+),\[[^\]]*\],'
                   r'"[0-9a-f]+",("[^"]*"|\[[^\]]*\])\]')
# a class list, in HTML (class="...") or in a script (classList="...", className="...")
_CLASSES = re.compile(r'class(?:List|Name)?\s*=\s*"([^"]*\bfa-[^"]*)"')

LICENSE = ("/* Icons: Font Awesome Free by @fontawesome - https://fontawesome.com - "
           "License: https://fontawesome.com/license/free (icons: CC BY 4.0). Only the icons "
           "this site's pages use, written by tools/site/icons.py. */\n")


def icon_shapes(fontawesome_js: str) -> dict[tuple[str, str], tuple[int, int, str]]:
    """{(prefix, name): (width, height, SVG path)} of every icon in Font Awesome's JS bundle,
    by the family it registers them under ("fas", "far", "fab")."""
    shapes: dict[tuple[str, str], tuple[int, int, str]] = {}
    start = 0
    for reg in _REGISTER.finditer(fontawesome_js):
        for m in _ICON.finditer(fontawesome_js, start, reg.start()):
            path = m.group(5)
            paths = re.findall(r'"([^"]*)"', path) if path.startswith("[") else [path[1:-1]]
            shapes.setdefault((reg.group(1), m.group(1) or m.group(2)),
                              (int(m.group(3)), int(m.group(4)), " ".join(p for p in paths if p)))
        start = reg.end()
    return shapes


def icons_named(text: str) -> set[tuple[str, str]]:
    """The (prefix, name) of every icon a class list in ``text`` names (solid by default)."""
    found = set()
    for classes in _CLASSES.findall(text):
        words = classes.split()
        prefix = next((FAMILIES[w] for w in words if w in FAMILIES), "fas")
        found |= {(prefix, w[3:]) for w in words
                  if w.startswith("fa-") and w not in FAMILIES and w not in _MODIFIERS}
    return found


def icon_css(shapes: dict[tuple[str, str], tuple[int, int, str]],
             wanted: set[tuple[str, str]]) -> str:
    """CSS that paints each wanted icon as a mask in the text's colour, Font Awesome's size
    (1em high, its own width; 1.25em wide with fa-fw)."""
    family = {v: k for k, v in FAMILIES.items() if k.startswith("fa-")}
    rules = [LICENSE,
             '[class*="fa-"]::before{display:inline-block;height:1em;vertical-align:-.125em;'
             "background-color:currentColor;-webkit-mask:var(--icon) no-repeat center/contain;"
             "mask:var(--icon) no-repeat center/contain}",
             ".fa-fw::before{width:1.25em!important}", ".fa-lg{font-size:1.25em}"]
    for prefix, name in sorted(wanted):
        if (prefix, name) not in shapes:
            continue
        w, h, path = shapes[(prefix, name)]
        svg = (f"<svg xmlns='http://www.w3.org/2000/svg' viewBox='0 0 {w} {h}'>"
               f"<path d='{path}'/></svg>")
        url = "url(\"data:image/svg+xml," + quote(svg, safe=" /:=',.-") + "\")"
        rules.append(f".{family[prefix]}.fa-{name}::before,.{prefix}.fa-{name}::before"
                     f"{{content:'';width:{w / h:.4g}em;--icon:{url}}}")
    return "\n".join(rules) + "\n"


def shrink(static: Path, pages: list[Path]) -> set[tuple[str, str]]:
    """Replace ``static/scripts/fontawesome.js`` by ``static/icons.css`` holding only the icons
    that ``pages`` and the theme's other scripts name; returns the icons named but not found."""
    bundle = static / "scripts" / "fontawesome.js"
    if not bundle.is_file():
        return set()
    shapes = icon_shapes(bundle.read_text(encoding="utf-8"))
    wanted: set[tuple[str, str]] = set()
    for file in [*pages, *(static / "scripts").glob("*.js")]:
        if file.name != "fontawesome.js":
            wanted |= icons_named(file.read_text(encoding="utf-8", errors="replace"))
    (static / "icons.css").write_text(icon_css(shapes, wanted), encoding="utf-8")
    bundle.write_text("/* The icons are CSS: _static/icons.css (tools/site/icons.py). */\n",
                      encoding="utf-8")
    for extra in static.glob("scripts/fontawesome.js.map"):  # its source map
        extra.unlink()
    return wanted - set(shapes)


# a character of Unicode's private-use area written as it is in a style sheet: an icon font's
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")


def subset_fonts(static: Path) -> dict[str, tuple[int, int]]:
    """Cut every Font Awesome web font under ``static`` to the icons the site's style sheets
    write as characters (with their ligatures, names and licence kept); {font: (bytes before,
    after)}."""
    from fontTools import subset

    used = sorted({ord(c) for css in static.rglob("*.css")
                   for c in _PRIVATE_USE.findall(css.read_text(encoding="utf-8",
                                                               errors="replace"))})
    sizes = {}
    for font in sorted(static.rglob("fa-*.woff2")):
        before = font.stat().st_size
        options = subset.Options()
        options.flavor = "woff2"
        options.name_IDs = ["*"]  # keep the names, the licence and its URL among them
        options.notdef_outline = True
        loaded = subset.load_font(str(font), options)
        subsetter = subset.Subsetter(options)
        subsetter.populate(unicodes=used)
        subsetter.subset(loaded)
        subset.save_font(loaded, str(font), options)
        sizes[font.name] = (before, font.stat().st_size)
    return sizes
