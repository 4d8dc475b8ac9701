"""What typing without capitals costs a cased translator: notebook 06's paragraph, read from the
true-casing record.

``benchmarks/truecasing.py`` translates the validation captions seven ways (as written,
lower-cased, all-caps, and the last two true-cased first) and stores its report, which ships as
package data (``truecasing_de_en.json``). The paragraph is composed from that report's numbers,
so it states what was measured, and it names the model measured: where the report is of another
file than the one the package ships now, it says so instead of passing old figures off as the
shipped model's.
"""

from __future__ import annotations

__all__ = ["casing_paragraph"]


def _bleu(rows: dict, key: str) -> str:
    return f"{rows[key]['sacrebleu']:.1f}"


def _restored(rows: dict, key: str) -> str:
    return f"{100 * rows[key]['restored']:.0f}%"


def casing_paragraph(record: dict, shipped_sha256: str | None) -> str:
    """One paragraph from a ``benchmarks/truecasing.py`` report: its validation figures (greedy
    sacreBLEU) as typed and true-cased, refusals counted. ``shipped_sha256`` is the sha256 the
    package's manifest records for the shipped model of the report's direction (None: none
    shipped); the paragraph says whether the report measured that file."""
    split = record["splits"]["valid"]
    rows = split["rows"]
    from convs2s.course.analysis import direction_name

    name = direction_name(record["direction"])
    if record["model_sha256"] == shipped_sha256:
        which = f"the shipped {name} model"
    else:
        which = (f"a {name} model that is not the one the package ships now "
                 "(benchmarks/truecasing.py has not measured the new one yet)")
    parts = [f"Measured on {which}, greedy decoding, the {split['sentences']:,} validation "
             f"captions: {_bleu(rows, 'cased')} sacreBLEU as written, {_bleu(rows, 'lower')} "
             f"typed all in lower case, {_bleu(rows, 'upper')} all in capitals"]
    refused, too_long = rows["upper"]["refused"], rows["upper"]["refused_too_long"]
    if refused:
        why = (": in capitals they split into more pieces than the model takes"
               if too_long == refused else "")
        parts[-1] += f" ({refused} of those refused, counted as empty translations{why})"
    parts[-1] += "."
    parts.append(f"Given each word's most frequent casing in the training captions first (what "
                 "the widget below does where the Multi30k files are on this machine): "
                 f"{_bleu(rows, 'lower_training')} from lower case and "
                 f"{_bleu(rows, 'upper_training')} from capitals, "
                 f"{_restored(rows, 'lower_training')} and {_restored(rows, 'upper_training')} "
                 "of the sentences restored exactly as written.")
    parts.append(f"With the casing the model's own vocabulary cuts into fewest pieces instead "
                 f"(what it does without the files): {_bleu(rows, 'lower_vocabulary')} "
                 f"and {_bleu(rows, 'upper_vocabulary')}.")
    return " ".join(parts)
