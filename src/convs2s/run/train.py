"""Training ConvS2S: a run's state, the learning rate, then the trainer: its setup and its loop,
one method per step.

``train(PRESETS["quick"], "runs/quick")``, or ``python -m convs2s.train --preset quick --out
runs/quick [--resume]``. A step: the next-token loss of a batch, its gradients clipped to
``clip_norm``, an update at the scheduled rate (warm-up, then smaller at every plateau). An epoch:
steps over the batches, the validation loss, a history row, ``last.pt`` (and ``best.pt`` when
validation improved). The loop runs epochs until a limit; Ctrl-C or SIGTERM save ``last.pt``,
and ``resume=True`` continues exactly. NaN/inf stops the run; diverged weights are never saved.
``preset.compile``: ``torch.compile`` (:mod:`~.compiled_training`); ``rdrop``: R-Drop;
``subword_sampling``: subword regularisation (:meth:`Trainer.sample_segmentations`);
``distilled`` and ``extra_sources``: other training pairs (:mod:`~convs2s.run.prepare`);
``init_from``: continued training from another checkpoint (:mod:`~convs2s.run.continued`).

The plumbing is beside it, one module each: :mod:`~convs2s.run.prepare` (data, model,
optimizer), :mod:`~convs2s.run.rng_state` (the random state a resumed run needs),
:mod:`~convs2s.run.time_budget` (``max_minutes``, and the time kept for the final choices),
:mod:`convs2s.system.signals` (Ctrl-C and SIGTERM wait for an update or a checkpoint write to
finish), :mod:`~convs2s.run.run_folder`, :mod:`~convs2s.run.resume`,
:mod:`~convs2s.run.distributed`, :mod:`~convs2s.run.precision` (the optimizer step),
:mod:`~convs2s.run.final_choices` (``final.pt``) and :mod:`~convs2s.run.train_arguments` (the
command line).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from convs2s.data import DataError, Vocab, load_multi30k, make_loader
from convs2s.model.convs2s import ConvS2S
from convs2s.model.loss import evaluate_loss, next_token_loss
from convs2s.run import continued, final_choices, prepare, run_folder, time_budget, train_arguments
from convs2s.run.checkpoint import Checkpoint, CheckpointError, copy_checkpoint
from convs2s.run.compiled_training import compile_for_training, compiled_loss
from convs2s.run.distributed import Distributed
from convs2s.run.precision import clipped_gradients, mixed_precision, update
from convs2s.run.presets import PRESETS, Preset
from convs2s.run.resume import check_train_state, reconcile_best, restore
from convs2s.run.rng_state import StepRandomState, loader_generator, seed_everything
from convs2s.system import arguments, environment
from convs2s.system.compiling import CUDA_GRAPH_MODES
from convs2s.system.signals import StopSignals, exit_status, how_stopped, stopped


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
        self.stored_segmentation: dict | None = None  # last.pt's, inside an epoch (sampling)
        self.segmented_epoch: int | None = None  # the epoch the training pairs are sampled for
        self.rng = StepRandomState()  # what an interrupted step is saved with
        ckpt = self._resumed_from() if resume else None
        self.run_id = (ckpt.run_id if ckpt is not None else None) or uuid.uuid4().hex
        seed_everything(preset.seed)
        datasets = self._build(data, ckpt)
        self.state = TrainState()
        if ckpt is not None:
            self._restore(ckpt)
        self._prepare_steps(*datasets)
        self.clock = time_budget.TrainingClock(self.state.seconds)  # across resumes
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
        if time_budget.out_of_time(s, p):  # with the time kept for final.pt
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
        from tqdm.auto import tqdm  # the progress bar (disabled: nothing shown)

        s, sampler = self.state, self.loader.batch_sampler
        self.sample_segmentations(s.epoch)
        sampler.set_epoch(s.epoch)
        n_batches, skip = len(sampler), s.batch_in_epoch
        bar = tqdm(total=n_batches, initial=skip, desc=f"epoch {s.epoch + 1}/{self.preset.epochs}",
                   leave=False, dynamic_ncols=True, disable=not self.progress)
        if skip == 0:
            s.ep_loss, s.ep_tokens = 0.0, 0
        self._t0, self._t0_tokens = time.monotonic(), s.ep_tokens
        for i, (src, trg) in enumerate(self.loader):
            if i < skip:
                continue  # resuming inside an epoch: these batches were already seen
            loss = self.train_step(i, src, trg)
            seen, seconds = s.ep_tokens - self._t0_tokens, time.monotonic() - self._t0
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{seen / max(seconds, 1e-9):,.0f}")
            if self.should_stop():
                break
        bar.close()
        return s.batch_in_epoch >= n_batches

    def train_step(self, i: int, src: torch.Tensor, trg: torch.Tensor) -> float:
        """One optimizer update on batch ``i`` of the epoch; returns its (smoothed) loss.

        The random state is kept first: a step interrupted before its end is saved as not
        taken, with that state, so the resumed run redraws the same dropout masks for it. The
        update and its record (:meth:`record_step`) happen together or not at all."""
        self.rng.step_begins()
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
        s.seconds = self.clock.seconds()
        self.rng.step_done()

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
        """Vocabularies, model and optimizer; returns the train and validation datasets. A new
        run with ``preset.init_from`` (continued training) starts from that checkpoint's
        vocabularies, text pipeline and weights (:mod:`~convs2s.run.continued`)."""
        preset = self.preset
        vocabs = pipeline = None
        start = continued.initial_checkpoint(preset) if ckpt is None and preset.init_from else ckpt
        if start is not None:  # the vocabularies and text pipeline it trained with
            vocabs, pipeline = (start.src_vocab, start.trg_vocab), start.pipeline
        train_ds, valid_ds, self.src_vocab, self.trg_vocab = prepare.prepare_data(
            preset, data, vocabs, pipeline)
        self.pipeline = train_ds.pipeline
        self.data_record = dict(zip(("train", "valid"), map(
            prepare.fingerprint, prepare.select_pairs(preset, data)), strict=True))
        if train_ds.n_dropped:
            self.say(f"dropped {train_ds.n_dropped} training pairs longer than "
                     f"{preset.model.max_positions} positions")
        self.model = prepare.build_model(preset, self.src_vocab, self.trg_vocab).to(self.device)
        if start is not None and ckpt is None:
            continued.load_initial_weights(start, self.model)
            self.say(f"continued training: the weights, vocabularies and text pipeline of "
                     f"{preset.init_from}")
        self.optimizer = prepare.make_optimizer(self.model, preset)
        self.pad = self.trg_vocab.pad_idx
        return train_ds, valid_ds

    def _resumed_from(self) -> Checkpoint:
        """``last.pt``, loaded through the guard; a file it refuses is said to be no run's
        ``last.pt`` (with --resume there is no other file to pass)."""
        try:
            return Checkpoint.load(self.last_path)
        except CheckpointError as e:
            raise CheckpointError(f"--resume cannot continue from {self.last_path}: {e.problem}. "
                                  "Train afresh with another --out, or put back the last.pt "
                                  "the run wrote.") from None

    def _restore(self, ckpt: Checkpoint) -> None:
        """Continue the run in ``last.pt`` (:func:`convs2s.run.resume.restore`)."""
        stored = restore(ckpt, preset=self.preset, data_record=self.data_record,
                         pipeline=self.pipeline, model=self.model, optimizer=self.optimizer,
                         src_vocab=self.src_vocab, trg_vocab=self.trg_vocab)
        self.stored_segmentation = stored.pop("segmentation", None)
        self.state = s = TrainState.from_dict(stored, self.last_path)
        self.saved["last.pt"] = s.step
        if self.dist.main:
            best = reconcile_best(s.history, s.best_valid_loss, s.step, s.batch_in_epoch,
                                  self.last_path, self.best_path, log=self.say)
            self.saved.update({} if best is None else {"best.pt": best})
            missing = final_choices.missing_snapshot(self.folder, s.snapshots, s.history,
                                                     s.batch_in_epoch)
            if missing:  # last.pt holds the end of the epoch it names: written from it
                final_choices.write_snapshot(self.checkpoint(), self.folder, s.history[-1])
                self.say(f"{missing} was missing (the run stopped between the epoch's last.pt "
                         "and its snapshot): written again from last.pt")
        self.say(f"resumed from {self.last_path}: epoch {s.epoch + 1}, step {s.step}")

    def _prepare_steps(self, train_ds, valid_ds) -> None:
        """Loaders, the DDP wrapper and mixed precision; a resumed position inside the epoch is
        checked against the loader."""
        preset = self.preset
        self.loader = make_loader(train_ds, max_tokens=preset.max_tokens, shuffle=True,
                                  seed=preset.seed, num_replicas=self.dist.world,
                                  rank=self.dist.rank)
        self.loader.generator = loader_generator(preset.seed)  # the same draws after a resume
        self.valid_loader = make_loader(valid_ds, max_tokens=preset.max_tokens, shuffle=False,
                                        bucket=False, num_replicas=1, rank=0)
        self.valid_loader.generator = loader_generator(preset.seed)
        self.net = self.dist.wrap(self.model)
        if preset.compile is not None:  # self.model stays the module: checkpoints save its keys
            self.net = compile_for_training(self.net, preset.compile, self.device)
        self.precision = mixed_precision(self.device, preset.amp)
        self.scaler = self.precision.scaler()  # float16 only: bfloat16 needs no loss scaling
        if preset.subword_sampling:  # the epoch resumed has its own segmentations, and batches
            if not self.put_back_segmentation():
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
        ``epoch`` (:func:`convs2s.run.prepare.sample_segmentations`), once per epoch; nothing
        when it is 0. Seeded by the run's seed and the epoch: the same draws in one process,
        but not in another (:func:`convs2s.data.subword.seeded_sampling`), so under torchrun
        the main process's segmentations are shared with the others, and a ``last.pt`` written
        inside an epoch keeps them for the resumed run (:meth:`put_back_segmentation`).
        Validation, the final choices and translation always tokenize the best way."""
        alpha, ds = self.preset.subword_sampling, self.loader.dataset
        if not alpha or self.segmented_epoch == epoch:
            return
        start = time.monotonic()
        kept = prepare.sample_segmentations(self.loader, self.pipeline, alpha, self.preset.seed,
                                            epoch)
        if self.dist.active:  # every process trains on the main one's segmentations
            sampled = prepare.segmentation_state(self.loader, epoch)
            shared = self.dist.share([sampled[k] for k in prepare.SEGMENTATION_TENSORS])
            if not self.dist.main:
                prepare.set_segmentation(self.loader, dict(zip(
                    prepare.SEGMENTATION_TENSORS, shared, strict=True)))
        if self.segmented_epoch is None:
            how = f", {kept} too long when sampled kept their best segmentation" if kept else ""
            self.say(f"subword sampling (alpha {alpha:g}): {len(ds)} training pairs segmented "
                     f"afresh for epoch {epoch + 1} in {time.monotonic() - start:.1f} s{how}; "
                     "again every epoch")
        self.segmented_epoch = epoch

    def put_back_segmentation(self) -> bool:
        """Resumed inside an epoch with subword sampling: the segmentations that epoch trained
        on, from ``last.pt`` (sampling again in this process would draw others, so batches
        already seen would come again and others never); whether there were any to put back.
        A stored segmentation that does not fit the training pairs is a ``CheckpointError``."""
        stored, epoch = self.stored_segmentation, self.state.epoch
        self.stored_segmentation = None
        if not (isinstance(stored, dict) and type(stored.get("epoch")) is int
                and stored["epoch"] == epoch):
            return False
        try:
            prepare.set_segmentation(self.loader, stored)
        except ValueError as e:
            raise CheckpointError(f"{self.last_path} cannot be resumed: the segmentation it "
                                  f"stored for epoch {epoch + 1} does not fit the training "
                                  f"pairs ({e}). Resume from a last.pt that convs2s wrote, or "
                                  "start a new --out folder.") from None
        self.segmented_epoch = epoch
        self.say(f"subword sampling: epoch {epoch + 1}'s segmentations put back from "
                 f"{self.last_path.name}")
        return True

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

    # -- the final model: its time after each epoch, the choices at the end ----------------------

    def make_final(self) -> None:
        """``final.pt`` if the preset makes one (:func:`convs2s.run.final_choices.finalize`)."""
        if self.preset.average_last and self.dist.main and self.best_path.exists():
            final_choices.finalize(self.folder, self.valid_pairs, device=self.device,
                                   beam=self.preset.final_beam, max_k=self.preset.average_last,
                                   log=self.say)

    def reserve_final_time(self, epoch: int | None = None,
                           why: str = "with this epoch's model") -> None:
        """With a time budget and a final model: what the final choices cost with the model as
        it is now, measured again and kept (:func:`convs2s.run.time_budget.measure_final_time`)."""
        if time_budget.keeps_final_time(self.preset) and self.dist.main:
            time_budget.measure_final_time(
                self.state, self.preset, self.model, self.src_vocab, self.trg_vocab,
                self.pipeline, self.valid_pairs, device=self.device, epoch=epoch, why=why,
                log=self.say)
            self.state.seconds = self.clock.seconds()

    # -- checkpoints ---------------------------------------------------------------------------

    def save_interrupted(self, e: KeyboardInterrupt) -> None:
        """Ctrl-C or SIGTERM (``e``): save ``last.pt`` and say how to continue. Inside a step,
        the step is dropped and the random state from its start is saved
        (:class:`~convs2s.run.rng_state.StepRandomState`), so the resumed run redraws the same
        dropout masks for it."""
        with self.signals.deferred(raise_pending=False):
            self.save()
        self.say(f"{how_stopped(e)} at step {self.state.step}: saved {self.last_path}; "
                 "continue with resume=True (--resume)")

    def save(self, best: bool = False, valid_loss: float | None = None,
             snapshot: bool = False) -> None:
        """Write ``last.pt`` (and copy it to ``best.pt`` if ``best``; at an epoch's end, with
        ``snapshot``, then its snapshot); never diverged weights."""
        why = self._diverged(valid_loss)
        if why:
            raise FloatingPointError(
                f"the weights diverged by step {self.state.step} ({why}). Training stopped "
                f"and they were not saved; {self._kept()}. Lower the learning rate (lr) or "
                "check the data."
            )
        s, keep = self.state, self.preset.average_last
        if not self.dist.main:
            return
        snapshot = snapshot and bool(keep)  # the last `keep` epochs, for the final average
        if snapshot:  # named in last.pt, written after it
            epoch = s.history[-1]["epoch"]
            s.snapshots, dropped = final_choices.keep_snapshot(s.snapshots, epoch, keep)
        with self.signals.deferred():  # last.pt first: nothing is ever ahead of the history
            self.checkpoint().save(self.last_path)
            self.saved["last.pt"] = s.step
            if best:
                copy_checkpoint(self.last_path, self.best_path)
                self.saved["best.pt"] = s.step
            if snapshot:
                final_choices.write_snapshot(self.checkpoint(), self.folder, s.history[-1],
                                             dropped)

    def checkpoint(self) -> Checkpoint:
        """What a checkpoint holds: the model, vocabularies, settings, data and train state."""
        train_state = {**self.state.to_dict(), "optimizer": self.optimizer.state_dict(),
                       "rng": self.rng.to_save()}
        if self.preset.subword_sampling and self.segmented_epoch == self.state.epoch:
            # inside a sampled epoch: its segmentations, which another process cannot redraw
            train_state["segmentation"] = prepare.segmentation_state(self.loader,
                                                                     self.state.epoch)
        return Checkpoint.from_model(
            self.model, self.src_vocab, self.trg_vocab, self.pipeline,
            preset=self.preset.as_dict(), data=self.data_record, run_id=self.run_id,
            train_state=train_state)

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
    preset = prepare.as_preset(preset)  # a Preset, or its name in PRESETS
    _check_arguments(data, log, on_epoch_end)  # before the folder is made and the data read
    if not str(out_dir).strip():  # Path("") is the current folder
        raise ValueError("out_dir (--out) is empty: name the folder for the run's checkpoints.")
    problem = arguments.dangling_link_problem(out_dir, "out_dir (--out)")
    if problem:  # its folder would be "a file", or made at the link's target
        raise ValueError(problem + ".")
    prepare.check_model_size(preset)  # before the data loads (a 15-billion one died there)
    folder = Path(out_dir)
    dist, trainer = None, None
    # Ctrl-C or SIGTERM while the device is set up, the data loads or the run is set up: the
    # folder this run made is removed (run_folder.held), and a line says so; once training
    # runs, Trainer.run saves.
    try:  # one run per folder: a second one is refused while this one lives
        dist = Distributed(environment.check_device(device) if device is not None else None)
        with StopSignals(), run_folder.held(folder, resume) if dist.main else \
                contextlib.nullcontext():
            if not isinstance(data, dict):  # the folder: its direction, and extra sources
                data = prepare.load_extra_sources(preset, load_multi30k(
                    data, src=preset.src_lang, trg=preset.trg_lang), data)
            trainer = Trainer(preset, folder, data, dist, resume=resume, progress=progress,
                              log=log, on_epoch_end=on_epoch_end)
            return trainer.result(trainer.run())
    except KeyboardInterrupt as e:
        if trainer is None and (dist is None or dist.main):
            log(f"{how_stopped(e)} before training started: nothing was trained or saved.")
        raise
    finally:
        if dist is not None:
            dist.close()


def _check_arguments(data, log, on_epoch_end) -> None:
    """A one-line ``TypeError`` (a ``ValueError`` too) for what a notebook may pass by mistake to
    :func:`train`, which would otherwise fail only after the data loaded or the first epoch
    ended (its checkpoints then written): ``data`` that is neither load_multi30k's dict nor a
    folder, a ``log`` or ``on_epoch_end`` that cannot be called as train calls it."""
    import inspect  # here: train.py's first lines are the training itself

    if data is not None and not isinstance(data, dict | str | os.PathLike):
        raise arguments.WrongType(
            "data must be load_multi30k()'s dict (train, valid, test) or a folder holding the "
            f"Multi30k files, not {type(data).__name__}.")
    for name, value, args, takes in (
            ("log", log, ("line",), "one line of text (e.g. print)"),
            ("on_epoch_end", on_epoch_end, ({}, None), "(row, model)")):
        if name == "on_epoch_end" and value is None:
            continue
        if not callable(value):
            raise arguments.WrongType(f"{name} must be a function taking {takes}, not "
                                      f"{arguments.brief(value)}.")
        try:
            signature = inspect.signature(value)
        except (TypeError, ValueError):  # a builtin or extension whose signature is not known
            continue
        try:
            signature.bind(*args)
        except TypeError:
            raise arguments.WrongType(
                f"{name} must be a function taking {takes}, not "
                f"{getattr(value, '__name__', type(value).__name__)}{signature}.") from None


def main(argv: list[str] | None = None) -> int:
    """``python -m convs2s.train``. Ctrl-C or SIGTERM at any point is one line and 130 / 143:
    said here while the flags are read and checked, by :func:`train` from then on."""
    try:
        with StopSignals():
            return _main(argv)
    except KeyboardInterrupt as e:
        return stopped(e, " before training started: nothing was trained or saved")


def _main(argv: list[str] | None) -> int:
    parser = train_arguments.make_parser()
    args = parser.parse_args(argv)  # its checks look at the device: seconds, on a busy machine
    try:
        preset = PRESETS[args.preset].replace(**train_arguments.overrides(args))
        prepare.check_model_size(preset)  # the size flags together, before the data loads
    except ValueError as e:
        parser.error(str(e))
    try:
        result = train(preset, args.out, data=args.data_dir, resume=args.resume,
                       device=args.device, progress=not args.no_progress)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: train said what was saved
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
