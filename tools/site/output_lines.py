"""What a notebook printed, on a narrow screen: a sentence wraps, a table's row keeps its columns.

The pages show a cell's printed text (stdout, stderr, a plain-text value) in a ``<pre>`` box that
scrolls sideways when a line is wider than the column, as a table's rows must: wrapped, a row's
numbers would no longer stand under their headings. But most lines the notebooks print are
sentences ("no run of notebook 05 here: the course's trained model ... is used"), and on a
375 px phone such a line ran three screens to the right, read by scrolling back and forth.
JupyterLab wraps every printed line; the site wraps every line that is not a table's row.

A line is a table's row when two or more runs of two or more spaces stand between its words
(the columns the notebooks line up with padding, ``f"{x:>8}"``); any other line is marked
``<span class="output-wraps">`` and ``static/site.css`` lets it wrap. The page's text is
unchanged (a copy of the box copies the same characters), and a box whose lines hold markup
of their own (colours of a terminal's escape codes) is left as it was.
"""

from __future__ import annotations

import html
import re

WRAPS = "output-wraps"

# a run of two or more spaces between two words: a table's column gap
_COLUMN_GAP = re.compile(r"(?<=\S) {2,}(?=\S)")
# the printed-text boxes myst-nb writes: stdout and stderr, and a value's plain text
_BOX = re.compile(r'(<div class="output (?:stream|stderr|text_plain)[^"]*">'
                  r'<div class="highlight"><pre>)(.*?)(</pre>)', re.DOTALL)
_EMPTY_SPAN = "<span></span>"  # Pygments opens every box with one


def is_table_row(line: str) -> bool:
    """True when ``line`` lines up columns: two or more gaps of two or more spaces between its
    words (leading indentation is no gap)."""
    return len(_COLUMN_GAP.findall(line.strip())) >= 2


def _marked(inner: str) -> str | None:
    """The box's text with each line that is not a table's row marked to wrap; None when a line
    holds markup (left alone)."""
    lead = _EMPTY_SPAN if inner.startswith(_EMPTY_SPAN) else ""
    lines = inner[len(lead):].split("\n")
    if any("<" in line for line in lines):
        return None
    return lead + "\n".join(
        line if not line or is_table_row(html.unescape(line))
        else f'<span class="{WRAPS}">{line}</span>' for line in lines)


def wrap_sentences(body: str) -> str:
    """``body`` (a page's HTML) with every printed line that is not a table's row marked to wrap
    on a narrow screen."""
    def mark(match: re.Match) -> str:
        marked = _marked(match.group(2))
        return match.group(0) if marked is None else match.group(1) + marked + match.group(3)

    return _BOX.sub(mark, body)
