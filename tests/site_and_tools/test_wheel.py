"""What `pip install` gives a learner: the package, and none of the course's secrets or tools.

The wheel is built (`pip wheel --no-deps`) from a copy of the repository, so that tools/ and
coursework/ sit beside src/ as they do in a clone. It must hold no course tool (coursework,
screenshots, badges), no nbgrader marker, no exercise's solution or hidden test, and nothing in
it may import tools/. The dependency rules of the package are checked on its imports (AST):
the model knows no data, files or plotting; training does not plot.
"""

from __future__ import annotations

import ast
import io
import json
import re
import tokenize
import zipfile
from pathlib import Path

import pytest
from wheel_support import MODELS, build_wheel

from tools import coursework

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "src" / "convs2s"
TOOL_MODULES = {"coursework", "screenshots", "badges"}
MARKERS = ("BEGIN SOLUTION", "END SOLUTION", "BEGIN HIDDEN TESTS", "END HIDDEN TESTS",
           "HIDDEN TESTS")


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> dict[str, str]:
    """The wheel's files (path -> text) built from a copy of the repository."""
    built = build_wheel(tmp_path_factory.mktemp("wheel"))
    with zipfile.ZipFile(built) as z:
        return {name: z.read(name).decode("utf-8", errors="replace") for name in z.namelist()}


# --------------------------------------------------------------------------------------------
# Finding a solution's body in a file, whatever its whitespace and comments
# --------------------------------------------------------------------------------------------


def normalised_lines(code: str) -> list[str]:
    """Lines of Python without comments, blank lines or whitespace."""
    try:
        tokens = list(tokenize.generate_tokens(io.StringIO(code).readline))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        tokens = None
    if tokens is not None:  # drop comments exactly, keeping '#' inside strings
        lines = code.splitlines()
        for tok in reversed(tokens):
            if tok.type == tokenize.COMMENT:
                row, col = tok.start
                lines[row - 1] = lines[row - 1][:col]
        code = "\n".join(lines)
    out = []
    for line in code.splitlines():
        line = "".join(line.split())  # layout never matters: `3*h` is `3 * h`
        if line and not line.startswith("#"):
            out.append(line)
    return out


def contains_run(haystack: list[str], needle: list[str]) -> bool:
    """Whether ``needle`` occurs as consecutive lines of ``haystack``."""
    n = len(needle)
    return any(haystack[i:i + n] == needle for i in range(len(haystack) - n + 1))


def _regions(source: str, begin: str, end: str) -> list[str]:
    out, current = [], None
    for line in source.splitlines():
        if begin in line:
            current = []
        elif end in line and current is not None:
            out.append("\n".join(current))
            current = None
        elif current is not None:
            current.append(line)
    return out


def course_secrets() -> tuple[list[list[str]], list[str]]:
    """Every exercise's secret code (solution regions as the course builder makes them, hidden
    test bodies), as normalised lines; and the explain exercises' model answers."""
    code, prose = [], []
    for path in coursework.course_notebooks(ROOT / "notebooks"):
        nb = coursework.read_notebook(path)
        hidden = coursework.read_hidden(ROOT / "coursework" / "hidden" / f"{nb.number}.py")
        for ex in nb.exercises:
            if ex.manual:
                prose.append(" ".join(ex.solution.split()))
                continue
            for region in _regions(coursework.solution_cell_source(ex),
                                   coursework.BEGIN_SOLUTION, coursework.END_SOLUTION):
                code.append(normalised_lines(region))
            if ex.id in hidden:
                code.append(normalised_lines(_body(hidden[ex.id])))
    return code, prose


def _body(fn) -> str:
    """A hidden test's body: its function's source without the ``def`` line(s) and docstring."""
    import inspect
    import textwrap

    source = textwrap.dedent(inspect.getsource(fn))
    node = ast.parse(source).body[0]
    first = node.body[1] if ast.get_docstring(node) and len(node.body) > 1 else node.body[0]
    return "\n".join(source.splitlines()[first.lineno - 1:node.end_lineno])


def checked(secret: list[str]) -> bool:
    """Whether a secret is distinctive enough to look for (see :func:`leaks`)."""
    return len(secret) >= 2 or (len(secret) == 1 and len(secret[0]) >= 24)


def leaks(files: dict[str, str], code: list[list[str]], prose: list[str]) -> list[str]:
    """(file, first line) of every secret found in ``files``.

    Strict but not flaky: a secret of two or more meaningful lines must not appear as a run of
    lines anywhere, nor a one-line secret of 24 characters or more without spaces (a short line
    such as ``return k - 1`` may be in the package for its own reasons); a model answer must not
    appear in the whitespace-collapsed text.
    """
    found = []
    for name, text in files.items():
        lines = normalised_lines(text) if name.endswith(".py") else [
            "".join(line.split()) for line in text.splitlines() if line.strip()]
        flat = " ".join(text.split())
        for secret in code:
            if checked(secret) and contains_run(lines, secret):
                found.append(f"{name}: {secret[0]}")
        for answer in prose:
            if len(answer) >= 40 and answer in flat:
                found.append(f"{name}: {answer[:60]}")
    return found


def test_the_leak_finder_finds_a_planted_solution():
    code = [["y = operator.mul(x, 2)", "return y"], ["return 1"],
            ["return 3 * hidden * (inputs + hidden) + 6 * hidden"]]
    prose = ["The gate lets gradients through the linear path, so deep stacks train."]
    planted = {"convs2s/x.py": "def f(x):\n    y = operator.mul(x,  2)  # a comment\n\n"
                               "    return y\n",
               "convs2s/y.py": "return 1\nreturn 3*hidden*(inputs+hidden) + 6*hidden\n",
               "convs2s/z.txt": "The gate lets gradients\nthrough the linear path, so deep "
                                "stacks train.\n"}
    code = [normalised_lines("\n".join(secret)) for secret in code]
    assert leaks(planted, code, prose) == [
        "convs2s/x.py: y=operator.mul(x,2)",
        "convs2s/y.py: return3*hidden*(inputs+hidden)+6*hidden",
        f"convs2s/z.txt: {prose[0][:60]}"]
    assert normalised_lines("s = '# not a comment'  # a comment\n") == ["s='#notacomment'"]


# --------------------------------------------------------------------------------------------
# The wheel
# --------------------------------------------------------------------------------------------


def test_wheel_holds_the_package_and_no_course_tool(wheel):
    packages = {name.split("/")[0] for name in wheel if "/" in name}
    assert packages == {"convs2s", next(p for p in packages if p.endswith(".dist-info"))}
    modules = {Path(name).stem for name in wheel if name.endswith(".py")}
    assert {"convs2s", "train", "checks", "nb01", "atomic_files"} <= modules | {
        Path(name).parent.name for name in wheel}
    assert modules & TOOL_MODULES == set(), sorted(modules & TOOL_MODULES)
    assert not any(name.startswith(("tools/", "coursework/")) for name in wheel)


def test_the_wheel_holds_exactly_the_package_data_it_ships(wheel):
    """Besides Python modules: the shipped models and their manifest (each model the manifest
    lists, in every direction, nothing else) and the reference reports notebooks 05-06 read;
    nothing more."""
    from convs2s.course import reference

    data = {name for name in wheel if name.startswith("convs2s/") and not name.endswith(".py")}
    expected = {f"convs2s/course/results/{p.name}" for p in reference.RESULTS_DIR.glob("*.json")}
    assert expected, "the reference reports"
    listed = json.loads((MODELS / "manifest.json").read_text(encoding="utf-8"))["models"]
    assert {"de-en", "en-de"} <= set(listed), sorted(listed)
    expected |= {"convs2s/run/models/manifest.json",
                 *(f"convs2s/run/models/{entry['file']}" for entry in listed.values())}
    assert data == expected, (f"unexpected: {sorted(data - expected)}; "
                              f"missing: {sorted(expected - data)}")


def test_wheel_holds_no_nbgrader_marker(wheel):
    hits = [(name, m) for name, text in wheel.items() for m in MARKERS if m in text]
    assert hits == []


def test_wheel_holds_no_solution_or_hidden_test(wheel):
    code, prose = course_secrets()
    # Not vacuous: the course's exercises are read, and most of their secrets are checked.
    assert sum(map(checked, code)) >= 30 and sum(map(checked, code)) >= 0.75 * len(code)
    assert len(prose) >= 5
    assert leaks(wheel, code, prose) == []


def _imports(tree: ast.AST, package: str) -> set[str]:
    """Absolute names of everything ``tree`` (a module of ``package``) imports, anywhere in it
    (``from a import b`` gives ``a`` and ``a.b``: b may be a module)."""
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)
    return out


def _strings(tree: ast.AST) -> list[str]:
    return [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)]


def test_nothing_installed_imports_tools(wheel):
    offenders = []
    for name, text in wheel.items():
        if not name.endswith(".py"):
            continue
        package = name.rsplit("/", 1)[0].replace("/", ".")
        tree = ast.parse(text)
        if any(m == "tools" or m.startswith("tools.") for m in _imports(tree, package)):
            offenders.append(name)
        if any(re.match(r"tools(\.|$)", s) for s in _strings(tree)):  # import_module("tools…")
            offenders.append(f"{name} (by name)")
    assert offenders == []


# --------------------------------------------------------------------------------------------
# The package's dependency rules
# --------------------------------------------------------------------------------------------


def _package_imports() -> dict[str, set[str]]:
    """convs2s module -> the modules it imports (any level, lazy imports included)."""
    graph = {}
    for path in sorted(SRC.rglob("*.py")):
        rel = path.relative_to(SRC.parent).with_suffix("")
        module = ".".join(rel.parts).removesuffix(".__init__")
        package = ".".join(rel.parts[:-1])
        graph[module] = _imports(ast.parse(path.read_text(encoding="utf-8")), package)
    return graph


def _reach(graph: dict[str, set[str]], start: str) -> set[str]:
    """Everything ``start`` imports, following the package's own modules transitively (not
    through ``convs2s/__init__``, which gathers the whole package for users' convenience)."""
    seen, todo = set(), [start]
    while todo:
        for name in graph.get(todo.pop(), ()):
            if name not in seen:
                seen.add(name)
                if name in graph and name != "convs2s":
                    todo.append(name)
    return seen


def _forbidden(reached: set[str], forbidden: tuple[str, ...]) -> list[str]:
    return sorted(n for n in reached
                  if any(n == f or n.startswith(f + ".") for f in forbidden))


@pytest.mark.parametrize("module", ["model", "model.convs2s", "model.encoder", "model.decoder",
                                    "model.layers", "model.attention", "model.search"])
def test_the_model_knows_no_data_files_or_plotting(module):
    graph = _package_imports()
    assert f"convs2s.{module}" in graph
    bad = _forbidden(_reach(graph, f"convs2s.{module}"),
                     ("convs2s.data", "convs2s.system.atomic_files",
                      "convs2s.system.folder_locks", "convs2s.run",
                      "convs2s.course", "matplotlib"))
    assert bad == [], f"convs2s.{module} imports {bad}"


def test_training_does_not_plot():
    graph = _package_imports()
    bad = _forbidden(_reach(graph, "convs2s.run.train"),
                     ("matplotlib", "convs2s.course"))
    assert bad == [], f"convs2s.run.train imports {bad}"


def test_the_rules_see_lazy_and_relative_imports():
    tree = ast.parse("def f():\n    from . import data\n    import matplotlib.pyplot as plt\n"
                     "from .checkpoint import save\n")
    names = _imports(tree, "convs2s")
    assert {"convs2s.data", "matplotlib.pyplot", "convs2s.checkpoint"} <= names
    assert _forbidden(names, ("matplotlib", "convs2s.data")) == [
        "convs2s.data", "matplotlib.pyplot"]


def test_nothing_in_the_package_imports_tools():
    graph = _package_imports()
    offenders = {m: sorted(n for n in names if n == "tools" or n.startswith("tools."))
                 for m, names in graph.items()}
    assert {m: v for m, v in offenders.items() if v} == {}
