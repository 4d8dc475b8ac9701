"""A predict exercise's check never shows the value it grades before the prediction holds: a
wrong try is told only that it did not hold, with a hint; a right one sees the measurement; a
self-learner may ask for it with ``checks.show_me``. A graded copy (the nbgrader release, whose
setup cell calls ``checks.graded_copy()``) turns ``show_me`` and ``hint`` off, and its predict
checks only record the answer (grading decides), whatever the answer."""

from pathlib import Path

import pytest

from convs2s.course import checks
from convs2s.course.checks import nb01, nb02, nb04, nb06, nb07, nb08
from tools import coursework

NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"


@pytest.fixture(scope="module")
def graded():
    """exercise -> (a wrong prediction, the right one, texts that would give the value away)."""
    moves = nb01._measured_moves()
    variance = nb02.measured_variance()
    context = nb04._measured_scaled_variance(nb04.PREDICT_WEIGHTS)
    bleu = nb06._halved_outputs_bleu().score
    steps = nb07._measured_training_steps()
    crossover = nb08._crossover()[0]
    return {
        "same_padding_moves": ([7, 8, 9], moves, [str(moves)]),
        "residual_variance": (1.0, variance, [f"{variance:.3g}", f"{variance:.0f}"]),
        "scaled_context_variance": (1.0, context, [f"{context:.3f}", f"{context:.2f}"]),
        "brevity_prediction": (50, bleu, [f"{bleu:.2f}", f"{bleu:.1f}"]),
        "training_steps": ({"GRU + attention": [10, 20, 40], "ConvS2S": [6, 6, 6]}, steps,
                           [str(steps["GRU + attention"])]),
        "attention_vs_conv": (100, crossover, [f"{crossover:g}", str(round(crossover))]),
    }


PREDICT = ["same_padding_moves", "residual_variance", "scaled_context_variance",
           "brevity_prediction", "training_steps", "attention_vs_conv"]
#: Predict exercises graded on their form only (practice: the answer depends on the machine);
#: their checks are tested in test_checks_speed_crossover.py.
PRACTICE_PREDICT = ["speed_crossover"]


def test_every_predict_exercise_of_the_notebooks_is_listed_here_and_has_a_measurement():
    kinds = {ex.id: ex.kind for path in sorted(NOTEBOOKS.glob("0[1-8]_*.ipynb"))
             for ex in coursework.read_notebook(path).exercises}
    assert sorted(name for name, kind in kinds.items() if kind == "predict") == sorted(
        PREDICT + PRACTICE_PREDICT)
    shown = [name for name, ex in checks.EXERCISES.items() if ex.show is not None]
    assert sorted(shown) == sorted(PREDICT + PRACTICE_PREDICT)


@pytest.mark.parametrize("name", PREDICT)
def test_wrong_tries_are_told_only_that_the_prediction_did_not_hold(name, graded, capsys):
    wrong, _, giveaways = graded[name]
    said = ""
    for _ in range(3):  # the nudge, then the closer hint too
        with pytest.raises(AssertionError) as e:
            getattr(checks, name)(wrong)
        said += str(e.value) + capsys.readouterr().out
    assert "did not hold" in said and "closer hint" in said
    for text in giveaways:
        assert text not in said, f"{name} showed {text} on a wrong try"


@pytest.mark.parametrize("name", PREDICT)
def test_a_right_prediction_is_shown_the_measurement(name, graded, capsys):
    _, right, giveaways = graded[name]
    assert getattr(checks, name)(right) is True
    out = capsys.readouterr().out
    assert "your prediction held" in out and any(text in out for text in giveaways)


@pytest.mark.parametrize("name", PREDICT)
def test_show_me_gives_a_self_learner_the_measurement(name, graded, capsys):
    checks.show_me(name)
    out = capsys.readouterr().out
    assert out.startswith(f"the measurement behind {name}")
    assert any(text in out for text in graded[name][2])


def test_show_me_of_an_unknown_name_lists_the_predict_exercises(capsys):
    checks.show_me("my_glu")
    out = capsys.readouterr().out
    assert out.startswith("… no predict exercise with a measurement is called 'my_glu'")
    assert "brevity_prediction" in out


@pytest.mark.parametrize("name", PREDICT)
def test_a_graded_copy_only_records_a_prediction(name, graded, capsys):
    """In a graded copy a predict check is no oracle: a right and a wrong prediction get the same
    words ("recorded"), and no measurement; show_me and hint are off."""
    checks.graded_copy(records=[name])
    assert checks.is_graded()
    capsys.readouterr()
    wrong, right, giveaways = graded[name]
    checks.show_me(name)
    checks.hint(name)
    said = capsys.readouterr().out
    assert "show_me is off in a graded copy" in said and "checks.hint is off" in said
    told = []
    for answer in (wrong, right, wrong):
        assert getattr(checks, name)(answer) is True
        told.append(capsys.readouterr().out)
    assert told[0] == told[1] == told[2] and "answer recorded" in told[0]
    for text in giveaways:
        assert text not in "".join(told)


@pytest.mark.parametrize("name", PREDICT)
def test_a_graded_copy_still_refuses_an_answer_of_the_wrong_form(name, capsys):
    checks.graded_copy(records=[name])
    with pytest.raises(AssertionError, match="should be"):
        getattr(checks, name)("a string")
    assert "hint: " in capsys.readouterr().out


def test_the_assignment_setup_cell_makes_a_graded_copy():
    nb = coursework.read_notebook(NOTEBOOKS / "01_glu_and_padding.ipynb")
    hidden = coursework.read_hidden(Path(__file__).resolve().parents[2] / "coursework" / "hidden"
                                    / "01.py")
    setup = coursework.build_assignment(nb, hidden)[0]["cells"][1]
    source = "".join(setup["source"])
    assert source.rstrip().endswith(
        "checks.graded_copy(records=['same_padding_moves'])")  # 01's one predict exercise
    assert not checks.is_graded()
    exec(compile(source, "setup", "exec"), {})  # noqa: S102 - the tool's own cell
    assert checks.is_graded()


def test_measurements_that_answer_an_exercise_are_folded_and_never_in_an_assignment():
    import json

    reveal = {}
    for path in sorted(NOTEBOOKS.glob("0[0-8]_*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        found = [c for c in cells if c.get("metadata", {}).get("convs2s", {}).get("role")
                 == coursework.REVEAL]
        for c in found:
            assert c["cell_type"] == "code" and c["metadata"]["jupyter"]["outputs_hidden"]
        reveal[path.name[:2]] = ["".join(c["source"]) for c in found]
        nb = coursework.read_notebook(path)
        if nb.exercises:
            hidden = coursework.read_hidden(path.parents[1] / "coursework" / "hidden"
                                            / f"{path.name[:2]}.py")
            assignment = json.dumps(coursework.build_assignment(nb, hidden))
            for source in reveal[path.name[:2]]:
                assert json.dumps(source)[1:-1][:80] not in assignment
    # the evidence cells the expert review listed
    assert {k: len(v) for k, v in reveal.items() if v} == {"01": 2, "02": 2, "05": 1, "07": 6,
                                                           "08": 1}
