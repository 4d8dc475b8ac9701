"""Watch which PyTorch operators run on this thread, without changing any.

Plumbing for the checks' refusals (:func:`convs2s.course.checks._core.refusing`): an exercise
that asks for the GLU refuses ``aten::glu`` however it was reached (``F.glu``, an alias,
``torch.ops.aten.glu``). A dispatch mode sees every operator call below autograd on the thread
that entered it, and passes each call on unchanged. ``TorchDispatchMode`` is private to torch
(``torch.utils._python_dispatch``), so it lives here, one of the few files that import torch's
private parts (``tests/test_architecture.py``).
"""

from __future__ import annotations

from collections.abc import Callable

from torch.utils._python_dispatch import TorchDispatchMode


class OperatorWatch(TorchDispatchMode):
    """A context in which each operator dispatched on this thread is told to ``seen`` by its
    name (``"aten::glu"``) before it runs as it would have."""

    def __init__(self, seen: Callable[[str], None]) -> None:
        super().__init__()
        self._seen = seen

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self._seen(func._schema.name)
        return func(*args, **(kwargs or {}))
