"""Quick mode's times are stated as measured (issue 65): the README and notebook 04 quote the
measured records (benchmarks/results/ci_time.json: every notebook under nbval in quick mode;
quality_quick.json: the quick preset's training), never "seconds" without a measurement."""

from __future__ import annotations

import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"


def _notebook_seconds() -> dict[str, float]:
    record = json.loads((RESULTS / "ci_time.json").read_text(encoding="utf-8"))
    return {row["what"][:2]: row["seconds"] for row in record["rows"]
            if row["what"].endswith(".ipynb")}


def _first_cell(prefix: str) -> str:
    path = next((ROOT / "notebooks").glob(f"{prefix}_*.ipynb"))
    source = json.loads(path.read_text(encoding="utf-8"))["cells"][0]["source"]
    return source if isinstance(source, str) else "".join(source)


def test_the_readme_quotes_the_measured_quick_mode_times():
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    seconds = _notebook_seconds()
    first, last = min(seconds), max(seconds)  # the notebooks the record holds ("00", "08")
    assert (f"ran each of notebooks {first} to {last} in {min(seconds.values()):.0f} to "
            f"{max(seconds.values()):.0f} s under nbval") in readme
    quick = json.loads((RESULTS / "quality_quick.json").read_text(encoding="utf-8"))
    assert f"{quick['train_seconds']:.0f} s of training on a quiet 2-core CPU" in readme
    assert "in seconds to a minute" not in readme and "# seconds:" not in readme


def test_notebook_04_quotes_its_measured_quick_mode_time():
    text = " ".join(_first_cell("04").split())
    assert f"ran in {_notebook_seconds()['04']:.0f} s under nbval" in text
    assert "in seconds." not in text


def test_notebook_07_quotes_its_measured_quick_mode_time():
    text = " ".join(_first_cell("07").split())
    assert f"ran in {_notebook_seconds()['07']:.0f} s under nbval" in text
    assert "in about a minute" not in text
