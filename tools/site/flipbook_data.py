"""Write the committed data of the site's flipbooks for notebooks 04 and 05 (tools/site/data/).

    python -m tools.site.flipbook_data [--run notebooks/runs/05_cpu_subword/last.pt]

Run it once, and again when notebook 04 or 05 is run anew; the site's build reads the files and
needs neither the Multi30k data nor the training run (see tools/site/flipbooks.py):

- ``04_validation_sentences.json``: the validation sentences notebook 04's flipbook covers, 24
  evenly spaced over the split and the one the notebook picks (the index its stored output
  prints), each ``{"index", "german", "english"}`` (needs the Multi30k data: CONVS2S_DATA_DIR);
- ``05_attention_by_epoch.json``: of the run that produced notebook 05's stored outputs (its
  ``last.pt``, which exists only on the machine that trained it), the id, preset and epochs,
  the watched sentence's tokens and per epoch the recorded attention (weights rounded to 4
  decimals: a sixth of the bytes, the same picture) with the validation loss the figure's
  title prints.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from convs2s.system.arguments import OneLineParser
from convs2s.system.atomic_files import write_text_atomic
from convs2s.system.signals import run_command
from tools.site import flipbooks

ROOT = Path(__file__).resolve().parents[2]
RUN_05 = ROOT / "notebooks" / "runs" / "05_cpu_subword" / "last.pt"
#: How many evenly spaced validation sentences notebook 04's flipbook covers (and its own).
SPACED = 24


def spaced_indices(total: int, chosen: int, n: int = SPACED) -> list[int]:
    """``n`` indices evenly spaced over ``range(total)``, first and last included, and
    ``chosen``, in order. Serves notebook 04. Pure."""
    return sorted({round(i * (total - 1) / (n - 1)) for i in range(n)} | {chosen})


def sentences_04(notebook: Path) -> dict:
    """Notebook 04's flipbook data, from the Multi30k validation split."""
    from convs2s.data import load_multi30k

    nb = json.loads(notebook.read_text(encoding="utf-8"))
    chosen = int(flipbooks.stored_output(nb, r"^validation sentence (\d+) ").group(1))
    valid = load_multi30k(download=False)["valid"]
    return {"split": "Multi30k validation (convs2s.data.load_multi30k()['valid'])",
            "total": len(valid), "notebook_sentence": chosen,
            "sentences": [{"index": i, "german": valid[i][0], "english": valid[i][1]}
                          for i in spaced_indices(len(valid), chosen)]}


def _round(value, places: int = 4):
    if isinstance(value, list):
        return [_round(v, places) for v in value]
    return round(float(value), places)


def epochs_05(run: Path) -> dict:
    """Notebook 05's flipbook data, from the run's checkpoint."""
    from convs2s.course import watching_attention
    from convs2s.run.checkpoint import Checkpoint

    checkpoint = Checkpoint.load(run)
    rows = watching_attention.with_attention(checkpoint.history, run.parent)
    history = [{"epoch": int(r["epoch"]), "valid_loss": float(r["valid_loss"]),
                "attention": _round(r["attention"])}
               for r in rows if r.get("attention")]
    if not history:
        raise flipbooks.FlipbookError(f"{run}: its history records no attention")
    return {"run_id": checkpoint.run_id, "preset": checkpoint.preset["name"],
            "epochs": len(history), "preset_epochs": checkpoint.preset.get("epochs"),
            "source": "notebooks/runs/05_cpu_subword/last.pt and the attention record beside "
                      "it (convs2s.course.watching_attention)",
            "rounded": "attention weights to 4 decimals",
            "watched": watching_attention.watched_sentence(run.parent), "history": history}


def _write(path: Path, data: dict) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(data, ensure_ascii=False, separators=(",", ":")) + "\n")
    print(f"wrote {path} ({path.stat().st_size:,} bytes)")


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m tools.site.flipbook_data",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--run", type=Path, default=RUN_05,
                        help="notebook 05's run checkpoint (default: %(default)s)")
    parser.add_argument("--notebooks", type=Path, default=ROOT / "notebooks")
    args = parser.parse_args(argv)
    try:  # both read before either is written: a failure changes nothing
        sentences = sentences_04(args.notebooks / "04_multi_step_attention.ipynb")
        epochs = epochs_05(args.run)
    except (OSError, ValueError, RuntimeError, flipbooks.FlipbookError) as e:
        # RuntimeError: the package's CheckpointError and DataError (a missing run or data)
        print(f"error: {e}", file=sys.stderr)
        return 2
    _write(flipbooks.SENTENCES_04, sentences)
    _write(flipbooks.EPOCHS_05, epochs)
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback (each file is replaced whole)."""
    return run_command(lambda: main(argv), ": each file is replaced whole (old or new, never "
                       "half-written); run it again")


if __name__ == "__main__":
    sys.exit(cli())
