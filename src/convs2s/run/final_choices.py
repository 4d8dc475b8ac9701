"""The model a training run ends with: the last epochs' weights averaged, and beam search's
length penalty chosen, both on the validation split.

Neither choice is the paper's. Averaging the weights of the last few checkpoints is a standard
trick of later systems (fairseq's ``scripts/average_checkpoints.py``; Vaswani et al., 2017,
average the last 5 or 20); fairseq's ``--lenpen`` divides a hypothesis's summed log-probability
by ``length ** α``. This course makes both choices after training, on validation only:

1. **Weights.** ``best.pt`` (lowest validation loss, k = 1) or the element-wise mean of the
   last k epochs' weights (k = 2 … ``max_k``, from the run's snapshots), scored by greedy
   sacreBLEU on validation.
2. **Length penalty.** α in ``ALPHAS`` for beam search (``beam``), scored by sacreBLEU on
   validation with the chosen weights.

A tie keeps the simpler choice (fewer epochs averaged; α nearer 1, fairseq's default). The result
is written as ``final.pt`` beside ``best.pt`` and ``last.pt``: a normal checkpoint whose
``choices`` record k, the epochs, α and every validation score behind them, and which
``translate`` and ``evaluate`` decode with α unless told otherwise. The test split is never
looked at here.

The snapshots (``snapshots/epochNN.pt``, the last ``max_k`` epochs' weights) are checkpoints
of their run: each names the run that wrote it (``run_id``), and one from another run is
refused; only those of epochs in the run's history count.
"""

from __future__ import annotations

import dataclasses
import math
import re
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from convs2s.run.checkpoint import Checkpoint, CheckpointError
from convs2s.run.evaluate import evaluate, score_alphas
from convs2s.run.translator import Translator

__all__ = ["ALPHAS", "FINAL", "SNAPSHOTS", "SNAPSHOT_NAME", "average", "choose",
           "estimate_costs", "finalize", "keep_snapshot", "load_snapshots", "measure_reserve",
           "missing_snapshot", "reserve_seconds", "seconds_to_keep", "snapshot_path",
           "write_snapshot"]

ALPHAS = (0.0, 0.5, 1.0, 1.5, 2.0)
SNAPSHOTS = "snapshots"
SNAPSHOT_NAME = re.compile(r"epoch[0-9]{2,}\.pt")  # a snapshot's file name in SNAPSHOTS
FINAL = "final.pt"


def snapshot_path(folder: Path, epoch: int) -> Path:
    return Path(folder) / SNAPSHOTS / f"epoch{epoch:02d}.pt"


def keep_snapshot(names: list[str], epoch: int, keep: int) -> tuple[list[str], list[str]]:
    """A run's snapshot names (``train_state["snapshots"]``) with ``epoch``'s added last, cut
    to the last ``keep``; and the names cut off, whose files are to be removed."""
    name = snapshot_path(Path(), epoch).name
    names = [n for n in names if n != name] + [name]
    return names[-keep:], names[:-keep]


def missing_snapshot(folder: Path, names: list[str], history: list[dict],
                     batch_in_epoch: int) -> Path | None:
    """The snapshot a run's ``last.pt`` names last (``names``) but ``folder`` lacks, if the
    run stopped between writing an epoch's ``last.pt`` and its snapshot (``last.pt`` then holds
    that epoch's end: ``batch_in_epoch`` 0); otherwise None."""
    if not (history and names and batch_in_epoch == 0):
        return None
    path = snapshot_path(folder, history[-1]["epoch"])
    return path if names[-1] == path.name and not path.exists() else None


def write_snapshot(ckpt: Checkpoint, folder: Path, row: dict, dropped: Sequence[str] = ()) -> Path:
    """``ckpt``'s weights (without its train state) as the snapshot of the epoch ``row``
    records, ``snapshots/epochNN.pt`` in ``folder``, with the row; then the ``dropped``
    snapshots are removed. A run writes it after ``last.pt`` names it. Only ``epochNN.pt``
    files of this run's ``snapshots/`` are ever removed: the names come from the run's
    ``snapshots``, which :func:`~convs2s.run.resume.check_train_state` checked."""
    path = snapshot_path(folder, row["epoch"])
    path.parent.mkdir(exist_ok=True)
    dataclasses.replace(ckpt, train_state=None, extra={"row": dict(row)}).save(path)
    for name in dropped:
        (path.parent / name).unlink(missing_ok=True)
    return path


def average(weights: Sequence[dict]) -> dict:
    """The element-wise mean of state dicts with the same keys (floating tensors averaged in
    float64, then cast back; other tensors, e.g. counters, taken from the first). Keys that
    share one tensor in the first (a tied embedding and output layer) share one in the mean,
    so that the averaged model is saved, and loaded, as small as its parts."""
    out, made = {}, {}
    for key, first in weights[0].items():
        same = (first.untyped_storage().data_ptr(), first.storage_offset(), tuple(first.shape),
                tuple(first.stride()))
        if same in made:
            out[key] = made[same]
        elif torch.is_floating_point(first):
            out[key] = sum(w[key].double() for w in weights).div(len(weights)).to(first.dtype)
        else:
            out[key] = first.clone()
        made.setdefault(same, out[key])
    return out


def best_of(rows: list[dict], key: str, prefer: Callable[[dict], float]) -> dict:
    """The row with the highest ``key``; among equal scores, the one ``prefer`` ranks first."""
    top = max(r[key] for r in rows)
    return min((r for r in rows if r[key] == top), key=prefer)


def load_snapshots(folder: Path, run_id: str | None) -> list[tuple[dict, dict]]:
    """The run's snapshots (``snapshots/epochNN.pt``) as ``(history row, weights)``, oldest
    first.

    ``CheckpointError`` (one line) for a snapshot of another run than ``run_id``."""
    out = []
    found = (Path(folder) / SNAPSHOTS).glob("epoch[0-9][0-9]*.pt")
    for f in sorted(f for f in found if SNAPSHOT_NAME.fullmatch(f.name)):
        snap = Checkpoint.load(f)
        if run_id is None or snap.run_id != run_id:
            raise CheckpointError(
                f"{f} belongs to another run than {Path(folder) / 'best.pt'} (run "
                f"{snap.run_id} vs {run_id}). Remove it, or train again in a new folder.")
        out.append((snap.extra.get("row", {}), snap.state_dict))
    return out


def choose(best: Checkpoint, snapshots: list[tuple[dict, dict]], valid_pairs, *,
           device=None, beam: int = 5, alphas: Sequence[float] = ALPHAS, max_k: int = 5,
           log: Callable[[str], None] = print) -> tuple[dict, dict]:
    """Pick the weights and α on ``valid_pairs``; returns ``(weights, choices)``."""
    t0 = time.perf_counter()
    translator = Translator.from_checkpoint(best, device=device)
    best_state = {k: v.detach().to("cpu", copy=True)
                  for k, v in translator.model.state_dict().items()}

    def score(weights: dict, beam_size: int) -> dict:
        translator.model.load_state_dict(weights)
        translator.model.eval()
        return evaluate(translator, valid_pairs, beam_sizes=[beam_size])

    candidates = [(1, [best.epoch], best_state)]
    for k in range(2, max_k + 1):
        if k <= len(snapshots):
            candidates.append((k, [r.get("epoch") for r, _ in snapshots[-k:]],
                               average([w for _, w in snapshots[-k:]])))
    averages = []
    for k, epochs, weights in candidates:
        m = score(weights, 1)
        averages.append({"k": k, "epochs": epochs, "valid_loss": m["loss"],
                         "valid_sacrebleu_greedy": m["beam1"]["sacrebleu"],
                         "valid_chrf_greedy": m["beam1"]["chrf"]})
        what = "best.pt" if k == 1 else f"average of epochs {epochs}"
        log(f"  weights: {what:<34} valid loss {m['loss']:.4f}  greedy sacreBLEU "
            f"{m['beam1']['sacrebleu']:.2f}")
    chosen = best_of(averages, "valid_sacrebleu_greedy", prefer=lambda r: r["k"])
    weights = next(w for k, _, w in candidates if k == chosen["k"])

    # One beam search serves every α: the length penalty only re-ranks finished hypotheses.
    translator.model.load_state_dict(weights)
    translator.model.eval()
    scored = []
    for m in score_alphas(translator, valid_pairs, alphas, beam_size=beam):
        scored.append({"alpha": m["alpha"], "valid_sacrebleu": m["sacrebleu"],
                       "valid_chrf": m["chrf"]})
        log(f"  beam {beam}, length penalty {m['alpha']:.1f}: valid sacreBLEU "
            f"{m['sacrebleu']:.2f}  chrF {m['chrf']:.2f}")
    alpha = best_of(scored, "valid_sacrebleu", prefer=lambda r: abs(r["alpha"] - 1.0))
    choices = {"k": chosen["k"], "epochs": chosen["epochs"], "length_penalty": alpha["alpha"],
               "beam": beam, "valid_sacrebleu": alpha["valid_sacrebleu"],
               "valid_sentences": len(valid_pairs), "averages": averages, "alphas": scored,
               "seconds": time.perf_counter() - t0}
    return weights, choices


def _epoch_and_step(row) -> tuple[int, int] | None:
    """A history row's ``(epoch, step)``, which name the epoch's end (None if not numbers)."""
    if not isinstance(row, dict):
        return None
    epoch, step = row.get("epoch"), row.get("step")
    return (epoch, step) if isinstance(epoch, int) and isinstance(step, int) else None


def finalize(folder: Path, valid_pairs, *, device=None, beam: int = 5,
             alphas: Sequence[float] = ALPHAS, max_k: int = 5,
             log: Callable[[str], None] = print, history: list[dict] | None = None) -> Path:
    """Make ``folder/final.pt`` from ``best.pt`` and the snapshots (see the module's text).

    Only the snapshots of epochs in the run's ``history`` (default: ``last.pt``'s) count: a
    run stopped between writing an epoch's snapshot and its ``last.pt`` (an older convs2s wrote
    them in that order) leaves the snapshot of an epoch the run never recorded."""
    folder = Path(folder)
    best = Checkpoint.load(folder / "best.pt")
    last = Checkpoint.load(folder / "last.pt") if (folder / "last.pt").is_file() else None
    if last is not None and last.run_id != best.run_id:
        last = None
    if history is None:
        history = (last or best).history
    recorded = {_epoch_and_step(r) for r in history} - {None}
    snapshots = []
    for row, weights in load_snapshots(folder, best.run_id):
        if _epoch_and_step(row) in recorded:
            snapshots.append((row, weights))
        else:
            epoch = row.get("epoch") if isinstance(row, dict) else None
            log(f"  left out the snapshot of epoch {epoch!r}: the run's history does not record "
                "that epoch (the snapshot was written as the run was stopped)")
    weights, choices = choose(best, snapshots, valid_pairs, device=device, beam=beam,
                              alphas=alphas, max_k=max_k, log=log)
    # the run as it ended (last.pt), not as it was at best.pt: the averaged epochs may come
    # after the best one, and the record says how many epochs the run trained
    state = (last or best).train_state or {}
    final = dataclasses.replace(
        best, state_dict=weights, choices=choices,
        train_state={k: state[k] for k in ("step", "epoch", "history", "seconds",
                                           "best_valid_loss") if k in state})
    path = final.save(folder / FINAL)
    what = "best.pt" if choices["k"] == 1 else f"the average of epochs {choices['epochs']}"
    log(f"final model: {what}, beam {beam} with length penalty {choices['length_penalty']} "
        f"(validation sacreBLEU {choices['valid_sacrebleu']:.2f}): {path}")
    return path


def estimate_costs(translator: Translator, valid_pairs, *, beam: int = 5,
                   sample: int = 32, repeats: int = 2) -> dict:
    """What :func:`choose` will cost, in seconds for the whole validation split, from timing
    greedy and beam decoding of a few of its sentences: ``{"greedy": one candidate's scoring,
    "beam": the length-penalty sweep}`` (one beam search serves every α), each the fastest of
    ``repeats`` timings (:func:`_fastest_of`). A training run
    measures it after every epoch (:func:`measure_reserve`) and keeps :func:`seconds_to_keep`
    of its time budget for the choices."""
    pairs = list(valid_pairs)
    part = pairs[:sample]
    if not part:
        return {"greedy": 0.0, "beam": 0.0}
    greedy = _fastest_of(repeats, lambda: evaluate(translator, part, beam_sizes=[1]))
    beamed = _fastest_of(repeats, lambda: evaluate(translator, part, beam_sizes=[beam]))
    scale = len(pairs) / len(part) * 1.1  # 10% to spare
    return {"greedy": greedy * scale, "beam": beamed * scale}


def _fastest_of(repeats: int, work: Callable[[], object]) -> float:
    """The shortest wall-clock time of ``repeats`` runs of ``work``: a pause that falls inside
    one of them (Ctrl-Z, a suspended laptop, a busy moment) is not taken for its cost."""
    times = []
    for _ in range(max(1, repeats)):
        t0 = time.perf_counter()
        work()
        times.append(time.perf_counter() - t0)
    return min(times)


def reserve_seconds(costs: dict, candidates: int) -> float:
    """Seconds :func:`choose` needs with ``candidates`` weight candidates (best.pt and the
    averages of the last 2 … k epochs), from :func:`estimate_costs`, plus 5 s of loading."""
    return math.ceil(max(1, candidates) * costs["greedy"] + costs["beam"] + 5)


def seconds_to_keep(costs: dict | None, finished_epochs: int, max_k: int,
                    recorded: float = 0.0) -> float:
    """Seconds of a run's time budget to keep for the final choices if it stopped now: one
    weight candidate per finished epoch, up to ``max_k`` (the snapshots that exist then), at the
    ``costs`` last measured; without costs, the reserve a checkpoint ``recorded``."""
    if not costs:
        return recorded
    return reserve_seconds(costs, min(max(finished_epochs, 1), max(max_k, 1)))


def measure_reserve(model: torch.nn.Module, src_vocab, trg_vocab, pipeline, valid_pairs, *,
                    device=None, beam: int = 5, max_k: int = 5, before: dict | None = None,
                    why: str = "with this epoch's model",
                    log: Callable[[str], None] = print) -> tuple[dict, float]:
    """Time decoding a few validation sentences with ``model`` as it is now (left in training
    mode): :func:`estimate_costs`, and the seconds the choices take with ``max_k`` candidates.

    A training run calls this after every epoch, because decoding time follows the model: an
    early model's greedy outputs often run on to the length limit, so a measurement taken once,
    early, overstates what the choices will cost and stops the run with its budget unused. The
    log says the costs when they are new or either moved by more than a quarter from
    ``before``."""
    translator = Translator(model, src_vocab, trg_vocab, pipeline=pipeline, device=device)
    try:
        costs = estimate_costs(translator, valid_pairs, beam=beam)
    finally:
        model.train()
    if before is None or any(abs(costs[k] - before[k]) > 0.25 * before[k] for k in costs):
        log(f"keeping time for the final model's choices: {costs['greedy']:.0f} s per "
            f"weight candidate (up to {max_k}, one per finished epoch) "
            f"and {costs['beam']:.0f} s for the length-penalty sweep"
            + ("" if before is None else f" (measured again {why})"))
    return costs, reserve_seconds(costs, max_k)
