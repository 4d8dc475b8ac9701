"""How long `nbgrader autograde` takes for a class, with every answer graded in a sandbox.

    python benchmarks/grading.py [--students 3] [--json benchmarks/results/grading_cpu.json]

Builds the whole course (notebooks 01-08) as `make student GRADE_PRACTICE=1` would, in a
temporary folder (every autograded exercise graded: the slowest case), submits the instructor
versions (every answer right) for ``--students`` students, runs one `nbgrader autograde "*"`
and times it. Reports seconds per submitted notebook and per student (eight notebooks), and the
time for a class of 80 at that rate, with the machine: measured, not modelled (the rate is one
run's, on this machine, with its cores; a busy machine is slower). Every submission must score
full marks, or the figure is refused.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import json_arg, run_main, stamp, write_report

from convs2s.system.arguments import OneLineParser

ROOT = Path(__file__).resolve().parents[1]
#: The notebooks whose exercises are timed: 09's project is graded on a trained model handed
#: in (tests/coursework/test_project_grading.py), which the instructor version does not hold.
EXERCISE_NOTEBOOKS = [f"{n:02d}" for n in range(1, 9)]
CLASS_SIZE = 80


def _cpu() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown CPU"


def _nbgrader(*args: str, cwd: Path) -> None:
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}"}
    proc = subprocess.run([sys.executable, "-m", "nbgrader", *args, "--log-level=WARN"],
                          cwd=cwd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"nbgrader {args[0]} failed: {proc.stderr.strip()[-400:]}")


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--students", type=int, default=3, help="submissions per assignment")
    parser.add_argument("--json", type=json_arg, help="also write the results as JSON here")
    args = parser.parse_args(argv)
    if not 1 <= args.students <= 200:
        parser.error(f"--students {args.students}: give 1 to 200")
    from nbgrader.api import Gradebook

    with tempfile.TemporaryDirectory(prefix="convs2s-grading-bench-") as tmp:
        course = Path(tmp) / "coursework"
        course.mkdir()
        for name in ("nbgrader_config.py", "sandbox_grading.py"):
            shutil.copy(ROOT / "coursework" / name, course / name)
        shutil.copytree(ROOT / "coursework" / "hidden", course / "hidden")
        subprocess.run([sys.executable, "-m", "tools.coursework", "--out", str(course / "source"),
                        "--hidden", str(course / "hidden"), "--grade-practice",
                        "--only", *EXERCISE_NOTEBOOKS], cwd=ROOT, check=True, capture_output=True)
        _nbgrader("generate_assignment", "*", "--force", cwd=course)
        assignments = sorted(p.name for p in (course / "source").iterdir() if p.is_dir())
        students = [f"student{n:03d}" for n in range(args.students)]
        for student in students:
            for name in assignments:
                dest = course / "submitted" / student / name
                dest.mkdir(parents=True)
                shutil.copy(course / "source" / name / f"{name}.ipynb", dest / f"{name}.ipynb")
        started = time.perf_counter()
        _nbgrader("autograde", "*", "--force", cwd=course)
        seconds = time.perf_counter() - started
        with Gradebook(f"sqlite:///{course / 'gradebook.db'}", course_id="convs2s") as gb:
            short = [(s, a) for s in students for a in assignments
                     if gb.find_submission(a, s).code_score
                     != gb.find_submission(a, s).max_code_score]
        with open(course / "grading.json", encoding="utf-8") as f:
            exercises = sum(len(a["exercises"]) for a in json.load(f)["assignments"].values())
    if short:
        raise ValueError(f"{len(short)} submissions of right answers did not score full marks "
                         f"(first: {short[0]}): no figure")
    notebooks = len(students) * len(assignments)
    per_notebook = seconds / notebooks
    per_student = per_notebook * len(assignments)
    report = stamp({
        "students": len(students), "assignments": len(assignments),
        "autograded_exercises_per_student": exercises, "seconds": round(seconds, 1),
        "seconds_per_notebook": round(per_notebook, 2),
        "seconds_per_student": round(per_student, 1),
        f"class_of_{CLASS_SIZE}_minutes": round(per_student * CLASS_SIZE / 60, 1),
        "cores": len(os.sched_getaffinity(0)), "cpu": _cpu(),
    })
    print(f"{notebooks} notebooks ({len(students)} students x {len(assignments)} assignments, "
          f"{exercises} sandboxed exercises each student) in {seconds:.0f} s: "
          f"{per_notebook:.1f} s a notebook, {per_student:.0f} s a student; a class of "
          f"{CLASS_SIZE}: {per_student * CLASS_SIZE / 60:.0f} min on {report['cores']} cores "
          f"({report['cpu']})")
    write_report(args.json, report)
    return 0


if __name__ == "__main__":
    sys.exit(run_main(main))
