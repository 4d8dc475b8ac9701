"""Candidates for the shipped translators, trained side by side on one device and each judged on
validation, in one report.

    python benchmarks/candidates.py --device cuda --parallel 8 --minutes 8 \
        --runs runs/candidates --distilled runs/distilled \
        --json benchmarks/results/candidates_h200.json

Each candidate is the shipped model's settings (``--base``, by default the shipped de→en
model's: ``cpu_subword``, dropout 0.3, up to 80 epochs, early stopping with patience 5) plus one
method for small corpora or a combination of them (issue 62): R-Drop (``--rdrop``), subword
sampling (``--subword-sampling``), sequence-level distillation (``--distilled``: the teacher's
translations of the training sources, made by ``python -m convs2s.run.distill``, one file per
direction in ``--distilled``, named ``<src>-<trg>.<trg>``) and, for de→en, the French and Czech
captions of the same English as more sources (``--extra-sources fr,cs``). ``CANDIDATES`` lists
them in the order they start: first those no run to convergence has measured yet, the shipped
de→en model's own setting (R-Drop 0.5) last.

Where a direction's distilled file is not in ``--distilled`` and ``--teachers`` holds a teacher
for it (``<src>-<trg>.pt``: the shipped models, ``src/convs2s/run/models``), the command makes
the file first (``python -m convs2s.run.distill`` on the same device, beam 5, in one of the
``--parallel`` places) while the other candidates start; the candidates that need it wait for
it.

Up to ``--parallel`` candidates train at once, each ``python -m convs2s.train`` in its own
process and run folder (``--runs``/``<name>``, its log ``<name>.log`` beside it), one thread
each on the CPU. Each stops by early stopping or by ``--minutes`` counted from this command's
start, whichever comes first, and then makes its final choices on validation (the weights, then
beam 5's length penalty α; ``convs2s.run.final_choices``). A run folder that exists is resumed
(``--resume``); a finished one (its ``final.pt`` there) is only read, so the same command after
an interruption, or with more minutes, carries on. A candidate that cannot start before the
deadline is reported as not started.

The report: for each candidate its command, how it stopped, epochs, seconds, best validation
loss, validation greedy sacreBLEU of the chosen weights and beam 5 with its α; for each
direction the best candidate by validation beam 5 (the course's rule) beside the shipped
model's recorded figure. Validation only: test2016 is never read here.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

if __name__ == "__main__":  # torch loads under StopSignals: Ctrl-C meanwhile is one line
    from common import run_script

    sys.exit(run_script("candidates"))

from common import json_arg, stamp, write_report

from convs2s.run.checkpoint import Checkpoint
from convs2s.run.pretrained import record
from convs2s.system import environment
from convs2s.system.arguments import OneLineParser, folder_arg

#: The shipped de→en model's settings (its manifest's command, without where and how long).
BASE = "--preset cpu_subword --dropout 0.3 --epochs 80 --patience 5"

#: name: (direction, the arguments beyond --base); ``{distilled}`` is that direction's file.
#: In the order a lent GPU should train them (PARALLEL at once): first the candidates no CPU has
#: finished (the French and Czech sources, en→de R-Drop from scratch, en→de distillation) and
#: their combinations with R-Drop, the method that made the shipped de→en model; subword
#: sampling last, since on the CPU it trained to convergence well below the shipped models in
#: both directions (benchmarks/RESULTS.md).
CANDIDATES = {
    "de-en_fr-cs": ("de-en", ["--extra-sources", "fr,cs"]),
    "en-de_rdrop-0.5": ("en-de", ["--rdrop", "0.5"]),
    "de-en_fr-cs_rdrop-0.5": ("de-en", ["--extra-sources", "fr,cs", "--rdrop", "0.5"]),
    "en-de_distill": ("en-de", ["--distilled", "{distilled}"]),
    "en-de_rdrop-0.5_distill": ("en-de", ["--rdrop", "0.5", "--distilled", "{distilled}"]),
    "de-en_rdrop-0.5": ("de-en", ["--rdrop", "0.5"]),
    "en-de_baseline": ("en-de", []),
    "de-en_rdrop-1": ("de-en", ["--rdrop", "1"]),
    "de-en_distill-add": ("de-en", ["--distilled", "{distilled}", "--distilled-mix", "add"]),
    "de-en_distill": ("de-en", ["--distilled", "{distilled}"]),
    "de-en_sampling-0.1": ("de-en", ["--subword-sampling", "0.1"]),
    "en-de_sampling-0.1": ("en-de", ["--subword-sampling", "0.1"]),
    "de-en_rdrop-0.5_sampling-0.1": ("de-en", ["--rdrop", "0.5", "--subword-sampling", "0.1"]),
    "en-de_rdrop-0.5_sampling-0.1": ("en-de", ["--rdrop", "0.5", "--subword-sampling", "0.1"]),
    "de-en_fr-cs_sampling-0.1": ("de-en", ["--extra-sources", "fr,cs",
                                           "--subword-sampling", "0.1"]),
    "de-en_sampling-0.2": ("de-en", ["--subword-sampling", "0.2"]),
}

#: The trainer, as a command (a test points it at a wrapper that reads a tiny corpus).
TRAIN = [sys.executable, "-m", "convs2s.train"]

#: The teacher's translations, as a command (the same for the test).
DISTILL = [sys.executable, "-m", "convs2s.run.distill"]

#: Sentences a teacher translates together (distill's default is 64; a GPU takes more).
DISTILL_BATCH = 128

#: Minutes a candidate needs at the least to be worth starting (its data, one epoch, choices).
LEAST_MINUTES = 1.0

#: Minutes kept between a trainer's own budget and the command's deadline (its start, its exit).
MARGIN_MINUTES = 0.25

_STOPPED = re.compile(r"^stopped \(([^)]*)\) after", re.MULTILINE)


def distilled_path(folder: Path, direction: str) -> Path:
    """Where the teacher's translations for ``direction`` lie in ``folder``: ``de-en.en``."""
    return folder / f"{direction}.{direction.split('-')[1]}"


def distilled_file(folder: Path | None, direction: str) -> Path | None:
    """The teacher's translations for ``direction`` in ``folder`` (``de-en.en``), if there."""
    if folder is None:
        return None
    path = distilled_path(folder, direction)
    return path if path.is_file() else None


def _needs_distilled(name: str) -> bool:
    return any("{distilled}" in a for a in CANDIDATES[name][1])


def to_distill(names: list[str], runs: Path, distilled: Path | None,
               teachers: Path | None) -> dict[str, list[str]]:
    """direction -> the command that makes its distilled file, for each direction a candidate
    in ``names`` still needs (not finished, its file not in ``distilled``) and ``teachers``
    has a teacher for (``<src>-<trg>.pt``)."""
    if distilled is None or teachers is None:
        return {}
    jobs = {}
    for name in names:
        direction = CANDIDATES[name][0]
        teacher = teachers / f"{direction}.pt"
        if (_needs_distilled(name) and direction not in jobs and teacher.is_file()
                and not (runs / name / "final.pt").exists()
                and distilled_file(distilled, direction) is None):
            jobs[direction] = [*DISTILL, "--teacher", str(teacher),
                               "--out", str(distilled_path(distilled, direction)),
                               "--batch-size", str(DISTILL_BATCH)]
    return jobs


def command(name: str, base: list[str], runs: Path, device: str, minutes: float,
            distilled: Path | None) -> list[str] | None:
    """The training command of candidate ``name``; None if it needs a distilled file that is
    not there. ``--resume`` when its run folder has a ``last.pt``."""
    direction, extra = CANDIDATES[name]
    if _needs_distilled(name):
        if distilled is None:
            return None
        extra = [a.replace("{distilled}", str(distilled)) for a in extra]
    src, trg = direction.split("-")
    out = runs / name
    return [*TRAIN, *base, *extra, "--src", src, "--trg", trg, "--device", device,
            "--max-minutes", f"{minutes:.2f}", "--no-progress", "--out", str(out),
            *(["--resume"] if (out / "last.pt").exists() else [])]


def outcome(name: str, runs: Path) -> dict:
    """What candidate ``name``'s run folder and log hold: how it stopped, its epochs and
    seconds, its best validation loss and its final choices on validation."""
    out, log = runs / name, runs / f"{name}.log"
    said = log.read_text(encoding="utf-8", errors="replace") if log.exists() else ""
    stops = _STOPPED.findall(said)
    row: dict = {"stopped": stops[-1] if stops else None}
    if (out / "last.pt").exists():
        history = Checkpoint.load(out / "last.pt").history
        if history:
            best = min(history, key=lambda h: h["valid_loss"])
            row.update(epochs=len(history), seconds=round(history[-1]["seconds"], 1),
                       best_valid_loss=round(best["valid_loss"], 4),
                       best_epoch=best["epoch"])
    if (out / "final.pt").exists():
        choices = Checkpoint.load(out / "final.pt").choices or {}
        chosen = next((a for a in choices.get("averages", [])
                       if a.get("epochs") == choices.get("epochs")), {})
        row.update(weights_epochs=choices.get("epochs"),
                   valid_greedy=_rounded(chosen.get("valid_sacrebleu_greedy")),
                   valid_beam5=_rounded(choices.get("valid_sacrebleu")),
                   alpha=choices.get("length_penalty"),
                   alphas={str(a["alpha"]): _rounded(a["valid_sacrebleu"])
                           for a in choices.get("alphas", [])})
    return row


def _rounded(x):
    return None if x is None else round(float(x), 2)


def best_by_direction(rows: dict) -> dict:
    """For each direction, the candidate with the highest validation beam-5 sacreBLEU beside
    the shipped model's recorded one (both on validation; ``record`` reads the manifest)."""
    best = {}
    for direction in sorted({r["direction"] for r in rows.values()}):
        scored = {n: r for n, r in rows.items()
                  if r["direction"] == direction and r.get("valid_beam5") is not None}
        try:
            shipped = _rounded(record(direction)["choices"]["valid_sacrebleu"])
        except (KeyError, TypeError, ValueError):
            shipped = None
        name = max(scored, key=lambda n: scored[n]["valid_beam5"]) if scored else None
        best[direction] = {
            "candidate": name, "valid_beam5": scored[name]["valid_beam5"] if name else None,
            "shipped_valid_beam5": shipped,
            "beats_shipped": bool(name and shipped is not None
                                  and scored[name]["valid_beam5"] > shipped)}
    return best


#: The candidates training now, and the teachers translating: name -> (process, its log).
_RUNNING: dict[str, tuple[subprocess.Popen, object]] = {}


def _start(name: str, cmd: list[str], runs: Path, env: dict) -> None:
    log = open(runs / f"{name}.log", "a", encoding="utf-8")  # noqa: SIM115
    _RUNNING[name] = (subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env), log)


def _train(args, base: list[str], device, start: float, names: list[str], rows: dict,
           env: dict, distilling: dict | None = None) -> None:
    """Start the candidates ``names`` in order, ``--parallel`` at a time, until each has
    finished or could not start; each one's status in ``rows``. First the distilled files
    that ``--teachers`` can make (``to_distill``): each one's status in ``distilling``, and
    the candidates that need one wait while it is made."""
    waiting, running = list(names), _RUNNING
    distilling = {} if distilling is None else distilling
    jobs = {f"distill_{d}": (d, cmd) for d, cmd in to_distill(
        names, args.runs, args.distilled, getattr(args, "teachers", None)).items()}
    distilling.update({d: "waiting" for d, _ in jobs.values()})
    while waiting or running:
        left = args.minutes - (time.monotonic() - start) / 60
        for job, (direction, cmd) in jobs.items():  # the teachers first, as places free
            if left < LEAST_MINUTES:  # nothing could use the file now: stopped, its part kept
                if distilling[direction] == "making" and job in running:
                    running[job][0].terminate()
                    distilling[direction] = "stopping"
                elif distilling[direction] == "waiting":
                    distilling[direction] = "not started: out of time"
            elif distilling[direction] == "waiting" and len(running) < args.parallel:
                _start(job, [*cmd, "--device", str(device)], args.runs, env)
                distilling[direction] = "making"
                print(f"started {job} (the teacher's translations)", flush=True)
        deferred = []
        while waiting and len(running) < args.parallel:
            name = waiting.pop(0)
            direction = CANDIDATES[name][0]
            if (_needs_distilled(name) and left >= LEAST_MINUTES
                    and distilling.get(direction) in ("waiting", "making")):
                deferred.append(name)  # its file is being made: it starts once there
                continue
            rows[name] = {"direction": direction}
            if (args.runs / name / "final.pt").exists():
                rows[name]["status"] = "finished before this command: read"
                continue
            if left < LEAST_MINUTES:
                rows[name]["status"] = "not started: out of time"
                continue
            cmd = command(name, base, args.runs, str(device), left - MARGIN_MINUTES,
                          distilled_file(args.distilled, direction))
            if cmd is None:
                made = distilling.get(direction)
                why = f" (making it {made}: see distill_{direction}.log)" if made else ""
                rows[name]["status"] = ("not started: no distilled file "
                                        f"{direction}.{direction.split('-')[1]} in "
                                        f"--distilled{why}")
                continue
            rows[name]["command"] = " ".join(shlex.quote(a) for a in cmd)
            _start(name, cmd, args.runs, env)
            print(f"started {name} ({left:.1f} minutes left)", flush=True)
        waiting[:0] = deferred
        for name, (process, log) in list(running.items()):
            if process.poll() is None:
                continue
            log.close()
            del running[name]
            status = ("finished" if process.returncode == 0
                      else f"failed (exit status {process.returncode})")
            if name in jobs:
                distilling[jobs[name][0]] = status
            else:
                rows[name]["status"] = status
            print(f"{name}: {status}", flush=True)
        if running:
            time.sleep(1)


def main(argv=None) -> int:
    parser = OneLineParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu, cuda, ... (default: cpu)")
    parser.add_argument("--runs", type=folder_arg("--runs"), required=True,
                        help="the folder of the candidates' run folders and logs")
    parser.add_argument("--distilled", type=Path,
                        help="the folder of the teachers' translations, <src>-<trg>.<trg>")
    parser.add_argument("--teachers", type=Path,
                        help="a folder of teacher checkpoints, <src>-<trg>.pt (the shipped "
                        "models: src/convs2s/run/models): a distilled file missing from "
                        "--distilled is made with its direction's teacher first")
    parser.add_argument("--only", nargs="+", choices=list(CANDIDATES), metavar="NAME",
                        help="these candidates only (default: all, in CANDIDATES' order)")
    parser.add_argument("--parallel", type=int, default=1,
                        help="how many train at once (default 1)")
    parser.add_argument("--minutes", type=float, required=True,
                        help="the wall-clock budget of the whole command, in minutes")
    parser.add_argument("--base", default=BASE,
                        help=f"the settings every candidate shares (default: {BASE!r})")
    parser.add_argument("--json", type=json_arg, help="also write the report as JSON here")
    args = parser.parse_args(argv)
    if args.parallel < 1:
        parser.error("--parallel must be at least 1")
    if not args.minutes > LEAST_MINUTES:
        parser.error(f"--minutes must be more than {LEAST_MINUTES:g}")
    if args.distilled is not None and not args.distilled.is_dir():
        parser.error(f"--distilled {args.distilled}: no such folder")
    if args.teachers is not None and args.distilled is None:
        parser.error("--teachers needs --distilled, the folder their translations go to")
    if args.teachers is not None and not args.teachers.is_dir():
        parser.error(f"--teachers {args.teachers}: no such folder")
    try:
        device = environment.check_device(args.device)
        base = shlex.split(args.base)
    except ValueError as e:
        parser.error(str(e))
    if args.runs.exists() and not args.runs.is_dir():
        parser.error(f"--runs {args.runs} is a file, not a folder: give the folder of the "
                     "candidates' run folders (made if missing)")
    try:
        args.runs.mkdir(parents=True, exist_ok=True)
    except (FileExistsError, NotADirectoryError):  # a folder above it is a file
        parser.error(f"--runs {args.runs}: a folder above it is a file; give a folder for "
                     "the candidates' run folders")

    start = time.monotonic()
    names = args.only or list(CANDIDATES)
    rows: dict[str, dict] = {}
    distilling: dict[str, str] = {}
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    if device.type == "cpu":  # one thread a process: the candidates share the cores
        env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1")
    try:
        _train(args, base, device, start, names, rows, env, distilling)
    finally:  # interrupted: each trainer saves its last.pt on SIGTERM and stops
        for process, _log in _RUNNING.values():
            if process.poll() is None:
                process.terminate()
        for process, log in _RUNNING.values():
            process.wait()
            log.close()
        _RUNNING.clear()
    for name in names:
        rows[name].update(outcome(name, args.runs))
        r = rows[name]
        ran = "" if r.get("epochs") is None else (
            f"; stopped ({r['stopped']}), {r['epochs']} epochs, best valid loss "
            f"{r['best_valid_loss']}, valid greedy {r.get('valid_greedy')}, beam 5 "
            f"{r.get('valid_beam5')} (α {r.get('alpha')})")
        print(f"{name}: {r['status']}{ran}", flush=True)
    best = best_by_direction(rows)
    for direction, b in best.items():
        print(f"{direction}: best {b['candidate']} ({b['valid_beam5']}); shipped "
              f"{b['shipped_valid_beam5']}", flush=True)
    write_report(args.json, stamp({
        "benchmark": "candidates", "split": "valid", "base": args.base,
        "device": environment.describe_device(device), "parallel": args.parallel,
        "minutes": args.minutes, "wall_seconds": round(time.monotonic() - start, 1),
        "distilled_here": distilling, "candidates": rows, "best": best}))
    return 0

