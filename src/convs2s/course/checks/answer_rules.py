"""What an answer cell's code may use: one static read, shared by the checks and by grading.

An exercise asks the learner to write something themselves, from the tools its notebook's setup
cell imports. So an answer may import only a few plain modules (:data:`MODULES`), may not reach
into a module's private parts (``torch._C``, ``F.glu.__code__``), may not run code it builds
from text or from a file (``exec``, ``eval``, ``open``, ``getattr``, ``importlib``), and may not
change anything it did not make itself (``F.glu = ...``, ``nn.Module.__init__ = ...``). Each
exercise may also name functions its answer must not call (its declaration's
``forbidden_names``, the static half of its ``shortcuts``: :class:`convs2s.course.checks.Exercise`).

:func:`problems` reads source text and never runs it. It is advisory: the
grader (:mod:`convs2s.course.checks.grader`) lists what it flags in the answer cell for the
instructor, beside the verdict, and a check says it in one line; neither takes marks for it.
What stands between an answer and the marks is the sandbox the answer runs in and the verdict
decided outside it. The rules are stated to the learner in every graded copy's header
(:data:`RULES`).
"""

from __future__ import annotations

import ast
import linecache
import threading

#: The modules an answer may import (and their submodules where listed).
MODULES = frozenset({
    "math", "cmath", "fractions", "decimal", "statistics", "collections", "itertools",
    "functools", "operator", "heapq", "bisect", "typing", "dataclasses", "numpy",
    "torch", "torch.nn", "torch.nn.functional",
})
#: Built-in names an answer may not use: they run text as code, open files or reach any
#: attribute by a name built at run time.
FORBIDDEN_BUILTINS = frozenset({
    "exec", "eval", "compile", "__import__", "open", "globals", "locals", "vars", "getattr",
    "setattr", "delattr", "breakpoint", "input", "help", "memoryview", "__builtins__",
    "__loader__", "__spec__",
})
#: Functions that look an attribute up by a name given as text (``attrgetter("_C._nn.glu")``),
#: as ``getattr`` does, and reload a module's code afresh (the functions grading removed).
BY_NAME = frozenset({"attrgetter", "methodcaller", "reload", "import_module"})
#: Built-in names flagged as an attribute of anything (``b.exec``, ``b.vars(m)``): no honest
#: object of an answer has them. The others (``model.eval()``, ``m.compile()``, ``self.input``)
#: are flagged where their owner is a module, or where they are called with arguments.
BUILTINS_ANYWHERE = frozenset({"exec", "getattr", "setattr", "delattr", "vars", "globals",
                               "locals", "__import__", "breakpoint", "memoryview"})
#: The names whose private attributes are the answer's own (a class it defines).
OWN_NAMES = frozenset({"self", "cls"})
#: Names the setup cell binds that an answer may not touch: the checks themselves.
FORBIDDEN_SETUP_NAMES = frozenset({"checks", "convs2s"})
#: Parts of torch that load, compile or dispatch code beside the public functions.
FORBIDDEN_TORCH = frozenset({
    "ops", "library", "hub", "utils", "jit", "fx", "load", "save", "package", "classes",
    "overrides", "compiler", "compile", "export", "onnx", "distributed", "multiprocessing",
    "testing", "serialization",
})
#: Modules an answer may not import, which other modules hold as attributes
#: (``torch.serialization.os``): reached that way, they are flagged as an import would be.
FORBIDDEN_MODULE_ATTRIBUTES = frozenset({
    "os", "sys", "subprocess", "builtins", "importlib", "gc", "ctypes", "inspect", "runpy",
    "pickle", "marshal", "shutil", "socket", "multiprocessing",
})
#: Attributes that reach a running frame or a function's code (``gen.gi_frame.f_back``): from
#: there any of the grader's own variables could be read.
FORBIDDEN_ATTRIBUTES = frozenset({
    "gi_frame", "gi_code", "cr_frame", "cr_code", "ag_frame", "ag_code", "f_back", "f_locals",
    "f_globals", "f_builtins", "f_code", "tb_frame", "tb_next", "co_code", "co_consts",
})
#: The rules as a graded copy states them (one paragraph of its header).
RULES = (
    "Each answer is graded on its own, from its cell's code, in a sandbox: the setup cell, "
    "then your answer cell, then the hidden tests' calls. Define everything your answer needs "
    "in its answer cell (the setup cell's imports are there). An exercise that asks you to "
    "write something refuses the package's or PyTorch's own version of it (it is removed while "
    "your answer runs), and an answer may not start other programs. Your instructor also sees "
    "what a read of your cell flags: imports other than " + ", ".join(sorted(MODULES)) + " (also "
    "such a module reached through another, `torch.serialization.os`); the `checks` or "
    "`convs2s` names; private "
    "or dunder attributes (`torch._C`, `f.__code__`); `exec`, `eval`, `compile`, `open`, "
    "`getattr`, `setattr`, `globals`, `vars` or `operator.attrgetter`, however reached; "
    "assignments to anything the cell did not create (`F.glu = ...`).")


def _root(node: ast.AST) -> str | None:
    """The name at the start of an attribute chain (``torch`` for ``torch.nn.functional.glu``)."""
    while isinstance(node, ast.Attribute | ast.Subscript | ast.Call):
        node = node.func if isinstance(node, ast.Call) else node.value
    return node.id if isinstance(node, ast.Name) else None


def _chain(node: ast.Attribute) -> list[str]:
    """``torch.nn.functional.glu`` -> ["torch", "nn", "functional", "glu"] (names only)."""
    parts: list[str] = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if isinstance(node, ast.Name):
        parts.append(node.id)
    return parts[::-1]


def _is_check_call(node: ast.stmt) -> bool:
    """``checks.<exercise>(...)`` or ``assert checks.<exercise>(...)``: the notebook's own call
    of a check, which the graded copy keeps in a cell of its own."""
    value = node.value if isinstance(node, ast.Expr) else (
        node.test if isinstance(node, ast.Assert) else None)
    return (isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
            and isinstance(value.func.value, ast.Name) and value.func.value.id == "checks")


def _called_with_arguments(node: ast.Attribute, parents: dict) -> bool:
    """Whether ``node`` (``b.eval``) is called with arguments (``b.eval("...")``)."""
    call = parents.get(id(node))
    return isinstance(call, ast.Call) and call.func is node and bool(call.args or call.keywords)


def _module_allowed(name: str) -> bool:
    return name in MODULES


def _imported(tree: ast.Module, setup_modules: dict[str, str]) -> dict[str, str]:
    """Names bound to modules or module members: the setup's and the answer's imports."""
    modules = dict(setup_modules)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                modules[alias.asname or alias.name.split(".")[0]] = (
                    alias.name if alias.asname else alias.name.split(".")[0])
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                modules[alias.asname or alias.name] = f"{node.module}.{alias.name}"
    for _ in range(3):  # a name bound to a module or a member of one is read as it: t = torch
        for node in ast.walk(tree):
            if (isinstance(node, ast.Assign) and len(node.targets) == 1
                    and isinstance(node.targets[0], ast.Name)
                    and isinstance(node.value, ast.Attribute | ast.Name)):
                chain = ([node.value.id] if isinstance(node.value, ast.Name)
                         else _chain(node.value))
                if chain and chain[0] in modules:
                    modules[node.targets[0].id] = ".".join([modules[chain[0]], *chain[1:]])
    return modules


#: What the course's setup cells bind (``import torch``, ``import torch.nn.functional as F``,
#: ``from collections import Counter`` ...), so that ``F.glu`` is read as torch's.
SETUP_MODULES = {"torch": "torch", "F": "torch.nn.functional", "math": "math",
                 "Counter": "collections.Counter", "checks": "convs2s.course.checks"}


#: The grader reads several answers at once, in threads (coursework/sandbox_grading.py).
#: CPython 3.11 counts the AST constructor's recursion in state its threads share, so two
#: threads parsing at once can fail with a spurious ``SystemError: AST constructor recursion
#: depth mismatch`` (python/cpython#106905) when a garbage collection inside one parse lets the
#: other run: an honest notebook's grading then fails. One parse at a time.
_ONE_PARSE_AT_A_TIME = threading.Lock()


def problems(source: str, forbidden: frozenset[str] = frozenset(), *,
             setup_modules: dict[str, str] | None = None) -> list[str]:
    """What ``source`` (an answer cell) does that :data:`RULES` forbid, one line each; [] when
    nothing. ``forbidden``: the names its exercise declares (``forbidden_names``). A cell that
    is not valid Python is one problem too."""
    try:
        with _ONE_PARSE_AT_A_TIME:
            tree = ast.parse(source)
    except SyntaxError as e:
        return [f"the answer cell is not valid Python (line {e.lineno}: {e.msg})"]
    except (ValueError, RecursionError, MemoryError) as e:  # null bytes, nesting too deep
        return [f"the answer cell could not be read ({type(e).__name__})"]
    tree.body = [node for node in tree.body if not _is_check_call(node)]
    modules = _imported(tree, SETUP_MODULES if setup_modules is None else setup_modules)
    found: list[str] = []
    parents = {id(child): node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}

    def say(node: ast.AST, text: str) -> None:
        line = f"line {getattr(node, 'lineno', '?')}: {text}"
        if line not in found:
            found.append(line)

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if not _module_allowed(alias.name):
                    say(node, f"imports {alias.name}: an answer may import only "
                              f"{', '.join(sorted(MODULES))}")
        elif isinstance(node, ast.ImportFrom):
            if node.level or not node.module or not _module_allowed(node.module):
                say(node, f"imports from {node.module or '.'}: an answer may import only "
                          f"{', '.join(sorted(MODULES))}")
            for alias in node.names:
                if alias.name.startswith("_") or alias.name == "*":
                    say(node, f"imports {alias.name} from {node.module}: not a public name")
                elif alias.name in forbidden:
                    say(node, f"imports {alias.name}: this exercise asks you to write it")
                elif f"{node.module}.{alias.name}" in MODULES:
                    continue
                elif alias.name in FORBIDDEN_MODULE_ATTRIBUTES:
                    say(node, f"imports {alias.name} from {node.module}: a module an answer may "
                              "not import, reached through another")
                elif alias.name in BY_NAME:
                    say(node, f"imports {alias.name}: an answer may not look attributes up by "
                              "name")
                elif node.module == "torch" and alias.name in FORBIDDEN_TORCH:
                    say(node, f"imports torch.{alias.name}: not one of the tools an answer uses")
        elif isinstance(node, ast.Name):
            if node.id in FORBIDDEN_BUILTINS:
                say(node, f"uses {node.id}: an answer may not run text as code, open files or "
                          "look attributes up by name")
            elif node.id in FORBIDDEN_SETUP_NAMES:
                say(node, f"uses {node.id}: the checks are not part of an answer")
            elif node.id in forbidden and node.id in modules:
                say(node, f"uses {node.id}: this exercise asks you to write it")
        elif isinstance(node, ast.Attribute):
            root = _root(node)
            attr = node.attr
            if attr.startswith("__") and attr.endswith("__"):
                if not (attr == "__init__" and isinstance(node.value, ast.Call)
                        and isinstance(node.value.func, ast.Name)
                        and node.value.func.id == "super"):
                    say(node, f"uses .{attr}: an answer may not reach into Python's internals")
            elif attr in FORBIDDEN_ATTRIBUTES:
                say(node, f"uses .{attr}: an answer may not reach into running code")
            elif attr in FORBIDDEN_MODULE_ATTRIBUTES:
                say(node, f"uses .{attr}: a module an answer may not import, reached through "
                          "another")
            elif attr in BY_NAME or (attr in FORBIDDEN_BUILTINS
                                     and (root in modules or attr in BUILTINS_ANYWHERE
                                          or _called_with_arguments(node, parents))):
                say(node, f"uses .{attr}: an answer may not run text as code, open files or "
                          "look attributes up by name")
            elif attr.startswith("_") and (root in modules or root not in OWN_NAMES):
                say(node, f"uses {'.'.join(_chain(node))}: a private part of an object the "
                          "answer did not make")
            elif attr in forbidden:
                say(node, f"uses .{attr}: this exercise asks you to write it")
            chain = _chain(node)
            if (root in modules and modules[root].split(".")[0] == "torch"
                    and len(chain) > 1):
                full = modules[root].split(".") + chain[1:]
                if len(full) > 1 and full[1] in FORBIDDEN_TORCH:
                    say(node, f"uses torch.{full[1]}: not one of the tools an answer uses")
        if isinstance(node, ast.Assign | ast.AugAssign | ast.AnnAssign | ast.Delete):
            targets = node.targets if isinstance(node, ast.Assign | ast.Delete) else [node.target]
            for target in targets:
                for sub in ast.walk(target):
                    if isinstance(sub, ast.Attribute | ast.Subscript):
                        root = _root(sub)
                        if root in modules or root in FORBIDDEN_SETUP_NAMES:
                            say(node, f"changes {root}'s {ast.unparse(sub)}: an answer may "
                                      "change only what it creates")
    return found


#: The file name under which :func:`define` runs an answer cell's text.
ANSWER_CELL = "<answer cell>"


def _is_cell(filename: str) -> bool:
    """Whether code compiled from ``filename`` came from a notebook cell (IPython names a cell
    ``.../ipykernel_<pid>/<n>.py`` or ``<ipython-input-...>``) or from :func:`define`."""
    return ("ipykernel_" in filename or filename.startswith("<ipython-input")
            or filename.startswith(ANSWER_CELL))


def source_of(fn) -> str | None:
    """The whole text of the notebook cell that defined the function ``fn``, when the Python
    session still holds it (IPython keeps every cell's text); None for a function from a file
    or one whose cell is unknown."""
    code = getattr(fn, "__code__", None)
    if code is None or not _is_cell(code.co_filename):
        return None
    lines = linecache.getlines(code.co_filename)
    return "".join(lines) if lines else None


def define(source: str, namespace: dict, label: str = "") -> dict:
    """Run an answer cell's text in ``namespace`` as a notebook would, keeping the text where
    :func:`source_of` finds it (as IPython does); returns ``namespace``."""
    filename = f"{ANSWER_CELL}{label}"
    linecache.cache[filename] = (len(source), None, source.splitlines(keepends=True), filename)
    exec(compile(source, filename, "exec"), namespace)  # noqa: S102 - the learner's own cell
    return namespace
