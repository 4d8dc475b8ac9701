"""Notebook 09's project: train a translator for a direction the course did not ship, within a
budget, and hand in ``final.pt``; it is graded on test sentences the student never sees.

The learner's side (notebook 09 and its graded copy call these):

- :func:`budget_preset`: the ``cpu_subword`` preset in the project's direction, with the budget
  (:data:`BUDGET_EPOCHS` epochs, no time limit) and the learner's own changes, refused in one
  line where a change would alter the budget or the data;
- :func:`train`: one run of :func:`convs2s.run.train.train` with it (the trainer makes its own
  choices on the validation split: best epoch, averaged weights, length penalty);
- :func:`save_submission`: the run's ``final.pt`` with float16 weights (the model computes in
  float32 when it loads them), at most :data:`MAX_SUBMISSION_BYTES`, beside the notebook;
- :func:`check_submission`: the visible check: the file loads through the course's checkpoint
  guard, is small enough and translates the project's direction;
- :func:`plot_validation`, :func:`validation_examples`: the evidence the written report cites.

The grader's side (``coursework/hidden/09.py`` says what to grade, ``coursework/
sandbox_grading.py`` calls :func:`grade`): the submitted file is never opened by the grader's
own process beyond its size and its bytes. Those bytes and the source side of the instructor's
test files go into a sandbox (:mod:`convs2s.system.sandbox`: no view of the grading folder,
limits on time and memory), where ``python -I -m convs2s.course.project`` writes them into its
scratch folder, loads them with :meth:`convs2s.run.checkpoint.Checkpoint.load` (the guard) and
translates with a bounded output length; only the translations come back, as data. The
references stay outside, where the BLEU score and the points (bands the instructor sets) are
decided. Every bad submission scores 0 with one line saying why.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import stat
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

#: The directions the project offers: those the course did not ship a translator for.
DIRECTIONS = ("fr-en", "en-fr", "cs-en", "en-cs")
#: The direction of the course notebook itself (a class's copy may name another).
DEFAULT_DIRECTION = "fr-en"
#: The preset the budget is counted in, and the budget: this many epochs of it (its own epoch
#: count, without its 30-minute limit). Measured per epoch in benchmarks/RESULTS.md.
PRESET = "cpu_subword"
BUDGET_EPOCHS = 30
#: The preset quick mode (``CONVS2S_QUICK=1``) trains instead: a tiny model, seconds.
QUICK_PRESET = "quick_subword"
#: What the learner hands in beside the notebook, and its largest size (20 MB).
SUBMISSION = "final.pt"
MAX_SUBMISSION_BYTES = 20_000_000
#: Preset fields a learner may not change: the budget, the direction and the data the choices
#: are made on (every other field, dropout or the layers for instance, is theirs to choose).
FIXED_FIELDS = frozenset({"name", "epochs", "max_minutes", "max_steps", "src_lang", "trg_lang",
                          "train_pairs", "valid_pairs", "final_pairs"})
#: Grading: beam search's width, and the output length cap (2 x the source's pieces + 10, at
#: most the model's positions): a decoder that never ends a sentence stops there.
GRADING_BEAM = 5
LENGTH_CAP_FACTOR, LENGTH_CAP_EXTRA = 2, 10
#: A submission whose translations reach the length cap this often has a decoder that does not
#: stop: it scores 0.
MAX_UNFINISHED_SHARE = 0.5
#: Starts the line that carries the sandbox's results.
MARKER = "convs2s-project-results "
#: The project's exercise id (its cells' ``metadata.convs2s.exercise``), and the two hints the
#: site folds under its check cell, as it does under every exercise's check (a nudge, then a
#: closer hint).
EXERCISE = "translator"
HINTS = ("the check reads final.pt as grading will: is it beside this notebook, at most 20 MB, "
         "a checkpoint of your direction? Run the training cell to its end first; it writes "
         "the file",
         "a file the check refuses scores 0: its line says why (none yet, too large, not a "
         "checkpoint, another direction). Write it again with project.save_submission(run), "
         "which keeps float16 weights, and check that DIRECTION is the direction you were given")


def arrow(direction: str) -> str:
    """``"fr-en"`` -> ``"fr→en"``."""
    return direction.replace("-", "→")


def check_direction(direction: object) -> str:
    """``direction`` if it is one of :data:`DIRECTIONS`, else ``ValueError`` in one line."""
    if direction not in DIRECTIONS:
        raise ValueError(f"the project's direction is one of {', '.join(DIRECTIONS)}, not "
                         f"{str(direction)[:40]!r}")
    return str(direction)


# --------------------------------------------------------------------------------------------
# The learner's side
# --------------------------------------------------------------------------------------------


def budget_preset(direction: str, changes: dict | None = None, *, quick: bool | None = None):
    """The project's preset: ``cpu_subword`` (``quick_subword`` in quick mode) in ``direction``,
    :data:`BUDGET_EPOCHS` epochs and no time limit, with ``changes`` (preset or model fields,
    e.g. ``{"dropout": 0.3}``). ``ValueError`` (one line) for a field of :data:`FIXED_FIELDS`
    or one no preset has."""
    from convs2s.run.presets import PRESETS
    from convs2s.system import environment

    src, trg = check_direction(direction).split("-")
    quick = environment.quick_mode() if quick is None else quick
    changes = dict(changes or {})
    fixed = sorted(set(changes) & FIXED_FIELDS)
    if fixed:
        raise ValueError(f"the project fixes {', '.join(fixed)} (the budget, the direction and "
                         "the data): change other fields")
    base = PRESETS[QUICK_PRESET if quick else PRESET]
    epochs = base.epochs if quick else BUDGET_EPOCHS
    return base.replace(src_lang=src, trg_lang=trg, epochs=epochs, max_minutes=None, **changes)


def run_folder(direction: str, *, quick: bool | None = None) -> Path:
    """Where :func:`train` writes its run: ``runs/09_<direction>`` beside the notebook
    (``CONVS2S_RUNS_DIR`` moves it; ``09_quick_<direction>`` in quick mode)."""
    from convs2s.course.analysis import runs_root
    from convs2s.system import environment

    quick = environment.quick_mode() if quick is None else quick
    return runs_root() / f"09_{'quick_' if quick else ''}{check_direction(direction)}"


def train(direction: str, changes: dict | None = None, *, out: str | os.PathLike | None = None,
          quick: bool | None = None, progress: bool = False, log=print):
    """Train the project's run (:func:`budget_preset`) into ``out`` (default
    :func:`run_folder`), resuming it where ``out/last.pt`` exists; the trainer's
    :class:`~convs2s.run.train.TrainResult` (``final_path``: its ``final.pt``)."""
    from convs2s.run.train import train as run_training

    preset = budget_preset(direction, changes, quick=quick)
    folder = Path(out) if out is not None else run_folder(direction, quick=quick)
    return run_training(preset, folder, resume=(folder / "last.pt").exists(), progress=progress,
                        log=log)


def _float16(state: dict) -> dict:
    """``state`` with every floating tensor as float16; tensors that share storage (a tied
    embedding and output layer) still share one."""
    import torch

    out, done = {}, {}
    for name, tensor in state.items():
        if not tensor.is_floating_point():
            out[name] = tensor
            continue
        key = (tensor.untyped_storage().data_ptr(), tensor.storage_offset(), tuple(tensor.shape),
               tuple(tensor.stride()))
        if key not in done:
            done[key] = tensor.detach().to(torch.float16).contiguous()
        out[name] = done[key]
    return out


def save_submission(run, target: str | os.PathLike = SUBMISSION) -> Path:
    """Write the run's final model (a :class:`~convs2s.run.train.TrainResult`, or the path of
    its ``final.pt``) to ``target`` with float16 weights; everything else (vocabularies, text
    pipeline, the validation choices and the run's history) as the run wrote it. ``ValueError``
    (one line, nothing written) when the file would exceed :data:`MAX_SUBMISSION_BYTES`."""
    from dataclasses import replace

    from convs2s.run.checkpoint import Checkpoint

    source = getattr(run, "final_path", run)
    if source is None:
        raise ValueError("this run wrote no final.pt (train with the project's preset: "
                         "project.train)")
    ckpt = Checkpoint.load(source)
    state = dict(ckpt.train_state or {})
    kept = {k: state[k] for k in ("epoch", "step", "seconds", "history") if k in state}
    half = replace(ckpt, state_dict=_float16(ckpt.state_dict), train_state=kept or None)
    target = Path(target)
    tmp = target.with_name(f".{target.name}.unchecked")
    try:
        half.save(tmp)
        size = tmp.stat().st_size
        if size > MAX_SUBMISSION_BYTES:
            raise ValueError(f"the model's file would be {size / 1e6:.1f} MB, over the "
                             f"{MAX_SUBMISSION_BYTES / 1e6:.0f} MB limit: train a smaller "
                             "model (fewer layers or channels)")
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    return target


@dataclass(frozen=True)
class Submission:
    """What :func:`check_submission` found: the file's size, the direction and the model."""

    path: Path
    bytes: int
    direction: str
    parameters: int
    epochs: int | None
    length_penalty: float
    valid_bleu: float | None  # beam search on validation, as the trainer's choices measured it


def read_submission(path: str | os.PathLike = SUBMISSION) -> Submission:
    """``path`` read as grading reads it (its size first, then the checkpoint guard);
    ``ValueError`` or :class:`~convs2s.run.checkpoint.CheckpointError` (one line) when it is
    not a submission."""
    from convs2s.model import count_parameters
    from convs2s.run.checkpoint import Checkpoint

    path = Path(path)
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise ValueError(f"{path.name} is not a plain file (a link or a folder)")
    if info.st_size > MAX_SUBMISSION_BYTES:
        raise ValueError(f"{path.name} is {info.st_size / 1e6:,.1f} MB, over the "
                         f"{MAX_SUBMISSION_BYTES / 1e6:.0f} MB limit: save it with "
                         "project.save_submission (float16 weights)")
    ckpt = Checkpoint.load(path)
    direction = f"{ckpt.pipeline.src_lang}-{ckpt.pipeline.trg_lang}"
    choices = ckpt.choices or {}
    return Submission(path, info.st_size, direction, count_parameters(ckpt.build_model(), False),
                      ckpt.epoch, ckpt.length_penalty, choices.get("valid_sacrebleu"))


def check_submission(path: str | os.PathLike = SUBMISSION, direction: str | None = None) -> bool:
    """The project's visible check: ``path`` (default ``final.pt`` beside the notebook) exists,
    is at most 20 MB, loads through the checkpoint guard and translates ``direction``. Prints
    one line per finding; True when it holds, False (nothing raised) when there is no file yet,
    ``AssertionError`` (one line) when it does not hold. Grading then translates the
    instructor's test sentences with it, in a sandbox."""
    from convs2s.run.checkpoint import CheckpointError

    path = Path(path)
    if not os.path.lexists(path):
        print(f"… translator: no {path.name} here yet: train, then project.save_submission(run)")
        return False
    try:
        found = read_submission(path)
    except (ValueError, CheckpointError, OSError) as e:
        line = f"✗ translator: {' '.join(str(e).split())}"
        print(line)
        raise AssertionError(line) from None
    if direction is not None and found.direction != check_direction(direction):
        line = (f"✗ translator: {path.name} translates {arrow(found.direction)}, the project "
                f"asks for {arrow(direction)}")
        print(line)
        raise AssertionError(line)
    bleu = f"{found.valid_bleu:.2f}" if found.valid_bleu is not None else "not recorded"
    print(f"✓ translator: {path.name}, {found.bytes / 1e6:.1f} MB (limit "
          f"{MAX_SUBMISSION_BYTES / 1e6:.0f} MB), {arrow(found.direction)}, "
          f"{found.parameters:,} parameters, {found.epochs} epochs trained; validation "
          f"sacreBLEU with beam 5 and length penalty {found.length_penalty:g}: {bleu}")
    return True


def plot_validation(history: Sequence[dict], *, title: str = "", ax=None):
    """The run's validation loss by epoch (the curve the report reads), the best epoch marked;
    returns the axes."""
    import matplotlib.pyplot as plt

    if not history:
        raise ValueError("history is empty: no epoch has finished yet")
    if ax is None:
        _, ax = plt.subplots(figsize=(6.5, 3.4), dpi=100)
    epochs = [row["epoch"] for row in history]
    ax.plot(epochs, [row["valid_loss"] for row in history], "o-", label="validation loss")
    if all("train_loss" in row for row in history):
        ax.plot(epochs, [row["train_loss"] for row in history], ".--", color="grey",
                label="training loss (label-smoothed)")
    best = min(history, key=lambda row: row["valid_loss"])
    ax.axvline(best["epoch"], color="C2", lw=1, ls=":", label=f"best: epoch {best['epoch']}")
    ax.set(xlabel="epoch", ylabel="loss (nats per token)", title=title or "validation curve")
    ax.legend(fontsize=8)
    return ax


def validation_examples(path: str | os.PathLike, pairs: Sequence[tuple[str, str]], *,
                        n: int = 5) -> list[dict]:
    """The ``n`` sentences of ``pairs`` (validation pairs) the model at ``path`` translates
    worst by sentence chrF (beam 5, its own length penalty): source, reference, output and
    score, worst first, for the report's error analysis."""
    import sacrebleu

    from convs2s.run.translator import Translator

    translator = Translator.from_checkpoint(path)
    keep = []
    for s, t in pairs:
        try:
            translator.source_tokens(s)
        except ValueError:  # longer than the model's positions (or empty): left out
            continue
        keep.append((s, t))
    outputs = translator.translate([s for s, _ in keep], beam_size=GRADING_BEAM)
    chrf = sacrebleu.metrics.CHRF()
    rows = [{"source": s, "reference": t, "output": o,
             "chrf": chrf.sentence_score(o, [t]).score}
            for (s, t), o in zip(keep, outputs, strict=True)]
    return sorted(rows, key=lambda row: row["chrf"])[:n]


# --------------------------------------------------------------------------------------------
# The grader's side
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Band:
    """A test BLEU of at least ``floor`` earns ``share`` (0 to 1) of the project's points."""

    floor: float
    share: float


#: The seconds one submission may take to load and translate the test sentences (a sandbox's
#: wall-clock and CPU limit; ``c.GradeInSandbox.project_seconds`` changes it).
DEFAULT_SECONDS = 900.0


@dataclass(frozen=True)
class ProjectTest:
    """What the project's hidden test gives grading: the direction asked for, the bands (any
    order), the project's points (the notebook's, from ``grading.json``) and the seconds one
    submission's sandbox may take to load the file and translate the test sentences."""

    direction: str
    bands: tuple[Band, ...]
    points: float = 10.0
    seconds: float = DEFAULT_SECONDS
    file: str = SUBMISSION

    def __post_init__(self) -> None:
        check_direction(self.direction)
        if not self.bands or not all(isinstance(b, Band) and math.isfinite(b.floor)
                                     and 0 <= b.share <= 1 for b in self.bands):
            raise ValueError("a project's bands are Band(floor, share) with finite floors and "
                             "shares from 0 to 1")
        if not (0 < self.seconds < math.inf) or not (0 < self.points < math.inf):
            raise ValueError("a project's points and seconds are positive numbers")

    def points_for(self, bleu: float) -> tuple[float, Band | None]:
        """The points of the highest band ``bleu`` reaches (0, None below them all)."""
        reached = [b for b in self.bands if bleu >= b.floor]
        if not reached:
            return 0.0, None
        band = max(reached, key=lambda b: b.floor)
        return round(band.share * self.points, 2), band


@dataclass(frozen=True)
class ProjectVerdict:
    """What grading says of one submission: its points, one line for the student (and the
    instructor), and the test BLEU when it was scored."""

    points: float
    line: str
    bleu: float | None = None
    refused: bool = False  # a bad submission (0 points, the line says why)


class ProjectConfigError(ValueError):
    """The instructor's project configuration (test files, bands) is unusable (one line)."""


def read_test_files(source: str | os.PathLike, reference: str | os.PathLike,
                    ) -> list[tuple[str, str]]:
    """The instructor's test pairs (as ``convs2s.evaluate --source/--reference`` reads them), or
    :class:`ProjectConfigError` in one line."""
    from convs2s.run.evaluate import BadInput, read_parallel

    try:
        return read_parallel(source, reference)
    except (BadInput, OSError) as e:
        raise ProjectConfigError(f"the project's test files: {' '.join(str(e).split())}") from None


def _refused(line: str) -> ProjectVerdict:
    return ProjectVerdict(0.0, f"✗ translator: {line}", refused=True)


def _submitted_bytes(path: Path) -> bytes | ProjectVerdict:
    """The submitted file's bytes, or the verdict of a submission that has none to grade. Only
    its size is read before the bytes, and never more than the limit allows."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return _refused(f"no {path.name} beside the notebook in the submission (hand in the "
                        "file project.save_submission wrote)")
    except OSError as e:
        return _refused(f"{path.name} could not be read ({e.strerror})")
    if not stat.S_ISREG(info.st_mode):
        return _refused(f"{path.name} is not a plain file (a link, a folder or a device)")
    if info.st_size > MAX_SUBMISSION_BYTES:
        return _refused(f"{path.name} is {info.st_size / 1e6:,.1f} MB, over the "
                        f"{MAX_SUBMISSION_BYTES / 1e6:.0f} MB limit")
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_SUBMISSION_BYTES + 1)
    except OSError as e:
        return _refused(f"{path.name} could not be read ({e.strerror})")
    if len(data) > MAX_SUBMISSION_BYTES:
        return _refused(f"{path.name} is over the {MAX_SUBMISSION_BYTES / 1e6:.0f} MB limit")
    return data


def grade(folder: str | os.PathLike, test: ProjectTest, pairs: Sequence[tuple[str, str]], *,
          hidden_folders: Sequence[Path] = (), env: dict[str, str] | None = None,
          ) -> ProjectVerdict:
    """Grade the submission in ``folder`` (its ``test.file``) on the instructor's test
    ``pairs``: its bytes and the source sentences go into a sandbox, which loads the file
    through the checkpoint guard and translates (beam 5, the file's own length penalty, output
    capped at :data:`LENGTH_CAP_FACTOR` x the source's pieces + :data:`LENGTH_CAP_EXTRA`);
    sacreBLEU against the references and the points are decided here. Raises
    ``sandbox.SandboxUnavailable`` where no sandbox starts: a submission is never loaded
    without one."""
    import sacrebleu

    from convs2s.system import sandbox

    data = _submitted_bytes(Path(folder) / test.file)
    if isinstance(data, ProjectVerdict):
        return data
    sources = [s for s, _ in pairs]
    header = json.dumps({"direction": test.direction, "sources": sources, "file": test.file,
                         "beam": GRADING_BEAM}).encode()
    seconds = float(test.seconds)
    limits = sandbox.Limits(wall_seconds=seconds, cpu_seconds=max(1, math.ceil(seconds)),
                            file_bytes=max(sandbox.Limits().file_bytes,
                                           2 * MAX_SUBMISSION_BYTES))
    outcome = sandbox.run([sys.executable, "-I", "-m", "convs2s.course.project"],
                          stdin=header + b"\n" + data, limits=limits, hidden=hidden_folders,
                          env={"OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1",
                               **(env or {})})
    said = _sandbox_result(outcome, seconds, len(sources))
    if isinstance(said, ProjectVerdict):
        return said
    if "refused" in said:
        return _refused(f"not a checkpoint this course loads: {str(said['refused'])[:300]}")
    found = str(said.get("direction", ""))[:20]
    if found != test.direction:
        return _refused(f"{test.file} translates {arrow(found) or 'no known direction'}; "
                        f"the project asks for {arrow(test.direction)}")
    hypotheses = said.get("hypotheses")
    if not isinstance(hypotheses, list) or len(hypotheses) != len(sources) or \
            not all(isinstance(h, str) for h in hypotheses):
        return _refused("its translations could not be read")
    unfinished = said.get("unfinished")
    unfinished = unfinished if isinstance(unfinished, int) else len(sources)
    if unfinished > MAX_UNFINISHED_SHARE * len(sources):
        return _refused(f"the decoder does not stop: {unfinished:,} of {len(sources):,} "
                        "translations reached the length cap without an end of sentence")
    bleu = sacrebleu.metrics.BLEU().corpus_score(hypotheses, [[t for _, t in pairs]]).score
    points, band = test.points_for(bleu)
    where = f"band BLEU ≥ {band.floor:g}" if band is not None else \
        f"below the lowest band, BLEU ≥ {min(b.floor for b in test.bands):g}"
    mark = "✓" if points > 0 else "✗"
    return ProjectVerdict(points, f"{mark} translator: {arrow(test.direction)}, test sacreBLEU "
                          f"{bleu:.2f} on {len(sources):,} sentences (beam {GRADING_BEAM}): "
                          f"{points:g} of {test.points:g} points ({where})", bleu)


def _sandbox_result(outcome, seconds: float, count: int) -> dict | ProjectVerdict:
    """The sandbox's results, or the verdict when it returned none."""
    if outcome.timed_out or outcome.killed_by == "SIGXCPU":
        return _refused(f"loading it and translating the {count:,} test sentences took longer "
                        f"than the limit of {seconds:g} s, and it was stopped (a decoder that "
                        "never stops, or a model too slow for the budget)")
    lines = outcome.stdout.decode("utf-8", errors="replace").splitlines()
    found = [line for line in lines if line.startswith(MARKER)]
    if not found:
        last = " ".join(outcome.stderr.decode("utf-8", errors="replace").split()[-12:])
        return _refused(f"grading's process ended before it returned anything (exit "
                        f"{outcome.returncode}{': ' + last if last else ''})"[:300])
    try:
        said = json.loads(found[-1][len(MARKER):])
    except (ValueError, RecursionError):
        said = None
    if not isinstance(said, dict):
        return _refused("its translations could not be read")
    return said


# --------------------------------------------------------------------------------------------
# Inside the sandbox: ``python -I -m convs2s.course.project``
# --------------------------------------------------------------------------------------------


def _translate_in_sandbox(header: dict, data: bytes) -> dict:
    """Write the submission into a new folder of its own in this (sandboxed) process's scratch
    folder, load it through the checkpoint guard and translate ``header["sources"]``: data, no
    verdict. The folder is removed afterwards; run outside a sandbox, nothing in the current
    folder is written over."""
    name = Path(str(header.get("file", SUBMISSION))).name
    name = name if name not in ("", ".", "..") else SUBMISSION
    with tempfile.TemporaryDirectory(prefix="convs2s-project-", dir=".") as folder, \
            contextlib.chdir(folder):  # messages name the file as the student named it
        Path(name).write_bytes(data)
        return _translate_file(Path(name), header)


def _translate_file(path: Path, header: dict) -> dict:
    """Load the submission at ``path`` through the checkpoint guard and translate
    ``header["sources"]``."""
    from convs2s.run.checkpoint import Checkpoint, CheckpointError
    from convs2s.run.translator import Translator

    try:
        ckpt = Checkpoint.load(path)
    except CheckpointError as e:
        return {"refused": " ".join(str(e).split())}
    except Exception as e:  # noqa: BLE001 - whatever the file made the loader raise
        return {"refused": f"{type(e).__name__}: {' '.join(str(e).split())}"}
    direction = f"{ckpt.pipeline.src_lang}-{ckpt.pipeline.trg_lang}"
    if direction != header.get("direction"):
        return {"direction": direction}
    translator = Translator.from_checkpoint(ckpt, device="cpu")
    sources = [str(s) for s in header.get("sources", [])]
    beam = int(header.get("beam", GRADING_BEAM))
    tokens: list[list[str] | None] = []
    for sentence in sources:
        try:
            tokens.append(translator.source_tokens(sentence))
        except ValueError:  # empty, or longer than the model's positions: no translation
            tokens.append(None)
    hypotheses, unfinished = [""] * len(sources), 0
    order = sorted((i for i, t in enumerate(tokens) if t is not None),
                   key=lambda i: len(tokens[i]))
    for start in range(0, len(order), 32):
        batch = order[start:start + 32]
        cap = min(translator.max_positions,
                  LENGTH_CAP_FACTOR * max(len(tokens[i]) for i in batch) + LENGTH_CAP_EXTRA)
        outputs = translator.translate_token_lists([tokens[i] for i in batch], beam_size=beam,
                                                   max_len=cap, batch_size=len(batch))
        for i, out in zip(batch, outputs, strict=True):
            hypotheses[i] = translator.detokenize(out)
            unfinished += len(out) >= cap
    return {"direction": direction, "hypotheses": hypotheses, "unfinished": unfinished,
            "untranslated": sum(t is None for t in tokens)}


def main() -> int:
    """Read one grading job (a JSON line, then the submission's bytes) on standard input and
    write its results after :data:`MARKER` on standard output (run in the sandbox)."""
    raw = sys.stdin.buffer.read()
    line, _, data = raw.partition(b"\n")
    try:
        header = json.loads(line)
        if not isinstance(header, dict):
            raise ValueError("not a JSON object")
    except (ValueError, RecursionError) as e:
        print(f"error: not a project grading job ({type(e).__name__})", file=sys.stderr)
        return 2
    with contextlib.redirect_stdout(sys.stderr):
        result = _translate_in_sandbox(header, data)
    out = ("\n" + MARKER + json.dumps(result) + "\n").encode()
    while out:
        out = out[os.write(1, out):]
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
