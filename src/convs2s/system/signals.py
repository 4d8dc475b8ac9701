"""How every command of the course stops on Ctrl-C or SIGTERM: one line, exit 130 or 143.

SIGTERM (``kill``, a scheduler, ``docker stop``) is turned into :class:`Terminated`, a
``KeyboardInterrupt``, so that ``finally`` blocks run and no temporary file stays behind, exactly
as for Ctrl-C. Used by ``python -m convs2s.train``/``translate``/``evaluate``, the benchmarks and
the course tools (``tools/``).
"""

from __future__ import annotations

import signal
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["Terminated", "run_command", "say", "sigterm_raises", "stopped"]


class Terminated(KeyboardInterrupt):
    """SIGTERM arrived: handled as Ctrl-C."""


def _raise_terminated(signum, frame):
    raise Terminated("SIGTERM")


@contextmanager
def sigterm_raises() -> Iterator[None]:
    """While inside, SIGTERM raises :class:`Terminated` (unless it is ignored, as under
    ``nohup``, or this is not the main thread, where signals cannot be handled)."""
    previous, installed = None, False
    try:
        previous = signal.getsignal(signal.SIGTERM)
        if previous is not signal.SIG_IGN:
            signal.signal(signal.SIGTERM, _raise_terminated)
            installed = True
    except ValueError:  # not the main thread
        pass
    try:
        yield
    finally:
        if installed:
            signal.signal(signal.SIGTERM, previous if previous is not None else signal.SIG_DFL)


def say(message: str) -> None:
    """``message`` on stderr, if there is one (``2>&-`` closes it: then nowhere, and never on
    stdout, where ``print(file=None)`` would put it among a command's output)."""
    if sys.stderr is not None:
        print(message, file=sys.stderr, flush=True)


def stopped(e: KeyboardInterrupt, detail: str = "") -> int:
    """Say in one line that Ctrl-C or SIGTERM stopped the command; its exit status (130, 143:
    128 + the signal's number, what a shell shows for a process the signal killed)."""
    sigterm = isinstance(e, Terminated)
    say(f"{'stopped by SIGTERM' if sigterm else 'interrupted'}{detail}.")
    return 128 + int(signal.SIGTERM if sigterm else signal.SIGINT)


def run_command(main: Callable[[], int | None], detail: str = "") -> int:
    """``main()`` as a command: its exit status, or :func:`stopped`'s on Ctrl-C / SIGTERM."""
    with sigterm_raises():
        try:
            code = main()
        except KeyboardInterrupt as e:
            return stopped(e, detail)
    return code if isinstance(code, int) else 0
