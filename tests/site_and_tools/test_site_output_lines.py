"""The site's printed text on a narrow screen (tools/site/output_lines.py): which lines wrap.

The browser test (test_site_phone.py) checks what a reader of a phone sees; these check the rule
on the lines themselves, and that the page's text is left as it was."""

from __future__ import annotations

import html
import re

from tools.site import output_lines

BOX = ('<div class="output stream highlight-myst-ansi notranslate"><div class="highlight">'
       '<pre><span></span>{}</pre></div>\n</div>')


def _text(page: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page))


def test_a_row_with_two_column_gaps_is_a_table_row_and_a_sentence_is_not():
    assert output_lines.is_table_row("  tokenizer        word    subword")
    assert output_lines.is_table_row("epoch  1: train loss 4.388 (smoothed)  valid loss 2.450")
    # leading indentation and one gap after a label are no columns
    assert not output_lines.is_table_row("    no run of notebook 05 here: the course's model")
    assert not output_lines.is_table_row("source:    Une femme en manteau rouge, avec un sac.")
    assert not output_lines.is_table_row("")


def test_each_sentence_is_marked_to_wrap_and_each_table_row_is_not():
    lines = ["no run of notebook 05 here: the course&#x27;s model &lt;unk&gt; is used",
             "  tokenizer        word    subword", "", "  machine: AMD EPYC, 2 cores"]
    page = BOX.format("\n".join(lines) + "\n")
    marked = output_lines.wrap_sentences("<p>before</p>" + page + "<p>after</p>")
    assert marked.count(f'<span class="{output_lines.WRAPS}">') == 2
    assert f'<span class="{output_lines.WRAPS}">{lines[0]}</span>' in marked
    assert f'<span class="{output_lines.WRAPS}">{lines[3]}</span>' in marked
    assert "\n" + lines[1] + "\n" in marked  # the row as it was
    assert _text(marked) == _text("<p>before</p>" + page + "<p>after</p>")


def test_code_and_boxes_with_markup_of_their_own_are_left_alone():
    code = ('<div class="highlight-ipython3 notranslate"><div class="highlight"><pre><span></span>'
            '<span class="n">x</span> <span class="o">=</span> 1\n</pre></div>')
    coloured = BOX.format('<span class="ansi-red-fg">red</span> text\n')
    assert output_lines.wrap_sentences(code) == code
    assert output_lines.wrap_sentences(coloured) == coloured
