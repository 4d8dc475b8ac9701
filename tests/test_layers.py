"""The package's layers point only down, and no import circle can come back (issue 25).

Every ``import`` of a ``convs2s`` module is read from the source (those inside functions too),
and each module must sit in one of these layers:

    base       config, fileio                       (nothing of convs2s)
    data       Multi30k, tokenizers, subword pipeline, vocabularies, metrics
    model      the model and decoding               (beside data, knowing nothing of it)
    run        checkpoints, training, translation, evaluation
    package    convs2s/__init__.py                  (what ``import convs2s`` gives)
    teaching   figures, probes, checks, baselines

A module may import its own layer or a layer below (data and model never each other), and the
whole graph, function-level imports included, has no cycle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "convs2s"

LAYERS = {
    "base": {"config", "fileio", "precision", "stopping"},
    "data": {"data", "subword", "metrics"},
    "model": {"layers", "attention", "encoder", "decoder", "model", "decode", "rnn", "variants",
              "loss"},
    "run": {"checkpoint", "train", "translate", "evaluate", "final"},
    "package": {"__init__"},
    "teaching": {"analysis", "probe", "viz", "scaling", "readout", "paths", "worked_attention",
                 "diagrams", "baselines", "checks"},
}
# which layers each layer may import (itself included)
MAY_IMPORT = {
    "base": {"base"},
    "data": {"base", "data"},
    "model": {"base", "model"},
    "run": {"base", "data", "model", "run"},
    "package": {"base", "data", "model", "run", "package"},
    "teaching": {"base", "data", "model", "run", "package", "teaching"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts)  # "checkpoint", "checks.nb01", "__init__", "checks.__init__"


def layer_of(name: str) -> str:
    top = name.split(".")[0]
    for layer, names in LAYERS.items():
        if top in names:
            return layer
    raise AssertionError(f"convs2s.{name} is in no layer: add it to LAYERS in {__file__}")


def imports_of(path: Path, text: str | None = None) -> set[str]:
    """The convs2s modules ``path`` imports anywhere in its code (relative to the package;
    ``__init__`` for ``import convs2s``); ``text``: its source, if not the file's."""
    tree = ast.parse(text if text is not None else path.read_text(encoding="utf-8"))
    found: set[str] = set()
    package = module_name(path).rsplit(".", 1)[0] if "." in module_name(path) else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "convs2s":
                    found.add("__init__")
                elif alias.name.startswith("convs2s."):
                    found.add(alias.name.removeprefix("convs2s."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from ._core import y
                base = package
                module = ".".join(p for p in (base, node.module or "") if p)
            elif node.module == "convs2s" or (node.module or "").startswith("convs2s."):
                module = (node.module or "").removeprefix("convs2s").removeprefix(".")
            else:
                continue
            for alias in node.names:  # from convs2s import config: the submodule, if it is one
                sub = ".".join(p for p in (module, alias.name) if p)
                if (SRC / (sub.replace(".", "/") + ".py")).exists() or \
                        (SRC / sub.replace(".", "/")).is_dir():
                    found.add(sub)
                elif module:
                    found.add(module)
                else:
                    found.add("__init__")
    return found


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(SRC.rglob("*.py"))}


def test_every_module_has_a_layer():
    for name in graph():
        layer_of(name)


def test_imports_point_down_or_sideways_only():
    wrong = []
    for name, deps in graph().items():
        mine = layer_of(name)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if theirs not in MAY_IMPORT[mine]:
                wrong.append(f"convs2s.{name} ({mine}) imports convs2s.{dep} ({theirs})")
    assert not wrong, "imports that point up or across:\n" + "\n".join(wrong)


def _cycle(g: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``g`` as a list of names (first == last), or None."""
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(n: str) -> list[str] | None:
        state[n] = 1
        stack.append(n)
        for d in sorted(g.get(n, ())):
            d = d if d in g else d + ".__init__" if d + ".__init__" in g else d
            if d == n or d not in g:
                continue
            if state.get(d) == 1:
                return stack[stack.index(d):] + [d]
            if state.get(d) is None and (c := visit(d)):
                return c
        stack.pop()
        state[n] = 2
        return None

    for n in sorted(g):
        if state.get(n) is None and (c := visit(n)):
            return c
    return None


def test_no_import_cycle_not_even_inside_functions():
    cycle = _cycle(graph())
    assert cycle is None, "import cycle: " + " -> ".join(cycle)


def test_the_detector_sees_a_cycle_hidden_in_a_function():
    """The negative control: the circle issue 25 removed (subword -> translate -> ... ->
    subword, via an import inside a function) is found, and so is an upward import."""
    g = graph()
    g["subword"] = g["subword"] | {"translate"}  # subword.py used to import detokenize so
    assert _cycle(g) is not None
    wrong = [d for d in g["subword"] if layer_of(d) not in MAY_IMPORT[layer_of("subword")]]
    assert wrong == ["translate"]


def test_the_imports_reader_sees_function_level_imports():
    f = SRC / "subword.py"
    planted = (f.read_text(encoding="utf-8") + "\n\ndef _late():\n"
               "    from convs2s.translate import Translator\n    return Translator\n")
    assert "translate" not in imports_of(f)
    assert "translate" in imports_of(f, planted)


@pytest.mark.parametrize("name", ["checkpoint", "translate", "train", "evaluate", "final"])
def test_the_run_layer_knows_nothing_of_the_teaching_helpers(name):
    deps = imports_of(SRC / f"{name}.py")
    assert not {d for d in deps if layer_of(d) == "teaching"}
