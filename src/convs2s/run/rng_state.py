"""The random state of a training run, kept so that a resumed run draws what an uninterrupted
one would have drawn: the same batches, the same dropout masks.

- :func:`seed_everything`: Python's and torch's generators seeded from the preset's seed.
- :func:`loader_generator`: a data loader's own generator.
- :class:`StepRandomState`: the state at the start of the step under way. A step cut short by
  Ctrl-C or SIGTERM is saved as not taken, with this state, so the resumed run redoes it with
  the same dropout masks; between steps a checkpoint holds the state as it is.

A checkpoint stores the state under ``train_state["rng"]`` (:func:`convs2s.run.resume.rng_state`
takes it, :func:`convs2s.run.resume.restore` puts it back).
"""

from __future__ import annotations

import random

import torch

from convs2s.run.resume import rng_state

__all__ = ["StepRandomState", "loader_generator", "seed_everything"]


def seed_everything(seed: int) -> None:
    """Python's and torch's global generators seeded with ``seed``."""
    random.seed(seed)
    torch.manual_seed(seed)


def loader_generator(seed: int) -> torch.Generator:
    """A data loader's own generator, seeded with ``seed``. Every ``iter(DataLoader)`` draws a
    seed from its generator, the global one by default; a private one keeps dropout's random
    stream independent of how often an epoch starts, so a run resumed inside an epoch draws
    exactly what the uninterrupted run drew."""
    return torch.Generator().manual_seed(seed)


class StepRandomState:
    """The random state to save: that of the start of the step under way, if one is
    (:meth:`step_begins` until :meth:`step_done`), otherwise the state as it is now."""

    def __init__(self) -> None:
        self.at_step_start: dict | None = None

    def step_begins(self) -> None:
        self.at_step_start = rng_state()

    def step_done(self) -> None:
        self.at_step_start = None

    def to_save(self) -> dict:
        return self.at_step_start if self.at_step_start is not None else rng_state()
