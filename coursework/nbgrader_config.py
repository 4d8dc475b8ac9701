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
    # Autograde copies no file of a submission but its notebooks into autograded/ (nbgrader's
    # copy has no size limit: a 10 GB file would be written out again). The project's final.pt
    # is read, size first, from submitted/ by the grading step itself.
    c.CourseDirectory.ignore = ["*"]

c.Autograde.autograde_preprocessors = [
    GradeInSandbox if step.__name__ == "Execute" else step
    for step in Autograde.class_traits()["autograde_preprocessors"].default()]
# seconds (wall clock and CPU) one exercise's sandbox may run; an endless loop costs this much
c.GradeInSandbox.timeout = 60

# The project (assignment 09, coursework/README.md "The project"): your test files for each
# direction a class may train, [source, reference], one sentence a line (plain or .gz), relative
# to this folder or absolute; they are read here and never released. For example Multi30k's
# test_2017_flickr or test_2018_flickr files of that direction, which the students' copy of the
# data does not hold.
c.GradeInSandbox.project_test_files = {
    # "fr-en": ["/srv/convs2s/test_2017_flickr.fr", "/srv/convs2s/test_2017_flickr.en"],
}
# Bands of your own, replacing hidden/09.py's (drawn from its COURSE_BLEU): by direction, a list
# of [lowest test BLEU, share of the project's points]. Empty: hidden/09.py's.
c.GradeInSandbox.project_bands = {}
# Seconds one submission may take to load its final.pt and translate the test sentences (its
# sandbox's wall clock and CPU time); a decoder that never stops costs this much, then 0 points.
c.GradeInSandbox.project_seconds = 900
