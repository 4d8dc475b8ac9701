"""The hidden test of notebook 09, the project: how a submitted ``final.pt`` is graded.

Grading (``coursework/sandbox_grading.py``, through :func:`convs2s.course.project.grade`)
copies the file into a sandbox, loads it there through the course's checkpoint guard,
translates the source side of *your* test files (``c.GradeInSandbox.project_test_files`` in
``nbgrader_config.py``: never in the release) and scores the translations outside the sandbox
with sacreBLEU (13a, beam 5, the file's own length penalty). This file says what the points
are: the project's points times the share of the highest band the score reaches.

The bands are drawn from one figure per direction, :data:`COURSE_BLEU`: what the course's own
run of notebook 09 at the project's budget scores on the test files. Full marks at that figure,
partial marks below it (:data:`BAND_SHARES`). ``c.GradeInSandbox.project_bands`` in
``nbgrader_config.py`` replaces them with bands of your own (coursework/README.md, "The
project").
"""

from convs2s.course.project import DEFAULT_DIRECTION, Band, ProjectTest

#: The course's test sacreBLEU (13a, beam 5) at the project's budget, by direction: the figure
#: full marks start at. French→English is the course's own full run of notebook 09 (its stored
#: run: the preset as it is, 20 epochs of the budget's 30, early-stopped; Multi30k test2016,
#: 2026-11-28). The other three are still PROVISIONAL: the 30-minute runs' test2016 figures
#: (benchmarks/RESULTS.md, 2026-11-24: 2 to 3 epochs), lower than a run of the budget scores,
#: so their bands are lenient until the course's full runs of those directions replace them.
#: Grading on other test files (test2017, test2018) scores lower than test2016: set bands of
#: your own for them (coursework/README.md, "The project").
COURSE_BLEU = {"fr-en": 52.53, "en-fr": 40.00, "cs-en": 32.37, "en-cs": 21.42}

#: (share of the course's figure reached, share of the project's points): full marks at the
#: figure, then 80 %, 60 %, 40 % and 20 % of the points at 95 %, 85 %, 70 % and 50 % of it;
#: below half of it, 0.
BAND_SHARES = ((1.00, 1.0), (0.95, 0.8), (0.85, 0.6), (0.70, 0.4), (0.50, 0.2))

#: The bands of each direction: Band(lowest test BLEU, share of the points).
DEFAULT_BANDS = {direction: tuple(Band(round(figure * reach, 1), share)
                                  for reach, share in BAND_SHARES)
                 for direction, figure in COURSE_BLEU.items()}


def translator(variant):
    """The project's grading: this class's direction (``variant["direction"]``) and its
    bands."""
    direction = variant.get("direction", DEFAULT_DIRECTION)
    return ProjectTest(direction, DEFAULT_BANDS[direction])
