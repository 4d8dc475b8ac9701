"""How every command of the course stops on Ctrl-C or SIGTERM: one line, exit 130 or 143.

:class:`StopSignals` is the one mechanism: while it is entered, SIGTERM (``kill``, a scheduler,
``docker stop``) raises :class:`Terminated`, a ``KeyboardInterrupt``, so that ``finally`` blocks
run and no temporary file stays behind, exactly as for Ctrl-C; inside its :meth:`~StopSignals.
deferred` blocks a signal waits for the block's end. :func:`run_command` runs the commands of
``python -m convs2s.train``/``translate``/``evaluate``, the benchmarks and the course tools
(``tools/``) under it; training also defers the signals around its updates and checkpoint writes.
"""

from __future__ import annotations

import signal
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from convs2s.system.arguments import cut

__all__ = ["StopSignals", "Terminated", "exit_status", "how_stopped", "import_command",
           "run_command", "say", "stopped"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled as Ctrl-C."""


class StopSignals:
    """While entered (in the main thread: only it can handle signals), SIGTERM raises
    :class:`Terminated` and, with ``sigint=True``, SIGINT (Ctrl-C, Jupyter's stop button)
    raises ``KeyboardInterrupt`` (without it SIGINT keeps its own handler). A signal that is
    ignored on entry (``nohup``, a background job) stays ignored. Inside :meth:`deferred`
    blocks a signal waits for the outermost block's end, so that work which must be whole (an
    optimizer update and its record, the writes of ``last.pt`` and ``best.pt``) is never cut in
    half. Leaving puts the previous handlers back."""

    def __init__(self, *, sigint: bool = True):
        self.signals = (signal.SIGINT, signal.SIGTERM) if sigint else (signal.SIGTERM,)
        self.depth, self.pending, self.previous = 0, None, {}

    def __enter__(self) -> StopSignals:
        if threading.current_thread() is threading.main_thread():
            for sig in self.signals:
                if signal.getsignal(sig) is not signal.SIG_IGN:  # e.g. nohup: leave it ignored
                    self.previous[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for sig, handler in self.previous.items():
            fallback = signal.default_int_handler if sig == signal.SIGINT else signal.SIG_DFL
            signal.signal(sig, handler if handler is not None else fallback)
        self.previous, self.pending = {}, None

    def _handle(self, signum, frame):
        if self.depth:
            self.pending = signum
        else:
            self._raise(signum)

    @staticmethod
    def _raise(signum):
        raise Terminated("SIGTERM") if signum == signal.SIGTERM else KeyboardInterrupt

    @contextmanager
    def deferred(self, raise_pending: bool = True) -> Iterator[None]:
        """A signal arriving inside waits until the outermost block ends, and is then raised
        (or, with ``raise_pending=False``, dropped: the caller is already stopping)."""
        self.depth += 1
        try:
            yield
        finally:
            self.depth -= 1
        if not self.depth and self.pending is not None:
            signum, self.pending = self.pending, None
            if raise_pending:
                self._raise(signum)


def say(message: str) -> None:
    """``message`` on stderr, if there is one (``2>&-`` closes it: then nowhere, and never on
    stdout, where ``print(file=None)`` would put it among a command's output); an argument of
    thousands of characters in it is cut (:func:`~convs2s.system.arguments.cut`)."""
    if sys.stderr is not None:
        print(cut(message), file=sys.stderr, flush=True)


def how_stopped(e: KeyboardInterrupt) -> str:
    """What stopped the work, for a message: "stopped by SIGTERM" or "interrupted" (Ctrl-C)."""
    return "stopped by SIGTERM" if isinstance(e, Terminated) else "interrupted"


def stopped(e: KeyboardInterrupt, detail: str = "") -> int:
    """Say in one line that Ctrl-C or SIGTERM stopped the command; its :func:`exit_status`."""
    say(f"{how_stopped(e)}{detail}.")
    return exit_status(e)


def exit_status(e: KeyboardInterrupt) -> int:
    """128 + the signal's number (130 for Ctrl-C, 143 for SIGTERM): what a shell shows for a
    process the signal killed."""
    return 128 + int(signal.SIGTERM if isinstance(e, Terminated) else signal.SIGINT)


def run_command(main: Callable[[], int | None], detail: str = "") -> int:
    """``main()`` as a command: its exit status, or :func:`stopped`'s on Ctrl-C / SIGTERM."""
    with StopSignals(sigint=False):
        try:
            code = main()
        except KeyboardInterrupt as e:
            return stopped(e, detail)
    return code if isinstance(code, int) else 0


def import_command(module: str, name: str = "main") -> Callable[..., int | None]:
    """``module``'s function ``name``, imported as a command's first step: Ctrl-C or SIGTERM
    while it loads (torch takes seconds) stops the command in one line, exit 130 or 143, as
    later (``python -m convs2s.translate`` and the other commands' modules)."""
    import importlib

    try:
        with StopSignals():
            return getattr(importlib.import_module(module), name)
    except KeyboardInterrupt as e:
        sys.exit(stopped(e))
