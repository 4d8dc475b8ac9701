"""Notebook 06's table of every de→en setting tried: read from package data, and a paragraph that
says what the record's numbers show (fed the stored record and contrary ones)."""

import copy
import json
import re
from pathlib import Path

import pytest

from convs2s.course import reference
from convs2s.course.settings_tried import settings_table, what_the_table_shows

ROOT = Path(__file__).resolve().parents[2]


def _record():
    record = reference.result("settings_tried_de_en.json")
    assert record is not None, "settings_tried_de_en.json is not in the package's results"
    return record


def _run(setting, loss, beam5, *, shipped=False, comparable=True):
    return {"setting": setting, "machine": "m", "epochs": 1, "date": "d", "valid_loss": loss,
            "comparable_loss": comparable, "valid_greedy": None, "valid_beam5": beam5,
            "alpha": 1.0, "test2016_beam5": None, "shipped": shipped}


@pytest.mark.parametrize("direction", ["de_en", "en_de"])
def test_the_stored_record_agrees_with_results_md(direction):
    """Each run's epochs, loss and beam-5 figure appear in RESULTS.md's table of settings for its
    direction (the record is a copy of those measured rows, not new figures), and the record
    has as many runs as the table has rows, one of them shipped."""
    record = reference.result(f"settings_tried_{direction}.json")
    assert record is not None and record["direction"] == direction.replace("_", "-")
    arrow = direction.replace("_", "→")
    text = (ROOT / "benchmarks" / "RESULTS.md").read_text(encoding="utf-8")
    section = text.split(f"## The {arrow} translator: every setting tried", 1)[1]
    section = section.split("\n## ", 1)[0]
    rows = [line for line in section.splitlines()
            if line.startswith("| ") and not line.startswith("| setting |")]
    assert len(rows) == len(record["runs"])
    for run, row in zip(record["runs"], rows, strict=True):
        loss, beam5 = f"{run['valid_loss']:.3f}", f"{run['valid_beam5']:.2f}"
        assert loss in row and beam5 in row, run["setting"]
        assert f"{run['epochs']} epochs" in row, run["setting"]
    assert sum(run["shipped"] for run in record["runs"]) == 1


def test_the_table_marks_the_shipped_run_and_other_vocabularies():
    table = settings_table(_record())
    shipped = [line for line in table.splitlines() if "(shipped)" in line]
    shipped_run = next(r for r in _record()["runs"] if r["shipped"])
    assert len(shipped) == 1 and f"{shipped_run['valid_beam5']:.2f}" in shipped[0]
    assert shipped_run["setting"] in shipped[0]
    assert table.count("†") == 1 + sum(not r["comparable_loss"] for r in _record()["runs"])


def test_the_stored_record_teaches_lower_loss_is_not_better_bleu():
    record = _record()
    text = what_the_table_shows(record)
    comparable = [r for r in record["runs"] if r["comparable_loss"]]
    best = max(record["runs"], key=lambda r: r["valid_beam5"])

    def below(against):
        return [r for r in comparable if r["valid_loss"] < against["valid_loss"]
                and r["valid_beam5"] < against["valid_beam5"]]

    if below(best) or any(r["valid_loss"] < best["valid_loss"] for r in comparable):
        expected = below(best)
    else:  # down the others by BLEU, to the first with runs below it in both
        others = sorted((r for r in comparable if r is not best),
                        key=lambda r: r["valid_beam5"], reverse=True)
        expected = next((below(r) for r in others if below(r)), [])
    assert len(expected) >= 2
    assert f"{len(expected)} runs reached a lower validation loss" in text
    assert all(f"'{r['setting']}' ({r['valid_loss']:.3f}" in text for r in expected)
    assert "A lower loss is evidence, not a guarantee" in text
    assert "the model that shipped" in text and "not the model" not in text


def test_a_record_where_the_lowest_loss_is_also_best_says_so():
    record = {"runs": [_run("a", 1.5, 44.0, shipped=True), _run("b", 1.6, 43.0),
                       _run("c", 1.4, 40.0, comparable=False)]}
    text = what_the_table_shows(record)
    assert "No comparable run reached a lower validation loss" in text
    assert "a lower BLEU" not in text


def test_a_run_with_the_same_lowest_loss_as_the_best_is_named_not_counted_lower():
    """A tie in validation loss is neither lower nor ignored: the other run is named as low."""
    record = {"runs": [_run("tied", 1.50, 43.0), _run("best", 1.50, 44.0, shipped=True),
                       _run("c", 1.60, 42.0)]}
    text = what_the_table_shows(record)
    assert "No comparable run reached a lower validation loss (as low: 'tied', 1.500)" in text
    assert "reached a lower validation loss and" not in text


def test_where_the_best_has_the_lowest_loss_the_runner_up_carries_the_lesson():
    record = {"runs": [_run("best", 1.50, 44.6, shipped=True), _run("second", 1.58, 44.2),
                       _run("lower loss", 1.55, 43.9), _run("higher loss", 1.60, 43.0),
                       _run("other vocabulary", 1.40, 43.5, comparable=False)]}
    text = what_the_table_shows(record)
    assert "No comparable run reached a lower validation loss" in text
    assert ("1 run reached a lower validation loss than the next best by BLEU, 'second' "
            "(1.580, 44.20), and a lower BLEU: 'lower loss' (1.550, 43.90)") in text
    assert "higher loss" not in text and "other vocabulary" not in text
    assert "A lower loss is evidence, not a guarantee" in text


def test_a_runner_up_with_no_run_below_it_passes_the_lesson_to_the_next_one_down():
    """The next best by BLEU may have the second-lowest loss: nothing lies below it in both, and
    the first run further down that has such runs is named, with its place."""
    record = {"runs": [_run("best", 1.50, 44.6, shipped=True), _run("second", 1.51, 44.5),
                       _run("third", 1.58, 44.2), _run("lower loss", 1.55, 43.9),
                       _run("higher loss", 1.60, 43.0)]}
    text = what_the_table_shows(record)
    assert ("1 run reached a lower validation loss than the third best by BLEU, 'third' "
            "(1.580, 44.20), and a lower BLEU: 'lower loss' (1.550, 43.90)") in text
    assert "'second'" not in text and "higher loss" not in text


def test_places_beyond_tenth_are_written_as_ordinals():
    from convs2s.course.settings_tried import _ordinal

    assert [_ordinal(n) for n in (3, 10, 11, 12, 13, 21, 22, 23, 101, 111)] == [
        "third", "tenth", "11th", "12th", "13th", "21st", "22nd", "23rd", "101st", "111th"]


def test_where_loss_and_bleu_agree_throughout_no_lesson_is_claimed():
    record = {"runs": [_run("a", 1.50, 44.6, shipped=True), _run("b", 1.55, 44.2),
                       _run("c", 1.60, 43.9)]}
    text = what_the_table_shows(record)
    assert "disagree" not in text and "not a guarantee" not in text


def test_a_lower_loss_with_an_equal_bleu_is_not_called_worse():
    record = {"runs": [_run("a", 1.5, 44.0, shipped=True), _run("b", 1.4, 44.0)]}
    text = what_the_table_shows(record)
    assert "1 run reached a lower validation loss and at least as high a BLEU" in text


def test_a_record_whose_shipped_run_is_not_the_best_is_called_out():
    record = {"runs": [_run("a", 1.5, 43.0, shipped=True), _run("b", 1.6, 44.0)]}
    text = what_the_table_shows(record)
    assert "'b' (44.00" in text and "not the model that shipped" in text


def test_the_paragraph_reads_the_numbers_it_is_given():
    record = copy.deepcopy(_record())
    for run in record["runs"]:
        run["valid_loss"] += 1.0 if not run["shipped"] else 0.0
    text = what_the_table_shows(record)
    assert "No comparable run reached a lower validation loss" in text
    assert not re.search(r"\d+ runs? reached a lower validation loss and a lower", text)


@pytest.mark.parametrize("variable, direction", [("record", "de_en"),
                                                 ("record_en_de", "en_de")])
def test_notebook_06_shows_the_record_the_package_holds(variable, direction):
    """Notebook 06's stored table and paragraph for each direction (both shown as markdown, so
    the paragraph wraps like prose) are the package's record as it is now: a run added to the
    record without re-running the notebook fails here."""
    notebook = json.loads((ROOT / "notebooks" / "06_inference_beam_search_bleu.ipynb")
                          .read_text(encoding="utf-8"))
    cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"
             and f"settings_tried.settings_table({variable})" in "".join(cell["source"])]
    assert len(cells) == 1, f"notebook 06 has no single cell that shows the {direction} table"
    assert f'reference.result("settings_tried_{direction}.json")' in "".join(cells[0]["source"])
    outputs = cells[0]["outputs"]
    shown = ["".join(o["data"]["text/markdown"]) for o in outputs
             if "text/markdown" in o.get("data", {})]
    record = reference.result(f"settings_tried_{direction}.json")
    assert shown == [settings_table(record), what_the_table_shows(record)]
