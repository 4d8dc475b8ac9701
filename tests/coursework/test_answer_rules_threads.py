"""The grader reads several answers at once, in threads: reading one must not fail because
another thread reads one too (a real `nbgrader autograde` in CI failed an honest notebook with
CPython 3.11's "AST constructor recursion depth mismatch", python/cpython#106905)."""

from __future__ import annotations

import gc
import time
from concurrent.futures import ThreadPoolExecutor

from convs2s.course.checks import answer_rules

ANSWER = "\n".join(f"def f{i}(x):\n    return [(a, b) for a in range(x) "
                   f"for b in {{k: v for k, v in zip('ab', 'cd')}}]" for i in range(60))


class _LetsOthersRun:
    """Garbage whose collection, inside a parse, lets another thread run (as the grader's
    threads do while they wait on their sandboxes)."""

    def __del__(self):
        time.sleep(0)


def _read_at_once(read) -> list[str]:
    failures = []

    def work(_):
        for _ in range(20):
            for _ in range(20):
                garbage = _LetsOthersRun()
                garbage.cycle = garbage
            try:
                read(ANSWER)
            except SystemError as e:
                failures.append(str(e))
                return

    thresholds = gc.get_threshold()
    gc.set_threshold(50, 1, 1)
    try:
        with ThreadPoolExecutor(8) as pool:
            list(pool.map(work, range(16)))
    finally:
        gc.set_threshold(*thresholds)
    return failures


def test_answers_read_in_many_threads_at_once_are_all_read():
    """Without the grader's lock, the same stress made a plain ``ast.parse`` fail in 5 runs of
    5 (CPython 3.11.7, the 2-core AMD EPYC); with it, ``problems`` reads every answer."""
    assert _read_at_once(answer_rules.problems) == []
