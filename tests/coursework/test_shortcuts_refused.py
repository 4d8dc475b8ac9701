"""A derive or implement exercise may not call the package's (or PyTorch's) own answer to it:
each listed shortcut is refused by the exercise's check and by its hidden test, also
when the learner's code catches the refusal, and the refused functions work again afterwards."""

import math

import pytest
import torch
import torch.nn.functional as F
from exercise_support import hidden

from convs2s.course import checks
from convs2s.course.attention_maps import attention_entropy
from convs2s.course.baselines import rnn_parameter_count
from convs2s.course.checks import _core
from convs2s.course.receptive_field import conv_path_length, receptive_field, rnn_path_length
from convs2s.data import Vocab
from convs2s.model.layers import ConvGLUBlock
from convs2s.model.variants import separable_conv1d_parameters


def _gru_counted(i, h):
    return sum(p.numel() for p in torch.nn.GRUCell(i, h).parameters())


def _itos(token_lists, min_freq, specials=("<unk>", "<pad>", "<bos>", "<eos>")):
    return Vocab.build(token_lists, min_freq=min_freq, specials=specials).itos


def _saving(c_in, c_out, k):
    return (c_in * c_out * k + c_out) / (c_in * k + c_in * c_out + c_out)


#: exercise -> (the notebook of its hidden test, the answers that take the shortcut)
SHORTCUT_ANSWERS = {
    "my_glu": ("01", (lambda h, dim: F.glu(h, dim),)),
    "my_receptive_field": ("01", (lambda k, n_layers: receptive_field(k, n_layers),)),
    "block_parameters": ("02", (lambda d, k: sum(
        p.numel() for p in ConvGLUBlock(d, k, padding="same").parameters()),)),
    "causal_conv1d": ("03", (lambda x, w, b: F.conv1d(F.pad(x, (w.size(-1) - 1, 0)), w, b),)),
    "cache_floats": ("03", (lambda n, k, h, steps: torch.nn.Linear(1, 1) and n * (k - 1) * h,)),
    "row_entropy": ("04", (lambda a: attention_entropy(a),)),
    "build_itos": ("05", (_itos,)),
    "path_length": ("07", (conv_path_length, rnn_path_length)),
    "baseline_parameters": ("07", (_gru_counted, lambda config: rnn_parameter_count(**config))),
    "separable_params": ("08", (
        lambda c_in, c_out, k, bias=True: separable_conv1d_parameters(c_in, c_out, k, bias=bias),
        _saving)),
}


def test_every_exercise_with_shortcuts_is_tested_here_and_every_shortcut_resolves():
    assert sorted(SHORTCUT_ANSWERS) == sorted(checks.SHORTCUTS)
    assert set(checks.SHORTCUTS) <= set(checks.EXERCISES)
    for targets in checks.SHORTCUTS.values():
        for target, _label, _why in targets:
            owner, attr = _core._resolve(target)
            assert hasattr(owner, attr), target


@pytest.mark.parametrize("exercise", sorted(SHORTCUT_ANSWERS))
def test_the_check_refuses_the_shortcut(exercise, capsys):
    _, answers = SHORTCUT_ANSWERS[exercise]
    with pytest.raises(AssertionError, match="it called .*; "):
        getattr(checks, exercise)(*answers)
    assert f"✗ {exercise}" in capsys.readouterr().out


@pytest.mark.parametrize("exercise", sorted(SHORTCUT_ANSWERS))
def test_the_hidden_test_refuses_the_shortcut(exercise):
    notebook, answers = SHORTCUT_ANSWERS[exercise]
    with pytest.raises(AssertionError, match="it called .*; "):
        getattr(hidden(notebook), exercise)(*answers)


def test_a_shortcut_whose_refusal_is_caught_is_still_refused(capsys):
    def sneaky(k, n_layers):
        try:
            return receptive_field(k, n_layers)
        except Exception:  # noqa: BLE001 - what a learner might write
            return 1 + n_layers * (k - 1)

    with pytest.raises(AssertionError, match="it called receptive_field.receptive_field"):
        checks.my_receptive_field(sneaky)
    with pytest.raises(AssertionError, match="it called receptive_field.receptive_field"):
        hidden("01").my_receptive_field(sneaky)


def test_the_refused_functions_work_again_afterwards():
    for exercise, (_, answers) in SHORTCUT_ANSWERS.items():
        with pytest.raises(AssertionError):
            getattr(checks, exercise)(*answers)
    assert receptive_field(3, 2) == 5 and conv_path_length(9, 9) == 2 and rnn_path_length(4) == 4
    assert F.glu(torch.ones(1, 2), -1).shape == (1, 1)
    assert _itos([["a", "a"]], 2)[-1] == "a"
    assert _gru_counted(1, 1) == 12 and math.isfinite(float(attention_entropy(torch.eye(2))))
    assert separable_conv1d_parameters(1, 1, 1) == 3


def test_a_refusal_changes_nothing_shared_and_other_threads_run_as_before():
    """A check watches the learner's calls with a profiler on its own thread: F.glu is the same
    function, with the same code, inside the block and after it, and another thread calling it
    meanwhile is not refused."""
    import threading

    from convs2s.course.checks import refusing

    real_glu, real_code = F.glu, F.glu.__code__
    inside, done = threading.Event(), threading.Event()
    elsewhere = []

    def other_thread():
        inside.wait(timeout=60)
        elsewhere.append(F.glu(torch.ones(1, 2), -1).shape)
        done.set()

    thread = threading.Thread(target=other_thread)
    thread.start()
    with refusing("my_glu"):
        assert F.glu is real_glu and F.glu.__code__ is real_code
        inside.set()
        done.wait(timeout=60)
    thread.join(timeout=60)
    assert elsewhere == [(1, 1)]
    with pytest.raises(_core.ShortcutRefused, match="it called F.glu"):
        with refusing("my_glu"):
            glu = F.glu  # an alias made before the call
            glu(torch.ones(1, 2), -1)
    assert F.glu is real_glu and F.glu.__code__ is real_code


def test_no_code_object_of_a_function_is_replaced_anywhere_in_the_package():
    from pathlib import Path

    package = Path(_core.__file__).resolve().parents[2]
    offenders = [str(p) for p in package.rglob("*.py") if ".__code__ =" in p.read_text()
                 or "__code__, " in p.read_text() and "= saved" in p.read_text()]
    assert offenders == []


def test_hint_and_show_me_of_a_value_that_is_not_a_name_say_so_in_one_line(capsys):
    checks.hint([1])
    checks.show_me({"a": 1})
    out = capsys.readouterr().out
    assert out.count("\n") == 2 and "give the exercise's name as a string" in out
