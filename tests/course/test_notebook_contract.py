"""Every notebook keeps the course's contract, and its stored outputs come from a clean run.

`make test` re-runs each notebook in quick mode (tests/site_and_tools/test_colab_like.py, from
the wheel); these checks read the stored files.
The checks themselves are run on hand-made notebooks too (one good, several broken), so a check
that cannot fail would be noticed.
"""

import base64
import json
import re
import struct
from pathlib import Path

import pytest

from tools.strip_solutions import is_solution_cell, stored_in_solutions

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))

# Output types whose data is base64 (may spell "/tmp/" by chance): not scanned as text.
BINARY_MIME = ("image/png", "image/jpeg", "image/gif", "image/webp")
MIN_IMAGE_WIDTH = 300  # pixels: a stored figure narrower than this is unreadable
# A local absolute path: at the start of the text or after a space, quote, bracket or "=", so
# that URLs (".../home/...") do not count.
LOCAL_PATH = re.compile(r"(?<![\w.:/~-])/(?:work|home|tmp|root|Users)/")
# tqdm's text bar ("  0%|          | 0/10 [00:00<?, ?it/s]"): what a viewer without widgets
# shows for a progress bar, and what tqdm prints when it falls back to text.
TQDM_TEXT = re.compile(r"\d{1,3}%\|")


def _load(path):
    return json.loads(Path(path).read_text(encoding="utf-8"))


def _source(cell):
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _text(value) -> str:
    if isinstance(value, list):
        return "".join(value)
    return value if isinstance(value, str) else json.dumps(value)


def _code_cells(nb):
    return [c for c in nb["cells"] if c["cell_type"] == "code"]


def contract_problems(nb: dict, name: str) -> list[str]:
    """What the notebook ``name`` lacks of the course's contract (empty: nothing)."""
    cells = nb["cells"]
    md = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    code_cells = _code_cells(nb)
    code = "\n".join(_source(c) for c in code_cells)
    problems = []
    if not cells or not _source(cells[0]).startswith("# "):
        problems.append("first cell must be the title")
    for heading in ("What you will learn", "Prerequisites", "Estimated time", "Summary"):
        if heading.lower() not in md.lower():
            problems.append(f"missing section: {heading}")
    if "colab-badge.svg" not in md or f"/notebooks/{name})" not in md:
        problems.append("missing or mis-named Open in Colab badge")
    if not re.search(r'if "google\.colab" in sys\.modules:\n\s+%pip install', code):
        problems.append("missing the Colab setup cell that installs the package only in Colab")
    problems += _diagram_problems(code_cells)
    problems += _notation_table_problems(md)
    if "torch.testing.assert_close" not in code:
        problems.append("missing the from-scratch == package check (torch.testing.assert_close)")
    if "exercise" not in md.lower() and "ipywidgets" not in code:
        problems.append("needs exercises or a widget")
    return problems


def _diagram_problems(code_cells) -> list[str]:
    """The notebook opens with the architecture diagram: in one of its first three code cells
    (setup, imports, diagram), with its picture stored once the notebook has outputs."""
    first = code_cells[:3]
    cell = next((c for c in first if "diagrams.architecture(" in _source(c)), None)
    if cell is None:
        return ["missing the architecture diagram cell (`diagrams.architecture(highlight=...)` "
                "in one of the first three code cells)"]
    if "from convs2s.course import diagrams" not in "\n".join(_source(c) for c in first):
        return ["the diagram cell needs `from convs2s.course import diagrams`"]
    ran = any(c.get("outputs") for c in code_cells)
    if ran and not any("image/png" in o.get("data", {}) for o in cell.get("outputs", [])):
        return ["the architecture diagram cell has no stored picture"]
    return []


def _notation_table_problems(md: str) -> list[str]:
    """A markdown table whose header row names the paper and fairseq columns."""
    lines = md.splitlines()
    for i, line in enumerate(lines[:-1]):
        header = line.strip().lower()
        if not header.startswith("|"):
            continue
        cols = [c.strip() for c in header.strip("|").split("|")]
        is_separator = re.fullmatch(r"\|?(\s*:?-{3,}:?\s*\|)+\s*:?-*:?\s*\|?",
                                    lines[i + 1].strip())
        if "paper" in cols and any("fairseq" in c for c in cols) and is_separator:
            return []
    return ["missing the notation table with a header row naming paper and fairseq columns "
            "(| paper | fairseq | this course | ...)"]


def _output_texts(nb):
    """(cell index, text) for every stored output's text, plus the saved widget state."""
    for i, cell in enumerate(_code_cells(nb)):
        for out in cell.get("outputs", []):
            kind = out.get("output_type")
            if kind == "stream":
                yield i, _text(out.get("text", ""))
            elif kind == "error":
                yield i, out.get("evalue", "") + "\n" + "\n".join(out.get("traceback", []))
            for mime, value in out.get("data", {}).items():
                if mime not in BINARY_MIME:
                    yield i, _text(value)
    widgets = nb.get("metadata", {}).get("widgets")
    if widgets:
        yield None, json.dumps(widgets)


def _png_width(data) -> int | None:
    raw = base64.b64decode(_text(data))
    if raw[:8] != b"\x89PNG\r\n\x1a\n" or raw[12:16] != b"IHDR":
        return None
    return struct.unpack(">I", raw[16:20])[0]


def hygiene_problems(nb: dict, root: Path = ROOT) -> list[str]:
    """Stored outputs a learner should not see: local paths, tqdm text, tiny figures."""
    parent = str(root.resolve().parent).rstrip("/")
    problems = []
    for i, text in _output_texts(nb):
        where = f"code cell {i}" if i is not None else "the saved widget state"
        found = LOCAL_PATH.search(text)
        if found or (len(parent) > 1 and parent + "/" in text):
            start = found.start() if found else text.index(parent + "/")
            problems.append(f"{where}: an absolute local path in the output: "
                            f"{text[max(start - 30, 0):start + 60]!r} (print paths relative "
                            "to the notebook, or just file names)")
        bar = TQDM_TEXT.search(text)
        if bar:
            problems.append(f"{where}: tqdm text progress bar in the output: "
                            f"{text[max(bar.start() - 10, 0):bar.end() + 30]!r} (use "
                            "progress=False or tqdm.auto with widgets, and clear it)")
    for i, cell in enumerate(_code_cells(nb)):
        for out in cell.get("outputs", []):
            png = out.get("data", {}).get("image/png")
            if png is None:
                continue
            width = _png_width(png)
            if width is None:
                problems.append(f"code cell {i}: a stored image/png that is not a PNG")
            elif width < MIN_IMAGE_WIDTH:
                problems.append(f"code cell {i}: a stored figure only {width} px wide "
                                f"(at least {MIN_IMAGE_WIDTH}: a bigger figsize, dpi >= 100)")
    return problems


def test_there_are_notebooks():
    assert NOTEBOOKS, "no notebooks found in notebooks/"
    assert NOTEBOOKS[0].name == "00_start_here.ipynb"


def test_the_course_map_in_notebook_00_lists_every_notebook():
    """Notebook 00's course map has one row per notebook, in order (09, the project, was once
    left out of it)."""
    cells = _load(NOTEBOOKS[0])["cells"]
    text = next("".join(c["source"]) for c in cells
                if c["cell_type"] == "markdown" and "The course map" in "".join(c["source"]))
    rows = [line for line in text.splitlines() if line.startswith("| ")
            and not line.startswith("| notebook |")]
    numbers = [row[2:].lstrip("*")[:2] for row in rows]
    assert numbers == [p.name[:2] for p in NOTEBOOKS], numbers


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_contract(path):
    problems = contract_problems(_load(path), path.name)
    assert not problems, "\n".join(problems)


def run_order_problems(nb: dict) -> list[str]:
    """One top-to-bottom run: code cell n (from 1) has execution count n, except solution cells,
    whose count and outputs are cleared (tools/strip_solutions.py) but which ran in turn."""
    problems = []
    for n, cell in enumerate(_code_cells(nb), start=1):
        count = cell.get("execution_count")
        if count == n or (count is None and is_solution_cell(cell)):
            continue
        problems.append(f"code cell {n} has execution count {count} (expected {n}"
                        f"{' or none, as a solution cell' if is_solution_cell(cell) else ''})")
    return problems


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_are_one_clean_run(path):
    nb = _load(path)
    code_cells = _code_cells(nb)
    problems = run_order_problems(nb)
    assert not problems, "not one top-to-bottom run:\n" + "\n".join(problems)
    outputs = [o for c in code_cells for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"], "stored error output"
    text = json.dumps(outputs)
    assert "image/png" in text, "no stored figure"
    assert re.search(r"device: \w+", text), "stored outputs must say which device ran them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_no_solution_cell_stores_outputs(path):
    """A collapsed solution still shows its outputs: they are cleared after a run with
    `python -m tools.strip_solutions`; CI still executes every solution (test_colab_like.py)."""
    nb = _load(path)
    assert any(is_solution_cell(c) for c in nb["cells"]) or path.name.startswith("00")
    stored = stored_in_solutions(nb)
    assert not stored, (f"solution cells {stored} store outputs or an execution count: run "
                        f"`python -m tools.strip_solutions {path.relative_to(ROOT)}`")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_are_clean(path):
    """No absolute local paths, no tqdm text bars, no tiny figures in what is stored."""
    problems = hygiene_problems(_load(path))
    assert not problems, "\n".join(problems)


# --------------------------------------------------------------------------------------------
# The checks above, on hand-made notebooks
# --------------------------------------------------------------------------------------------


def _png(width_in: float, dpi: int = 100) -> str:
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width_in, 2), dpi=dpi)
    fig.gca().plot([0, 1], [0, 1], label="x")
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    plt.close(fig)
    return base64.b64encode(buf.getvalue()).decode("ascii")


NAME = "09_made_up.ipynb"


def _good_notebook() -> dict:
    import nbformat
    from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook, new_output

    figure = {"image/png": _png(5), "text/plain": "<Figure size 500x200 with 1 Axes>"}
    cells = [
        new_markdown_cell("# 09 A made-up notebook\n\n[![Open In Colab](https://colab.research."
                          f"google.com/assets/colab-badge.svg)](https://x/blob/main/notebooks/"
                          f"{NAME})\n\n## What you will learn\n\n## Prerequisites\n\n"
                          "## Estimated time\n"),
        new_code_cell('import sys\n\nif "google.colab" in sys.modules:\n    %pip install -q x',
                      execution_count=1),
        new_code_cell("import torch\n\nfrom convs2s.course import diagrams", execution_count=2,
                      outputs=[new_output("stream", name="stdout", text="device: cpu\n")]),
        new_code_cell('diagrams.architecture(highlight="encoder");', execution_count=3,
                      outputs=[new_output("display_data", data=figure)]),
        new_markdown_cell("| paper | fairseq | this course |\n|---|---|---|\n| $z_j$ | "
                          "`encoder_out[0]` | `conved` |"),
        new_code_cell("torch.testing.assert_close(torch.ones(1), torch.ones(1))\n"
                      'print("saved to runs/05_quick/best.pt, see https://x.org/home/a")',
                      execution_count=4,
                      outputs=[new_output("stream", name="stdout",
                                          text="saved to runs/05_quick/best.pt, see "
                                               "https://x.org/home/a\n")]),
        new_markdown_cell("## Exercises\n\n## Summary"),
    ]
    nb = new_notebook(cells=cells)
    nbformat.validate(nb)
    return json.loads(nbformat.writes(nb))


def _write_and_load(tmp_path, nb) -> dict:
    path = tmp_path / NAME
    path.write_text(json.dumps(nb), encoding="utf-8")
    return _load(path)


def test_a_good_made_up_notebook_passes(tmp_path):
    nb = _write_and_load(tmp_path, _good_notebook())
    assert contract_problems(nb, NAME) == []
    assert hygiene_problems(nb) == []


def _output_text(nb, cell_index: int, text: str) -> None:
    nb["cells"][cell_index]["outputs"] = [
        {"output_type": "stream", "name": "stderr", "text": [text]}]


@pytest.mark.parametrize("bad, expected", [
    (lambda nb: _output_text(nb, 5, "checkpoint: /work/main/notebooks/runs/best.pt\n"),
     "absolute local path"),
    (lambda nb: _output_text(nb, 5, "wrote '/tmp/tmpab12/x.png'\n"), "absolute local path"),
    (lambda nb: _output_text(nb, 5, "data in /home/ada/multi30k\n"), "absolute local path"),
    (lambda nb: _output_text(nb, 5, "see /Users/ada/x\n"), "absolute local path"),
    (lambda nb: _output_text(nb, 5, "cwd=/root/x\n"), "absolute local path"),
    (lambda nb: _output_text(nb, 5, f"in {ROOT.resolve().parent}/elsewhere/x\n"),
     "absolute local path"),
    (lambda nb: _output_text(nb, 5, "  0%|          | 0/10 [00:00<?, ?it/s]\n"), "tqdm"),
    (lambda nb: nb["cells"][5]["outputs"].append(
        {"output_type": "display_data", "metadata": {},
         "data": {"text/plain": "epoch 1:   0%|          | 0/3", "application/vnd.jupyter."
                  "widget-view+json": {"model_id": "ab", "version_major": 2,
                                       "version_minor": 0}}}), "tqdm"),
    (lambda nb: nb["metadata"].update(
        widgets={"state": {"ab": {"state": {"value": "/home/ada/x"}}}}), "widget state"),
    (lambda nb: nb["cells"][3]["outputs"][0]["data"].update({"image/png": _png(2)}),
     "px wide"),
])
def test_the_hygiene_check_catches_a_bad_notebook(tmp_path, bad, expected):
    nb = _good_notebook()
    bad(nb)
    problems = hygiene_problems(_write_and_load(tmp_path, nb))
    assert problems and expected in "\n".join(problems), problems


def _replace_source(index: int, old: str, new: str):
    def change(nb):
        cell = nb["cells"][index]
        cell["source"] = _source(cell).replace(old, new)
    return change


@pytest.mark.parametrize("bad, expected", [
    (_replace_source(3, 'diagrams.architecture(highlight="encoder");', "pass"),
     "architecture diagram cell"),
    (_replace_source(2, "from convs2s.course import diagrams", "import convs2s"),
     "from convs2s.course import diagrams"),
    (lambda nb: nb["cells"].append(nb["cells"].pop(3)), "architecture diagram cell"),
    (lambda nb: nb["cells"][3].update(outputs=[]), "no stored picture"),
    (_replace_source(4, "| paper | fairseq | this course |", "| paper | meaning | code |"),
     "notation table"),
    (_replace_source(4, "|---|---|---|", ""), "notation table"),
    (_replace_source(0, "## Estimated time", ""), "Estimated time"),
    (_replace_source(0, NAME, "other.ipynb"), "Colab badge"),
])
def test_the_contract_check_catches_a_bad_notebook(tmp_path, bad, expected):
    nb = _good_notebook()
    bad(nb)
    problems = contract_problems(_write_and_load(tmp_path, nb), NAME)
    assert problems and expected in "\n".join(problems), problems


def _cells(*specs) -> dict:
    """Code cells from (execution_count, is_solution) pairs."""
    cells = []
    for count, solution in specs:
        meta = {"cellView": "form", "jupyter": {"source_hidden": True}} if solution else {}
        source = "#@title Solution\nx = 1\n" if solution else "x = 1\n"
        cells.append({"cell_type": "code", "metadata": meta, "source": source, "outputs": [],
                      "execution_count": count})
    return {"cells": cells}


def test_a_run_with_its_solution_counts_cleared_is_one_run():
    assert run_order_problems(_cells((1, False), (None, True), (3, False))) == []
    assert run_order_problems(_cells((1, False), (2, True), (3, False))) == []  # not stripped


@pytest.mark.parametrize("specs, expected", [
    (((1, False), (None, False), (3, False)), "code cell 2 has execution count None"),
    (((1, False), (None, True), (2, False)), "code cell 3 has execution count 2"),
    (((2, False), (1, False)), "code cell 1 has execution count 2"),
])
def test_the_run_order_check_catches_a_bad_notebook(specs, expected):
    problems = run_order_problems(_cells(*specs))
    assert problems and expected in problems[0], problems
