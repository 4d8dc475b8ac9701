"""nbgrader configuration of the ConvS2S coursework. Run nbgrader from this folder (coursework/).

Layout (nbgrader's defaults, relative to this folder):
    source/<assignment>/<assignment>.ipynb     instructor versions, written by `make student`
    release/<assignment>/<assignment>.ipynb    student versions (nbgrader generate_assignment)
    submitted/<student>/<assignment>/           collected submissions
    autograded/, feedback/                      written by autograde / generate_feedback
    gradebook.db                                the gradebook (sqlite)
See README.md in this folder.
"""

c = get_config()  # noqa: F821 (nbgrader provides get_config)

c.CourseDirectory.course_id = "convs2s"
# The exercises take seconds; a generous limit per cell still stops a student's endless loop.
c.Execute.timeout = 300
# Where `nbgrader release_assignment` / `collect` exchange files on a shared JupyterHub;
# change it to your hub's exchange folder (or use an LMS / the nbgrader ngshare exchange).
c.Exchange.root = "/srv/nbgrader/exchange"

# Autograde grades every test cell again in a fresh Python process, from the answer cell's text
# (fresh_process_grading.py, beside this file): what a student's other cells did to the kernel
# cannot change a grade. It runs right after nbgrader's Execute and replaces the test cells'
# outputs with its verdicts; nbgrader then scores them as usual.
import os as _os  # noqa: E402
import sys as _sys  # noqa: E402

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from fresh_process_grading import GradeInFreshProcess  # noqa: E402
from nbgrader.converters.autograde import Autograde  # noqa: E402

_steps = list(Autograde.class_traits()["autograde_preprocessors"].default())
_steps.insert(next(i for i, step in enumerate(_steps) if step.__name__ == "Execute") + 1,
              GradeInFreshProcess)
c.Autograde.autograde_preprocessors = _steps
# seconds one exercise may take in its fresh process
c.GradeInFreshProcess.timeout = 120
