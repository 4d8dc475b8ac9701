"""Every notebook's time estimate comes from one stated method (tools/time_estimate.py, the
README's "How long the course takes"), and the README's table and the website's total agree
with the notebooks."""

import json

import pytest

from tools import time_estimate as te
from tools.site import course_time, lesson_minutes, read_lesson

NOTEBOOKS = te.notebooks()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name[:2])
def test_each_notebooks_estimated_time_line_is_what_the_method_gives(path):
    est = te.estimate(path)
    lesson = read_lesson(path)
    assert lesson.time.strip().startswith(te.sentence(est)), \
        f"run python -m tools.time_estimate --write ({path.name})"
    assert lesson_minutes(lesson.time) == est.main.minutes  # what the website adds up


def test_the_readme_table_is_the_method_s_and_the_site_total_is_its_total():
    estimates = [te.estimate(p) for p in NOTEBOOKS]
    readme = te.README.read_text(encoding="utf-8")
    block = readme[readme.index(te.BEGIN) + len(te.BEGIN):readme.index(te.END)].strip()
    assert block == te.table(estimates), "run python -m tools.time_estimate --write"
    total = sum(e.main.minutes for e in estimates)
    assert course_time([read_lesson(p) for p in NOTEBOOKS]).startswith(
        f"about {total // 60} h {total % 60:02d} min")


def md(text):
    return {"cell_type": "markdown", "metadata": {}, "source": text}


def made_up_notebook(tmp_path, cells):
    """A notebook of ``cells`` written to tmp_path (its name numbered like the course's)."""
    path = tmp_path / "99_made_up.ipynb"
    path.write_text(json.dumps({"cells": cells, "metadata": {}, "nbformat": 4,
                                "nbformat_minor": 5}))
    return path


def test_the_method_on_a_made_up_notebook(tmp_path):
    def code(text, seconds=0.0, **meta):
        ex = {"iopub.execute_input": "2026-01-01T00:00:00Z",
              "shell.execute_reply": f"2026-01-01T00:{int(seconds) // 60:02d}:"
                                     f"{int(seconds) % 60:02d}Z"}
        return {"cell_type": "code", "metadata": {"execution": ex, **meta}, "outputs": [],
                "execution_count": 1, "source": text}

    cells = [md("# 99 · Title\n\n**Estimated time:** soon.\n\n" + "word " * 290),
             code("x = 1\n\ny = 2\n" * 20, seconds=125),  # 40 lines; waited for: 125 s
             code("z = 3", seconds=5),  # too short to wait for
             md("### Exercise 1 (derive): a thing"),
             code("#@title Solution\n" + "a = 1\n" * 100, convs2s={"role": "solution"}),
             md("## 2. Deep dive (optional): more\n\n" + "word " * 300),
             code("w = 1\n" * 20, seconds=61),
             md("## Summary\n\nshort.")]
    path = made_up_notebook(tmp_path, cells)
    est = te.estimate(path)
    main, deep = est.main, est.deep_dive
    assert main.exercises == ("derive",) and deep.exercises == ()
    assert (main.reading, main.code, main.exercise_minutes, main.running) == (3, 3, 12, 3)
    assert main.minutes == 25 and deep.minutes == 10  # 21 -> 25; 3 + 1 + 2 = 6 -> 10
    assert te.sentence(est).startswith("about 25 minutes: 3 of reading, 3 of reading and "
                                       "running code, 12 for the 1 exercise and 3 of waiting")
    assert "plus about 10 for the optional deep dive" in te.sentence(est)
    assert te.write(path, est) and not te.write(path, est)  # written once, then unchanged
    assert "**Estimated time:** about 25 minutes" in path.read_text()


def test_an_exercise_in_a_deep_dive_is_graded_so_it_counts_in_the_main_path(tmp_path):
    """Notebook 02's Exercise 4 sits in its optional deep dive but is graded like the
    others; the estimate counts it with them ("the 4 exercises"), the reading stays the dive's."""
    cells = [md("# 99 · Title\n\n**Estimated time:** soon.\n\n" + "word " * 140),
             md("### Exercise 1 (predict): a thing"),
             md("## 2. Deep dive (optional): more\n\n" + "word " * 290),
             md("### Exercise 2 (derive): another thing"),
             md("## Summary\n\nshort.")]
    path = made_up_notebook(tmp_path, cells)
    est = te.estimate(path)
    assert est.main.exercises == ("predict", "derive") and est.deep_dive.exercises == ()
    assert est.main.exercise_minutes == 20
    assert est.deep_dive.words == 6 + 290 + 6  # its heading, its text and the exercise's
    assert "20 for the 2 exercises" in te.sentence(est)


def test_an_ungraded_warm_up_exercise_counts_like_a_graded_one(tmp_path):
    """Notebook 00's warm-ups open with a bold "**Exercise N (kind).**", not a heading (they
    are not coursework tasks); a learner still spends an exercise's minutes on each. A bold
    mention of exercises in running text is not one."""
    cells = [md("# 99 · Title\n\n**Estimated time:** soon.\n\n**Exercises:** two, below."),
             md("**Exercise 1 (predict, then measure).** Before you run anything, write it."),
             md("**Exercise 2 (derive).** Compute it."),
             md("## Summary\n\nshort.")]
    path = made_up_notebook(tmp_path, cells)
    est = te.estimate(path)
    assert est.main.exercises == ("predict", "derive") and est.main.exercise_minutes == 20
