"""The package's folders are its layers; imports point only down, and no import circle can come
back.

Every ``import`` of a ``convs2s`` module is read from the source (those inside functions too).
A module's layer is the folder it sits in:

    system    convs2s/system/    environment, atomic files and locks, signals (nothing of convs2s)
    model     convs2s/model/     ConvS2S, search, loss, the RNN baseline, variants (torch's
                                 public API only)
    data      convs2s/data/      Multi30k, tokenizers, vocabularies, batching, subwords
    run       convs2s/run/       presets, training, checkpoints, final choices, translate, evaluate
    package   convs2s/__init__.py                   (what ``import convs2s`` gives)
    commands  convs2s/{train,translate,evaluate}.py (``python -m convs2s.train`` etc.)
    course    convs2s/course/    figures, probes, baselines, analysis, checks: the notebooks'

A module may import its own layer or the layers below it (data and model never each other), and
the whole graph, function-level imports included, has no cycle. convs2s/model/ imports no private
torch module (compiled decoding, which needs one, is convs2s/run/compiled_decoding.py).
"""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src" / "convs2s"

FOLDERS = {"system", "model", "data", "run", "course"}
COMMANDS = {"train", "translate", "evaluate"}
# the convs2s.run module each command's entry point imports its ``main`` from
COMMAND_MODULES = {"train": "run.train", "translate": "run.translate_cli",
                   "evaluate": "run.evaluate"}
# which layers each layer may import (itself included)
MAY_IMPORT = {
    "system": {"system"},
    "model": {"system", "model"},
    "data": {"system", "data"},
    "run": {"system", "data", "model", "run"},
    "package": {"system", "data", "model", "run", "package"},
    "commands": {"system", "run"},  # system: how a command stops while torch loads
    "course": {"system", "data", "model", "run", "package", "course"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(SRC).with_suffix("").parts
    return ".".join(parts)  # "run.checkpoint", "course.checks.nb01", "__init__", "model.__init__"


def layer_of(name: str) -> str:
    top = name.split(".")[0]
    if top in FOLDERS:
        return top
    if name == "__init__":
        return "package"
    if name in COMMANDS:
        return "commands"
    raise AssertionError(f"convs2s.{name} sits in no layer folder: move it into one of "
                         f"{sorted(FOLDERS)} (see {__file__})")


def imports_of(path: Path, text: str | None = None) -> set[str]:
    """The convs2s modules ``path`` imports anywhere in its code (relative to the package;
    ``__init__`` for ``import convs2s``); ``text``: its source, if not the file's."""
    tree = ast.parse(text if text is not None else path.read_text(encoding="utf-8"))
    found: set[str] = set()
    name = module_name(path)
    package = name.rsplit(".", 1)[0] if "." in name else ""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == "convs2s":
                    found.add("__init__")
                elif alias.name.startswith("convs2s."):
                    found.add(alias.name.removeprefix("convs2s."))
        elif isinstance(node, ast.ImportFrom):
            if node.level:  # relative: from . import x / from ._core import y
                base = package.rsplit(".", node.level - 1)[0] if node.level > 1 else package
                module = ".".join(p for p in (base, node.module or "") if p)
            elif node.module == "convs2s" or (node.module or "").startswith("convs2s."):
                module = (node.module or "").removeprefix("convs2s").removeprefix(".")
            else:
                continue
            for alias in node.names:  # from convs2s.run import train: the submodule, if it is one
                sub = ".".join(p for p in (module, alias.name) if p)
                if (SRC / (sub.replace(".", "/") + ".py")).exists() or \
                        (SRC / sub.replace(".", "/")).is_dir():
                    found.add(sub)
                elif module:
                    found.add(module)
                else:
                    found.add("__init__")
    return found


def third_party_imports_of(path: Path) -> set[str]:
    """The top-level names of what ``path`` imports from outside convs2s and the standard
    library."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    tops: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            tops |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            tops.add(node.module.split(".")[0])
    return {t for t in tops if t not in sys.stdlib_module_names and t not in ("convs2s",
                                                                             "__future__")}


def graph() -> dict[str, set[str]]:
    return {module_name(p): imports_of(p) for p in sorted(SRC.rglob("*.py"))}


def _wrong_imports(g: dict[str, set[str]]) -> list[str]:
    wrong = []
    for name, deps in g.items():
        mine = layer_of(name)
        for dep in sorted(deps):
            theirs = layer_of(dep)
            if theirs not in MAY_IMPORT[mine]:
                wrong.append(f"convs2s.{name} ({mine}) imports convs2s.{dep} ({theirs})")
    return wrong


def test_every_module_sits_in_a_layer_folder():
    for name in graph():
        layer_of(name)


def test_the_top_level_holds_only_the_package_and_its_three_commands():
    top = {p.stem for p in SRC.glob("*.py")}
    assert top == {"__init__"} | COMMANDS
    assert {p.name for p in SRC.iterdir() if p.is_dir() and p.name != "__pycache__"} == FOLDERS


def test_imports_point_down_or_sideways_only():
    wrong = _wrong_imports(graph())
    assert not wrong, "imports that point up or across:\n" + "\n".join(wrong)


def test_the_model_layer_needs_torch_only():
    """What an engineer copies out: convs2s/model/ imports the standard library, torch and
    itself (and the system plumbing), nothing else (no numpy, spaCy, sacreBLEU, matplotlib)."""
    extra = {str(p.relative_to(SRC)): third_party_imports_of(p) - {"torch"}
             for p in sorted((SRC / "model").rglob("*.py"))}
    assert not {k: v for k, v in extra.items() if v}


def private_torch_imports_of(path: Path, text: str | None = None) -> set[str]:
    """What ``path`` imports from torch's private modules (a part of the dotted name, or an
    imported name, that starts with ``_``: ``torch._dynamo``, ``from torch.fx.experimental
    import _config``); ``text``: its source, if not the file's."""
    tree = ast.parse(text if text is not None else path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            names = [f"{node.module}.{a.name}" for a in node.names]
        else:
            continue
        found |= {n for n in names if n.split(".")[0] == "torch"
                  and any(part.startswith("_") for part in n.split(".")[1:])}
    return found


def test_the_model_layer_uses_public_torch_only():
    """The paper's code relies on torch's public API only: private modules (compiler
    configuration and the like, which change between releases) belong to convs2s/run/ (the
    compiled steps) or convs2s/system/."""
    private = {str(p.relative_to(SRC)): private_torch_imports_of(p)
               for p in sorted((SRC / "model").rglob("*.py"))}
    assert not {k: v for k, v in private.items() if v}


#: The only modules that may import torch's private modules: the compiled steps, the probe
#: of what torch.compile needs on this machine, and the checks' watch on operators.
PRIVATE_TORCH_ALLOWED = {"run/compiled_decoding.py", "run/compiled_training.py",
                         "system/compiling.py",
                         # the checks' watch on the operators a GLU exercise refuses
                         "system/operator_watch.py"}


def test_private_torch_imports_stay_in_the_compiled_steps():
    """Outside model/ too, a private torch import (which changes between torch releases) sits
    in the compiled steps and their probe only, so that one reading of those covers every such
    dependency."""
    private = {str(p.relative_to(SRC)): private_torch_imports_of(p)
               for p in sorted(SRC.rglob("*.py"))}
    assert {k for k, v in private.items() if v} <= PRIVATE_TORCH_ALLOWED


def test_the_private_torch_check_sees_a_planted_import():
    """The negative control: private imports in every spelling are found, public ones not."""
    f = SRC / "model" / "search.py"
    planted = (f.read_text(encoding="utf-8") + "\n\ndef _late():\n"
               "    import torch._dynamo\n"
               "    from torch.fx.experimental import _config\n"
               "    from torch._inductor.config import patch\n"
               "    from torch.nn.utils import parametrize\n"
               "    return torch._dynamo, _config, patch, parametrize\n")
    assert private_torch_imports_of(f) == set()
    assert private_torch_imports_of(f, planted) == {
        "torch._dynamo", "torch.fx.experimental._config", "torch._inductor.config.patch"}
    assert private_torch_imports_of(SRC / "run" / "compiled_decoding.py")  # it is seen there


def test_the_commands_are_only_entry_points():
    """``convs2s/train.py`` etc. exist so that ``python -m convs2s.train`` keeps working: each
    imports its ``convs2s.run`` module's ``main`` (by ``signals.import_command``, so that a
    signal while torch loads stops it in one line) and nothing else."""
    for name in COMMANDS:
        path = SRC / f"{name}.py"
        assert imports_of(path) == {"system.signals"}
        assert f'main = import_command("convs2s.{COMMAND_MODULES[name]}")' in path.read_text(
            encoding="utf-8")
        assert len((SRC / f"{name}.py").read_text(encoding="utf-8").splitlines()) <= 16


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
    """The negative control: a circle through an import inside a function (subword ->
    translator -> ... -> subword, one the package once had) is found, and so is the upward
    import."""
    g = graph()
    g["data.subword"] = g["data.subword"] | {"run.translator"}
    assert _cycle(g) is not None
    assert _wrong_imports({"data.subword": g["data.subword"]}) == [
        "convs2s.data.subword (data) imports convs2s.run.translator (run)"]


def test_the_detector_sees_model_and_data_knowing_each_other():
    g = {"model.search": {"data.vocab"}, "data.batching": {"model.convs2s"}}
    assert len(_wrong_imports(g)) == 2


def test_the_detector_sees_a_module_outside_the_layer_folders():
    with pytest.raises(AssertionError, match="sits in no layer folder"):
        layer_of("helpers")


def test_the_imports_reader_sees_function_level_imports():
    f = SRC / "data" / "subword.py"
    planted = (f.read_text(encoding="utf-8") + "\n\ndef _late():\n"
               "    from convs2s.run.translator import Translator\n    return Translator\n")
    assert "run.translator" not in imports_of(f)
    assert "run.translator" in imports_of(f, planted)


def test_the_torch_only_check_sees_a_planted_import(tmp_path):
    f = tmp_path / "x.py"
    f.write_text("import torch\nimport numpy as np\n\ndef f():\n    import spacy\n")
    assert third_party_imports_of(f) - {"torch"} == {"numpy", "spacy"}


@pytest.mark.parametrize("name", ["checkpoint", "checkpoint_guard", "compiled_decoding",
                                  "compiled_training", "rng_state", "time_budget",
                                  "train_arguments", "translator", "translate_cli", "train",
                                  "evaluate", "final_choices", "presets"])
def test_the_run_layer_knows_nothing_of_the_course(name):
    deps = imports_of(SRC / "run" / f"{name}.py")
    assert not {d for d in deps if layer_of(d) == "course"}
