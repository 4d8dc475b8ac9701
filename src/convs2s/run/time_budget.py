"""A training run's time budget (``max_minutes``), counted across resumes, and the part of it
kept for the final choices (``final.pt``, :mod:`convs2s.run.final_choices`).

A run with a budget and a final model (``average_last``) must end its training early enough
to make ``final.pt`` within the budget. After every epoch it measures what the choices would
cost with the model as it is then (:func:`measure_final_time`), and it stops when the seconds
trained plus the seconds kept reach the budget (:func:`out_of_time`). The functions take the
run's state (a :class:`convs2s.run.train.TrainState`) and read or set its ``seconds``,
``epoch``, ``final_costs``, ``final_costs_epoch`` and ``final_reserve``.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from convs2s.run import final_choices
from convs2s.run.presets import Preset

__all__ = ["TrainingClock", "keeps_final_time", "measure_final_time", "out_of_time"]


class TrainingClock:
    """Seconds trained: those of the run's earlier sessions (``before``) and this one's."""

    def __init__(self, before: float = 0.0):
        self.before, self.start = before, time.monotonic()

    def seconds(self) -> float:
        return self.before + time.monotonic() - self.start


def keeps_final_time(preset: Preset) -> bool:
    """Whether a run of ``preset`` keeps time for the final choices: it has a time budget and
    makes a final model."""
    return bool(preset.average_last and preset.max_minutes)


def out_of_time(state, preset: Preset) -> bool:
    """Whether the seconds trained plus the seconds the final choices need now (one weight
    candidate per finished epoch, :func:`~convs2s.run.final_choices.seconds_to_keep`) reach
    the time budget; never without one."""
    keep = final_choices.seconds_to_keep(state.final_costs, state.epoch, preset.average_last,
                                         state.final_reserve)
    return bool(preset.max_minutes) and state.seconds + keep >= 60 * preset.max_minutes


def measure_final_time(state, preset: Preset, model: torch.nn.Module, src_vocab, trg_vocab,
                       pipeline, valid_pairs, *, device: torch.device, epoch: int | None = None,
                       why: str = "with this epoch's model",
                       log: Callable[[str], None] = print) -> None:
    """Measure again what the final choices will cost with ``model`` as it is now, that of
    ``epoch`` (by default the one just finished), and keep that time in ``state``
    (:func:`convs2s.run.final_choices.measure_reserve`). A resumed run measures before it trains:
    its checkpoint's costs were measured on the machine, and at the load, of the run's last
    session (a pause there could have made them hours)."""
    state.final_costs, state.final_reserve = final_choices.measure_reserve(
        model, src_vocab, trg_vocab, pipeline, valid_pairs, device=device,
        beam=preset.final_beam, max_k=preset.average_last, before=state.final_costs, why=why,
        log=log)
    state.final_costs_epoch = state.epoch + 1 if epoch is None else epoch
