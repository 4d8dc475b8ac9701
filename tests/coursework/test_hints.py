"""No hint gives a solution away.

Every hint string of ``convs2s.course.checks`` (the registered two-step hints, and every string a
check passes as a hint) is held against every solution cell of every notebook. A hint may not hold

- a code fragment of a solution (a statement line or a sub-expression of at least
  MIN_FRAGMENT characters, compared without whitespace), nor
- a call, written out with its parenthesis, of a function or method that a solution calls
  (``F.conv1d(x, weight, bias)`` when the solution calls ``F.conv1d``; ``.chunk(``): a hint
  may name a function as a word, not write the call.

What the exercise's own starting cell already shows (a planted bug's lines, a stub's signature)
is not the answer and does not count.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

import pytest

from convs2s.course import checks
from convs2s.course.checks import _core
from convs2s.course.checks._core import Hint
from tools.strip_solutions import is_solution_cell

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHECK_MODULES = sorted((ROOT / "src" / "convs2s" / "course" / "checks").glob("nb[0-9][0-9].py"))
#: A fragment this long (without whitespace) is code, not a word: `trg[:,:-1]` is 10.
MIN_FRAGMENT = 10


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _source(cell: dict) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def code_fragments(source: str) -> set[str]:
    """The statement lines and sub-expressions of ``source``, without whitespace, at least
    MIN_FRAGMENT long: calls, subscripts, arithmetic, comparisons (not bare names, dotted
    names or string constants, which a hint may mention as words)."""
    lines = [line.split("#", 1)[0] for line in source.splitlines()]
    found = {_squash(line) for line in lines}
    try:
        tree = ast.parse(source)
    except SyntaxError:
        tree = None
    if tree is not None:
        for node in ast.walk(tree):
            if isinstance(node, ast.expr) and not isinstance(
                    node, ast.Name | ast.Attribute | ast.Constant | ast.JoinedStr):
                found.add(_squash(ast.unparse(node)))
    return {f for f in found if len(f) >= MIN_FRAGMENT}


def _dotted(node: ast.AST) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = _dotted(node.value)
        return f"{inner}.{node.attr}" if inner else None
    return None


def call_patterns(source: str) -> set[str]:
    """How the calls of ``source`` are written, up to their parenthesis: ``F.conv1d(``,
    ``len(``, and for every method ``.chunk(`` whatever object it is called on."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            name = _dotted(node.func)
            if name:
                found.add(f"{name}(")
            if isinstance(node.func, ast.Attribute):
                found.add(f".{node.func.attr}(")
    return found


def _code_of(source: str) -> set[str]:
    """Fragments (no whitespace) and call patterns, marked apart by their first character."""
    return code_fragments(source) | {f"\x01{p}" for p in call_patterns(source)}


def solution_fragments(nb: dict) -> dict[str, set[str]]:
    """{where: fragments and call patterns} for every solution code cell of ``nb``, less what
    its exercise's starting cell shows. A call pattern starts with "\\x01"."""
    cells = nb["cells"]
    answers: dict[str, set[str]] = {}
    for cell in cells:
        meta = cell.get("metadata", {}).get("convs2s", {})
        if meta.get("role") == "answer" and cell["cell_type"] == "code":
            answers[meta["exercise"]] = _code_of(_source(cell))
    out = {}
    for i, cell in enumerate(cells):
        if cell["cell_type"] != "code" or not is_solution_cell(cell):
            continue
        exercise = cell.get("metadata", {}).get("convs2s", {}).get("exercise")
        out[f"cell {i} ({exercise or 'solution'})"] = (
            _code_of(_source(cell)) - answers.get(exercise, set()))
    return out


def holds(hint: str, fragment: str) -> bool:
    """Whether ``hint`` holds a code fragment (compared without whitespace) or writes a call
    pattern (``F.conv1d (`` counts as ``F.conv1d(``)."""
    if not fragment.startswith("\x01"):
        return fragment in _squash(hint)
    pattern = fragment[1:]
    text = re.sub(r"\s*\.\s*", ".", re.sub(r"\s+\(", "(", hint))
    before = r"(?<![\w])" if pattern.startswith(".") else r"(?<![\w.])"
    return re.search(before + re.escape(pattern), text) is not None


def _literal_text(node: ast.AST) -> str | None:
    """A string literal's text; an f-string's literal parts, with a break at each {field}."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.JoinedStr):
        return "\x00".join(_literal_text(v) or "" for v in node.values)
    if isinstance(node, ast.BinOp):  # "..." + "..."
        left, right = _literal_text(node.left), _literal_text(node.right)
        return None if left is None and right is None else f"{left or ''}\x00{right or ''}"
    return None


def hint_strings_in_source(source: str) -> list[str]:
    """Every literal a check module gives as a hint: the arguments of ``Hint(...)``, the hint
    argument of ``run.case(what, hint)`` and ``_check_causal``, ``hint=...``, and whatever is
    assigned to a name containing "hint"."""
    found = []
    for node in ast.walk(ast.parse(source)):
        values: list[ast.AST] = []
        if isinstance(node, ast.Call):
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name == "Hint":
                values += [*node.args, *(k.value for k in node.keywords)]
            elif name == "case" and len(node.args) >= 2:
                values.append(node.args[1])
            elif name == "_check_causal" and len(node.args) >= 5:
                values.append(node.args[4])
            values += [k.value for k in node.keywords if k.arg in {"hint", "nudge", "closer"}]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any("hint" in ast.unparse(t).lower() for t in targets) and node.value:
                values.append(node.value)
        for value in values:
            text = _literal_text(value)
            if text:
                found.append(text)
    return found


def all_hints() -> list[tuple[str, str]]:
    """(where, text) of every hint: registered hints, and the literals in the check modules."""
    hints = [(f"checks.EXERCISES[{name!r}].hint.{part}", getattr(ex.hint, part))
             for name, ex in _core.EXERCISES.items() for part in ("nudge", "closer")]
    for path in CHECK_MODULES:
        hints += [(path.name, text)
                  for text in hint_strings_in_source(path.read_text(encoding="utf-8"))]
    return hints


def _exercise_notebooks(notebooks: dict[str, dict]) -> dict[str, str]:
    """{exercise id: the notebook whose cells carry it}."""
    return {cell.get("metadata", {}).get("convs2s", {}).get("exercise"): name
            for name, nb in notebooks.items() for cell in nb["cells"]
            if cell.get("metadata", {}).get("convs2s", {}).get("exercise")}


def shown_in(where: str, nb_name: str, homes: dict[str, str]) -> bool:
    """Whether a hint from ``where`` is one a learner sees in notebook ``nb_name``: a check
    module's hints in its own notebook (nb07.py in 07_...), a registered exercise's in the
    notebook that holds the exercise; a hint of unknown home in every notebook."""
    module = re.fullmatch(r"nb(\d\d)\.py", where)
    if module:
        return nb_name.startswith(module.group(1) + "_")
    registered = re.match(r"checks\.EXERCISES\['([^']+)'\]", where)
    if registered and registered.group(1) in homes:
        return homes[registered.group(1)] == nb_name
    return True


def leaks(hints: list[tuple[str, str]], notebooks: dict[str, dict]) -> list[str]:
    """Every (hint, solution fragment) pair where the hint holds the fragment, for the hints a
    learner sees in the solution's notebook."""
    problems = []
    homes = _exercise_notebooks(notebooks)
    for nb_name, nb in notebooks.items():
        for cell, fragments in solution_fragments(nb).items():
            for fragment in sorted(fragments):
                for where, text in hints:
                    if shown_in(where, nb_name, homes) and holds(text, fragment):
                        problems.append(f"{where} holds {fragment.lstrip(chr(1))!r}, code of "
                                        f"{nb_name} {cell}: {text[:100]!r}")
    return problems


# --------------------------------------------------------------------------------------------
# The course's hints
# --------------------------------------------------------------------------------------------


def _notebooks() -> dict[str, dict]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in NOTEBOOKS}


def test_the_hints_are_found():
    hints = all_hints()
    assert len(hints) >= 2 * len(checks.EXERCISES)
    modules = {where for where, _ in hints}
    assert len(CHECK_MODULES) >= 8, "the check modules (nb01.py ...) were not found"
    assert {p.name for p in CHECK_MODULES} <= modules, "a check module's hints were not found"


def test_every_solution_cell_gives_fragments():
    for name, nb in _notebooks().items():
        for cell, fragments in solution_fragments(nb).items():
            assert fragments, f"{name} {cell}: no code fragment found (is it a solution?)"


def test_no_hint_holds_a_solutions_code():
    problems = leaks(all_hints(), _notebooks())
    assert not problems, f"{len(problems)} hint(s) give a solution away:\n" + "\n".join(problems)


def test_every_check_has_a_two_step_hint():
    missing = [name for name, ex in checks.EXERCISES.items()
               if not isinstance(ex.hint, _core.Hint)]
    assert not missing, f"exercises declared without a two-step Hint: {missing}"


# --------------------------------------------------------------------------------------------
# The detector, on hints that do give the answer away
# --------------------------------------------------------------------------------------------


def _notebook(*cells: tuple[dict, str]) -> dict:
    return {"cells": [{"cell_type": "code", "metadata": meta, "source": src, "outputs": [],
                       "execution_count": None} for meta, src in cells]}


SOLUTION = {"cellView": "form", "jupyter": {"source_hidden": True},
            "convs2s": {"exercise": "repeats", "role": "solution"}}
ANSWER = {"convs2s": {"exercise": "repeats", "role": "answer"}}
PLANTED = "def repeats(tokens, n=1):\n    for i in range(len(tokens) - 2 * n):\n        pass\n"
FIXED = ("#@title Solution\ndef repeats(tokens, n=1):\n"
         "    for i in range(len(tokens) - 2 * n + 1):  # the fix\n"
         "        if tokens[i:i + n] == tokens[i + n:i + 2 * n]:\n            return True\n"
         "    return False\nchecks.repeats(repeats)\n")


@pytest.mark.parametrize("hint", [
    "count the windows: range(len(tokens) - 2 * n + 1) of them",
    "compare tokens[i : i + n] with the next window",
    "loop over range(len(tokens)-2*n+1)",  # spacing does not hide it
])
def test_a_hint_quoting_the_fix_is_caught(hint):
    nb = _notebook((ANSWER, PLANTED), (SOLUTION, FIXED))
    assert leaks([("made-up", hint)], {"nb": nb})


@pytest.mark.parametrize("hint", [
    "how many windows of 2n tokens fit in a list of n tokens?",
    "len and range are enough",  # names as words, not calls
    "the loop misses the last window",
    "range(len(tokens) - 2 * n) is what the starting cell shows",  # the planted line, not the fix
])
def test_a_hint_about_the_idea_passes(hint):
    nb = _notebook((ANSWER, PLANTED), (SOLUTION, FIXED))
    assert not leaks([("made-up", hint)], {"nb": nb})


@pytest.mark.parametrize("code, hint", [
    ("#@title Solution\ndef glu(h, dim):\n    a, b = h.chunk(2, dim=dim)\n"
     "    return a * torch.sigmoid(b)\n", "split with h.chunk(2, dim=dim)"),
    ("#@title Solution\ndef conv(x, weight, bias):\n    k = weight.size(-1)\n"
     "    return F.conv1d(F.pad(x, (k - 1, 0)), weight, bias)\n",
     "then F.conv1d(x, weight, bias) without padding"),
    ("#@title Solution\ndef conv(x, weight, bias):\n    k = weight.size(-1)\n"
     "    return F.conv1d(F.pad(x, (k - 1, 0)), weight, bias)\n", "pad with F.pad(x, (k-1, 0))"),
    ("#@title Solution\ndef light(x, kernel, channels):\n"
     "    return F.conv1d(x, kernel, groups=channels)\n",
     "use F.conv1d(x, kernel, groups=channels)"),
])
def test_hints_that_quote_a_solutions_call_are_caught(code, hint):
    nb = _notebook(({"cellView": "form"}, code))
    assert leaks([("made-up", hint)], {"nb": nb})


def test_a_hint_is_held_to_the_solutions_of_the_notebook_it_is_shown_in():
    """A check module's hints are read against its own notebook's solutions, a registered
    exercise's against the notebook holding it: nb07's "print sorted(prediction)" is no leak of
    notebook 06's call of sorted(), nb06's would be."""
    nb = _notebook((ANSWER, PLANTED), (SOLUTION, FIXED))
    hint = "count the windows: range(len(tokens) - 2 * n + 1) of them"
    notebooks = {"06_x.ipynb": nb}
    assert leaks([("nb06.py", hint)], notebooks)
    assert not leaks([("nb07.py", hint)], notebooks)
    assert leaks([("checks.EXERCISES['repeats'].hint.closer", hint)], notebooks)
    assert not leaks([("checks.EXERCISES['repeats'].hint.closer", hint)],
                     {**notebooks, "07_y.ipynb": _notebook(
                         ({"convs2s": {"exercise": "repeats", "role": "task"}}, "pass"))}
                     | {"06_x.ipynb": _notebook(({"cellView": "form"}, FIXED))})


def test_hints_are_read_from_a_check_module_source():
    source = '''
HINT = Hint(nudge="look at the gate", closer=f"use {x} then torch.sigmoid(b)")
with run.case("what", "plain hint text"):
    pass
with run.case(what, hint=("a" "b")):
    pass
my_hint = "assigned"
_check_causal(run, conv, x, what, "causal hint", cut=5)
'''
    found = hint_strings_in_source(source)
    assert "look at the gate" in found and "plain hint text" in found
    assert "ab" in found and "assigned" in found and "causal hint" in found
    assert any("torch.sigmoid(b)" in text for text in found)


# --------------------------------------------------------------------------------------------
# A closer hint is a smaller step or a question, never the fix in words
# --------------------------------------------------------------------------------------------

#: By check module: words and code that would state an exercise's fix. No hint of that module
#: (nudge or closer, main or secondary, shortcut hints included) may hold one (case ignored).
FIX_WORDS = {
    "nb01": ["chunk", "sigmoid of b", "a times", "remainder", "raise valueerror",
             "(k - 1)/2", "l times as far", "a ⊗ σ(b)"],
    "nb02": ["twice that variance", "2 ** 10", "2^10", "masked_fill", "zero the pad",
             "2·hid_dim", "2 * hid", "one gain g per"],
    "nb03": ["[..., :", "[:, :-1]", "[:, 1:]", "slice", "surplus", "without its last",
             "without its first", "k - 1 inputs", "(k - 1) * hid", "as it is; it accepts"],
    "nb04": ["-inf", "minus infinity", "masked_fill", "a_j²", "[trg_len, emb_dim] x",
             "torch.where", "where p > 0", "nan_to_num", "softmax over the last dimension"],
    "nb05": ["ignore_index", "ignore", "exp(", "2 **", "raise its base", "to the power of the loss",
             "sorted(", "ties alphabetically", "counter(", "leave them out of the counted"],
    "nb06": ["**alpha", "** alpha", "multiply each score", "min(1", "e^(1", "2 * n + 1",
             "make that last start"],
    "nb07": ["once per target position", "count both passes", "ceil", "rounded up", "-(-",
             "two bias vectors", "l·(k - 1) + 1", "(vocabulary × e)", "one update per position"],
    "nb08": ["one filter of width k per input channel", "no bias", "repeat_interleave",
             "groups", "softmax over its k taps", "c_in·c_out·k", "d·2d·k", "set the two",
             "k - 1 zeros on the left", "repeat each head's row"],
}


def _module_hints(module) -> list[tuple[str, Hint]]:
    """The module's Hint constants and the hints its exercises declare."""
    hints = [(name, value) for name, value in vars(module).items() if isinstance(value, Hint)]
    for ex in _core.EXERCISES.values():
        if ex.check.__module__ == module.__name__:
            hints += [(f"{ex.id}.hint", ex.hint)]
            hints += [(f"{ex.id}.shortcut_hint", ex.shortcut_hint)] if ex.shortcut_hint else []
    return hints


@pytest.mark.parametrize("module_name", sorted(FIX_WORDS))
def test_no_hint_states_its_exercises_fix_in_words(module_name):
    import importlib

    module = importlib.import_module(f"convs2s.course.checks.{module_name}")
    hints = _module_hints(module)
    assert hints, module_name
    stated = [f"{name}.{part}: {word!r}" for name, hint in hints
              for part in ("nudge", "closer") for word in FIX_WORDS[module_name]
              if word in getattr(hint, part).lower()]
    assert not stated, "hints that state a fix:\n" + "\n".join(stated)


def test_every_declared_and_shortcut_hint_is_checked_for_fix_words():
    import importlib

    checked = {id(h) for m in FIX_WORDS
               for _, h in _module_hints(importlib.import_module(f"convs2s.course.checks.{m}"))}
    for ex in _core.EXERCISES.values():
        for hint in (ex.hint, ex.shortcut_hint):
            assert hint is None or id(hint) in checked, ex.id


#: Words that state a fix in a docstring, beyond each module's FIX_WORDS.
DOCSTRING_FIX_WORDS = ["exp of", "exp(1 - 2)", "100 · exp", "must feed", "2 to the power"]


@pytest.mark.parametrize("module_name", sorted(FIX_WORDS))
def test_no_docstring_of_a_check_states_its_exercises_fix(module_name):
    """A student can read a check's docstring in a graded copy (`help(checks.my_glu)`): like
    the hints, it says what is compared, never the answer."""
    import importlib
    import inspect

    module = importlib.import_module(f"convs2s.course.checks.{module_name}")
    texts = {module_name: module.__doc__ or ""}
    for name, value in vars(module).items():
        if inspect.isfunction(value) and value.__module__ == module.__name__:
            texts[name] = inspect.getdoc(value) or ""
    stated = [f"{name}: {word!r}" for name, text in texts.items()
              for word in [*FIX_WORDS[module_name], *DOCSTRING_FIX_WORDS] if word in text.lower()]
    assert not stated, "docstrings that state a fix:\n" + "\n".join(stated)
