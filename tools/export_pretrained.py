"""Ship a training run's final model with the package: ``src/convs2s/run/models/<direction>.pt``.

    python -m tools.export_pretrained --run runs/pretrained_de_en --direction de-en \\
        --machine "AMD EPYC, 2 cores" --scores benchmarks/results/pretrained_de_en.json

Reads the run's ``final.pt`` (the weights and length penalty chosen on validation by
``convs2s.run.final_choices``) and writes a copy for inference only: its floating-point weights
as float16 (the model computes in float32 when it loads them; ``benchmarks/pretrained.py``
measures that the two score the same), its vocabularies, sentencepiece model, preset, data
digests and choices, no optimizer or RNG state. The manifest ``models/manifest.json`` then
records the file's sha256 and size and how the model came to be: the training command, epochs
(trained, and the best by validation loss), hours and the machine, the validation curve, and
(``--scores``) what the benchmark measured. ``convs2s.pretrained`` refuses a file whose sha256
differs.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

from convs2s.system.arguments import OneLineParser, shown
from convs2s.system.atomic_files import write_json_atomic
from convs2s.system.signals import import_command, run_command

if __name__ == "__main__":
    # `python -m tools.export_pretrained`: this module, torch and all, is imported again as the
    # command's first step (the imports below never run here), so that Ctrl-C or SIGTERM while
    # torch loads stops it in one line, exit 130 or 143, as later (convs2s/train.py's way)
    sys.exit(import_command("tools.export_pretrained", "cli")())

import torch  # noqa: E402 (see above)

from convs2s.run.checkpoint import Checkpoint, CheckpointError  # noqa: E402
from convs2s.run.pretrained import MANIFEST, MODELS_DIR  # noqa: E402

#: The most a shipped model may weigh (at most 20 MB a model, so the package stays small).
MAX_BYTES = 20_000_000


def float16_weights(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The weights with every floating tensor as float16 (others, if any, unchanged). Tensors
    with the same values (the tied output layer and token embedding: one tensor in a training
    checkpoint, two equal ones after final_choices averages each name) become one, so the file
    holds them once."""
    kept: list[tuple[torch.Tensor, torch.Tensor]] = []  # (original, float16)
    out = {}
    for k, v in state.items():
        if not v.is_floating_point():
            out[k] = v
            continue
        same = next((half for original, half in kept
                     if original.shape == v.shape and original.dtype == v.dtype
                     and torch.equal(original, v)), None)
        if same is None:
            same = v.detach().to(torch.float16).contiguous()
            kept.append((v, same))
        out[k] = same
    return out


def inference_copy(final: Checkpoint) -> Checkpoint:
    """What is shipped of a run's final checkpoint: float16 weights and what translating needs
    (vocabularies, text pipeline, choices), the preset and data digests; no training state."""
    return Checkpoint(model_config=final.model_config,
                      state_dict=float16_weights(final.state_dict),
                      src_vocab=final.src_vocab, trg_vocab=final.trg_vocab,
                      pipeline=final.pipeline, model_class=final.model_class,
                      preset=shipped_preset(final.preset), data=final.data,
                      run_id=final.run_id, choices=final.choices)


#: The preset's fields that hold a file on the training machine (``--distilled``, ``--init-from``:
#: absolute paths, as the run records them for ``--resume``).
PATH_FIELDS = ("distilled", "init_from")


def shipped_preset(preset: dict | None) -> dict | None:
    """The preset as shipped: each file it names by its name alone, not the folder it lay in on
    the machine that trained it (a shipped file holds no local path)."""
    if not preset:
        return preset
    return {k: Path(v).name if k in PATH_FIELDS and isinstance(v, str) else v
            for k, v in preset.items()}


def training_record(final: Checkpoint, last: Checkpoint | None, command: str, machine: str
                    ) -> dict:
    """How the model came to be, from the run's own records (``last.pt``: every epoch)."""
    history = last.history if last is not None else final.history
    state = (last.train_state if last is not None else final.train_state) or {}
    epochs = [row.get("epoch") for row in history if row.get("epoch") is not None]
    valid = [(row.get("epoch"), row.get("valid_loss")) for row in history
             if row.get("valid_loss") is not None]
    best_epoch = min(valid, key=lambda r: r[1])[0] if valid else None
    seconds = state.get("seconds")
    return {"command": command, "machine": machine,
            "epochs": max(epochs) if epochs else None, "best_epoch": best_epoch,
            "hours": round(seconds / 3600, 2) if isinstance(seconds, (int, float)) else None,
            "valid_loss": [{"epoch": e, "loss": round(float(v), 4)} for e, v in valid]}


def continued_from(final: Checkpoint, manifest: dict) -> dict | None:
    """A continued run's start (``--init-from``): the checkpoint's file name and sha256, and, when
    it was a model the manifest lists, how that one was trained (command, machine, epochs,
    hours). None for a run from random weights. A run shipped before and trained on since may
    have replaced the very file it started from: it keeps the start its first export recorded."""
    init = (final.preset or {}).get("init_from")
    if not init:
        return None
    for entry in manifest.get("models", {}).values():
        earlier = (entry.get("training") or {}).get("continued_from")
        if final.run_id is not None and entry.get("run_id") == final.run_id and earlier:
            return earlier
    path = Path(init)
    sha = hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None
    record = {"file": path.name, "sha256": sha}
    for entry in manifest.get("models", {}).values():
        if sha is not None and entry.get("sha256") == sha:
            training = entry.get("training") or {}
            record.update({k: training.get(k) for k in ("command", "machine", "epochs", "hours")})
    return record


def export(run: Path, direction: str, machine: str, command: str, scores: dict | None = None,
           models_dir: Path = MODELS_DIR) -> dict:
    """Write ``models_dir/<direction>.pt`` and its manifest entry; returns the entry."""
    final = Checkpoint.load(run / "final.pt")
    last = Checkpoint.load(run / "last.pt") if (run / "last.pt").is_file() else None
    src, trg = direction.split("-", 1) if "-" in direction else ("", "")
    if (src, trg) != (final.pipeline.src_lang, final.pipeline.trg_lang):
        raise ValueError(f"{run / 'final.pt'} translates {final.pipeline.src_lang} to "
                         f"{final.pipeline.trg_lang}, not {direction}: name its direction")
    models_dir.mkdir(parents=True, exist_ok=True)
    manifest_path = models_dir / MANIFEST
    manifest = (json.loads(manifest_path.read_text(encoding="utf-8"))
                if manifest_path.is_file() else {"models": {}})
    start = continued_from(final, manifest)  # before the file it may start from is replaced
    # The new file is written beside the shipped one and checked there; the shipped model and
    # its manifest entry are replaced only once the whole entry is built, so a refused or
    # interrupted export leaves both as they were.
    path = models_dir / f"{direction}.pt"
    unchecked = models_dir / f".{direction}.pt.unchecked"
    try:
        inference_copy(final).save(unchecked)
        size = unchecked.stat().st_size
        if size > MAX_BYTES:
            raise ValueError(f"the float16 model weighs {size:,} bytes, more than the "
                             f"{MAX_BYTES:,} a shipped model may: choose a smaller architecture "
                             f"({path} is unchanged)")
        entry = {"file": path.name, "sha256": hashlib.sha256(unchecked.read_bytes()).hexdigest(),
                 "bytes": size, "direction": direction, "weights": "float16",
                 # the model's own count: a tied weight is one parameter, not two
                 "parameters": sum(p.numel() for p in final.build_model().parameters()),
                 "preset": (final.preset or {}).get("name"), "run_id": final.run_id,
                 "choices": final.choices,
                 "training": training_record(final, last, command, machine)}
        if start is not None:
            entry["training"]["continued_from"] = start
        if scores is not None:
            entry["scores"] = scores
        manifest["models"][direction] = entry
        os.replace(unchecked, path)
        write_json_atomic(manifest_path, manifest)
    finally:
        unchecked.unlink(missing_ok=True)
    return entry


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m tools.export_pretrained",
                                     description=__doc__.split("\n\n")[0])
    parser.add_argument("--run", required=True, type=Path,
                        help="the training run's folder (final.pt, last.pt)")
    parser.add_argument("--direction", required=True, help="de-en, en-de, ...")
    parser.add_argument("--machine", required=True, help="where it was trained, in words")
    parser.add_argument("--command", required=True, help="the training command, as run")
    parser.add_argument("--scores", type=Path, help="benchmarks/pretrained.py's JSON")
    args = parser.parse_args(argv)
    try:
        scores = read_scores(args.scores) if args.scores else None
        entry = export(args.run, args.direction, args.machine, args.command, scores)
    except (CheckpointError, ValueError, OSError) as e:
        print(f"error: {' '.join(str(e).split())}", file=sys.stderr)
        return 2
    print(f"wrote {MODELS_DIR / entry['file']} ({entry['bytes']:,} bytes, sha256 "
          f"{entry['sha256'][:12]}…) and its manifest entry")
    return 0


def read_scores(path: Path):
    """``--scores``: the JSON ``benchmarks/pretrained.py`` wrote; ``ValueError`` (one
    line naming the file and what to do) for a file that is not UTF-8 text or not such JSON."""
    try:
        raw = path.read_bytes()
    except OSError as e:
        raise ValueError(f"--scores {shown(str(path))}: cannot read it ({e.strerror or e}); give "
                         "the JSON file benchmarks/pretrained.py wrote (its --json)") from None
    q = shlex.quote(shown(str(path)))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise ValueError(f"--scores {shown(str(path))} is not UTF-8 text (line {line}: byte "
                         f"{raw[e.start:e.start + 1]!r}): give the JSON benchmarks/pretrained.py "
                         f"wrote, or convert it first, e.g. iconv -f LATIN1 -t UTF-8 {q} > "
                         f"{q}.utf8") from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--scores {shown(str(path))} is not JSON ({e}): give the JSON "
                         "benchmarks/pretrained.py wrote") from None


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143."""
    return run_command(lambda: main(argv), ": the manifest and the model are each the old or "
                       "the new one, never half-written")
