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
