"""How long each notebook takes a careful learner, estimated the same way for every notebook.

``python -m tools.time_estimate`` prints the table; ``--write`` puts each notebook's estimate
into its "**Estimated time:**" line. ``tests/course/test_time_estimates.py`` checks that every
line says what this method gives for the committed notebook.

The method (README, "How long the course takes"):

- prose: the words of the markdown cells at ``WORDS_PER_MINUTE`` (maths and links counted as
  words; solution cells left out: a learner opens them after trying);
- code: the lines of the code cells at ``CODE_LINES_PER_MINUTE`` (reading a cell and its
  shape comments, running it, looking at its output; solution cells left out);
- exercises: ``EXERCISE_MINUTES`` by kind (predict, derive, debug, implement, explain), graded
  ones and ungraded warm-ups alike;
- running: the seconds the stored top-to-bottom run took on the machine that made it (a 2-core
  CPU; the cells' own execution times, recorded by nbclient and kept by ``tools.strip_solutions``
  as ``metadata.run_seconds``), for the cells that took longer than
  ``WAIT_SECONDS``: those a learner waits for;
- an optional deep-dive section (a heading with "Deep dive (optional)") is counted apart: the
  main path is everything else. An exercise in a deep dive is graded like any other, so its
  minutes count in the main path (the reading around it stays the deep dive's).

Each part is rounded up to whole minutes and the total to 5 minutes.
"""

from __future__ import annotations

import json
import math
import re
import sys
from dataclasses import dataclass
from pathlib import Path

from convs2s.system.arguments import OneLineParser
from convs2s.system.atomic_files import write_text_atomic
from convs2s.system.signals import run_command

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"

WORDS_PER_MINUTE = 150
CODE_LINES_PER_MINUTE = 20
EXERCISE_MINUTES = {"predict": 8, "explain": 8, "derive": 12, "implement": 12, "debug": 12}
WAIT_SECONDS = 10
DEEP_DIVE = re.compile(r"^#{2,3}\s.*Deep dive \(optional\)", re.MULTILINE)
_HEADING = re.compile(r"^(#{1,3})\s", re.MULTILINE)
#: A graded exercise's heading, "### Exercise N (kind): title", or an ungraded warm-up's bold
#: opening, "**Exercise N (kind).**" (notebook 00): a learner spends the same time on either.
_EXERCISE = re.compile(r"^(?:###\s+|\*\*)Exercise\s+\d+\s*\(\s*(\w+)", re.MULTILINE)
#: How every estimate ends (what follows it in the notebook is kept by --write).
SENTENCE_END = " (the README's \"How long the course takes\" says how this is estimated)."
_TIME_LINE = re.compile(r"(\*\*Estimated time:\*\*)(.*?)(?=\n\n|\Z)", re.DOTALL)


@dataclass
class Part:
    """Minutes of one stretch of a notebook (its main path, or its deep dive)."""

    words: int = 0
    code_lines: int = 0
    exercises: tuple[str, ...] = ()
    run_seconds: float = 0.0

    @property
    def reading(self) -> int:
        return math.ceil(self.words / WORDS_PER_MINUTE)

    @property
    def code(self) -> int:
        return math.ceil(self.code_lines / CODE_LINES_PER_MINUTE)

    @property
    def exercise_minutes(self) -> int:
        return sum(EXERCISE_MINUTES[kind] for kind in self.exercises)

    @property
    def running(self) -> int:
        return math.ceil(self.run_seconds / 60)

    @property
    def minutes(self) -> int:
        raw = self.reading + self.code + self.exercise_minutes + self.running
        return 5 * math.ceil(raw / 5) if raw else 0


@dataclass
class Estimate:
    name: str
    main: Part
    deep_dive: Part


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _is_solution(cell: dict) -> bool:
    meta = cell.get("metadata", {}).get("convs2s", {})
    return (isinstance(meta, dict) and meta.get("role") == "solution") or \
        _source(cell).lstrip().startswith("#@title Solution")


def _seconds(cell: dict) -> float:
    """How long the cell ran in the stored run: its timestamps (a run not yet stripped) or the
    duration ``tools.strip_solutions`` kept (``metadata.run_seconds``)."""
    from tools.strip_solutions import run_seconds

    meta = cell.get("metadata", {})
    seconds = run_seconds(meta.get("execution", {})) if "execution" in meta else None
    if seconds is None:
        kept = meta.get("run_seconds")
        seconds = float(kept) if isinstance(kept, int | float) and not isinstance(kept, bool) \
            else 0.0
    return max(0.0, seconds)


def estimate(path: Path) -> Estimate:
    """The estimate of one notebook, from its committed cells and stored run."""
    cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
    main, deep = Part(), Part()
    where, deep_level = main, None
    for cell in cells:
        text = _source(cell)
        if cell.get("cell_type") == "markdown":
            for m in _HEADING.finditer(text):
                level = len(m.group(1))
                line = text[m.start():text.find("\n", m.start()) if "\n" in text[m.start():]
                            else len(text)]
                if DEEP_DIVE.match(line):
                    where, deep_level = deep, level
                elif deep_level is not None and level <= deep_level:
                    where, deep_level = main, None
        if _is_solution(cell):
            continue
        if cell.get("cell_type") == "markdown":  # the estimate itself is not counted
            where.words += len(re.findall(r"\S+", _TIME_LINE.sub("", text)))
            # graded wherever it sits: an exercise is never optional
            main.exercises += tuple(k.lower() for k in _EXERCISE.findall(text))
        elif cell.get("cell_type") == "code":
            where.code_lines += sum(1 for line in text.splitlines() if line.strip())
            seconds = _seconds(cell)
            if seconds > WAIT_SECONDS:
                where.run_seconds += seconds
    return Estimate(path.stem, main, deep)


def sentence(est: Estimate) -> str:
    """The notebook's "Estimated time" line (after the bold label)."""
    m = est.main
    n = len(m.exercises)
    parts = [f"{m.reading} of reading", f"{m.code} of reading and running code"]
    if n:
        parts.append(f"{m.exercise_minutes} for the {n} exercise{'s' if n != 1 else ''}")
    if m.running:
        parts.append(f"{m.running} of waiting for the longer cells on a 2-core CPU")
    text = f"about {m.minutes} minutes: {', '.join(parts[:-1])} and {parts[-1]}"
    if est.deep_dive.minutes:
        text += f", plus about {est.deep_dive.minutes} for the optional deep dive"
    return text + SENTENCE_END


def notebooks() -> list[Path]:
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def table(estimates: list[Estimate]) -> str:
    rows = ["| notebook | main path | reading | code | exercises | waiting for runs | "
            "optional deep dive |", "|---|---|---|---|---|---|---|"]
    for e in estimates:
        m = e.main
        rows.append(f"| {e.name[:2]} | **{m.minutes} min** | {m.reading} | {m.code} | "
                    f"{m.exercise_minutes} ({len(m.exercises)}) | {m.running} | "
                    f"{e.deep_dive.minutes or '–'} |")
    main = sum(e.main.minutes for e in estimates)
    deep = sum(e.deep_dive.minutes for e in estimates)
    rows.append(f"| all | **{main // 60} h {main % 60:02d} min** | | | | | {deep} min |")
    return "\n".join(rows)


def write(path: Path, est: Estimate) -> bool:
    """Put ``sentence(est)`` into the notebook's Estimated time line; True if it changed."""
    nb = json.loads(path.read_text(encoding="utf-8"))
    for cell in nb["cells"]:
        text = _source(cell)
        m = _TIME_LINE.search(text)
        if cell.get("cell_type") == "markdown" and m:
            old = m.group(2)
            # keep what follows the estimate (how to run the notebook quickly, ...): after this
            # tool's sentence, or after the first sentence of a line it has not written yet
            if SENTENCE_END in old:
                tail = old.split(SENTENCE_END, 1)[1]
            else:
                parts = re.split(r"(?<=\.)\s+", old.strip(), maxsplit=1)
                tail = " " + parts[1] if len(parts) > 1 else ""
            new = text[:m.start(2)] + " " + sentence(est) + tail + text[m.end(2):]
            if new == text:
                return False
            lines = new.split("\n")
            cell["source"] = [line + "\n" for line in lines[:-1]] + [lines[-1]]
            write_text_atomic(path, json.dumps(nb, indent=1, ensure_ascii=False) + "\n")
            return True
    raise SystemExit(f"error: {path.name} has no '**Estimated time:**' line")


README = ROOT / "README.md"
BEGIN, END = "<!-- time-estimate:begin -->", "<!-- time-estimate:end -->"


def write_readme(estimates: list[Estimate], readme: Path = README) -> bool:
    """Put :func:`table` between the README's time-estimate markers; True if it changed."""
    text = readme.read_text(encoding="utf-8")
    start, end = text.find(BEGIN), text.find(END)
    if start < 0 or end < start:
        raise SystemExit(f"error: {readme.name} has no {BEGIN} ... {END} block")
    new = text[:start + len(BEGIN)] + "\n" + table(estimates) + "\n" + text[end:]
    if new == text:
        return False
    write_text_atomic(readme, new)
    return True


def main(argv: list[str] | None = None) -> int:
    parser = OneLineParser(description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true",
                        help="put each estimate into its notebook's Estimated time line, and the "
                             "table into README.md")
    args = parser.parse_args(argv)
    estimates = [estimate(p) for p in notebooks()]
    print(table(estimates))
    if args.write:
        for path, est in zip(notebooks(), estimates, strict=True):
            if write(path, est):
                print(f"wrote {path.name}")
        if write_readme(estimates):
            print("wrote README.md")
    return 0


def cli(argv: list[str] | None = None) -> int:
    """``main`` as a command: Ctrl-C or SIGTERM end it with one line and 130 / 143, not a
    traceback (each file is replaced whole, so none is left half-written)."""
    return run_command(lambda: main(argv), ": each file is replaced whole (old or new, never "
                       "half-written); run it again")


if __name__ == "__main__":
    sys.exit(cli())
