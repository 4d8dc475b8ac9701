"""Checks for notebook 07 · ConvS2S vs an RNN with attention."""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from convs2s.course.checks._core import (
    MODULE_BUILDING,
    Hint,
    Shortcut,
    WrongForm,
    _assert_equal,
    _assert_int,
    _gen,
    _Run,
    _seeded,
    _short_repr,
    _type_name,
    _wrong_kind,
    exercise,
    form_calls,
)

__all__ = ["training_steps", "path_length", "baseline_parameters", "speed_crossover"]

STEPS_GRU = Hint(
    nudge="how many times does the decoder's loop call its GRUCell for n target positions, and "
          "does the backward pass go through each of those calls again?",
    closer="count calls, not time: put a counter on the GRUCell (a forward hook) and run one "
           "forward pass for n = 10. Does the backward pass go through each of those calls again?")
STEPS_CONV = Hint(
    nudge="how many convolution calls does one ConvS2S decoder layer make for a whole "
          "sentence?",
    closer="does the number of convolution calls of one decoder layer depend on the sentence's "
           "length? And how many times does the backward pass go through each call?")
STEPS_FORM = Hint(
    nudge="prediction is a dict with one list of numbers per model",
    closer="print sorted(prediction) and the length of each list: do they match the keys and the "
           "three lengths the task names?")
PATH_CONV = Hint(
    nudge="draw a stack of layers of width k: how many consecutive positions does one output "
          "see after 1, 2 and 3 layers?",
    closer="how many consecutive positions does one output see after L layers of width k? For n = "
           "4 and k = 3, try L = 1, 2, 3: which is the first L that covers both words? Does your "
           "formula give that L for every n, also when n is not a multiple of k - 1?")
PATH_RNN = Hint(
    nudge="how does information from one word reach a word n positions later in a recurrent "
          "network?",
    closer="draw the states between two words n positions apart: how many updates lie between "
           "them?")
CROSSOVER = Hint(
    nudge="at a fixed budget of target tokens per batch, how many sentences share each of the "
          "RNN's sequential steps at 8 tokens, and at 256? And how many positions does one "
          "ConvS2S layer compute at once at each length?",
    closer="a matrix product with few rows leaves parallel units idle, and every sequential "
           "step has a fixed cost of its own: from how many sentences per step down would you "
           "expect the RNN's steps to stop keeping two CPU cores busy?")
CROSSOVER_FORM = Hint(
    nudge="the prediction is one of the sweep's six lengths, written as a whole number",
    closer="print the type of crossover_prediction and its value: is it an int, and is it one "
           "of the six lengths the task lists?")
GRU_PARAMS = Hint(
    nudge="a GRU has three gates: what does each gate multiply, and what does it add?",
    closer="print the names and shapes of torch.nn.GRUCell(3, 5)'s parameters (in a cell of your "
           "own): how many matrices and bias vectors are there, and what are their shapes in terms"
           " of the input and hidden sizes?")
BASELINE = Hint(
    nudge="count each part the task lists on its own, then add them up; compare your total "
          "with the parameters of a small RNNAttentionSeq2Seq counted in PyTorch",
    closer="compare part by part: print the parameter count of each submodule of a small "
           "RNNAttentionSeq2Seq (in a cell of your own) beside your count of the same part. Which "
           "part differs?")

#: The decoder input lengths of the "training steps" exercise.
TRAINING_STEP_LENGTHS = (10, 20, 40)
_MODELS = ("GRU + attention", "ConvS2S")
TRAINING_STEP_LAYERS = 3


def _measured_training_steps(lengths: tuple[int, ...] = TRAINING_STEP_LENGTHS,
                             layers: int = TRAINING_STEP_LAYERS) -> dict[str, list[int]]:
    """Forward + backward calls of the decoder's GRUCell / convolutional blocks (one
    convolution each) in one training step."""
    from convs2s.course.baselines import RNNAttentionSeq2Seq
    from convs2s.course.receptive_field import count_calls
    from convs2s.model.convs2s import ConvS2S
    from convs2s.model.layers import ConvGLUBlock  # one convolution each
    from convs2s.model.loss import sequence_loss

    with _seeded(7):
        rnn = RNNAttentionSeq2Seq(30, 30, emb_dim=8, enc_hid_dim=8, dec_hid_dim=8, dropout=0.0,
                                  max_positions=64, src_pad_idx=1, trg_pad_idx=1)
        conv = ConvS2S(30, 30, emb_dim=8, hid_dim=8, enc_layers=2, dec_layers=layers,
                       dropout=0.0, max_positions=64, src_pad_idx=1, trg_pad_idx=1)
    g = _gen(7)
    measured: dict[str, list[int]] = {name: [] for name in _MODELS}
    for n in lengths:
        src = torch.randint(2, 30, (2, 9), generator=g)  # src = [2, 9]
        trg = torch.randint(2, 30, (2, n + 1), generator=g)  # trg = [2, n + 1]
        for name, model, cell in (("GRU + attention", rnn, nn.GRUCell),
                                  ("ConvS2S", conv, ConvGLUBlock)):

            def step(model=model, src=src, trg=trg):
                logits, _ = model(src, trg[:, :-1])  # logits = [2, n, 30]
                sequence_loss(logits, trg[:, 1:], 1, 0.0).backward()

            calls = count_calls(model.decoder, cell, step)
            measured[name].append(calls["forward"] + calls["backward"])
    return measured


def _training_steps_form(prediction, counts: bool = False) -> None:
    """A dict with one list of len(TRAINING_STEP_LENGTHS) values per model, whole numbers if
    ``counts`` (AssertionError)."""
    lengths = list(TRAINING_STEP_LENGTHS)
    if type(prediction) is not dict:
        raise _wrong_kind("prediction", "a dict with one list per model",
                          _type_name(prediction))
    if not all(type(key) is str for key in prediction) or set(prediction) != set(_MODELS):
        keys = (f"the keys {_short_repr(sorted(prediction))}"
                if all(type(key) is str for key in prediction) else "keys that are not str")
        raise _wrong_kind("prediction", f"a dict with the keys {list(_MODELS)}", keys)
    for name in _MODELS:
        values = prediction[name]
        if type(values) not in (list, tuple) or len(values) != len(lengths):
            got = (f"a {type(values).__name__} of {len(values)}"
                   if type(values) in (list, tuple) else _type_name(values))
            raise _wrong_kind(f"prediction[{name!r}]", f"a list of {len(lengths)} numbers",
                              got)
        if counts:
            for value in values:
                _assert_int(value, f"each count of prediction[{name!r}]")


def _steps_hold(name: str, guesses, measured: list[int]) -> None:
    """One model's predicted counts, whole numbers equal to the measured ones."""
    guessed = [_assert_int(guess, f"prediction[{name!r}]") for guess in guesses]
    if guessed != list(measured):
        raise AssertionError(f"your prediction for {name} did not hold")


def accept_training_steps(prediction, measured: dict[str, list[int]]) -> None:
    """What this exercise accepts (its check and its hidden test alike): the form, then every
    count equal to the measured one; AssertionError otherwise."""
    _training_steps_form(prediction)
    for name in _MODELS:
        _steps_hold(name, prediction[name], measured[name])


def _training_steps_lines() -> list[str]:
    measured = _measured_training_steps()
    return [f"{name:<16} {measured[name]} calls (decoder lengths {list(TRAINING_STEP_LENGTHS)})"
            for name in _MODELS]


@exercise(hint=STEPS_GRU,
          form=lambda prediction: _training_steps_form(prediction, counts=True),
          accept=accept_training_steps, measure=_measured_training_steps,
          show=_training_steps_lines)
def training_steps(prediction) -> None:
    """Exercise "sequential steps of one training step" (predict, then measure).

    ``prediction = {"GRU + attention": [..], "ConvS2S": [..]}``: for decoder inputs of 10, 20
    and 40 tokens, how many calls of the RNN decoder's ``GRUCell`` and of the ConvS2S decoder's
    convolutions (3 layers) one training step makes, forward and backward together.
    """
    run = _Run("training_steps")
    lengths = list(TRAINING_STEP_LENGTHS)
    with run.case("the prediction's form", STEPS_FORM):
        _training_steps_form(prediction)
    if any(v is None for name in _MODELS for v in prediction[name]):
        run.not_answered("replace every None in `prediction` by your predicted count, run "
                         "the cell, then run this check again")
    measured = _measured_training_steps()
    hints = {"GRU + attention": STEPS_GRU, "ConvS2S": STEPS_CONV}
    for name in _MODELS:
        with run.case(f"{name}, decoder lengths {lengths}", hints[name]):
            _steps_hold(name, prediction[name], measured[name])
    run.held()


@exercise(hint=PATH_CONV, form=form_calls("int", (4, 3), (4,)),
          shortcuts=tuple(
              Shortcut(f"convs2s.course.receptive_field:{name}", f"receptive_field.{name}",
                       "the exercise is to derive the path lengths")
              for name in ("conv_path_length", "rnn_path_length", "path_lengths")))
def path_length(conv_fn: Callable, rnn_fn: Callable) -> None:
    """Exercise "path length between two words" (derive): ``conv_path_length(n, k)``,
    ``rnn_path_length(n)``."""
    from convs2s.course import receptive_field

    run = _Run("path_length")
    answers = {}
    for k in (2, 3, 4, 5, 7):
        for n in (1, 2, 3, 4, 5, 6, 9, 10, 11, 20, 49, 50):
            with run.case(f"conv_path_length({n}, {k})"):
                answers["conv", n, k] = _assert_int(conv_fn(n, k))
                _assert_equal(answers["conv", n, k], receptive_field.conv_path_length(n, k))
    rnn_hint = PATH_RNN
    for n in (1, 2, 7, 50):
        with run.case(f"rnn_path_length({n})", rnn_hint):
            answers["rnn", n] = _assert_int(rnn_fn(n))
            _assert_equal(answers["rnn", n], receptive_field.rnn_path_length(n))
    print("  two words 50 apart: "
          f"conv k=3 {answers['conv', 50, 3]} layers, k=5 {answers['conv', 50, 5]} layers; "
          f"RNN {answers['rnn', 50]} steps")
    run.done()


def _rnn_configs() -> list[dict]:
    from convs2s.course.baselines import RNNAttentionSeq2Seq

    kwargs = [
        dict(emb_dim=8, enc_hid_dim=12, dec_hid_dim=16, attn_dim=10),
        dict(emb_dim=7, enc_hid_dim=9, dec_hid_dim=16, attn_dim=4, out_dim=3),
        dict(emb_dim=16, enc_hid_dim=16, dec_hid_dim=24),
    ]
    configs = []
    for i, kw in enumerate(kwargs):
        model = RNNAttentionSeq2Seq(30 + 7 * i, 40 - 3 * i, dropout=0.0, src_pad_idx=1,
                                    trg_pad_idx=1, **kw)
        configs.append((model.config, sum(p.numel() for p in model.parameters())))
    return configs


@exercise(
    hint=GRU_PARAMS,
    form=form_calls("int", (3, 5), ({
        "src_vocab_size": 5, "trg_vocab_size": 6, "emb_dim": 1, "enc_hid_dim": 2,
        "dec_hid_dim": 3, "attn_dim": 4, "out_dim": 5},)),
    shortcuts=(
        MODULE_BUILDING,
        Shortcut("convs2s.course.baselines:rnn_parameter_count", "baselines.rnn_parameter_count",
                 "the exercise is to count them yourself"),
        Shortcut("convs2s.model.convs2s:count_parameters", "count_parameters",
                 "count from the shapes you derive")),
    forbidden_names={"GRU", "GRUCell", "Linear", "Embedding", "Module", "parameters"})
def baseline_parameters(gru_fn: Callable, baseline_fn: Callable) -> None:
    """Exercise "count the baseline's parameters" (derive): ``gru_parameters``,
    ``baseline_parameters``."""
    run = _Run("baseline_parameters")
    for inp, hid in ((3, 4), (16, 32), (128, 5)):
        expected = sum(p.numel() for p in nn.GRU(inp, hid).parameters())
        with run.case(f"gru_parameters({inp}, {hid})"):
            _assert_equal(_assert_int(gru_fn(inp, hid)), expected)
    hint = BASELINE
    for config, expected in _rnn_configs():
        short = {k: config[k] for k in ("emb_dim", "enc_hid_dim", "dec_hid_dim", "attn_dim",
                                        "out_dim")}
        with run.case(f"baseline_parameters(config with {short})", hint):
            _assert_equal(_assert_int(baseline_fn(dict(config))), expected, name="the count")
    run.done()



#: The sentence lengths of the course's length sweep (``benchmarks/length_sweep.py``), from which
#: the "where ConvS2S pulls ahead" exercise picks one.
CROSSOVER_LENGTHS = (8, 16, 32, 64, 128, 256)
#: How many times the RNN's training tokens/s ConvS2S must reach in that exercise.
CROSSOVER_FACTOR = 1.5


def accept_speed_crossover(prediction) -> int:
    """What the practice exercise "where ConvS2S pulls ahead" accepts (its check and its hidden
    test alike): one of :data:`CROSSOVER_LENGTHS` as a whole number; AssertionError otherwise.
    It is not graded for correctness: where the crossover lies depends on the machine."""
    value = _assert_int(prediction, "the prediction")
    if value not in CROSSOVER_LENGTHS:  # a form rule (nothing hidden): said to the student
        raise WrongForm("the prediction should be one of the sweep's lengths "
                             f"{', '.join(map(str, CROSSOVER_LENGTHS))}, got another whole "
                             "number")
    return value


#: The prediction the learner's own check accepted last (notebook 07 compares it with the
#: course's measurement after the figure); None until a check accepts one.
_checked: dict[str, int | None] = {"prediction": None}


def checked_crossover_prediction() -> int | None:
    """The crossover prediction that ``speed_crossover``'s check accepted last, or None. The
    notebook's comparison reads this, not the variable: the course's own run of the notebook
    executes the folded solution, which sets ``crossover_prediction`` but calls no check, so
    its stored comparison is what a learner who has predicted nothing sees."""
    return _checked["prediction"]


def _speed_crossover_lines() -> list[str]:
    from convs2s.course import length_sweep

    found = length_sweep.records()
    lines = []
    for record in found:
        first = length_sweep.first_length_at(record, CROSSOVER_FACTOR)
        where = f"at {first} tokens" if first is not None else "at no length measured"
        lines.append(f"{length_sweep.label(record)}: ConvS2S first trains at least "
                     f"{CROSSOVER_FACTOR:g}x the RNN's target tokens/s {where}")
    return lines + length_sweep.not_measured_lines(found)


@exercise(hint=CROSSOVER, form=accept_speed_crossover, show=_speed_crossover_lines)
def speed_crossover(prediction) -> None:
    """Exercise "where ConvS2S pulls ahead" (predict, practice): ``prediction``, the shortest
    sentence length of the course's length sweep at which ConvS2S trains at least
    :data:`CROSSOVER_FACTOR` times the RNN's target tokens/s.

    Practice: the answer depends on the machine, so the check accepts any of the six lengths and
    records it; notebook 07 compares it with the course's measurement after the figure
    (:func:`convs2s.course.length_sweep.compare`), and ``show_me`` prints that measurement.
    """
    run = _Run("speed_crossover")
    with run.case("the prediction's form", CROSSOVER_FORM):
        value = accept_speed_crossover(prediction)
    _checked["prediction"] = value
    print(f"✓ speed_crossover: prediction recorded ({value} tokens). Practice, not graded for "
          "correctness: where the crossover lies depends on the machine; the course's "
          "measurement comes after the task")
