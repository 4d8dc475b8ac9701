"""Every setting tried for a shipped translator (de→en, en→de), and what the table teaches.

Notebook 06 shows the records ``settings_tried_de_en.json`` and ``settings_tried_en_de.json``
(package data, copied from ``benchmarks/results/``; nothing is recomputed): each run's best
validation loss beside its validation BLEU. The paragraph under the table is composed from the
record's values, so it says what these numbers show — whether a lower validation loss went with
a higher BLEU — and would say the opposite of a record that showed the opposite.
"""

from __future__ import annotations

__all__ = ["settings_table", "what_the_table_shows"]


def _figure(value: float | None, digits: int = 2) -> str:
    return "–" if value is None else f"{value:.{digits}f}"


def settings_table(record: dict) -> str:
    """The record's runs as a markdown table, the shipped run in bold, in the record's order."""
    lines = ["| setting | epochs | machine | best validation loss | validation greedy BLEU "
             "| validation beam 5 BLEU (α) |",
             "|---|---|---|---|---|---|"]
    for run in record["runs"]:
        loss = _figure(run["valid_loss"], 3) + ("" if run["comparable_loss"] else " †")
        alpha = "" if run["alpha"] is None else f" (α {run['alpha']:g})"
        setting = f"**{run['setting']} (shipped)**" if run["shipped"] else run["setting"]
        lines.append(f"| {setting} | {run['epochs']} | {run['machine']} | {loss} "
                     f"| {_figure(run['valid_greedy'])} | {_figure(run['valid_beam5'])}{alpha} |")
    if not all(run["comparable_loss"] for run in record["runs"]):
        lines.append("")
        lines.append("† another vocabulary: its loss is per piece of that vocabulary, so it is "
                     "not compared with the others by loss.")
    return "\n".join(lines)


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


_LESSON = ("The validation loss scores the probability the model gives each reference word one "
           "step at a time, given the reference so far; BLEU scores the sentences beam search "
           "writes from the model's own words. A lower loss is evidence, not a guarantee: choose "
           "by the measure of how the model will be used.")


def _lower_both(against: dict, runs: list[dict]) -> list[dict]:
    """The runs of ``runs`` with a lower validation loss and a lower BLEU than ``against``."""
    return [r for r in runs if r["valid_loss"] < against["valid_loss"]
            and r["valid_beam5"] < against["valid_beam5"]]


def _named(runs: list[dict]) -> str:
    return "; ".join(f"'{r['setting']}' ({r['valid_loss']:.3f}, {r['valid_beam5']:.2f})"
                     for r in runs)


def what_the_table_shows(record: dict) -> str:
    """One paragraph read from the record: which run is best by validation beam 5 (the rule the
    choice follows), and how many comparable runs reached a lower validation loss than it and a
    lower BLEU — the lesson that a lower loss need not mean better translations. Where the best
    run also has the lowest loss, the same is asked of the others, best by BLEU first: the first
    with runs below it in both is named with its place."""
    runs = [r for r in record["runs"] if r["valid_beam5"] is not None]
    best = max(runs, key=lambda r: r["valid_beam5"])
    comparable = [r for r in runs if r["comparable_loss"] and r is not best]
    if not best["comparable_loss"]:
        comparable = []
    lower_loss = [r for r in comparable if r["valid_loss"] < best["valid_loss"]]
    lower_both = _lower_both(best, lower_loss)
    lowest = min((r for r in runs if r["comparable_loss"]), key=lambda r: r["valid_loss"])
    parts = [f"Of {len(runs)} runs, the best by validation beam-5 BLEU is "
             f"'{best['setting']}' ({best['valid_beam5']:.2f}, validation loss "
             f"{best['valid_loss']:.3f})"
             + (", the model that shipped." if best["shipped"] else
                ", which is not the model that shipped: the record's choice does not follow its "
                "own rule.")]
    if not comparable:
        parts.append("No other run used its vocabulary, so no run can be set beside it by loss.")
    elif lower_both:
        parts.append(f"{_count(len(lower_both), 'run', 'runs')} reached a lower validation loss "
                     f"and a lower BLEU: {_named(lower_both)}. {_LESSON}")
    elif lower_loss:
        parts.append(f"{_count(len(lower_loss), 'run', 'runs')} reached a lower validation loss "
                     "and at least as high a BLEU: here a lower loss did go with better "
                     "translations.")
    else:
        named = "" if lowest is best else (
            f" (as low: '{lowest['setting']}', {lowest['valid_loss']:.3f})")
        parts.append(f"No comparable run reached a lower validation loss{named}: here "
                     "the lowest loss and the best BLEU belong to the same run.")
        # the others by BLEU, best first: the first with runs below it in both
        by_bleu = sorted(comparable, key=lambda r: r["valid_beam5"], reverse=True)
        for rank, against in enumerate(by_bleu, start=2):
            below = _lower_both(against, [r for r in comparable if r is not against])
            if below:
                place = "next" if rank == 2 else _ordinal(rank)
                parts.append(f"Among the others the two disagree: "
                             f"{_count(len(below), 'run', 'runs')} reached a lower validation "
                             f"loss than the {place} best by BLEU, '{against['setting']}' "
                             f"({against['valid_loss']:.3f}, {against['valid_beam5']:.2f}), and "
                             f"a lower BLEU: {_named(below)}. {_LESSON}")
                break
    return " ".join(parts)


_ORDINALS = {3: "third", 4: "fourth", 5: "fifth", 6: "sixth", 7: "seventh", 8: "eighth",
             9: "ninth", 10: "tenth"}


def _ordinal(n: int) -> str:
    """3 → "third" … 10 → "tenth", then 11th, 21st, 22nd, 23rd, 111th."""
    if n in _ORDINALS:
        return _ORDINALS[n]
    suffix = "th" if n % 100 in (11, 12, 13) else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"
