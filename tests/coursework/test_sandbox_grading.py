# ruff: noqa: E501 - the answers are written as a student would write them
"""Grading in the sandbox, answer by answer (convs2s.course.checks.grader): every class of
tampering route an audit found scores 0, and honest answers in several styles pass.

These run the real sandbox (bubblewrap): never skipped in CI. The nbgrader-level test
(test_nbgrader_release.py) runs the same routes through ``nbgrader autograde``.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from sandbox_support import needs_sandbox

from convs2s.course.checks import grader, testing
from convs2s.system import sandbox

pytestmark = needs_sandbox

ROOT = Path(__file__).resolve().parents[2]
SETUP = "import torch\nimport torch.nn.functional as F\nfrom convs2s.course import checks\nchecks.graded_copy(class_version=True)"
HIDDEN = grader.load_hidden(ROOT / "coursework" / "hidden" / "01.py")
#: A class's values, as grading.json holds them: these never enter the sandbox.
VARIANT = {"convs_per_layer": 3}
LIMITS = sandbox.Limits(wall_seconds=60, cpu_seconds=20)


def _(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def grade(exercise: str, answer: str, variant: dict | None = None, names=None, **kwargs):
    cases = HIDDEN[exercise](dict(VARIANT if variant is None else variant))
    return grader.grade(exercise, setup=SETUP, answer=_(answer),
                        answer_names=names or [exercise], cases=cases,
                        limits=kwargs.pop("limits", LIMITS), **kwargs)


RIGHT_FIELD = [
    "def my_receptive_field(k, n_layers):\n    return 1 + 3 * n_layers * (k - 1)",
    # numpy ints, a helper of any name, a float that is whole is not an int: np.int64 is
    """
    import numpy as np

    def _per_block(k):
        return np.int64(3 * (k - 1))

    def my_receptive_field(k, n_layers):
        return np.int64(1) + n_layers * _per_block(k)
    """,
    # a one-element integer tensor
    "def my_receptive_field(k, n_layers):\n    return torch.tensor(1 + 3 * n_layers * (k - 1))",
]


@pytest.mark.parametrize("answer", RIGHT_FIELD)
def test_right_answers_in_several_styles_pass(answer):
    verdict = grade("my_receptive_field", answer)
    assert verdict.passed, verdict.line


def test_a_right_answer_that_breaks_a_static_rule_still_passes_and_is_flagged():
    verdict = grade("my_receptive_field", """
        import os

        def my_receptive_field(k, n_layers):
            return 1 + 3 * n_layers * (k - 1)
        """)
    assert verdict.passed, verdict.line
    assert verdict.flagged and "imports os" in verdict.flagged[0]


TAMPERED = {
    # the public solution, written for the notebook's numbers: the class's differ
    "the public solution": "def my_receptive_field(k, n_layers):\n    return 1 + n_layers * (k - 1)",
    # the checks' internals replaced inside: the judgement is not made there
    "an alias that replaces a check's internals": """
        t = checks
        t._core._assert_equal = lambda *a, **k: None
        t._core._answer = lambda value, *a, **k: value
        import operator
        operator.attrgetter("_core")(checks).Unreadable = int
        def my_receptive_field(k, n_layers):
            return 0
        """,
    # walking the frames finds the runner's job: inputs only, never the expected values
    "a frame walk to the grader's data": """
        import sys
        f = sys._getframe()
        found = []
        while f is not None:
            found += [v for v in f.f_globals.values() if isinstance(v, dict) and "calls" in v]
            found += [v for v in f.f_locals.values() if isinstance(v, dict) and "calls" in v]
            f = f.f_back
        EXPECTED = [str(d) for d in found]
        def my_receptive_field(k, n_layers):
            return 0 if "expected" not in " ".join(EXPECTED) else 1
        """,
    # a verdict printed at exit, in every form grading ever used
    "a forged verdict at exit": """
        import atexit, os, sys, json
        line = 'convs2s-sandboxed-results ' + json.dumps([{"returned": 1 + 3 * 9 * 8}] * 8)
        atexit.register(lambda: print(line))
        atexit.register(lambda: print("passed the check and the hidden tests"))
        print(line)
        def my_receptive_field(k, n_layers):
            os.write(1, ("\\n" + line + "\\n").encode())
            os.kill(os.getpid(), 9)
        """,
    # files: the grading folder is not there to read or write
    "reading the gradebook and grading.json": """
        import glob, json
        hits = glob.glob("/**/grading.json", recursive=True) + glob.glob("/**/gradebook.db", recursive=True)
        values = json.load(open(hits[0])) if hits else {}
        def my_receptive_field(k, n_layers):
            return values["c"] * n_layers
        """,
    "a planted package": """
        import os
        os.makedirs("convs2s", exist_ok=True)
        open("convs2s/__init__.py", "w").write("raise SystemExit")
        def my_receptive_field(k, n_layers):
            return 0
        """,
    # a value that lies about equality cannot cross the wall as itself
    "a value that lies about equality": """
        class Anything(int):
            def __eq__(self, other):
                return True
            __hash__ = int.__hash__
        def my_receptive_field(k, n_layers):
            return Anything(0)
        """,
    "an endless loop": "while True:\n    pass",
    "sys.exit": "import sys\nsys.exit(0)",
    # another program started from the answer, where nothing is removed: the package's own answer
    "the package's answer in a child process": """
        s = torch.serialization
        def my_receptive_field(k, n_layers):
            code = ("from convs2s.course.receptive_field import receptive_field as r; "
                    f"print(r({k}, {n_layers}) * 3 - 2)")
            return int(s.os.popen(f"{s.sys.executable} -c '{code}'").read())
        """,
    # a forged results line the grader's decoding cannot read: a verdict of its own, not a crash
    "forged results that fail to decode": """
        import os, json
        def my_receptive_field(k, n_layers):
            line = 'convs2s-sandboxed-results ' + json.dumps([{"returned": {"$fraction": [1, 0]}}] * 8)
            os.write(1, ("\\n" + line + "\\n").encode())
            os._exit(0)
        """,
}


@pytest.mark.parametrize("route", sorted(TAMPERED))
def test_every_tampering_route_scores_nothing(route, tmp_path):
    course = tmp_path / "course"
    course.mkdir()
    (course / "grading.json").write_text('{"c": 3}')
    (course / "gradebook.db").write_text("")
    verdict = grade("my_receptive_field", TAMPERED[route], hidden_folders=[course],
                    limits=sandbox.Limits(wall_seconds=60, cpu_seconds=10))
    assert not verdict.passed, (route, verdict.line)
    assert "expected" not in verdict.line.lower() or route == "the public solution"
    assert not (course / "convs2s").exists()


def test_a_forbidden_function_is_gone_however_it_is_reached():
    """F.glu (and its twin in torch._C) are removed before the answer runs: an alias made in any
    way finds the refusal."""
    routes = [
        "t = torch\ndef my_glu(h, dim=-1):\n    return t.nn.functional.glu(h, dim)",
        "import operator\nglu = operator.attrgetter('nn.functional.glu')(torch)\ndef my_glu(h, dim=-1):\n    return glu(h, dim)",
        "import sys\ndef my_glu(h, dim=-1):\n    return sys.modules['torch']._C._nn.glu(h, dim)",
        "m = torch.nn.GLU\ndef my_glu(h, dim=-1):\n    return m(dim)(h)",
        # the operator itself, reached past the Python functions: refused at the dispatcher
        "def my_glu(h, dim=-1):\n    if h.shape[dim] % 2:\n        raise ValueError('odd')\n    return torch.ops.aten.glu(h, dim)",
        "t = torch\ndef my_glu(h, dim=-1):\n    if h.shape[dim] % 2:\n        raise ValueError('odd')\n    return t._C._jit_get_operation('aten::glu')[0](h, dim)",
    ]
    for answer in routes:
        verdict = grade("my_glu", answer, {})
        assert not verdict.passed, answer
        assert "ShortcutRefused" in verdict.line, verdict.line


def test_a_predict_answer_is_judged_outside_on_values_that_never_entered():
    expected = [3, 4, 5]
    variant = {"expected": expected}
    right = grade("same_padding_moves", "moved_outputs = (5, 4, 3, 4)", variant,
                  names=["moved_outputs"])
    assert right.passed, right.line
    wrong = grade("same_padding_moves", "moved_outputs = [3, 4]", variant,
                  names=["moved_outputs"])
    assert not wrong.passed and "[3, 4, 5]" not in wrong.line


def test_what_comes_back_is_data_and_odd_data_is_refused_in_one_line():
    for answer, said in [
        ("def my_receptive_field(k, n):\n    return '7'", "should be a whole number"),
        ("def my_receptive_field(k, n):\n    x = 1\n    for _ in range(10_000):\n        x = [x]\n    return x", "should be a whole number"),
        ("def my_receptive_field(k, n):\n    return torch.zeros(10_000_000)", "should be a whole number"),
        ("def my_receptive_field(k, n):\n    return (x for x in iter(int, 1))", "should be a whole number"),
        ("def my_receptive_field(k, n):\n    raise ValueError('x' * 10_000)", "raised ValueError"),
    ]:
        verdict = grade("my_receptive_field", answer)
        assert not verdict.passed and said in verdict.line, verdict.line
        assert len(verdict.line) < 600 and "\n" not in verdict.line


def test_a_message_sent_from_the_sandbox_cannot_add_a_line_to_the_verdict():
    """A forged result whose message holds a newline and a terminal escape: the verdict stays
    one line of printable text, and fails."""
    verdict = grade("my_receptive_field", """
        import os, json
        def my_receptive_field(k, n_layers):
            fake = {"raised": "E", "message": "x\\n\\x1b[2K✓ my_receptive_field: all 8 hidden cases held"}
            os.write(1, ("\\nconvs2s-sandboxed-results " + json.dumps([fake] * 8) + "\\n").encode())
            os._exit(0)
        """)
    assert not verdict.passed
    assert "\n" not in verdict.line and "\x1b" not in verdict.line, repr(verdict.line)


def test_data_round_trips_exactly():
    import numpy as np
    import torch

    values = [None, True, 3, 2.5, float("nan"), "x", [1, (2, 3)], {"a": 1}, {1, 2},
              torch.tensor([[1.5, -2.0]]), torch.tensor(7), torch.tensor([True, False]),
              np.int64(4), np.float32(0.25), np.arange(6).reshape(2, 3)]
    for value in values:
        back = testing.decode(testing.encode(value))
        assert type(back) is type(value), (value, back)
        if isinstance(value, torch.Tensor):
            assert back.dtype == value.dtype and torch.equal(back, value)
        elif isinstance(value, np.ndarray):
            assert back.dtype == value.dtype and (back == value).all()
        elif value == value:  # not NaN
            assert back == value
    assert isinstance(testing.decode(testing.encode(object())), testing.Unreadable)


def test_an_answer_the_parser_cannot_hold_is_one_line_about_the_answer():
    for answer in ["moved_outputs = [" + "+".join(["1"] * 200_000) + "]",
                   "moved_outputs = [1]\0", "x" * (grader.MAX_ANSWER + 1)]:
        verdict = grade("same_padding_moves", answer, {"expected": [1]}, names=["moved_outputs"])
        assert not verdict.passed and "\n" not in verdict.line and len(verdict.line) < 400
        assert "answer cell" in verdict.line, verdict.line


def test_the_sandboxed_runner_refuses_what_is_not_a_job_in_one_line():
    import subprocess
    import sys

    for text in ['"x"', "1", "null", '{"setup": 1}', "[" * 100_000]:
        proc = subprocess.run([sys.executable, "-m", "convs2s.course.checks.sandboxed"],
                              input=text, capture_output=True, text=True, timeout=120)
        assert proc.returncode == 2, (text[:20], proc.stderr[-300:])
        assert proc.stderr.count("\n") == 1 and "not a grading job" in proc.stderr


def test_the_courses_hidden_tests_use_the_public_api_only():
    """No private name (``_core``, ``nb01._measured_moves``) and no injected global: a hidden test
    is written as an instructor writes a private one, against convs2s.course.checks.testing."""
    import ast

    for path in sorted((ROOT / "coursework" / "hidden").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        private = [f"line {node.lineno}" for node in ast.walk(tree)
                   if isinstance(node, ast.Attribute) and node.attr.startswith("_")
                   or isinstance(node, ast.alias) and node.name.split(".")[-1].startswith("_")]
        assert private == [], (path.name, private)
        for fn in (n for n in tree.body if isinstance(n, ast.FunctionDef)):
            assert [a.arg for a in fn.args.args] == ["variant"] or fn.name.startswith("_"), \
                (path.name, fn.name)


def test_a_module_reached_through_another_is_flagged_as_an_import_would_be():
    from convs2s.course.checks import answer_rules

    flagged = answer_rules.problems(_(TAMPERED["the package's answer in a child process"]))
    assert any("torch.serialization" in f for f in flagged), flagged
    assert any("uses .os:" in f for f in flagged) and any("uses .sys:" in f for f in flagged)
    assert answer_rules.problems("def f(x):\n    return x.ostrich + x.system") == []


def test_an_endless_loop_is_told_it_ran_out_of_cpu_time():
    """The runner is its sandbox's process 1 and handles SIGXCPU itself (process 1 does not
    take a signal it has no handler for): the verdict names the CPU-time limit."""
    verdict = grade("my_receptive_field", "while True:\n    pass",
                    limits=sandbox.Limits(wall_seconds=120, cpu_seconds=4))
    assert not verdict.passed and "CPU-time limit" in verdict.line, verdict.line


def test_forged_data_costs_the_grader_neither_time_nor_memory():
    """What the sandbox sends may be forged: keys made to share one hash (quadratic to put in a
    set), an array whose dtype multiplies its size, a huge empty tensor. Each is unreadable at
    once, and what encode writes still reads back."""
    import json
    import time

    p = 2**61 - 1  # every multiple of it hashes to 0
    forged = [
        {"$set": [k * p for k in range(1, 10_001)]},
        {"$dict": [[{"$tuple": [k * p, 1]}, 0] for k in range(1, 10_001)]},
        {"$ndarray": "(200000000,)f8", "shape": [-1], "data": [1, 1]},
        {"$tensor": "float32", "shape": [100_000, 100_000], "data": []},
        {"$tensor": "float32", "shape": [2], "data": [[1.0] * 1000, [2.0] * 1000]},
        {"$set": [{"$tuple": [k, 2**40 + k]} for k in range(10_000)]},  # a tuple's hash is chosen
        [{"$set": list(range(10_000))} for _ in range(11)],
    ]
    started = time.process_time()
    decoded = [testing.decode(json.loads(json.dumps(d))) for d in forged]
    assert time.process_time() - started < 5  # quadratic would be minutes
    assert all(isinstance(d, testing.Unreadable) for d in decoded[:6]), decoded[:6]
    assert all(isinstance(d, set) for d in decoded[6][:10])
    assert isinstance(decoded[6][10], testing.Unreadable)
    for fine in [{(1, 2): [3.5, {"$set": None}], 4: {5, 6}}, {(1, (2, "a")): None},
                 [{k: k for k in range(6_000)}] * 2, {2**61 - 2: 1.5}]:
        assert testing.decode(json.loads(json.dumps(testing.encode(fine)))) == fine


def test_the_routes_that_rebuild_a_removed_function_are_flagged():
    """In-process removal is a guard, not a wall (the README says so): each route an audit
    used to put a removed function back is flagged for the instructor."""
    from convs2s.course.checks import answer_rules

    routes = {
        "reload": "from typing import sys\nr = sys.modules['importlib'].reload",
        "attrgetter": "import operator\nglu = operator.attrgetter('_C._nn.glu')(torch)",
        "an alias's private part": "t = torch\nglu = t._C._nn.glu",
        "an alias's forbidden part": "t = torch\nglu = t.ops.aten.glu",
        "a builtin as an attribute": "import math\nb = math.floor\nb.setattr",
        "a module imported from another": "from torch import os",
        # a third audit: no module name at the chain's start
        "a private part of anything": "import collections\nc = [collections][0]\ns = c._sys",
        "builtins looked up by name": "b = [1][0]\nv = b.vars(b)['x']\nb.exec(b.compile('1', 'f', 'exec'))",
    }
    for name, route in routes.items():
        assert answer_rules.problems(route), name


def test_an_honest_attribute_named_like_a_builtin_is_not_flagged():
    from convs2s.course.checks import answer_rules

    assert answer_rules.problems("def f(model, x):\n    model.eval()\n    model.input = x\n"
                                 "    return model.compile") == []
    assert answer_rules.problems("class M(torch.nn.Module):\n    def __init__(self):\n"
                                 "        super().__init__()\n        self._w = 1\n"
                                 "    def forward(self, model):\n"
                                 "        return self._w + model.compile()") == []
