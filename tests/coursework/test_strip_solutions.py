"""tools/strip_solutions.py: the outputs of solution cells and every cell's run timestamps are
cleared, nothing else changes."""

from __future__ import annotations

import copy
import json
import os
import stat

import pytest

from tools import strip_solutions
from tools.strip_solutions import (
    drop_timestamps,
    is_solution_cell,
    notebook_json,
    stored_in_solutions,
    strip,
    timestamped_cells,
)

OUTPUT = [{"output_type": "stream", "name": "stdout", "text": ["predicted [5, 6], measured\n"]}]


def _cell(source: str, metadata: dict | None = None, *, count: int = 1) -> dict:
    return {"cell_type": "code", "execution_count": count, "id": f"c{count}",
            "metadata": metadata or {}, "outputs": copy.deepcopy(OUTPUT), "source": source}


def _notebook() -> dict:
    return {"cells": [
        _cell("print('lesson')", count=1),
        _cell("#@title Solution\nx = [5, 6]\n", count=2),  # the title line alone
        _cell("x = 1", {"cellView": "form"}, count=3),  # Colab's form alone
        _cell("x = 2", {"jupyter": {"source_hidden": True}}, count=4),  # JupyterLab's alone
        _cell("x = 3", {"convs2s": {"exercise": "e", "role": "solution"}}, count=5),
        _cell("checks.e(x)", {"convs2s": {"exercise": "e", "role": "check"}}, count=6),
        {"cell_type": "markdown", "id": "m", "metadata": {"convs2s": {"role": "solution"}},
         "source": "<details><summary>Solution</summary>\n\nwords\n\n</details>"},
    ], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}


def test_solution_cells_are_recognised_by_any_of_their_marks():
    nb = _notebook()
    assert [is_solution_cell(c) for c in nb["cells"]] == [False, True, True, True, True, False,
                                                          True]
    assert stored_in_solutions(nb) == [1, 2, 3, 4]


def test_strip_clears_solution_outputs_and_counts_only():
    nb = _notebook()
    assert strip(nb) == 4
    for i in (1, 2, 3, 4):
        assert nb["cells"][i]["outputs"] == [] and nb["cells"][i]["execution_count"] is None
    for i in (0, 5):
        assert nb["cells"][i]["outputs"] == OUTPUT and nb["cells"][i]["execution_count"] == i + 1
    assert stored_in_solutions(nb) == [] and strip(nb) == 0


def test_the_command_rewrites_a_notebook_in_place_keeping_its_mode(tmp_path, capsys):
    path = tmp_path / "01_x.ipynb"
    path.write_text(notebook_json(_notebook()), encoding="utf-8")
    os.chmod(path, 0o640)
    assert strip_solutions.main(["--check", str(path)]) == 1
    assert "solution cells [1, 2, 3, 4] store outputs" in capsys.readouterr().out
    assert strip_solutions.main([str(path)]) == 0
    assert "cleared 4 solution cells" in capsys.readouterr().out
    assert stat.S_IMODE(path.stat().st_mode) == 0o640
    nb = json.loads(path.read_text(encoding="utf-8"))
    assert stored_in_solutions(nb) == [] and nb["cells"][0]["outputs"] == OUTPUT
    assert strip_solutions.main(["--check", str(path)]) == 0
    before = path.stat().st_mtime_ns
    assert strip_solutions.main([str(path)]) == 0  # nothing to clear: not rewritten
    assert path.stat().st_mtime_ns == before
    assert [p.name for p in tmp_path.iterdir()] == ["01_x.ipynb"]  # no temporary file left


STAMPS = {"iopub.execute_input": "2026-11-28T06:22:27.759475Z",
          "iopub.status.busy": "2026-11-28T06:22:27.759269Z",
          "iopub.status.idle": "2026-11-28T06:22:27.765518Z",
          "shell.execute_reply": "2026-11-28T06:22:27.765024Z"}


def test_a_cells_run_timestamps_are_removed_and_its_other_metadata_kept():
    nb = _notebook()
    lesson_meta = {"tags": ["keep"], "execution": dict(STAMPS)}
    solution_meta = {"convs2s": {"exercise": "e", "role": "solution"}, "execution": dict(STAMPS)}
    nb["cells"][0]["metadata"] = copy.deepcopy(lesson_meta)
    nb["cells"][4]["metadata"] = copy.deepcopy(solution_meta)
    assert timestamped_cells(nb) == [0, 4]
    assert drop_timestamps(nb) == 2
    assert nb["cells"][0]["metadata"] == {"tags": ["keep"]}
    assert nb["cells"][4]["metadata"] == {"convs2s": {"exercise": "e", "role": "solution"}}
    assert nb["cells"][0]["outputs"] == OUTPUT and nb["cells"][0]["execution_count"] == 1
    assert timestamped_cells(nb) == [] and drop_timestamps(nb) == 0


def test_the_command_removes_timestamps_even_where_no_solution_stores_outputs(tmp_path, capsys):
    nb = _notebook()
    strip(nb)
    nb["cells"][5]["metadata"]["execution"] = dict(STAMPS)
    path = tmp_path / "01_x.ipynb"
    path.write_text(notebook_json(nb), encoding="utf-8")
    assert strip_solutions.main(["--check", str(path)]) == 1
    assert "1 code cells store their run's timestamps" in capsys.readouterr().out
    assert strip_solutions.main([str(path)]) == 0
    assert "removed the timestamps of 1 cell" in capsys.readouterr().out
    stored = json.loads(path.read_text(encoding="utf-8"))
    assert stored["cells"][5]["metadata"] == {"convs2s": {"exercise": "e", "role": "check"}}
    assert strip_solutions.main(["--check", str(path)]) == 0


def test_the_layout_is_the_one_jupyter_writes():
    text = notebook_json(_notebook())
    assert text.startswith('{\n "cells": [\n  {\n   "cell_type": "code",') and text.endswith("}\n")


@pytest.mark.parametrize("content", ["not json", None])
def test_a_bad_path_is_one_line(tmp_path, capsys, content):
    path = tmp_path / "x.ipynb"
    if content is not None:
        path.write_text(content)
    assert strip_solutions.main([str(path)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot read the notebook" in err


def test_a_slow_cell_keeps_its_duration_which_the_time_estimate_reads(tmp_path):
    """The timestamps go, but a cell that ran a second or more keeps how long it ran
    (``metadata.run_seconds``), so ``tools.time_estimate`` still counts the waiting."""
    from tools import time_estimate

    nb = _notebook()
    slow = {"iopub.execute_input": "2026-11-28T10:00:00.000000Z",
            "shell.execute_reply": "2026-11-28T10:00:42.340000Z"}
    fast = {"iopub.execute_input": "2026-11-28T10:00:00.000000Z",
            "shell.execute_reply": "2026-11-28T10:00:00.300000Z"}
    nb["cells"][0]["metadata"] = {"execution": slow, "run_seconds": 99.0}
    nb["cells"][5]["metadata"]["execution"] = fast
    before = time_estimate._seconds(nb["cells"][0])
    assert drop_timestamps(nb) == 2
    assert nb["cells"][0]["metadata"] == {"run_seconds": 42.3}  # the old one replaced
    assert "run_seconds" not in nb["cells"][5]["metadata"]
    assert time_estimate._seconds(nb["cells"][0]) == pytest.approx(before, abs=0.05) == 42.34
