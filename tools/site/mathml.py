"""The site's maths as MathML, written into the pages when the site is built.

Browsers display MathML themselves (Chromium since 109, Firefox and Safari for longer), so a page
needs no maths library: the course's pages used to load MathJax's 1.2 MB ``tex-chtml.js`` (of a
24 MB copy in the site) to typeset a few dozen formulas on each. ``latex2mathml`` (a pure-Python
library) turns each formula's TeX into MathML while Sphinx writes the page.

A formula it cannot convert is a build warning naming the page and the formula (the site tests
fail on any warning), and the page shows its TeX as code meanwhile, so nothing is lost silently.
"""

from __future__ import annotations

import html
import re

from docutils import nodes
from sphinx.util import logging

logger = logging.getLogger(__name__)
_UNKNOWN_COMMAND = re.compile(r">(\\[A-Za-z]+)<")
# TeX's named operators that latex2mathml does not know (it knows \max, \log, \exp ...):
# written as \operatorname{...}, which it does
_NAMED_OPERATORS = re.compile(r"\\(arg|argmax|argmin)(?![A-Za-z])")


def to_mathml(tex: str, display: bool) -> str:
    """``tex`` as one ``<math>`` element (display="block" for a displayed formula); ValueError
    if it is not TeX that latex2mathml reads."""
    from latex2mathml.converter import convert

    tex = _NAMED_OPERATORS.sub(r"\\operatorname{\1}", tex)
    try:
        mathml = convert(tex.strip(), display="block" if display else "inline")
    except Exception as e:  # the library's own exceptions, and its parser's IndexError & co.
        raise ValueError(f"{type(e).__name__}: {e}".rstrip(": ")) from None
    # a command the library does not know comes out as its own name, to be shown as text
    unknown = _UNKNOWN_COMMAND.search(mathml)
    if unknown:
        raise ValueError(f"unknown command {unknown.group(1)}")
    return mathml


def _fallback(translator, node, tex: str, why: str) -> str:
    logger.warning("this formula cannot be written as MathML (%s): %s", why, tex,
                   location=node, type="mathml")
    return f"<code>{html.escape(tex)}</code>"


def _displayed_parts(tex: str) -> list[str]:
    """A displayed block's formulas: Sphinx's math directive separates them by a blank line."""
    return [part for part in tex.split("\n\n") if part.strip()]


def _formula(translator, node, tex: str, display: bool) -> str:
    """One formula as MathML, or (with a warning) its TeX as code."""
    try:
        return to_mathml(tex, display=display)
    except ValueError as e:
        return _fallback(translator, node, tex, str(e))


def visit_math(translator, node: nodes.math) -> None:
    translator.body.append(translator.starttag(node, "span", "", CLASS="math notranslate"))
    translator.body.append(_formula(translator, node, node.astext(), display=False))
    translator.body.append("</span>")
    raise nodes.SkipNode


def visit_math_block(translator, node: nodes.math_block) -> None:
    tex = node.astext()
    translator.body.append(translator.starttag(node, "div", CLASS="math notranslate"))
    if node.get("number"):
        from sphinx.util.math import get_node_equation_number

        translator.body.append(f'<span class="eqno">({get_node_equation_number(translator, node)})'
                               "</span>")
    for part in _displayed_parts(tex):
        translator.body.append(_formula(translator, node, part, display=True))
    translator.body.append("</div>\n")
    raise nodes.SkipNode


def setup(app) -> dict:
    app.add_html_math_renderer("mathml", (visit_math, None), (visit_math_block, None))
    return {"parallel_read_safe": True, "parallel_write_safe": True}
