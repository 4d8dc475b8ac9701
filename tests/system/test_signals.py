"""StopSignals, the one way the course's commands and training stop on Ctrl-C or SIGTERM."""

from __future__ import annotations

import os
import signal
import threading

import pytest

from convs2s.system.signals import StopSignals, Terminated, exit_status, run_command


def _sigterm_to_self():
    signal.pthread_kill(threading.main_thread().ident, signal.SIGTERM)


@pytest.fixture
def handlers():
    """SIGINT and SIGTERM's handlers put back after the test, whatever it did."""
    before = signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)
    yield before
    signal.signal(signal.SIGINT, before[0])
    signal.signal(signal.SIGTERM, before[1])


def test_sigterm_raises_terminated_and_the_handlers_come_back(handlers):
    with pytest.raises(Terminated), StopSignals():
        _sigterm_to_self()
    assert (signal.getsignal(signal.SIGINT), signal.getsignal(signal.SIGTERM)) == handlers


def test_a_signal_inside_deferred_waits_for_the_outermost_block(handlers):
    done = []
    with pytest.raises(Terminated), StopSignals() as stop:
        with stop.deferred():
            with stop.deferred():
                _sigterm_to_self()
                done.append("inner")
            done.append("outer")  # the inner block's end does not raise yet
        done.append("never")
    assert done == ["inner", "outer"]


def test_a_pending_signal_can_be_dropped_by_a_caller_already_stopping(handlers):
    with StopSignals() as stop:
        with stop.deferred(raise_pending=False):
            _sigterm_to_self()
        # nothing raised, and a later signal is not mistaken for the dropped one
        assert stop.pending is None


def test_without_sigint_only_sigterm_is_taken(handlers):
    """Commands (run_command) leave SIGINT to Python's own handler."""
    def mine(signum, frame):
        pass

    signal.signal(signal.SIGINT, mine)
    with StopSignals(sigint=False):
        assert signal.getsignal(signal.SIGINT) is mine
        assert signal.getsignal(signal.SIGTERM) is not handlers[1]
    with StopSignals():
        assert signal.getsignal(signal.SIGINT) is not mine


def test_an_ignored_signal_stays_ignored(handlers):
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    with StopSignals():
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        os.kill(os.getpid(), signal.SIGTERM)  # nothing happens
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN


def test_run_command_turns_sigterm_into_exit_143(handlers, capsys):
    def main():
        _sigterm_to_self()
        return 0

    assert run_command(main, " (test)") == 143 == exit_status(Terminated())
    assert capsys.readouterr().err == "stopped by SIGTERM (test).\n"
    assert exit_status(KeyboardInterrupt()) == 130


@pytest.mark.parametrize("command", ["convs2s.translate", "convs2s.train", "convs2s.evaluate"])
@pytest.mark.parametrize(("sig", "line", "status"), [("SIGINT", "interrupted.", 130),
                                                     ("SIGTERM", "stopped by SIGTERM.", 143)])
def test_a_signal_while_torch_loads_stops_a_command_in_one_line(tmp_path, command, sig, line,
                                                                status):
    """Ctrl-C or SIGTERM in the seconds torch takes to load: one line and 130 or 143, as later
    (it was a 14-50 line traceback, or for SIGTERM exit 143 and no line at all): ``import
    convs2s`` loads no torch, and each command imports its code under StopSignals."""
    from signal_support import run_while_torch_loads

    done = run_while_torch_loads(tmp_path, sig, "-m", command, "--help")
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (status, [line], "")


def test_import_convs2s_loads_no_torch_and_its_names_come_on_first_use():
    import subprocess
    import sys

    code = ("import sys, convs2s; assert 'torch' not in sys.modules; "
            "assert convs2s.ConvS2S.__name__ == 'ConvS2S' and 'torch' in sys.modules; "
            "assert convs2s.run.__name__ == 'convs2s.run'; assert 'pretrained' in dir(convs2s)")
    subprocess.run([sys.executable, "-c", code], check=True)
