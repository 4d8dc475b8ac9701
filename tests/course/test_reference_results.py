"""The reference reports notebooks 05 and 06 compare with ship inside the package
(convs2s.course.reference), equal to the benchmarks' own, and no notebook looks for the
repository's benchmarks/ folder (on Colab there is none)."""

import json
from pathlib import Path

from convs2s.course import reference
from tools import ship_results

ROOT = Path(__file__).resolve().parents[2]


def test_the_shipped_reports_equal_the_benchmarks_reports():
    wanted = ship_results.wanted()
    assert {p.name for p in wanted} == {p.name for p in reference.RESULTS_DIR.glob("*.json")}, \
        "run python -m tools.ship_results"
    for report in wanted:
        assert (reference.RESULTS_DIR / report.name).read_bytes() == report.read_bytes(), \
            f"{report.name} differs from its benchmark report: run python -m tools.ship_results"
    for pattern in reference.SHIPPED:
        assert reference.results(pattern), f"no report matches {pattern}"


def test_the_reports_are_read_as_the_notebooks_read_them():
    runs = reference.results("quality_cpu_subword*_de_en.json")
    assert runs and all(r.get("valid_curve") for r in runs)
    assert reference.result("train_choices.json")["rows"]
    assert reference.result("no_such_report.json") is None


def test_ship_copies_changed_reports_and_removes_only_stale_copies(tmp_path):
    reports, out = tmp_path / "reports", tmp_path / "out"
    reports.mkdir()
    (reports / "quality_x.json").write_text('{"a": 1}')
    (reports / "speed_cpu.json").write_text("{}")  # not a report the notebooks read
    assert ship_results.ship(reports, out) == (["quality_x.json"], [])
    assert ship_results.ship(reports, out) == ([], [])
    (out / "notes.txt").write_text("mine")
    (reports / "quality_x.json").unlink()
    assert ship_results.ship(reports, out) == ([], ["quality_x.json"])
    assert (out / "notes.txt").read_text() == "mine"
    assert not (out / "speed_cpu.json").exists()


def test_no_notebook_looks_for_the_repositorys_benchmarks():
    for path in sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb")):
        for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]:
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                assert '"benchmarks"' not in source and "../benchmarks" not in source, \
                    f"{path.name}: {source[:120]}"
