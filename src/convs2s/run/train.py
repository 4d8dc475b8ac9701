"""Training ConvS2S: a run's state, the learning rate, then the trainer: its setup and its loop,
one method per step.

``train(PRESETS["quick"], "runs/quick")``, or ``python -m convs2s.train --preset quick --out
runs/quick [--resume]``. A step: the next-token loss of a batch, its gradients clipped to
``clip_norm``, an update at the scheduled rate (warm-up, then smaller at every plateau). An epoch:
steps over the batches, the validation loss, a history row, ``last.pt`` (and ``best.pt`` when
validation improved). The loop runs epochs until a limit; Ctrl-C or SIGTERM save ``last.pt``,
and ``resume=True`` continues exactly. NaN/inf stops the run; diverged weights are never saved.
``preset.compile`` (``--compile``) runs the steps through ``torch.compile``
(:func:`compile_for_training`, :func:`compiled_loss`); ``preset.rdrop``: R-Drop (``--rdrop``);
``preset.subword_sampling``: subword regularisation (:meth:`Trainer.sample_segmentations`).
The rest is elsewhere: :mod:`~convs2s.run.prepare` (data, model, optimizer),
:mod:`~convs2s.run.run_folder`, :mod:`~convs2s.run.resume`, :mod:`~convs2s.run.distributed`,
:mod:`~convs2s.run.precision` (the optimizer step), :mod:`~convs2s.run.final_choices`
(``final.pt``) and :mod:`convs2s.system.signals`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import itertools
import math
import os
import random
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch.fx.experimental import _config as fx_config

from convs2s.data import LANGUAGES, DataError, Vocab, load_multi30k, make_loader
from convs2s.data.subword import TOKENIZER_KINDS
from convs2s.model.convs2s import ConvS2S
from convs2s.model.loss import evaluate_loss, next_token_loss, rdrop_loss, sequence_loss
from convs2s.run import final_choices, prepare, run_folder
from convs2s.run.checkpoint import Checkpoint, CheckpointError, copy_checkpoint
from convs2s.run.distributed import Distributed
from convs2s.run.precision import clipped_gradients, mixed_precision, update
from convs2s.run.presets import MAX_RDROP, PRESETS, Preset, get_preset
from convs2s.run.resume import check_train_state, reconcile_best, restore, rng_state
from convs2s.system import arguments, environment
from convs2s.system.compiling import COMPILE_MODES, CUDA_GRAPH_MODES, check_compiler, check_mode
from convs2s.system.signals import StopSignals, Terminated, exit_status


@dataclass
class TrainState:
    """Where a run is: what a checkpoint's ``train_state`` holds, under these names, besides the
    optimizer's state and the random-number states."""

    step: int = 0  # optimizer updates so far
    epoch: int = 0  # epochs finished
    batch_in_epoch: int = 0  # batches of the current epoch done (a resumed run skips them)
    history: list[dict] = field(default_factory=list)  # a row per finished epoch
    best_valid_loss: float = math.inf
    bad_epochs: int = 0  # epochs since validation last improved
    lr_scale: float = 1.0  # shrunk by lr_shrink at every plateau
    seconds: float = 0.0  # training time, across resumes
    ep_loss: float = 0.0  # this epoch's training loss, summed over its tokens
    ep_tokens: int = 0
    snapshots: list[str] = field(default_factory=list)  # this run's snapshots/epochNN.pt
    final_reserve: float = 0.0  # seconds of max_minutes kept for the final choices
    final_costs: dict | None = None  # what they cost, measured (final_choices.measure_reserve)
    final_costs_epoch: int | None = None  # with the model of this epoch

    def to_dict(self) -> dict:
        """The fields as a checkpoint stores them (the last two once they are set)."""
        unset = ("final_costs", "final_costs_epoch")
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if not (f.name in unset and getattr(self, f.name) is None)}

    @classmethod
    def from_dict(cls, stored: dict, path: Path | None = None) -> TrainState:
        """A stored train state, checked (:func:`~convs2s.run.resume.check_train_state`: a
        ``CheckpointError`` line naming ``path``); fields older checkpoints lack keep their
        defaults."""
        check_train_state(stored, path)
        names = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in stored.items() if k in names})


def learning_rate(preset: Preset, step: int, lr_scale: float) -> float:
    """The rate for update ``step`` (from 1): a linear warm-up over ``warmup_steps``, then
    ``lr · lr_scale``, never below ``min_lr`` once warm."""
    warm = min(1.0, step / max(preset.warmup_steps, 1))
    return max(preset.lr * warm * lr_scale, min(preset.min_lr, preset.lr * warm))


def reduce_on_plateau(state: TrainState, valid_loss: float, lr_shrink: float) -> bool:
    """After an epoch's validation: a new best resets the count of bad epochs; otherwise one
    more bad epoch, and the rate shrinks by ``lr_shrink``. Returns whether it improved."""
    improved = valid_loss < state.best_valid_loss
    if improved:
        state.best_valid_loss, state.bad_epochs = valid_loss, 0
    else:
        state.bad_epochs += 1
        state.lr_scale *= lr_shrink
    return improved


class Trainer:
    """One training run: ``model``, ``optimizer``, the batches (``loader``, ``valid_loader``)
    and ``state``. :meth:`__init__` sets it up; :meth:`run` is the loop, one method per step:
    :meth:`run_epoch` (its batches, then validation), :meth:`train_step`, :meth:`end_epoch`.
    The setup's parts, the final model and the checkpoints follow."""

    def __init__(self, preset: Preset, folder: Path, data: dict, dist: Distributed, *,
                 resume: bool = False, progress: bool = True, log: Callable = print,
                 on_epoch_end: Callable[[dict, ConvS2S], None] | None = None):
        self.preset, self.folder, self.dist, self.device = preset, folder, dist, dist.device
        self.on_epoch_end = on_epoch_end
        self.say = log if dist.main else (lambda *_: None)
        self.progress = progress and dist.main
        self.last_path, self.best_path = folder / "last.pt", folder / "best.pt"
        self.final_path = folder / final_choices.FINAL
        # raw text, for the final choices (convs2s.run.final_choices)
        self.valid_pairs = prepare.select_pairs(preset, data)[1][:preset.final_pairs]
        self.signals, self.saved = StopSignals(), {}  # saved: checkpoint name -> its step
        self.rng_before_step = None  # the random state at the start of a step under way
        ckpt = Checkpoint.load(self.last_path) if resume else None
        self.run_id = (ckpt.run_id if ckpt is not None else None) or uuid.uuid4().hex
        seed_everything(preset.seed)
        datasets = self._build(data, ckpt)
        self.state = TrainState()
        if ckpt is not None:
            self._restore(ckpt)
        self._prepare_steps(*datasets)
        self._start, self._start_seconds = time.monotonic(), self.state.seconds
        if ckpt is not None and self.state.final_costs:  # the last session's measurement
            self.reserve_final_time(epoch=self.state.epoch, why="on resuming")

    def run(self) -> str:
        """Train until a limit, then make the final model; return why it stopped. Ctrl-C or
        SIGTERM save ``last.pt`` (:meth:`save_interrupted`)."""
        with self.signals:
            try:
                while not (stop := self.should_stop()):
                    self.run_epoch()
                self.make_final()
            except KeyboardInterrupt as e:
                self.save_interrupted(e)
                raise
        return stop

    def should_stop(self) -> str:
        """Why training must stop now ("" to go on); under torchrun, every process's answer."""
        return self.dist.agree(self._stop_here())

    def _stop_here(self) -> str:
        s, p = self.state, self.preset
        if p.max_steps is not None and s.step >= p.max_steps:
            return "max_steps"
        keep = final_choices.seconds_to_keep(s.final_costs, s.epoch, p.average_last,
                                             s.final_reserve)  # time for final.pt
        if p.max_minutes and s.seconds + keep >= 60 * p.max_minutes:
            return "time budget"
        if s.bad_epochs >= p.patience:
            return "early stop"
        if s.epoch >= p.epochs:
            return "epochs"
        return ""

    def run_epoch(self) -> None:
        """The rest of the current epoch, or until a limit: its steps; at its end, validation,
        the final choices' time measured again, the epoch's record and its checkpoints."""
        if not self.train_batches():
            self.save()  # stopped inside the epoch
            return
        valid_loss = evaluate_loss(self.model, self.valid_loader, self.pad, self.device)
        self.reserve_final_time()  # with this epoch's model; saved in its checkpoints below
        with self.signals.deferred():  # the epoch's record and its checkpoints, or none
            improved = self.end_epoch(valid_loss)
            self.save(best=improved, valid_loss=valid_loss, snapshot=True)
        if self.on_epoch_end is not None and self.dist.main:
            self.on_epoch_end(dict(self.state.history[-1]), self.model)

    def train_batches(self) -> bool:
        """A step on each batch of the epoch not yet seen, until a limit; whether the epoch is
        finished."""
        s, sampler = self.state, self.loader.batch_sampler
        self.sample_segmentations(s.epoch)
        sampler.set_epoch(s.epoch)
        n_batches, skip = len(sampler), s.batch_in_epoch
        bar = _Progress(n_batches, f"epoch {s.epoch + 1}/{self.preset.epochs}", self.progress,
                        initial=skip)
        if skip == 0:
            s.ep_loss, s.ep_tokens = 0.0, 0
        self._t0, self._t0_tokens = time.monotonic(), s.ep_tokens
        for i, (src, trg) in enumerate(self.loader):
            if i < skip:
                continue  # resuming inside an epoch: these batches were already seen
            loss = self.train_step(i, src, trg)
            bar.step(loss, s.ep_tokens - self._t0_tokens, time.monotonic() - self._t0)
            if self.should_stop():
                break
        bar.close()
        return s.batch_in_epoch >= n_batches

    def train_step(self, i: int, src: torch.Tensor, trg: torch.Tensor) -> float:
        """One optimizer update on batch ``i`` of the epoch; returns its (smoothed) loss.

        The random state is kept first: a step interrupted before its end is saved as not
        taken, with that state, so the resumed run redraws the same dropout masks for it. The
        update and its record (:meth:`record_step`) happen together or not at all."""
        self.rng_before_step = rng_state()
        src, trg = src.to(self.device), trg.to(self.device)
        loss = self._loss(src, trg)  # eager, or compiled (preset.compile)
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"the training loss became {loss.item()} at step {self.state.step + 1} (epoch "
                f"{self.state.epoch + 1}, batch {i + 1}). Training stopped; {self._kept()}. "
                "Lower the learning rate (lr) or check the data.")
        tokens = int((trg[:, 1:] != self.pad).sum())
        clipped_gradients(loss, self.optimizer, self.scaler, self.model.parameters(),
                          self.preset.clip_norm)
        with self.signals.deferred():  # the update and its record: both or neither
            update(self.optimizer, self.scaler,
                   learning_rate(self.preset, self.state.step + 1, self.state.lr_scale))
            self.record_step(i, loss.item(), tokens)
        return loss.item()

    def record_step(self, i: int, loss: float, tokens: int) -> None:
        """A step done on batch ``i``: the counts, the epoch's loss and tokens, the time."""
        s = self.state
        s.step, s.batch_in_epoch = s.step + 1, i + 1
        s.ep_loss += loss * tokens
        s.ep_tokens += tokens
        s.seconds = self._elapsed()
        self.rng_before_step = None

    def end_epoch(self, valid_loss: float) -> bool:
        """Record the epoch in the history, move to the next, :func:`reduce_on_plateau`."""
        s = self.state
        seen, seconds = s.ep_tokens - self._t0_tokens, time.monotonic() - self._t0
        row = {"epoch": s.epoch + 1, "step": s.step,
               "train_loss": s.ep_loss / max(s.ep_tokens, 1), "valid_loss": valid_loss,
               "valid_ppl": math.exp(min(valid_loss, 50)),
               "lr": self.optimizer.param_groups[0]["lr"], "seconds": round(s.seconds, 1),
               "tokens_per_s": seen * self.dist.world / max(seconds, 1e-9)}
        s.history.append(row)
        self.say(f"epoch {row['epoch']:>2}: train loss {row['train_loss']:.3f} (smoothed)  "
                 f"valid loss {valid_loss:.3f}  valid ppl {row['valid_ppl']:.2f}  "
                 f"{row['tokens_per_s']:,.0f} tok/s  {row['seconds']:.0f} s")
        s.epoch, s.batch_in_epoch = s.epoch + 1, 0
        return reduce_on_plateau(s, valid_loss, self.preset.lr_shrink)

    # -- setup -----------------------------------------------------------------------------------

    def _build(self, data: dict, ckpt: Checkpoint | None) -> tuple:
        """Vocabularies, model and optimizer; returns the train and validation datasets."""
        preset = self.preset
        vocabs = pipeline = None
        if ckpt is not None:  # the vocabularies and text pipeline it trained with
            vocabs, pipeline = (ckpt.src_vocab, ckpt.trg_vocab), ckpt.pipeline
        train_ds, valid_ds, self.src_vocab, self.trg_vocab = prepare.prepare_data(
            preset, data, vocabs, pipeline)
        self.pipeline = train_ds.pipeline
        self.data_record = dict(zip(("train", "valid"), map(
            prepare.fingerprint, prepare.select_pairs(preset, data)), strict=True))
        if train_ds.n_dropped:
            self.say(f"dropped {train_ds.n_dropped} training pairs longer than "
                     f"{preset.model.max_positions} positions")
        self.model = prepare.build_model(preset, self.src_vocab, self.trg_vocab).to(self.device)
        self.optimizer = prepare.make_optimizer(self.model, preset)
        self.pad = self.trg_vocab.pad_idx
        return train_ds, valid_ds

    def _restore(self, ckpt: Checkpoint) -> None:
        """Continue the run in ``last.pt`` (:func:`convs2s.run.resume.restore`)."""
        stored = restore(ckpt, preset=self.preset, data_record=self.data_record,
                         pipeline=self.pipeline, model=self.model, optimizer=self.optimizer,
                         src_vocab=self.src_vocab, trg_vocab=self.trg_vocab)
        self.state = s = TrainState.from_dict(stored, self.last_path)
        self.saved["last.pt"] = s.step
        if self.dist.main:
            best = reconcile_best(s.history, s.best_valid_loss, s.step, s.batch_in_epoch,
                                  self.last_path, self.best_path, log=self.say)
            self.saved.update({} if best is None else {"best.pt": best})
            self._rebuild_snapshot()
        self.say(f"resumed from {self.last_path}: epoch {s.epoch + 1}, step {s.step}")

    def _rebuild_snapshot(self) -> None:
        """A run stopped between an epoch's ``last.pt`` and its snapshot: ``last.pt`` holds
        that epoch's end, so write the snapshot it names from it."""
        s = self.state
        if not (s.history and s.snapshots and s.batch_in_epoch == 0):
            return
        path = final_choices.snapshot_path(self.folder, s.history[-1]["epoch"])
        if s.snapshots[-1] == path.name and not path.exists():
            self.save_snapshot()
            self.say(f"{path} was missing (the run stopped between the epoch's last.pt and "
                     "its snapshot): written again from last.pt")

    def _prepare_steps(self, train_ds, valid_ds) -> None:
        """Loaders, the DDP wrapper and mixed precision; a resumed position inside the epoch is
        checked against the loader."""
        preset = self.preset
        self.loader = make_loader(train_ds, max_tokens=preset.max_tokens, shuffle=True,
                                  seed=preset.seed, num_replicas=self.dist.world,
                                  rank=self.dist.rank)
        # Every iter(DataLoader) draws a seed from its generator, the global RNG by default.
        # A private one keeps dropout's random stream independent of how often we start an
        # epoch, so a run resumed mid-epoch draws exactly what the uninterrupted run drew.
        self.loader.generator = torch.Generator().manual_seed(preset.seed)
        self.valid_loader = make_loader(valid_ds, max_tokens=preset.max_tokens, shuffle=False,
                                        bucket=False, num_replicas=1, rank=0)
        self.valid_loader.generator = torch.Generator().manual_seed(preset.seed)
        self.net = self.dist.wrap(self.model)
        if preset.compile is not None:  # self.model stays the module: checkpoints save its keys
            self.net = compile_for_training(self.net, preset.compile, self.device)
        self.precision = mixed_precision(self.device, preset.amp)
        self.scaler = self.precision.scaler()  # float16 only: bfloat16 needs no loss scaling
        self.segmented_epoch: int | None = None  # the epoch the training pairs are sampled for
        if preset.subword_sampling:  # the epoch resumed has its own segmentations, and batches
            self.sample_segmentations(self.state.epoch)
            self.loader.batch_sampler.set_epoch(self.state.epoch)
        if len(self.loader.batch_sampler) < self.state.batch_in_epoch:  # a last.pt from elsewhere
            raise CheckpointError(
                f"{self.last_path} cannot be resumed: its train_state batch_in_epoch "
                f"{self.state.batch_in_epoch} is past the {len(self.loader.batch_sampler)} "
                "batches of an epoch. Resume from a last.pt that convs2s wrote, or start a new "
                "--out folder.")

    def sample_segmentations(self, epoch: int) -> None:
        """With ``preset.subword_sampling`` (alpha): the training pairs segmented afresh for
        ``epoch``, at random (:meth:`convs2s.data.subword.TextPipeline.sample`), and the
        batches cut from their new lengths; once per epoch, and nothing when it is 0. The draws
        are seeded by the run's seed and the epoch, as the batches' order is, so a resumed run
        (or another process under torchrun) gets the same segmentations. A pair whose sampled
        pieces are too long for the model keeps its best segmentation. Validation, the final
        choices and translation always tokenize the best way (the pipeline's tokenizers)."""
        alpha = self.preset.subword_sampling
        if not alpha or self.segmented_epoch == epoch:
            return
        start, ds = time.monotonic(), self.loader.dataset
        kept = ds.resegment(self.pipeline.sample(ds.pairs, alpha, (self.preset.seed, epoch)))
        self.loader.batch_sampler.set_lengths(list(zip(ds.src_lengths, ds.trg_lengths,
                                                       strict=True)))
        if self.segmented_epoch is None:
            how = (f", {kept} too long when sampled kept their best segmentation" if kept
                   else "")
            self.say(f"subword sampling (alpha {alpha:g}): {len(ds)} training pairs segmented "
                     f"afresh for epoch {epoch + 1} in {time.monotonic() - start:.1f} s{how}; "
                     "again every epoch")
        self.segmented_epoch = epoch

    def _loss(self, src: torch.Tensor, trg: torch.Tensor) -> torch.Tensor:
        """A step's loss: :func:`~convs2s.model.loss.next_token_loss` of the model, or with
        ``preset.compile``, :func:`compiled_loss` of the compiled one (the same loss); R-Drop's
        with ``preset.rdrop`` > 0 (its KL term then counts in the epoch's ``train_loss``)."""
        p = self.preset
        if p.compile is None:
            return next_token_loss(self.net, src, trg, self.pad, p.label_smoothing,
                                   self.precision.autocast(), rdrop=p.rdrop)
        return compiled_loss(self.net, src, trg, src_pad=self.src_vocab.pad_idx,
                             trg_pad=self.pad, label_smoothing=p.label_smoothing,
                             autocast=self.precision.autocast(),
                             max_positions=p.model.max_positions,
                             static=p.compile in CUDA_GRAPH_MODES, rdrop=p.rdrop)

    def _elapsed(self) -> float:
        """Training seconds so far, across resumes."""
        return self._start_seconds + time.monotonic() - self._start

    # -- the final model: its time after each epoch, the choices at the end ----------------------

    def make_final(self) -> None:
        """``final.pt`` if the preset makes one (:func:`convs2s.run.final_choices.finalize`)."""
        if self.preset.average_last and self.dist.main and self.best_path.exists():
            final_choices.finalize(self.folder, self.valid_pairs, device=self.device,
                                   beam=self.preset.final_beam, max_k=self.preset.average_last,
                                   log=self.say)

    def reserve_final_time(self, epoch: int | None = None,
                           why: str = "with this epoch's model") -> None:
        """With a time budget and a final model: measure again what the final choices will
        cost with the model as it is now (that of ``epoch``, by default the one just finished),
        and keep that time (:func:`convs2s.run.final_choices.measure_reserve`). A resumed run
        measures first: its checkpoint's costs were measured on the machine, and at the load,
        of the run's last session (a pause there could have made them hours)."""
        s, preset = self.state, self.preset
        if not (preset.average_last and preset.max_minutes and self.dist.main):
            return
        s.final_costs, s.final_reserve = final_choices.measure_reserve(
            self.model, self.src_vocab, self.trg_vocab, self.pipeline, self.valid_pairs,
            device=self.device, beam=preset.final_beam, max_k=preset.average_last,
            before=s.final_costs, why=why, log=self.say)
        s.final_costs_epoch = s.epoch + 1 if epoch is None else epoch
        s.seconds = self._elapsed()

    # -- checkpoints ---------------------------------------------------------------------------

    def save_interrupted(self, e: KeyboardInterrupt) -> None:
        """Ctrl-C or SIGTERM (``e``): save ``last.pt`` and say how to continue. Inside a step,
        the step is dropped and the random state from its start is saved, so the resumed run
        redraws the same dropout masks for it."""
        with self.signals.deferred(raise_pending=False):
            self.save(rng=self.rng_before_step)
        how = "stopped by SIGTERM" if isinstance(e, Terminated) else "interrupted"
        self.say(f"{how} at step {self.state.step}: saved {self.last_path}; "
                 "continue with resume=True (--resume)")

    def save(self, rng: dict | None = None, best: bool = False,
             valid_loss: float | None = None, snapshot: bool = False) -> None:
        """Write ``last.pt`` (and copy it to ``best.pt`` if ``best``; at an epoch's end, with
        ``snapshot``, then its snapshot); never diverged weights."""
        why = self._diverged(valid_loss)
        if why:
            raise FloatingPointError(
                f"the weights diverged by step {self.state.step} ({why}). Training stopped "
                f"and they were not saved; {self._kept()}. Lower the learning rate (lr) or "
                "check the data."
            )
        if not self.dist.main:
            return
        dropped = self._add_snapshot() if snapshot else None  # recorded in last.pt
        with self.signals.deferred():  # last.pt first: nothing is ever ahead of the history
            self.checkpoint(rng).save(self.last_path)
            self.saved["last.pt"] = self.state.step
            if best:
                copy_checkpoint(self.last_path, self.best_path)
                self.saved["best.pt"] = self.state.step
            if dropped is not None:
                self.save_snapshot(dropped)

    def checkpoint(self, rng: dict | None = None) -> Checkpoint:
        """What a checkpoint holds: the model, vocabularies, settings, data and train state."""
        return Checkpoint.from_model(
            self.model, self.src_vocab, self.trg_vocab, self.pipeline,
            preset=self.preset.as_dict(), data=self.data_record, run_id=self.run_id,
            train_state={**self.state.to_dict(), "optimizer": self.optimizer.state_dict(),
                         "rng": rng if rng is not None else rng_state()})

    def _add_snapshot(self) -> list[str] | None:
        """Name the finished epoch's snapshot in ``state.snapshots``, which keeps the last
        ``average_last``; returns the names it drops (None: this run keeps no snapshots)."""
        s, k = self.state, self.preset.average_last
        if not k:
            return None
        name = final_choices.snapshot_path(self.folder, s.history[-1]["epoch"]).name
        names = [n for n in s.snapshots if n != name] + [name]
        s.snapshots = names[-k:]
        return names[:-k]

    def save_snapshot(self, dropped: list[str] | None = None) -> None:
        """The finished epoch's weights as ``snapshots/epochNN.pt`` (for the final average),
        written after ``last.pt`` names it; then the ``dropped`` snapshots are removed. Only
        ``epochNN.pt`` files of this run's ``snapshots/`` are ever removed: the names come from
        ``state.snapshots``, which :func:`~convs2s.run.resume.check_train_state` checked."""
        row = self.state.history[-1]
        path = final_choices.snapshot_path(self.folder, row["epoch"])
        path.parent.mkdir(exist_ok=True)
        snap = dataclasses.replace(self.checkpoint(), train_state=None, extra={"row": dict(row)})
        snap.save(path)
        for name in dropped or ():
            (path.parent / name).unlink(missing_ok=True)

    def _diverged(self, valid_loss: float | None = None) -> str:
        """Why the weights are unusable ("" if they are not): inf/nan in them or their output."""
        for name, p in self.model.named_parameters():
            if not torch.isfinite(p).all():
                return f"{name} holds inf or nan"
        if valid_loss is None:  # finite weights can still overflow (e.g. weight norm's norm)
            valid_loss = evaluate_loss(self.model, itertools.islice(self.valid_loader, 1),
                                       self.pad, self.device)
        return "" if math.isfinite(valid_loss) else f"the validation loss is {valid_loss}"

    def _kept(self) -> str:
        """What checkpoints this run has in its folder, truthfully."""
        if not self.saved:
            return f"no checkpoint was written to {self.folder}"
        held = " and ".join(f"{name} (step {step})" for name, step in self.saved.items())
        many = len(self.saved) > 1
        return (f"the last good checkpoint{'s' if many else ''} in {self.folder}, {held}, "
                f"{'were' if many else 'was'} kept")

    def result(self, stop: str) -> TrainResult:
        """The run's outcome; the model gets the best weights (lowest validation loss)."""
        s = self.state
        result = TrainResult(self.model, self.src_vocab, self.trg_vocab, s.history, None,
                             self.last_path, stop, s.step, s.seconds)
        if self.best_path.exists():
            best = Checkpoint.load(self.best_path, map_location=self.device)
            self.model.load_state_dict(best.state_dict)
            result.best_path = self.best_path
        if self.preset.average_last and self.final_path.exists():
            result.final_path = self.final_path
        self.model.eval()
        if s.history:
            best = f"best valid loss {s.best_valid_loss:.3f}"
        else:  # stopped inside the first epoch: never validated, no best.pt
            best = ("no epoch finished, so nothing was validated and the model keeps the last "
                    "weights (raise max_minutes or max_steps to finish one)")
        self.say(f"stopped ({stop}) after {s.step} steps, {s.seconds:.0f} s; {best}")
        return result


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


class _Progress:
    """An epoch's progress bar (tqdm), or nothing when not ``enabled``."""

    def __init__(self, total: int, desc: str, enabled: bool, initial: int = 0):
        self.bar = None
        if enabled:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=total, desc=desc, initial=initial, leave=False,
                            dynamic_ncols=True)

    def step(self, loss: float, tokens: int, seconds: float) -> None:
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{tokens / max(seconds, 1e-9):,.0f}")

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


# ---------------------------------------------------------------------------------------------
# The compiled step (Preset.compile, --compile)
# ---------------------------------------------------------------------------------------------

# Under torch.compile's CUDA_GRAPH_MODES a graph is recorded once per input shape, and the
# loader's batches come in many shapes (every length, every batch size), so under these modes a
# batch is padded to one of a few shapes first (:func:`static_shapes`).
#: Under CUDA graphs, sentence lengths are padded up to a multiple of this (at most the model's
#: positions): 13 lengths a side for 100 positions, at the price of a few pad positions.
LENGTH_MULTIPLE = 8


def compile_for_training(net: torch.nn.Module, mode: str,
                         device: torch.device | str) -> torch.nn.Module:
    """``net`` compiled for training steps (``torch.compile``, ``mode`` one of
    :data:`~convs2s.system.compiling.COMPILE_MODES`); a ``ValueError`` line first where ``device``
    cannot run compiled kernels (no C++ compiler for a CPU, no Triton for a CUDA GPU).

    The compiled module shares ``net``'s parameters: train it, but save and load ``net``
    itself (the compiled wrapper's state_dict names every key ``_orig_mod.``...).

    ``dynamic=True``: batches differ in size and length from step to step, and a graph compiled
    for one shape (``dynamic=False``) would be compiled again for each new one, until
    torch.compile's recompilation limit sends the rest back to eager. A graph with symbolic
    sizes compiles once; under CUDA graphs each padded shape (:func:`static_shapes`) is then
    recorded once and replayed."""
    check_mode(mode)
    check_compiler(device, "train without --compile")
    return torch.compile(net, mode=mode, dynamic=True)


def compiled_loss(net: torch.nn.Module, src: torch.Tensor, trg: torch.Tensor, *, src_pad: int,
                  trg_pad: int, label_smoothing: float, autocast, max_positions: int,
                  static: bool, rdrop: float = 0.0) -> torch.Tensor:
    """The loss :func:`~convs2s.model.loss.next_token_loss` computes, for a compiled ``net``.

    The output layer runs at every target position, padding included, and the loss ignores the
    padding (``sequence_loss``; the same loss and gradients: ``tests/model/test_loss.py``):
    selecting the real positions first, as the eager step does, gives a tensor whose size
    depends on the batch's values, which splits a compiled graph and defeats CUDA graphs.
    ``static``: pad the batch to a few shapes first (:func:`static_shapes`), and tell the CUDA
    graphs that a new step begins. ``rdrop`` > 0: R-Drop's loss
    (:func:`~convs2s.model.loss.rdrop_loss`), the (padded) batch concatenated with itself.

    Sizes that happen to be equal in the batch that is compiled (as many rows as source
    positions, a source as long as the target) stay distinct symbols: torch.compile would
    otherwise assume them equal ("duck sizing") and compile again at the first batch where
    they are not."""
    if static:
        src, trg = static_shapes(src, trg, src_pad, trg_pad, max_positions)
        torch.compiler.cudagraph_mark_step_begin()
    if rdrop:  # the batch twice: src = [2 * batch, src_len], trg = [2 * batch, trg_len + 1]
        src, trg = torch.cat([src, src]), torch.cat([trg, trg])
    with autocast, fx_config.patch(use_duck_shape=False):
        logits, _ = net(src, trg[:, :-1])  # logits = [batch, trg_len, vocab]
    if rdrop:
        return rdrop_loss(logits, trg[:, 1:], trg_pad, label_smoothing, rdrop)
    return sequence_loss(logits, trg[:, 1:], trg_pad, label_smoothing)


def static_shapes(src: torch.Tensor, trg: torch.Tensor, src_pad: int, trg_pad: int,
                  max_positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """``(src, trg)`` padded to one of a few shapes, with the same loss and gradients.

    Lengths: the source and the decoder input (``trg[:, :-1]``) up to a multiple of
    :data:`LENGTH_MULTIPLE`, at most ``max_positions``. The encoder masks source padding and
    the decoder is causal with the padding's targets ignored, so added positions change no
    real position's output. Rows: up to :func:`padded_rows`; an added row is the first row's
    source (an all-padding source would make its attention NaN, and NaN times a zero gradient
    is NaN) with a target of padding only, so it adds nothing to the loss or its gradients
    (rows never mix)."""
    (rows, s_len), t_len = src.shape, trg.size(1)
    s_new = max(s_len, min(_round_up(s_len, LENGTH_MULTIPLE), max_positions))
    t_new = max(t_len - 1, min(_round_up(t_len - 1, LENGTH_MULTIPLE), max_positions)) + 1
    r_new = padded_rows(rows)
    if (r_new, s_new, t_new) == (rows, s_len, t_len):
        return src, trg
    src_out = src.new_full((r_new, s_new), src_pad)
    src_out[:rows, :s_len] = src
    src_out[rows:, :s_len] = src[:1]
    trg_out = trg.new_full((r_new, t_new), trg_pad)
    trg_out[:rows, :t_len] = trg
    return src_out, trg_out


def padded_rows(n: int) -> int:
    """``n`` rounded up to one of 8 sizes per doubling (1 to 16, then 18, 20, ..., 32, 36, ...):
    at most an eighth more rows, and a few dozen sizes for any batch the loader makes."""
    return _round_up(n, 1 << max(n.bit_length() - 4, 0))


def _round_up(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


# ---------------------------------------------------------------------------------------------
# train() and the command line
# ---------------------------------------------------------------------------------------------


@dataclass
class TrainResult:
    """What :func:`train` returns; ``model`` holds the best weights."""

    model: ConvS2S
    src_vocab: Vocab
    trg_vocab: Vocab
    history: list[dict] = field(default_factory=list)
    best_path: Path | None = None
    last_path: Path | None = None
    stopped: str = ""  # why training ended: "epochs", "early stop", "max_steps", "time budget"
    steps: int = 0
    seconds: float = 0.0
    final_path: Path | None = None  # final.pt (convs2s.run.final_choices), if the preset makes one


def train(
    preset: Preset | str,
    out_dir: str | os.PathLike,
    *,
    data: dict | str | os.PathLike | None = None,
    resume: bool = False,
    device: torch.device | str | None = None,
    progress: bool = True,
    log: Callable[[str], None] = print,
    on_epoch_end: Callable[[dict, ConvS2S], None] | None = None,
) -> TrainResult:
    """Train a ConvS2S model with ``preset`` and write ``best.pt`` / ``last.pt`` into ``out_dir``.

    ``data`` is ``load_multi30k()``'s dict of ``(source, target)`` pairs in the preset's
    direction, or the folder to load it from (default: ``CONVS2S_DATA_DIR``). With
    ``resume=True`` training continues from ``out_dir/last.pt``
    exactly where it stopped. Returns a :class:`TrainResult` whose ``model`` holds the *best*
    weights (lowest validation loss).

    ``on_epoch_end(row, model)`` is called (on the main process) after each completed epoch's
    checkpoints are written, with the epoch's history row and the model (in training mode; do
    not change it). Its time counts as training time: keep it short (copy the weights, score
    them after training).
    """
    preset = get_preset(preset) if isinstance(preset, str) else preset
    if not str(out_dir).strip():  # Path("") is the current folder
        raise ValueError("out_dir (--out) is empty: name the folder for the run's checkpoints.")
    problem = arguments.dangling_link_problem(out_dir, "out_dir (--out)")
    if problem:  # its folder would be "a file", or made at the link's target
        raise ValueError(problem + ".")
    prepare.check_model_size(preset)  # before the data loads (a 15-billion one died there)
    folder = Path(out_dir)
    dist = Distributed(environment.check_device(device) if device is not None else None)
    trainer = None
    # Ctrl-C or SIGTERM while the data loads or the run is set up: the folder this run made is
    # removed (run_folder.held), and a line says so; once training runs, Trainer.run saves.
    try:  # one run per folder: a second one is refused while this one lives
        with StopSignals(), run_folder.held(folder, resume) if dist.main else \
                contextlib.nullcontext():
            if not isinstance(data, dict):
                data = load_multi30k(data, src=preset.src_lang, trg=preset.trg_lang)
            trainer = Trainer(preset, folder, data, dist, resume=resume, progress=progress,
                              log=log, on_epoch_end=on_epoch_end)
            return trainer.result(trainer.run())
    except KeyboardInterrupt as e:
        if trainer is None and dist.main:
            how = "stopped by SIGTERM" if isinstance(e, Terminated) else "interrupted"
            log(f"{how} before training started: nothing was trained or saved")
        raise
    finally:
        dist.close()


def _fraction(text: str) -> float:
    """A probability for dropout or label smoothing: a number from 0 to below 1."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value < 1:
        raise argparse.ArgumentTypeError("expected a number from 0 to below 1, not "
                                         f"{arguments.brief(text)}")
    return value


def _share(text: str) -> float:
    """A learning rate or the factor it shrinks by: a number above 0, at most 1."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"expected a number above 0 and at most 1, not "
                                         f"{arguments.brief(text)}")
    return value


def _rdrop_weight(text: str) -> float:
    """R-Drop's weight: a number from 0 (off) to MAX_RDROP."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= MAX_RDROP:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a number from 0 (off) to {MAX_RDROP:g}, "
                                         f"not {arguments.brief(text)}")
    return value


def _sampling_alpha(text: str) -> float:
    """Subword sampling's alpha: a number from 0 (off) to 1."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 <= value <= 1:  # NaN too
        raise argparse.ArgumentTypeError(f"expected a number from 0 (off) to 1, not "
                                         f"{arguments.brief(text)}")
    return value


#: --out: not an empty name, not a path through a symbolic link to nothing
_folder = arguments.folder_arg("--out")


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError("expected a number of minutes > 0, not "
                                         f"{arguments.brief(text)}")
    return value


def _device(text: str) -> torch.device:
    try:
        dev = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{arguments.brief(text)} is not a device (cpu, cuda, mps)"
                                         ) from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError("cuda was asked for but this machine has no CUDA GPU "
                                         "(or this torch is a CPU build); use --device cpu")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError("mps was asked for but is not available; use cpu")
    return dev


#: The largest model sizes the command takes (the paper's largest WMT model has 15 + 15
#: layers up to 2,048 channels wide); the package's own checks have no upper bound. Together
#: they are bounded by the model's parameters (convs2s.run.prepare.MAX_MODEL_PARAMETERS).
MAX_LAYERS, MAX_WIDTH = 64, 4096


def main(argv: list[str] | None = None) -> int:
    parser = arguments.OneLineParser(
        prog="python -m convs2s.train",
        description="Train ConvS2S on Multi30k (any direction; German→English by default)."
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--out", required=True, type=_folder, help="folder for best.pt and last.pt")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    parser.add_argument("--data-dir", type=Path, help="Multi30k folder (default: CONVS2S_DATA_DIR)")
    parser.add_argument("--device", type=_device,
                        help="cpu, cuda, mps (default: the best available)")
    parser.add_argument("--epochs", type=arguments.whole_number_arg,
                        help="override the preset's epochs")
    parser.add_argument("--max-steps", type=arguments.whole_number_arg,
                        help="override the preset's step limit")
    parser.add_argument("--max-minutes", type=_minutes, help="override the preset's time budget")
    parser.add_argument("--src", choices=LANGUAGES, help="source language (default: the "
                        "preset's, de)")
    parser.add_argument("--trg", choices=LANGUAGES, help="target language (default: the "
                        "preset's, en)")
    parser.add_argument("--tokenizer", choices=TOKENIZER_KINDS,
                        help="word: lower-cased spaCy words; subword: cased sentencepiece "
                        "pieces (default: the preset's)")
    parser.add_argument("--vocab-size", type=arguments.bounded_int_arg(arguments.MAX_VOCAB_SIZE),
                        help="subword pieces per vocabulary (default: the preset's, 8000)")
    parser.add_argument("--joint-vocab", action=argparse.BooleanOptionalAction, default=None,
                        help="subword: one vocabulary for both languages (default) or one each")
    parser.add_argument("--share-embed", action=argparse.BooleanOptionalAction, default=None,
                        help="tie the decoder's output layer to its token embedding (fairseq's "
                        "--share-input-output-embed; default: the preset's, off)")
    parser.add_argument("--layers", type=arguments.bounded_int_arg(MAX_LAYERS),
                        help="override the model's convolutional layers, as many in the "
                        "encoder as in the decoder (the cpu_subword preset's: 4)")
    parser.add_argument("--emb-dim", type=arguments.bounded_int_arg(MAX_WIDTH),
                        help="override the model's token embedding size (cpu_subword: 256)")
    parser.add_argument("--hid-dim", type=arguments.bounded_int_arg(MAX_WIDTH),
                        help="override the model's convolution channels (cpu_subword: 256)")
    parser.add_argument("--dropout", type=_fraction, help="override the model's dropout "
                        "(the cpu_subword preset's: 0.2)")
    parser.add_argument("--label-smoothing", type=_fraction,
                        help="override the preset's label smoothing (0.1)")
    parser.add_argument("--lr", type=_share, help="override the peak learning rate, reached "
                        "after the warm-up (the cpu_subword preset's: 0.002)")
    parser.add_argument("--warmup-steps", type=arguments.whole_number_arg,
                        help="override the updates "
                        "the rate rises over from 0 to its peak (cpu_subword: 200)")
    parser.add_argument("--lr-shrink", type=_share, help="override what the rate is multiplied "
                        "by after each epoch without a better validation loss (0.5; 1: never)")
    parser.add_argument("--rdrop", type=_rdrop_weight, metavar="WEIGHT", help="R-Drop: each "
                        "batch through the model twice (two dropout masks), WEIGHT times the "
                        "symmetric KL between the two passes added to the mean of their losses "
                        "(twice the step's time; the paper's alpha is 2 x WEIGHT); default 0: off")
    parser.add_argument("--subword-sampling", type=_sampling_alpha, metavar="ALPHA",
                        help="subword regularisation (subword tokenizer only): each epoch every "
                        "training sentence segmented afresh at random, by BPE-dropout with "
                        "probability ALPHA for a BPE vocabulary (the presets'), or from all "
                        "segmentations with smoothing ALPHA for a unigram one (0.1-0.2 typical); "
                        "validation and translation use the best segmentation; seeded by the "
                        "run's seed and the epoch; default 0: off")
    parser.add_argument("--patience", type=arguments.whole_number_arg, help="override the preset's "
                        "epochs without a better validation loss before stopping")
    parser.add_argument("--compile", nargs="?", const="default", choices=COMPILE_MODES,
                        metavar="MODE", help="torch.compile the training step: default (MODE "
                        "left out), reduce-overhead or max-autotune (both replay CUDA graphs "
                        "on a GPU); off unless given")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in (("epochs", args.epochs), ("max_steps", args.max_steps),
                                   ("max_minutes", args.max_minutes), ("src_lang", args.src),
                                   ("trg_lang", args.trg), ("tokenizer", args.tokenizer),
                                   ("vocab_size", args.vocab_size),
                                   ("joint_vocab", args.joint_vocab),
                                   ("share_input_output_embed", args.share_embed),
                                   ("enc_layers", args.layers), ("dec_layers", args.layers),
                                   ("emb_dim", args.emb_dim), ("hid_dim", args.hid_dim),
                                   ("dropout", args.dropout),
                                   ("label_smoothing", args.label_smoothing),
                                   ("lr", args.lr), ("warmup_steps", args.warmup_steps),
                                   ("lr_shrink", args.lr_shrink), ("rdrop", args.rdrop),
                                   ("subword_sampling", args.subword_sampling),
                                   ("patience", args.patience), ("compile", args.compile))
                 if v is not None}
    try:
        preset = PRESETS[args.preset].replace(**overrides)
        prepare.check_model_size(preset)  # the size flags together, before the data loads
    except ValueError as e:
        parser.error(str(e))
    try:
        result = train(preset, args.out, data=args.data_dir, resume=args.resume,
                       device=args.device, progress=not args.no_progress)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: last.pt was saved and said so
        return exit_status(e)
    except (CheckpointError, DataError, FloatingPointError, ValueError) as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(run_folder.describe_os_error(e, args.out))
    if result.best_path:
        print(f"best checkpoint: {arguments.shown(str(result.best_path))}")
    if result.final_path:
        print(f"final model (translate with this one): {arguments.shown(str(result.final_path))}")
    return 0


def _fail(message: str) -> int:
    print("error: " + arguments.cut(" ".join(message.split())), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
