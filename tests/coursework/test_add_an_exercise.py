"""Adding an exercise takes the three steps of coursework/README.md's "Adding your own exercise",
and a real ``nbgrader autograde`` then grades it: followed here for the README's own example,
``my_relu``, in a copy of the course.

The copy: the package (``src/convs2s``), notebook 01 and the hidden tests, in a temporary folder,
with a Python whose ``convs2s`` is the copied package (a virtual environment whose path file puts
the copy before this environment's site-packages), so that the grader and its sandbox import the
copy with the new declaration. The steps: the exercise's four cells added to the notebook (its
kind and points in the task cell's metadata, as the README says), the README's declaration
appended to ``checks/nb01.py``, the README's hidden test and samples appended to
``hidden/01.py``. Then ``--check-hidden`` passes, the builder writes the assignment, and three
students (a right answer, a wrong one, one that calls ``F.relu``) are autograded: only the right
one scores. These run the real sandbox: never skipped in CI.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_support import needs_sandbox

ROOT = Path(__file__).resolve().parents[2]
NAME = "01_glu_and_padding"

pytestmark = [needs_sandbox, pytest.mark.slow]


def _readme_example() -> tuple[str, str]:
    """The two Python blocks of the README's example: the declaration, the hidden test."""
    text = (ROOT / "coursework" / "README.md").read_text(encoding="utf-8")
    section = text[text.index("## Adding your own exercise"):text.index("## Writing a hidden test")]
    blocks = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    assert len(blocks) == 2, "the README's example has a declaration and a hidden test"
    return blocks[0], blocks[1]


def _cell(cell_type: str, source: str, convs2s: dict) -> dict:
    cell = {"cell_type": cell_type, "metadata": {"convs2s": convs2s}, "source": source}
    if cell_type == "code":
        cell.update(execution_count=None, outputs=[])
    return cell


def _add_cells(notebook: Path) -> None:
    """Step 1: the task, answer, check and solution cells, after the notebook's last exercise."""
    nb = json.loads(notebook.read_text(encoding="utf-8"))
    last = max(i for i, c in enumerate(nb["cells"])
               if c.get("metadata", {}).get("convs2s", {}).get("exercise"))
    number = sum(c.get("metadata", {}).get("convs2s", {}).get("role") == "task"
                 for c in nb["cells"]) + 1
    solution = "#@title Solution\ndef my_relu(x):\n    return x.clamp(min=0)\n\n\n" \
               "checks.my_relu(my_relu)"
    cells = [
        _cell("markdown", f"### Exercise {number} (implement): ReLU by hand\nWrite `my_relu(x)`, "
              "which keeps the positive values of `x` and sets the others to 0, **without** "
              "calling `F.relu`.",
              {"exercise": "my_relu", "kind": "implement", "points": 1, "role": "task"}),
        _cell("code", "def my_relu(x):\n    raise NotImplementedError()",
              {"exercise": "my_relu", "role": "answer"}),
        _cell("code", "checks.my_relu(my_relu)", {"exercise": "my_relu", "role": "check"}),
        _cell("code", solution, {"exercise": "my_relu", "role": "solution"}),
    ]
    cells[3]["metadata"].update(cellView="form", jupyter={"source_hidden": True})
    nb["cells"][last + 1:last + 1] = cells
    notebook.write_text(json.dumps(nb, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")


def _python_with(src: Path, folder: Path) -> Path:
    """A Python whose ``convs2s`` is ``src/convs2s``, everything else from this environment."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(folder)], check=True)
    site = next((folder / "lib").glob("python3*/site-packages"))
    here = [p for p in sys.path if p.endswith("site-packages") and Path(p).is_dir()]
    (site / "course_copy.pth").write_text("\n".join([str(src), *here]) + "\n")
    return folder / "bin" / "python"


def _run(python: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    path = os.pathsep.join([str(python.parent), str(Path(sys.executable).parent),
                            os.environ["PATH"]])  # the copy's Python, then this env's tools
    env = {**os.environ, "PATH": path}
    return subprocess.run([str(python), *args], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=1800)


@pytest.fixture(scope="module")
def copy(tmp_path_factory) -> dict[str, Path]:
    """The course copy after the README's three steps, and its Python."""
    tmp = tmp_path_factory.mktemp("added")
    shutil.copytree(ROOT / "src" / "convs2s", tmp / "src" / "convs2s",
                    ignore=shutil.ignore_patterns("__pycache__"))
    (tmp / "notebooks").mkdir()
    shutil.copy(ROOT / "notebooks" / f"{NAME}.ipynb", tmp / "notebooks")
    course = tmp / "coursework"
    course.mkdir()
    for name in ("nbgrader_config.py", "sandbox_grading.py"):
        shutil.copy(ROOT / "coursework" / name, course / name)
    shutil.copytree(ROOT / "coursework" / "hidden", course / "hidden",
                    ignore=shutil.ignore_patterns("__pycache__"))
    declaration, hidden_test = _readme_example()
    _add_cells(tmp / "notebooks" / f"{NAME}.ipynb")  # step 1
    with (tmp / "src" / "convs2s" / "course" / "checks" / "nb01.py").open("a") as f:
        f.write("\n\n" + declaration)  # step 2
    with (course / "hidden" / "01.py").open("a") as f:
        f.write("\n\n" + hidden_test)  # step 3
    python = _python_with(tmp / "src", tmp / "venv")
    return {"tmp": tmp, "course": course, "python": python}


def test_the_copy_imports_the_new_declaration(copy):
    proc = _run(copy["python"], "-I", "-c", "from convs2s.course import checks; "
                "print(checks.EXERCISES['my_relu'].shortcuts[0].label)", cwd=copy["tmp"])
    assert proc.stdout.strip() == "F.relu", proc.stderr[-2000:]


def test_check_hidden_accepts_the_added_exercise_and_its_samples(copy):
    proc = _run(copy["python"], "-m", "tools.coursework", "--check-hidden", "--notebooks",
                str(copy["tmp"] / "notebooks"), "--hidden", str(copy["course"] / "hidden"),
                "--only", "01", cwd=ROOT)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    assert "my_relu" in proc.stdout


def _submit(course: Path, student: str, answer: str) -> None:
    nb = json.loads((course / "release" / NAME / f"{NAME}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if cell.get("metadata", {}).get("nbgrader", {}).get("grade_id") == "my_relu":
            cell["source"] = answer
    dest = course / "submitted" / student / NAME
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"{NAME}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


def test_autograde_scores_a_right_answer_and_refuses_a_wrong_one_and_a_shortcut(copy):
    course, python = copy["course"], copy["python"]
    proc = _run(python, "-m", "tools.coursework", "--out", str(course / "source"), "--notebooks",
                str(copy["tmp"] / "notebooks"), "--hidden", str(course / "hidden"), "--only",
                "01", "--public", "--grade-practice", cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    for args in (["generate_assignment", NAME, "--force"], ):
        proc = _run(python, "-m", "nbgrader", *args, cwd=course)
        assert proc.returncode == 0, proc.stderr[-3000:]
    answers = {"right": "def my_relu(x):\n    return torch.where(x > 0, x, torch.zeros_like(x))",
               "wrong": "def my_relu(x):\n    return x.abs()",
               "shortcut": "relu = F.relu\n\ndef my_relu(x):\n    return relu(x)"}
    for student, answer in answers.items():
        _submit(course, student, answer)
    proc = _run(python, "-m", "nbgrader", "autograde", NAME, "--force", cwd=course)
    assert proc.returncode == 0, proc.stderr[-3000:]

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="convs2s") as gb:
        scores = {s: gb.find_grade("my_relu_tests", NAME, NAME, s).score for s in answers}
    assert scores == {"right": 1.0, "wrong": 0.0, "shortcut": 0.0}, scores
