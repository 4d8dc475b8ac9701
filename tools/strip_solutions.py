"""Clear the stored outputs of the notebooks' solution cells, and every cell's run timestamps.

A collapsed solution cell still shows its outputs in JupyterLab and Colab: "predicted [5, 6, 7,
8, 9], measured [5, 6, 7, 8, 9]" under a predict exercise gives the answer away. After a full
top-to-bottom run of a notebook, run

    python -m tools.strip_solutions                  # every notebooks/NN_*.ipynb
    python -m tools.strip_solutions notebooks/01_glu_and_padding.ipynb
    python -m tools.strip_solutions --check          # exit 1 if it would change something

It empties the outputs and the execution count of every solution cell, and removes every code
cell's ``metadata.execution`` (the kernel's iopub timestamps, which a run writes anew each
time: kept, every re-run would change every cell in the diff), keeping only how long a cell
that took a second or more ran, ``metadata.run_seconds`` (one decimal: what
``tools.time_estimate`` counts as waiting); every other cell keeps its outputs, and every cell
its other metadata. CI still executes every solution (nbval runs all
cells in quick mode).
A notebook is rewritten only when something changes: atomically, keeping its mode, with the
same JSON layout as Jupyter's (indent 1, keys sorted, UTF-8). Every notebook named is read and
checked (``tools.notebook_format``) before any is written: a file that is not a notebook (a
device, a FIFO, a file over 64 MiB, JSON nested too deeply) stops the command with one line naming
it and what is wrong, and nothing is written. Ctrl-C and SIGTERM
stop it with one line (exit 130 / 143, ``convs2s.system.signals``), never a traceback.
"""

from __future__ import annotations

import json
import re
import sys
from datetime import datetime
from pathlib import Path

from convs2s.system.arguments import OneLineParser
from convs2s.system.atomic_files import write_text_atomic
from convs2s.system.local_files import FileRefused, json_value, read_small
from convs2s.system.signals import run_command
from tools.notebook_format import MAX_NOTEBOOK_BYTES, NotebookFormatError, check_notebook

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
_TITLE = re.compile(r"^#@title\s+Solution\b")


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def is_solution_cell(cell: dict) -> bool:
    """A solution cell: ``metadata.convs2s.role == "solution"``, a first line
    ``#@title Solution``, Colab's ``cellView: form`` or JupyterLab's ``source_hidden``."""
    meta = cell.get("metadata", {})
    return (meta.get("convs2s", {}).get("role") == "solution"
            or bool(_TITLE.match(_source(cell)))
            or meta.get("cellView") == "form"
            or bool(meta.get("jupyter", {}).get("source_hidden")))


def solution_cells(nb: dict) -> list[tuple[int, dict]]:
    """(index, cell) of every solution cell, code and markdown."""
    return [(i, c) for i, c in enumerate(nb.get("cells", [])) if is_solution_cell(c)]


def stored_in_solutions(nb: dict) -> list[int]:
    """Indices of the solution code cells that store outputs or an execution count."""
    return [i for i, c in solution_cells(nb) if c.get("cell_type") == "code"
            and (c.get("outputs") or c.get("execution_count") is not None)]


def timestamped_cells(nb: dict) -> list[int]:
    """Indices of the code cells whose metadata holds ``execution`` (the run's timestamps)."""
    return [i for i, c in enumerate(nb.get("cells", [])) if c.get("cell_type") == "code"
            and isinstance(c.get("metadata"), dict) and "execution" in c["metadata"]]


#: A cell that ran at least this long keeps its duration (``metadata.run_seconds``).
KEEP_SECONDS = 1.0


def run_seconds(execution: dict) -> float | None:
    """How long a cell ran, from its ``metadata.execution`` timestamps; None if unreadable."""
    try:
        start = datetime.fromisoformat(execution["iopub.execute_input"].replace("Z", "+00:00"))
        end = datetime.fromisoformat(execution["shell.execute_reply"].replace("Z", "+00:00"))
    except (KeyError, ValueError, AttributeError, TypeError):
        return None
    return max(0.0, (end - start).total_seconds())


def drop_timestamps(nb: dict) -> int:
    """Remove ``metadata.execution`` from ``nb``'s code cells, in place, keeping the rest of
    their metadata and, for a cell that ran :data:`KEEP_SECONDS` or longer, its duration
    (``metadata.run_seconds``, replacing an older one); how many cells changed."""
    changed = timestamped_cells(nb)
    for i in changed:
        meta = nb["cells"][i]["metadata"]
        seconds = run_seconds(meta.pop("execution"))
        meta.pop("run_seconds", None)
        if seconds is not None and seconds >= KEEP_SECONDS:
            meta["run_seconds"] = round(seconds, 1)
    return len(changed)


def strip(nb: dict) -> int:
    """Empty the outputs and execution count of ``nb``'s solution code cells, in place; how
    many cells changed. (:func:`drop_timestamps` removes the run's timestamps.)"""
    changed = stored_in_solutions(nb)
    for i in changed:
        nb["cells"][i]["outputs"] = []
        nb["cells"][i]["execution_count"] = None
    return len(changed)


def notebook_json(nb: dict) -> str:
    """The layout Jupyter writes (and tools/badges.py): indent 1, sorted keys, UTF-8."""
    return json.dumps(nb, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(prog="python -m tools.strip_solutions",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("notebooks", nargs="*", type=Path,
                        help="notebooks to strip (default: every notebooks/NN_*.ipynb)")
    parser.add_argument("--check", action="store_true",
                        help="change nothing; exit 1 if a solution cell stores outputs or a "
                             "cell its run's timestamps")
    args = parser.parse_args(argv)
    paths = args.notebooks or sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))
    notebooks = []
    for path in paths:  # every notebook read and checked before any is written
        try:
            nb = json_value(read_small(path, MAX_NOTEBOOK_BYTES, "notebook"))
        except FileRefused as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
        except (OSError, ValueError) as e:
            why = e.strerror if isinstance(e, OSError) and e.strerror else e
            print(f"{path}: cannot read the notebook ({why}); pass a .ipynb file",
                  file=sys.stderr)
            return 2
        try:
            notebooks.append((path, check_notebook(nb, path)))
        except NotebookFormatError as e:
            print(f"error: {e}", file=sys.stderr)
            return 2
    status = 0
    for path, nb in notebooks:
        if args.check:
            found, stamped = stored_in_solutions(nb), timestamped_cells(nb)
            if found:
                print(f"{path}: solution cells {found} store outputs (run "
                      "`python -m tools.strip_solutions` to clear them)")
                status = 1
            if stamped:
                print(f"{path}: {len(stamped)} code cells store their run's timestamps "
                      "(metadata.execution; run `python -m tools.strip_solutions` to remove them)")
                status = 1
            continue
        n, stamped = strip(nb), drop_timestamps(nb)
        if n or stamped:
            try:
                write_text_atomic(path, notebook_json(nb))  # keeps the file's mode
            except OSError as e:
                print(f"error: cannot write {path} ({e.strerror or e}); it is left as it was",
                      file=sys.stderr)
                return 2
        print(f"{path.name}: cleared {n} solution cell{'s' if n != 1 else ''}"
              + (f", removed the timestamps of {stamped} cell{'s' if stamped != 1 else ''}"
                 if stamped else ""))
    return status


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback (each notebook is replaced whole, so none is left half-written)."""
    return run_command(lambda: main(argv), ": each notebook is replaced whole (old or new, "
                       "never half-written); run it again")


if __name__ == "__main__":
    sys.exit(cli())
