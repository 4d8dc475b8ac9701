"""nbgrader configuration of the ConvS2S coursework. Run nbgrader from this folder (coursework/).

Layout (nbgrader's defaults, relative to this folder):
    source/<assignment>/<assignment>.ipynb     instructor versions, written by `make student`
    release/<assignment>/<assignment>.ipynb    student versions (nbgrader generate_assignment)
    submitted/<student>/<assignment>/           collected submissions
    autograded/, feedback/                      written by autograde / generate_feedback
    gradebook.db                                the gradebook (sqlite)
    grading.json                                this class's values per exercise (make student)
    variant-secret                              the class's secret the values come from
See README.md in this folder.
"""

c = get_config()  # noqa: F821 (nbgrader provides get_config)

c.CourseDirectory.course_id = "convs2s"
# Where `nbgrader release_assignment` / `collect` exchange files on a shared JupyterHub;
# change it to your hub's exchange folder (or use an LMS / the nbgrader ngshare exchange).
c.Exchange.root = "/srv/nbgrader/exchange"

# Autograde never runs a submitted notebook in a kernel here: nbgrader's Execute step is
# replaced by sandbox_grading.py (beside this file), which grades each autograded cell's answer
# in a bubblewrap sandbox and decides the verdict outside it. Without a sandbox, autograde stops
# with one line saying what to install.
import os as _os  # noqa: E402
import sys as _sys  # noqa: E402

_sys.path.insert(0, _os.path.dirname(_os.path.abspath(__file__)))
from nbgrader.converters.autograde import Autograde  # noqa: E402
from sandbox_grading import GradeInSandbox, refuse_without_sandbox  # noqa: E402

if _sys.argv[1:2] == ["autograde"]:  # `nbgrader autograde`: one line, before any submission
    refuse_without_sandbox()

c.Autograde.autograde_preprocessors = [
    GradeInSandbox if step.__name__ == "Execute" else step
    for step in Autograde.class_traits()["autograde_preprocessors"].default()]
# seconds (wall clock and CPU) one exercise's sandbox may run; an endless loop costs this much
c.GradeInSandbox.timeout = 60
