"""coursework/README.md says what the notebooks hold: its table lists every exercise
of notebooks 01–08 with its number, id and kind, and its count is the notebooks' count."""

import re
from pathlib import Path

from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")


def _exercises():
    found = []
    for path in sorted((ROOT / "notebooks").glob("0[1-8]_*.ipynb")):
        for ex in coursework.read_notebook(path).exercises:
            found.append((path.name[:2], ex.number, ex.id, ex.kind))
    return found


def test_the_table_lists_every_exercise_with_its_number_id_and_kind():
    rows = re.findall(r"^\| (0[1-8]) \| (\d) \| `(\w+)` \| (\w+) \|", README, re.MULTILINE)
    assert [(nb, int(n), ex_id, kind) for nb, n, ex_id, kind in rows] == _exercises()


def test_the_count_and_the_range_of_exercises_per_notebook_are_true():
    exercises = _exercises()
    per_notebook = {}
    for nb, *_ in exercises:
        per_notebook[nb] = per_notebook.get(nb, 0) + 1
    assert set(per_notebook.values()) == {4, 5}
    assert f"four or five exercises ({len(exercises)} in all)" in README
    assert "stored, for now, as its previous version" not in README


def test_every_path_the_table_keeps_out_of_git_is_ignored_by_git():
    """The table of coursework/'s files marks what `make student` and grading write as not in
    git (the class's secret among them): git must ignore each, or `git add -A` in an
    instructor's fork commits the secret that every variant is drawn from."""
    import subprocess

    rows = [line for line in README.splitlines()
            if line.startswith("| `") and line.rstrip().endswith(("| no |", "| no (generated) |"))]
    paths = [p for row in rows for p in re.findall(r"`([^`]+)`", row.split(" | ")[0])]
    assert {"grading.json", "variant-secret", "grading-flags.jsonl", "gradebook.db"} <= set(paths)
    for path in paths:
        probe = "coursework/" + path.replace("<assignment>", "01_glu_and_padding").rstrip("/")
        if path.endswith("/"):
            probe += "/anything"
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", probe], cwd=ROOT)
        assert ignored.returncode == 0, f"{probe} is not ignored by git (.gitignore)"
