"""Training ConvS2S on Multi30k: presets, the training loop, checkpoints, resume, DDP.

Use it from a notebook::

    from convs2s.run.presets import PRESETS
    from convs2s.run.train import train
    result = train(PRESETS["quick"], "runs/quick")

or from the command line::

    python -m convs2s.train --preset cpu --out runs/cpu            # train
    python -m convs2s.train --preset cpu --out runs/cpu --resume   # continue after a stop
    python -m convs2s.train --preset cpu --out runs/en_de --src en --trg de --tokenizer subword
    torchrun --nproc_per_node 2 -m convs2s.train --preset gpu --out runs/gpu   # several GPUs

What it does, and why:

- **Text.** Any direction of Multi30k (``src_lang``/``trg_lang``: en, de, fr, cs; German to
  English by default). ``tokenizer="word"`` (the default, what notebooks 00-08 use): lower-cased
  spaCy words, a vocabulary of those seen twice. ``tokenizer="subword"``: cased sentencepiece
  pieces learned on the training split (``vocab_size``, ``joint_vocab``, ``subword_model``;
  :mod:`convs2s.data.subword`), so the output is cased text with no ``<unk>``. The checkpoint records
  the direction and the tokenizer (the subword models included); resuming with another refuses.

- **Optimizer.** AdamW by default. The paper used Nesterov SGD (lr 0.25, momentum 0.99) on
  WMT-sized data for days. On Multi30k, measured at equal wall time with the ``cpu`` preset
  (``benchmarks/train_choices.py``), AdamW reached a validation loss of 3.47 (perplexity 32)
  where Nesterov SGD reached 4.16 (perplexity 64). ``optimizer="nesterov"`` gives the paper's
  choice.
- **Gradient clipping** at norm 0.1, the paper's value: the deep residual stacks make occasional
  large gradients, and clipping keeps single bad batches from undoing progress.
- **Label smoothing** (0.1 by default), as fairseq's ConvS2S recipes use: it costs a little
  perplexity and buys BLEU by keeping the model from becoming over-confident.
- **LR schedule.** Linear warm-up, then the rate halves whenever validation loss stops improving
  (fairseq's "reduce on plateau"). Training stops early after ``patience`` epochs without
  improvement.
- **Mixed precision on CUDA** (:mod:`convs2s.run.precision`, shared with the baselines): the matrix
  work runs in bfloat16 on tensor cores; weights, the optimizer and the loss stay in float32,
  and no loss scaling is needed. GPUs without native bfloat16 (Colab's T4, compute capability
  7.5) use float16 with a gradient scaler instead.
- **The final model** (subword presets, ``average_last``; :mod:`convs2s.run.final_choices`): each epoch's
  weights are kept for the last few epochs (``snapshots/``), and when training ends the run
  chooses, on validation, between ``best.pt`` and the average of the last k epochs, and beam
  search's length penalty, and writes ``final.pt``: the model to translate with. The time
  budget keeps room for these choices. The subword presets also tie the output layer to the
  target embedding (fairseq's ``share_input_output_embed``: better validation loss in both
  directions measured, 1.686 vs 1.737 de-en, 1.851 vs 1.915 en-de). Neither is the paper's.
- **Checkpoints** ``best.pt`` (lowest validation loss) and ``last.pt`` (written at every epoch
  end, on a time budget or step limit, and when you interrupt with Ctrl-C / the stop button /
  SIGTERM, which a scheduler or ``docker stop`` sends), each written atomically. At an epoch end
  ``last.pt`` is written first and ``best.pt`` copied from it; a signal arriving meanwhile waits
  until both are written, and a run killed between the two is repaired at ``--resume`` (best.pt
  is always the checkpoint the history calls best). ``resume=True`` restores the weights, the
  optimizer, the random-number states and the position inside the epoch, so it continues exactly
  as if never stopped; it refuses a run trained with other settings or data.
- **NaN/inf** in the loss, the weights or the validation loss stops training with a message
  naming the step and the checkpoints that exist; diverged weights are never saved.
- **DDP.** Under ``torchrun`` (``WORLD_SIZE`` > 1) each process trains on its own shard of the
  bucketed batches (gloo on CPU, nccl on GPU); gradients are averaged, so every replica keeps
  identical weights. Rank 0 writes checkpoints and prints.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import errno
import hashlib
import itertools
import json
import math
import os
import random
import signal
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import torch

from convs2s.data import (
    LANGUAGES,
    DataError,
    TranslationDataset,
    Vocab,
    load_multi30k,
    make_loader,
)
from convs2s.data.subword import KINDS, TextPipeline
from convs2s.model.convs2s import ConvS2S
from convs2s.model.loss import (
    evaluate_loss,
    next_token_loss,
    sequence_loss,  # noqa: F401  (notebooks import it from here)
)
from convs2s.run import final_choices
from convs2s.run.checkpoint import (
    Checkpoint,
    CheckpointError,
    check_compatible,
    check_same_run,
    copy_checkpoint,
)
from convs2s.run.final_choices import FINAL, SNAPSHOTS
from convs2s.run.precision import mixed_precision
from convs2s.run.presets import PRESETS, Preset, get_preset  # noqa: F401
from convs2s.run.translator import Translator
from convs2s.system import environment
from convs2s.system.atomic_files import LOCK_NAME, FolderInUse, folder_lock, remove_stale_temps
from convs2s.system.signals import Terminated

# ---------------------------------------------------------------------------------------------
# Results
# ---------------------------------------------------------------------------------------------


@dataclass
class TrainResult:
    model: ConvS2S
    src_vocab: Vocab
    trg_vocab: Vocab
    history: list[dict] = field(default_factory=list)
    best_path: Path | None = None
    last_path: Path | None = None
    stopped: str = ""  # why training ended: "epochs", "early stop", "max_steps", "time budget"
    steps: int = 0
    seconds: float = 0.0
    final_path: Path | None = None  # final.pt (convs2s.run.final_choices), when the preset makes one


# ---------------------------------------------------------------------------------------------
# Pieces
# ---------------------------------------------------------------------------------------------


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)


def _rng_state() -> dict:
    state = {"torch": torch.get_rng_state(), "python": random.getstate()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def _set_rng_state(state: dict) -> None:
    torch.set_rng_state(state["torch"])
    random.setstate(state["python"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def make_optimizer(model: torch.nn.Module, preset: Preset) -> torch.optim.Optimizer:
    if preset.optimizer == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=preset.lr, betas=(0.9, 0.98),
                                 weight_decay=preset.weight_decay)
    if preset.optimizer == "nesterov":
        return torch.optim.SGD(model.parameters(), lr=preset.lr, momentum=preset.momentum,
                               nesterov=True, weight_decay=preset.weight_decay)
    raise ValueError(f"optimizer must be 'adamw' or 'nesterov', not {preset.optimizer!r}.")


def make_pipeline(preset: Preset, train_pairs) -> TextPipeline:
    """The preset's text pipeline; a subword one is learned on ``train_pairs`` (or its cache)."""
    if preset.tokenizer == "word":
        return TextPipeline.word(preset.src_lang, preset.trg_lang, lower=preset.lower)
    return TextPipeline.learn(train_pairs, preset.src_lang, preset.trg_lang,
                              preset.subword_settings())


def prepare_data(
    preset: Preset, data: dict | None = None, vocabs: tuple[Vocab, Vocab] | None = None,
    pipeline: TextPipeline | None = None,
):
    """Tokenize, build (or reuse) the vocabularies and the train/valid datasets for a preset.

    ``pipeline`` (default: :func:`make_pipeline`'s) tokenizes; the pipeline used is
    ``train_ds.pipeline``."""
    train_pairs, valid_pairs = select_pairs(preset, data)
    if pipeline is None:
        pipeline = make_pipeline(preset, train_pairs)
    tok_src, tok_trg = pipeline.src_tokenizer, pipeline.trg_tokenizer
    if vocabs is None:
        src_vocab, trg_vocab = pipeline.vocabs(train_pairs, min_freq=preset.min_freq)
    else:
        src_vocab, trg_vocab = vocabs
    kw = dict(max_len=preset.max_positions)
    train_ds = TranslationDataset(train_pairs, tok_src, tok_trg, src_vocab, trg_vocab, **kw)
    valid_ds = TranslationDataset(valid_pairs, tok_src, tok_trg, src_vocab, trg_vocab, **kw)
    train_ds.pipeline = valid_ds.pipeline = pipeline
    return train_ds, valid_ds, src_vocab, trg_vocab


def select_pairs(preset: Preset, data: dict | None = None) -> tuple[list, list]:
    """The training and validation pairs a preset uses (``data`` defaults to Multi30k in the
    preset's direction; a given ``data`` must already be ``(source, target)`` pairs)."""
    if data is None:
        data = load_multi30k(src=preset.src_lang, trg=preset.trg_lang)
    for split in ("train", "valid"):
        if split not in data or not data[split]:
            raise ValueError(f"data has no {split!r} split; expected load_multi30k()'s dict.")
    train_pairs = data["train"][: preset.train_pairs] if preset.train_pairs else data["train"]
    valid_pairs = data["valid"][: preset.valid_pairs] if preset.valid_pairs else data["valid"]
    return train_pairs, valid_pairs


def fingerprint(pairs: list) -> dict:
    """How many pairs and their sha256: what a checkpoint records of the data it trained on."""
    text = json.dumps([list(p) for p in pairs], ensure_ascii=False)
    return {"pairs": len(pairs), "sha256": hashlib.sha256(text.encode("utf-8")).hexdigest()}


def build_model(preset: Preset, src_vocab: Vocab, trg_vocab: Vocab) -> ConvS2S:
    return ConvS2S(len(src_vocab), len(trg_vocab), src_pad_idx=src_vocab.pad_idx,
                   trg_pad_idx=trg_vocab.pad_idx, **preset.model_kwargs())


STOP_REASONS = ("", "epochs", "early stop", "time budget", "max_steps")
"""Why :meth:`Trainer.should_stop` stops a run, in rising precedence when processes differ."""


class _Distributed:
    """torchrun's environment, or a single process."""

    def __init__(self, device: torch.device | None):
        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.active = self.world > 1
        if device is None:
            device = environment.device()
        if self.active and device.type == "cuda":
            device = torch.device("cuda", self.local_rank)
            torch.cuda.set_device(device)
        self.device = device
        self.started_here = False
        if self.active and not torch.distributed.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            torch.distributed.init_process_group(backend=backend)
            self.started_here = True

    @property
    def main(self) -> bool:
        return self.rank == 0

    def agree(self, reason: str) -> str:
        """One stopping decision for every process: the first of ``STOP_REASONS`` any of them
        gives (``""``: all go on). Each process times its own run, and only the main one keeps
        time for the final choices, so left alone they would stop at different steps and the
        others would wait forever in the next gradient all-reduce."""
        if not self.active:
            return reason
        code = torch.tensor([STOP_REASONS.index(reason)], device=self.device)
        torch.distributed.all_reduce(code, op=torch.distributed.ReduceOp.MAX)
        return STOP_REASONS[int(code.item())]

    def close(self) -> None:
        if self.started_here and torch.distributed.is_initialized():
            torch.distributed.destroy_process_group()


# ---------------------------------------------------------------------------------------------
# Stopping signals, the run folder
# ---------------------------------------------------------------------------------------------


class _StopSignals:
    """While installed, SIGINT (Ctrl-C, Jupyter's stop button) raises KeyboardInterrupt and
    SIGTERM raises :class:`Terminated`, except inside :meth:`deferred` blocks, where the signal
    waits for the block's end: a step's update and its bookkeeping, or the writes of ``last.pt``
    and ``best.pt``, are never cut in half."""

    SIGNALS = (signal.SIGINT, signal.SIGTERM)

    def __init__(self):
        self.depth, self.pending, self.previous = 0, None, {}

    def __enter__(self):
        if threading.current_thread() is threading.main_thread():
            for sig in self.SIGNALS:
                if signal.getsignal(sig) is not signal.SIG_IGN:  # e.g. nohup: leave it ignored
                    self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc):
        for sig, handler in self.previous.items():
            fallback = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
            signal.signal(sig, handler if handler is not None else fallback)
        self.previous, self.pending = {}, None

    def _handle(self, signum, frame):
        if self.depth:
            self.pending = signum
        else:
            self._raise(signum)

    @staticmethod
    def _raise(signum):
        raise Terminated("SIGTERM") if signum == signal.SIGTERM else KeyboardInterrupt

    @contextmanager
    def deferred(self, raise_pending: bool = True) -> Iterator[None]:
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        if not self.depth and self.pending is not None:
            signum, self.pending = self.pending, None
            if raise_pending:
                self._raise(signum)


CHECKPOINTS = ("last.pt", "best.pt")


def make_folder(folder: Path) -> list[Path]:
    """Create ``folder`` (and its parents) if needed; the folders created, deepest first.

    ``CheckpointError`` (one line) if it cannot be: a file is in the way, or no permission."""
    created, p = [], folder
    while not p.exists() and p != p.parent:
        created, p = [*created, p], p.parent
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        remove_empty_folders(created)
        raise _unwritable(folder, e) from None
    return created


def _unwritable(folder: Path, e: OSError) -> CheckpointError:
    if isinstance(e, FileExistsError | NotADirectoryError):
        return CheckpointError(f"cannot write checkpoints into {folder}: it (or a folder above "
                               "it) is a file. Choose another --out folder.")
    return CheckpointError(f"cannot write checkpoints into {folder} ({e.strerror}). Choose "
                           "another --out folder, or make this one writable.")


def claim_folder(folder: Path, resume: bool) -> None:
    """Check, before any work, that ``folder`` (made, and held by this process) can take this
    run's checkpoints.

    Refuses a folder holding another run (unless resuming it), or a folder it cannot write to
    (probed with a temporary file of the checkpoints' own pattern), and removes the temporary
    files a killed run left.
    """
    if resume and not (folder / "last.pt").is_file():
        raise CheckpointError(f"{folder} holds no last.pt to resume from; start a new run "
                              "without resume=True (--resume), or pass the run's folder.")
    if not resume and (any((folder / name).exists() for name in (*CHECKPOINTS, FINAL))
                       or any((folder / SNAPSHOTS).glob("epoch*.pt"))):
        raise CheckpointError(
            f"{folder} already holds a training run (last.pt). Continue it with "
            "resume=True (--resume), or choose another output folder."
        )
    try:
        fd, probe = tempfile.mkstemp(dir=folder, prefix=".last.pt.", suffix=".tmp")
        os.close(fd)
        os.unlink(probe)
    except OSError as e:
        raise _unwritable(folder, e) from None
    remove_stale_temps(folder, list(CHECKPOINTS))


def remove_empty_folders(folders: list[Path]) -> None:
    for folder in folders:  # deepest first; only folders this run created, only when empty
        try:
            folder.rmdir()
        except OSError:
            return


# ---------------------------------------------------------------------------------------------
# The trainer
# ---------------------------------------------------------------------------------------------


class Trainer:
    """One training run: the model, its data and optimizer, and the ``state`` checkpoints hold.

    :meth:`run` repeats :meth:`run_epoch` until :meth:`should_stop` gives a reason; an epoch is
    :meth:`train_step` over its batches, then :meth:`validate` and :meth:`save`.
    """

    def __init__(self, preset: Preset, folder: Path, data: dict, dist: _Distributed, *,
                 resume: bool = False, progress: bool = True, log: Callable = print,
                 on_epoch_end: Callable[[dict, ConvS2S], None] | None = None):
        self.preset, self.folder, self.dist, self.device = preset, folder, dist, dist.device
        self.on_epoch_end = on_epoch_end
        self.say = log if dist.main else (lambda *_: None)
        self.progress = progress and dist.main
        self.last_path, self.best_path = folder / "last.pt", folder / "best.pt"
        self.final_path = folder / FINAL
        # raw text, for the final choices (convs2s.run.final_choices)
        self.valid_pairs = select_pairs(preset, data)[1][:preset.final_pairs]
        self.signals, self.saved = _StopSignals(), {}  # saved: checkpoint name -> its step
        self._rng_at_step_start = None  # set while a step is under way (see run)
        ckpt = Checkpoint.load(self.last_path) if resume else None
        self.run_id = (ckpt.run_id if ckpt is not None else None) or uuid.uuid4().hex
        seed_everything(preset.seed)
        datasets = self._build(data, ckpt)
        self.state = {"step": 0, "epoch": 0, "batch_in_epoch": 0, "history": [],
                      "best_valid_loss": math.inf, "bad_epochs": 0, "lr_scale": 1.0,
                      "seconds": 0.0, "ep_loss": 0.0, "ep_tokens": 0,
                      "snapshots": [], "final_reserve": 0.0}
        if ckpt is not None:
            self._restore(ckpt)
        self._prepare_steps(*datasets)
        self._start, self._start_seconds = time.monotonic(), self.state["seconds"]

    def _build(self, data: dict, ckpt: Checkpoint | None) -> tuple:
        """Vocabularies, model and optimizer; returns the train and validation datasets."""
        preset = self.preset
        vocabs = pipeline = None
        if ckpt is not None:  # the vocabularies and text pipeline it trained with
            vocabs, pipeline = (ckpt.src_vocab, ckpt.trg_vocab), ckpt.pipeline
        train_ds, valid_ds, self.src_vocab, self.trg_vocab = prepare_data(
            preset, data, vocabs, pipeline)
        self.pipeline = train_ds.pipeline
        self.data_record = dict(zip(("train", "valid"),
                                    map(fingerprint, select_pairs(preset, data)), strict=True))
        if train_ds.n_dropped:
            self.say(f"dropped {train_ds.n_dropped} training pairs longer than "
                     f"{preset.max_positions} positions")
        self.model = build_model(preset, self.src_vocab, self.trg_vocab).to(self.device)
        self.optimizer = make_optimizer(self.model, preset)
        self.pad = self.trg_vocab.pad_idx
        return train_ds, valid_ds

    def _prepare_steps(self, train_ds, valid_ds) -> None:
        """Loaders, the DDP wrapper and mixed precision."""
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
        self.net = self.model
        if self.dist.active:
            ids = [self.device.index] if self.device.type == "cuda" else None
            self.net = torch.nn.parallel.DistributedDataParallel(self.model, device_ids=ids)
        self.precision = mixed_precision(self.device, preset.amp)
        self.scaler = self.precision.scaler()  # float16 only: bfloat16 needs no loss scaling

    def _check_same_text(self) -> None:
        """Refuse to resume a run trained in another direction or with another tokenizer.

        The preset's fields say so for checkpoints that recorded them; this also covers older
        checkpoints (German to English, word-level) and compares what the checkpoint holds."""
        recorded = self.pipeline.settings_dict()
        p = self.preset
        wanted = {"src_lang": p.src_lang, "trg_lang": p.trg_lang, "kind": p.tokenizer}
        if p.tokenizer == "word":
            wanted["lower"] = p.lower
        else:
            wanted.update(p.subword_settings().as_dict())
        diffs = [f"{k}: checkpoint {recorded.get(k)!r}, now {v!r}"
                 for k, v in wanted.items() if recorded.get(k) != v]
        if diffs:
            raise CheckpointError(
                f"{self.last_path} was trained with other settings or data (direction or "
                "tokenizer: " + "; ".join(diffs) + "). Resume with the settings it was trained "
                "with (--src, --trg, --tokenizer, --vocab-size, --joint-vocab), or start a new "
                "--out folder.")

    def _restore(self, ckpt: Checkpoint) -> None:
        """Continue the run in ``last.pt``: same settings and data, or a clear refusal."""
        train_state = ckpt.resumable()
        check_same_run(ckpt, {**dataclasses.asdict(self.preset), "data": self.data_record},
                       self.last_path, ignore=("name", "epochs", "max_steps", "max_minutes"))
        self._check_same_text()
        check_compatible(ckpt, self.model.config, self.src_vocab, self.trg_vocab, self.last_path)
        self.model.load_state_dict(ckpt.state_dict)
        self.optimizer.load_state_dict(train_state["optimizer"])
        self.state.update({k: v for k, v in train_state.items() if k not in ("optimizer", "rng")})
        _set_rng_state(train_state["rng"])
        self.saved["last.pt"] = self.state["step"]
        if self.dist.main:
            self._reconcile_best()
        self.say(f"resumed from {self.last_path}: epoch {self.state['epoch'] + 1}, "
                 f"step {self.state['step']}")

    def _reconcile_best(self) -> None:
        """Make ``best.pt`` the checkpoint the history calls best, after a kill between saves."""
        best_loss = self.state["best_valid_loss"]
        row = next((r for r in self.state["history"] if r["valid_loss"] == best_loss), None)
        found = None
        if self.best_path.exists():
            found = Checkpoint.load(self.best_path).step
        if row is None and found is None or row is not None and found == row["step"]:
            self.saved.update({} if found is None else {"best.pt": found})
            return
        if row is not None and self.state["step"] == row["step"] and \
                self.state["batch_in_epoch"] == 0:  # last.pt is that epoch's end: best's twin
            copy_checkpoint(self.last_path, self.best_path)
            self.saved["best.pt"] = row["step"]
            self.say(f"best.pt was behind last.pt (stopped between the two saves): copied "
                     f"last.pt (epoch {row['epoch']}) to best.pt")
            return
        wanted = "none" if row is None else f"epoch {row['epoch']}, step {row['step']}"
        raise CheckpointError(
            f"{self.best_path} does not match the history in {self.last_path} (best.pt: "
            f"{'missing' if found is None else f'step {found}'}; the history's best: {wanted}) "
            "and cannot be rebuilt from it. Put back this run's best.pt, or start a new "
            "--out folder."
        )

    # -- the loop ------------------------------------------------------------------------------

    def run(self) -> str:
        """Train until a limit; return why it stopped. Ctrl-C / SIGTERM save ``last.pt``."""
        with self.signals:
            try:
                while not (stop := self.should_stop()):
                    self.run_epoch()
                if self.preset.average_last and self.dist.main and self.best_path.exists():
                    final_choices.finalize(self.folder, self.valid_pairs, device=self.device,
                                   beam=self.preset.final_beam,
                                   max_k=self.preset.average_last, log=self.say)
            except KeyboardInterrupt as e:
                # Inside a step, the step is dropped and the random state from its start is
                # saved, so the resumed run redraws the same dropout masks for it.
                with self.signals.deferred(raise_pending=False):
                    self.save(rng=self._rng_at_step_start)
                how = "stopped by SIGTERM" if isinstance(e, Terminated) else "interrupted"
                self.say(f"{how} at step {self.state['step']}: saved {self.last_path}; "
                         "continue with resume=True (--resume)")
                raise
        return stop

    def should_stop(self) -> str:
        """Why training must stop now ("" to go on): a step or time limit, a plateau, the end;
        under torchrun, the same answer in every process (:meth:`_Distributed.agree`)."""
        return self.dist.agree(self._stop_here())

    def _stop_here(self) -> str:
        """:meth:`should_stop` as this process sees it."""
        s, preset = self.state, self.preset
        if preset.max_steps is not None and s["step"] >= preset.max_steps:
            return "max_steps"
        if preset.max_minutes and s["seconds"] + self.final_reserve() >= \
                60 * preset.max_minutes:  # (the final choices get the time they need)
            return "time budget"
        if s["bad_epochs"] >= preset.patience:
            return "early stop"
        if s["epoch"] >= preset.epochs:
            return "epochs"
        return ""

    def final_reserve(self) -> float:
        """Seconds of the budget kept for the final choices if the run stopped now: one
        candidate per finished epoch up to ``average_last`` (the snapshots that exist then)."""
        s = self.state
        costs = s.get("final_costs")
        if not costs:
            return s.get("final_reserve", 0.0)
        candidates = min(max(s["epoch"], 1), max(self.preset.average_last, 1))
        return final_choices.reserve_seconds(costs, candidates)

    def run_epoch(self) -> None:
        """Train on the rest of the current epoch or until a limit; at its end validate; save."""
        s, sampler = self.state, self.loader.batch_sampler
        sampler.set_epoch(s["epoch"])
        n_batches, skip = len(sampler), s["batch_in_epoch"]
        bar = _progress(n_batches, f"epoch {s['epoch'] + 1}/{self.preset.epochs}",
                        self.progress, initial=skip)
        if skip == 0:
            s["ep_loss"], s["ep_tokens"] = 0.0, 0
        self._t0, self._t0_tokens = time.monotonic(), s["ep_tokens"]
        for i, (src, trg) in enumerate(self.loader):
            if i < skip:
                continue  # resuming inside an epoch: these batches were already seen
            loss = self.train_step(i, src, trg)
            if bar is not None:
                rate = (s["ep_tokens"] - self._t0_tokens) / max(time.monotonic() - self._t0, 1e-9)
                bar.update(1)
                bar.set_postfix(loss=f"{loss:.3f}", tok_s=f"{rate:,.0f}")
            if self.should_stop():
                break
        if bar is not None:
            bar.close()
        if s["batch_in_epoch"] < n_batches:
            self.save()  # stopped inside the epoch
            return
        valid_loss = self.validate()
        self.reserve_final_time()  # with this epoch's model; saved in its checkpoints below
        with self.signals.deferred():  # the epoch's record and both its checkpoints, or none
            improved = self.end_epoch(valid_loss)
            self.save_snapshot()
            self.save(best=improved, valid_loss=valid_loss)
        if self.on_epoch_end is not None and self.dist.main:
            self.on_epoch_end(dict(self.state["history"][-1]), self.model)

    def train_step(self, i: int, src: torch.Tensor, trg: torch.Tensor) -> float:
        """One optimizer step on batch ``i`` of the epoch; returns its (smoothed) loss."""
        self._rng_at_step_start = _rng_state()
        src, trg = src.to(self.device), trg.to(self.device)
        trg_out = trg[:, 1:]
        loss = next_token_loss(self.net, src, trg, self.pad, self.preset.label_smoothing,
                               self.precision.autocast())
        if not torch.isfinite(loss):
            raise FloatingPointError(
                f"the training loss became {loss.item()} at step {self.state['step'] + 1} "
                f"(epoch {self.state['epoch'] + 1}, batch {i + 1}). Training stopped; "
                f"{self._kept()}. Lower the learning rate (lr) or check the data."
            )
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.unscale_(self.optimizer)  # clip the true gradients, not scaled ones
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.preset.clip_norm)
        tokens, s = int((trg_out != self.pad).sum()), self.state
        with self.signals.deferred():  # the update and its bookkeeping: both or neither
            _set_lr(self.optimizer, self.preset, s["step"] + 1, s["lr_scale"])
            self.scaler.step(self.optimizer)
            self.scaler.update()
            s["step"] += 1
            s["batch_in_epoch"] = i + 1
            s["ep_loss"] += loss.item() * tokens
            s["ep_tokens"] += tokens
            s["seconds"] = self._start_seconds + time.monotonic() - self._start
            self._rng_at_step_start = None
        return loss.item()

    def validate(self) -> float:
        """Mean per-token validation cross-entropy (no smoothing)."""
        return evaluate_loss(self.model, self.valid_loader, self.pad, self.device)

    def end_epoch(self, valid_loss: float) -> bool:
        """Record the epoch in the history, move to the next, halve the LR on a plateau.

        Returns whether the validation loss improved on the best so far."""
        s = self.state
        seen, seconds = s["ep_tokens"] - self._t0_tokens, time.monotonic() - self._t0
        row = {"epoch": s["epoch"] + 1, "step": s["step"],
               "train_loss": s["ep_loss"] / max(s["ep_tokens"], 1), "valid_loss": valid_loss,
               "valid_ppl": math.exp(min(valid_loss, 50)),
               "lr": self.optimizer.param_groups[0]["lr"], "seconds": round(s["seconds"], 1),
               "tokens_per_s": seen * self.dist.world / max(seconds, 1e-9)}
        row["attention"] = self.watched_attention()
        s["history"].append(row)
        self.say(f"epoch {row['epoch']:>2}: train loss {row['train_loss']:.3f} (smoothed)  "
                 f"valid loss {valid_loss:.3f}  valid ppl {row['valid_ppl']:.2f}  "
                 f"{row['tokens_per_s']:,.0f} tok/s  {row['seconds']:.0f} s")
        s["epoch"] += 1
        s["batch_in_epoch"] = 0
        improved = valid_loss < s["best_valid_loss"]
        if improved:
            s["best_valid_loss"], s["bad_epochs"] = valid_loss, 0
        else:
            s["bad_epochs"] += 1
            s["lr_scale"] *= self.preset.lr_shrink
        return improved

    # -- checkpoints ---------------------------------------------------------------------------

    def save(self, rng: dict | None = None, best: bool = False,
             valid_loss: float | None = None) -> None:
        """Write ``last.pt`` (and copy it to ``best.pt`` if ``best``); never diverged weights."""
        why = self._diverged(valid_loss)
        if why:
            raise FloatingPointError(
                f"the weights diverged by step {self.state['step']} ({why}). Training stopped "
                f"and they were not saved; {self._kept()}. Lower the learning rate (lr) or "
                "check the data."
            )
        if not self.dist.main:
            return
        with self.signals.deferred():  # last.pt first: best.pt is never ahead of the history
            self.checkpoint(rng).save(self.last_path)
            self.saved["last.pt"] = self.state["step"]
            if best:
                copy_checkpoint(self.last_path, self.best_path)
                self.saved["best.pt"] = self.state["step"]

    @torch.no_grad()
    def watched_attention(self) -> list:
        """Every decoder layer's attention on the first validation pair under teacher forcing,
        ``[layers][trg tokens][src tokens]`` (rounded), so a run's history shows how attention
        is learned epoch by epoch (:func:`convs2s.course.analysis.attention_by_epoch`). An eval-mode
        forward pass: it draws no random numbers, so resuming stays exact."""
        if not self.valid_pairs:
            return []
        src_text, trg_text = self.valid_pairs[0]
        room = self.preset.max_positions - 1  # as the data: src plain, trg in <bos> ... <eos>
        src_tokens = self.pipeline.src_tokenizer(src_text)[:room]
        trg_tokens = self.pipeline.trg_tokenizer(trg_text)[:room]
        src = torch.tensor([self.src_vocab.encode(src_tokens)], device=self.device)
        trg = torch.tensor([self.trg_vocab.encode(trg_tokens, add_bos_eos=True)],
                           device=self.device)
        was_training = self.model.training
        self.model.eval()
        _, attention = self.model(src, trg[:, :-1])  # [1, layers, len(trg_tokens) + 1, src_len]
        self.model.train(was_training)
        # rows: the tokens the decoder outputs (the reference's, then <eos>); columns: source
        self.state["watched"] = {"src": list(src_tokens), "trg": [*trg_tokens, "<eos>"]}
        return [[[round(float(x), 4) for x in r] for r in layer] for layer in attention[0].cpu()]

    def save_snapshot(self) -> None:
        """This epoch's weights as ``snapshots/epochNN.pt`` (for the final average); only the
        last ``average_last`` are kept, and only files this run wrote are ever removed."""
        s, k = self.state, self.preset.average_last
        if not k or not self.dist.main:
            return
        row = s["history"][-1]
        path = final_choices.snapshot_path(self.folder, row["epoch"])
        path.parent.mkdir(exist_ok=True)
        snap = dataclasses.replace(self.checkpoint(), train_state=None, extra={"row": dict(row)})
        snap.save(path)
        s["snapshots"] = [n for n in s["snapshots"] if n != path.name] + [path.name]
        for name in s["snapshots"][:-k]:
            (path.parent / name).unlink(missing_ok=True)
        s["snapshots"] = s["snapshots"][-k:]

    def reserve_final_time(self) -> None:
        """After every epoch, with a time budget: time decoding a few validation sentences with
        the model as it is now, and keep the time the final choices will take out of the
        training budget (:meth:`final_reserve`).

        Measured again every epoch because decoding time follows the model: an early model's
        greedy outputs often run on to the length limit. Measured once, after epoch 1, it
        overstated the choices' cost (a one-thread en->fr run: 261 s per candidate measured
        after epoch 1; its two candidates and the length-penalty sweep then took 2.8 minutes
        together), so the run stopped with minutes of its budget unused."""
        s, preset = self.state, self.preset
        if not (preset.average_last and preset.max_minutes and self.dist.main):
            return
        translator = Translator(self.model, self.src_vocab, self.trg_vocab,
                                pipeline=self.pipeline, device=self.device)
        try:
            costs = final_choices.estimate_costs(translator, self.valid_pairs, beam=preset.final_beam)
        finally:
            self.model.train()
        before = s.get("final_costs")
        s["final_costs"], s["final_costs_epoch"] = costs, s["epoch"] + 1  # this epoch's model
        s["final_reserve"] = final_choices.reserve_seconds(costs, preset.average_last)
        s["seconds"] = self._start_seconds + time.monotonic() - self._start
        if before is None or abs(costs["greedy"] - before["greedy"]) > 0.25 * before["greedy"]:
            self.say(f"keeping time for the final model's choices: {costs['greedy']:.0f} s per "
                     f"weight candidate (up to {preset.average_last}, one per finished epoch) "
                     f"and {costs['beam']:.0f} s for the length-penalty sweep"
                     + ("" if before is None else " (measured again with this epoch's model)"))

    def checkpoint(self, rng: dict | None = None) -> Checkpoint:
        """What a checkpoint holds: the model, vocabularies, settings, data and train state."""
        return Checkpoint.from_model(
            self.model, self.src_vocab, self.trg_vocab, self.pipeline,
            preset=dataclasses.asdict(self.preset), data=self.data_record, run_id=self.run_id,
            train_state={**self.state, "optimizer": self.optimizer.state_dict(),
                         "rng": rng if rng is not None else _rng_state()})

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
        result = TrainResult(self.model, self.src_vocab, self.trg_vocab, s["history"], None,
                             self.last_path, stop, s["step"], s["seconds"])
        if self.best_path.exists():
            best = Checkpoint.load(self.best_path, map_location=self.device)
            self.model.load_state_dict(best.state_dict)
            result.best_path = self.best_path
        if self.preset.average_last and self.final_path.exists():
            result.final_path = self.final_path
        self.model.eval()
        if s["history"]:
            best = f"best valid loss {s['best_valid_loss']:.3f}"
        else:  # stopped inside the first epoch: never validated, no best.pt
            best = ("no epoch finished, so nothing was validated and the model keeps the last "
                    "weights (raise max_minutes or max_steps to finish one)")
        self.say(f"stopped ({stop}) after {s['step']} steps, {s['seconds']:.0f} s; {best}")
        return result


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
    folder = Path(out_dir)
    dist = _Distributed(environment.check_device(device) if device is not None else None)
    created: list[Path] = []
    try:
        with contextlib.ExitStack() as held:
            if dist.main:  # one run per folder: a second one is refused while this one lives
                created = make_folder(folder)
                held.enter_context(folder_lock(folder))
                claim_folder(folder, resume)
            if not isinstance(data, dict):
                data = load_multi30k(data, src=preset.src_lang, trg=preset.trg_lang)
            trainer = Trainer(preset, folder, data, dist, resume=resume, progress=progress,
                              log=log, on_epoch_end=on_epoch_end)
            return trainer.result(trainer.run())
    except BaseException as e:
        if created and folder.is_dir() and all(p.name == LOCK_NAME for p in folder.iterdir()):
            (folder / LOCK_NAME).unlink()  # a folder this run made and left empty: remove it
            remove_empty_folders(created)
        if isinstance(e, FolderInUse):
            raise CheckpointError(str(e)) from None
        raise
    finally:
        dist.close()


def _set_lr(optimizer, preset: Preset, step: int, lr_scale: float) -> None:
    """Linear warm-up over ``warmup_steps``, then ``lr · lr_scale`` (halved on plateaus)."""
    warm = min(1.0, step / max(preset.warmup_steps, 1))
    lr = max(preset.lr * warm * lr_scale, min(preset.min_lr, preset.lr * warm))
    for group in optimizer.param_groups:
        group["lr"] = lr


def _progress(total: int, desc: str, enabled: bool, initial: int = 0):
    if not enabled:
        return None
    from tqdm.auto import tqdm

    return tqdm(total=total, desc=desc, initial=initial, leave=False, dynamic_ncols=True)


# ---------------------------------------------------------------------------------------------
# Command line
# ---------------------------------------------------------------------------------------------


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # one line, not the usage block
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def _whole_number(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number >= 1, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _minutes(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise argparse.ArgumentTypeError(f"expected a number of minutes > 0, not {text!r}")
    return value


def _device(text: str) -> torch.device:
    try:
        dev = torch.device(text)
    except RuntimeError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a device (cpu, cuda, mps)") from None
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise argparse.ArgumentTypeError("cuda was asked for but this machine has no CUDA GPU "
                                         "(or this torch is a CPU build); use --device cpu")
    if dev.type == "mps" and not torch.backends.mps.is_available():
        raise argparse.ArgumentTypeError("mps was asked for but is not available; use cpu")
    return dev


def describe_os_error(e: OSError, folder: Path) -> str:
    """One line naming an OSError's problem and its fix."""
    where = Path(e.filename).parent if e.filename else folder
    if e.errno in (errno.ENOSPC, errno.EDQUOT):
        return (f"no space left on device in {where}: free some space there, or choose another "
                "--out folder on a disk with room.")
    if e.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return (f"cannot write to {e.filename or folder} ({e.strerror}): choose another --out "
                "folder, or make this one writable.")
    return f"{e.strerror or e} ({e.filename or folder})."


def main(argv: list[str] | None = None) -> int:
    parser = _Parser(
        prog="python -m convs2s.train",
        description="Train ConvS2S on Multi30k (any direction; German→English by default)."
    )
    parser.add_argument("--preset", choices=sorted(PRESETS), required=True)
    parser.add_argument("--out", required=True, type=Path, help="folder for best.pt and last.pt")
    parser.add_argument("--resume", action="store_true", help="continue from OUT/last.pt")
    parser.add_argument("--data-dir", type=Path, help="Multi30k folder (default: CONVS2S_DATA_DIR)")
    parser.add_argument("--device", type=_device,
                        help="cpu, cuda, mps (default: the best available)")
    parser.add_argument("--epochs", type=_whole_number, help="override the preset's epochs")
    parser.add_argument("--max-steps", type=_whole_number, help="override the preset's step limit")
    parser.add_argument("--max-minutes", type=_minutes, help="override the preset's time budget")
    parser.add_argument("--src", choices=LANGUAGES, help="source language (default: the "
                        "preset's, de)")
    parser.add_argument("--trg", choices=LANGUAGES, help="target language (default: the "
                        "preset's, en)")
    parser.add_argument("--tokenizer", choices=KINDS, help="word: lower-cased spaCy words; "
                        "subword: cased sentencepiece pieces (default: the preset's)")
    parser.add_argument("--vocab-size", type=_whole_number, help="subword pieces per "
                        "vocabulary (default: the preset's, 8000)")
    parser.add_argument("--joint-vocab", action=argparse.BooleanOptionalAction, default=None,
                        help="subword: one vocabulary for both languages (default) or one each")
    parser.add_argument("--share-embed", action=argparse.BooleanOptionalAction, default=None,
                        help="tie the decoder's output layer to its token embedding (fairseq's "
                        "--share-input-output-embed; default: the preset's, off)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    args = parser.parse_args(argv)
    overrides = {k: v for k, v in (("epochs", args.epochs), ("max_steps", args.max_steps),
                                   ("max_minutes", args.max_minutes), ("src_lang", args.src),
                                   ("trg_lang", args.trg), ("tokenizer", args.tokenizer),
                                   ("vocab_size", args.vocab_size),
                                   ("joint_vocab", args.joint_vocab),
                                   ("share_input_output_embed", args.share_embed))
                 if v is not None}
    try:
        preset = dataclasses.replace(PRESETS[args.preset], **overrides)
    except ValueError as e:
        parser.error(str(e))
    try:
        result = train(preset, args.out, data=args.data_dir, resume=args.resume,
                       device=args.device, progress=not args.no_progress)
    except KeyboardInterrupt as e:  # Ctrl-C or SIGTERM: last.pt was saved and said so
        return 128 + (signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)
    except (CheckpointError, DataError, FloatingPointError, ValueError) as e:
        return _fail(str(e))
    except OSError as e:
        return _fail(describe_os_error(e, args.out))
    if result.best_path:
        print(f"best checkpoint: {result.best_path}")
    if result.final_path:
        print(f"final model (translate with this one): {result.final_path}")
    return 0


def _fail(message: str) -> int:
    print("error: " + " ".join(message.split()), file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
