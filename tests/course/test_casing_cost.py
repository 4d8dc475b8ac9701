"""Notebook 06's paragraph on what casing costs the shipped translator: read from the true-casing
record the package ships, which must be a record of the model the package ships now."""

import copy
import json
from pathlib import Path

from convs2s.course import reference
from convs2s.course.casing_cost import casing_paragraph
from convs2s.run import pretrained

ROOT = Path(__file__).resolve().parents[2]


def _record():
    record = reference.result("truecasing_de_en.json")
    assert record is not None, "truecasing_de_en.json is not in the package's results"
    return record


def test_the_shipped_record_measured_the_shipped_model():
    """A new shipped model makes this fail until benchmarks/truecasing.py measures it."""
    record = _record()
    assert record["model_sha256"] == pretrained.record(record["direction"])["sha256"], (
        "benchmarks/results/truecasing_de_en.json measured another model: run python "
        "benchmarks/truecasing.py --json benchmarks/results/truecasing_de_en.json, then "
        "python -m tools.ship_results")


def test_the_paragraph_states_the_records_figures_for_the_shipped_model():
    record = _record()
    rows = record["splits"]["valid"]["rows"]
    text = casing_paragraph(record, record["model_sha256"])
    assert text.startswith("Measured on the shipped German → English model")
    for key in ("cased", "lower", "upper", "lower_training", "upper_training",
                "lower_vocabulary", "upper_vocabulary"):
        assert f"{rows[key]['sacrebleu']:.1f}" in text, key
    assert f"{rows['upper']['refused']} of those refused" in text


def test_the_paragraph_reads_the_numbers_it_is_given():
    record = copy.deepcopy(_record())
    rows = record["splits"]["valid"]["rows"]
    rows["lower"]["sacrebleu"], rows["lower_training"]["restored"] = 12.34, 0.5
    rows["upper"]["refused"] = rows["upper"]["refused_too_long"] = 0
    text = casing_paragraph(record, record["model_sha256"])
    assert "12.3 typed all in lower case" in text and "50% and" in text
    assert "refused" not in text


def test_a_record_of_another_model_says_so():
    record = _record()
    text = casing_paragraph(record, "0" * 64)
    assert "not the one the package ships now" in text and "the shipped German" not in text


def test_refusals_for_another_reason_are_not_called_too_long():
    record = copy.deepcopy(_record())
    record["splits"]["valid"]["rows"]["upper"].update(refused=3, refused_too_long=1)
    text = casing_paragraph(record, record["model_sha256"])
    assert "3 of those refused, counted as empty translations)" in text
    assert "more pieces" not in text


def test_notebook_06_prints_the_paragraph_of_the_record_the_package_holds():
    """Shown as markdown (prose that wraps on a phone); a new record without re-running notebook
    06 fails here."""
    notebook = json.loads((ROOT / "notebooks" / "06_inference_beam_search_bleu.ipynb")
                          .read_text(encoding="utf-8"))
    cells = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"
             and "casing_cost.casing_paragraph(" in "".join(cell["source"])]
    assert len(cells) == 1, "notebook 06 has no single cell that prints the casing paragraph"
    shown = ["".join(o["data"]["text/markdown"]) for o in cells[0]["outputs"]
             if "text/markdown" in o.get("data", {})]
    record = _record()
    assert shown == [casing_paragraph(record, pretrained.record(record["direction"])["sha256"])]
