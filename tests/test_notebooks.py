"""Every notebook keeps the course's contract, and its stored outputs come from a clean run.

nbval (in `make test`) re-runs each notebook in quick mode; these checks read the stored files.
"""

import json
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def _load(path):
    return json.loads(path.read_text(encoding="utf-8"))


def _source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"
    assert NOTEBOOKS[0].name == "00_start_here.ipynb"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_contract(path):
    nb = _load(path)
    cells = nb["cells"]
    md = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    code = "\n".join(_source(c) for c in cells if c["cell_type"] == "code")
    assert _source(cells[0]).startswith("# "), "first cell must be the title"
    for heading in ("What you will learn", "Prerequisites", "Estimated time", "Summary"):
        assert heading.lower() in md.lower(), f"missing section: {heading}"
    badge = f"/notebooks/{path.name})"
    assert "colab-badge.svg" in md and badge in md, "missing or mis-named Open in Colab badge"
    assert re.search(r'if "google\.colab" in sys\.modules:\n\s+%pip install', code), (
        "missing the Colab setup cell that installs the package only in Colab"
    )
    assert re.search(r"^\|\s*paper\s*\|", md, flags=re.M | re.I), "missing the notation table"
    assert "torch.testing.assert_close" in code, "missing the from-scratch == package check"
    assert "exercise" in md.lower() or "ipywidgets" in code, "needs exercises or a widget"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_are_one_clean_run(path):
    nb = _load(path)
    code_cells = [c for c in nb["cells"] if c["cell_type"] == "code"]
    counts = [c.get("execution_count") for c in code_cells]
    assert all(isinstance(n, int) for n in counts), "some code cells were not run"
    assert counts == list(range(1, len(counts) + 1)), f"not one top-to-bottom run: {counts}"
    outputs = [o for c in code_cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"], "stored error output"
    text = json.dumps(outputs)
    assert "image/png" in text, "no stored figure"
    assert re.search(r"device: \w+", text), "stored outputs must say which device ran them"
