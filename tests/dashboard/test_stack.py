"""`make run` supervision: a crashed process is restarted with back-off and logged; the stack
stays up until Ctrl-C (issue 12, defect 4). Real child processes, no Django needed."""

import os
import signal
import sys
import time

from dashboard.stack import Supervisor


def supervise_until(supervisor: Supervisor, condition, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "condition never became true"
        supervisor.supervise_once(time.monotonic())
        time.sleep(0.05)


def test_a_killed_process_is_restarted_and_logged(capsys):
    supervisor = Supervisor(dict(os.environ))
    supervisor.start("sleeper", [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(120)"])
    supervisor.start("other", [sys.executable, "-c", "import time; time.sleep(120)"])
    try:
        first = supervisor.children[0].proc
        other = supervisor.children[1].proc
        os.kill(first.pid, signal.SIGKILL)
        supervise_until(supervisor, lambda: supervisor.children[0].proc is not first)
        assert supervisor.children[0].proc.poll() is None
        assert other.poll() is None  # the others were left running
        out = capsys.readouterr().out
        assert f"sleeper exited with status {-signal.SIGKILL}" in out
        assert "restarting it in 1 s" in out
        assert "sleeper restarted" in out
    finally:
        supervisor.stop()
    assert all(c.proc.poll() is not None for c in supervisor.children)


def test_back_off_doubles_up_to_a_ceiling():
    supervisor = Supervisor(dict(os.environ))
    supervisor.start("crasher", [sys.executable, "-c", "raise SystemExit(3)"])
    child = supervisor.children[0]
    delays = []
    now = 1000.0
    try:
        for _ in range(8):
            child.proc.wait(timeout=10)
            child.started_at = now  # it exited at once
            supervisor.supervise_once(now)
            delays.append(child.restart_at - now)
            now = child.restart_at
            supervisor.supervise_once(now)  # the back-off has passed: started again
            assert child.restart_at is None
    finally:
        supervisor.stop()
    assert delays == [1, 2, 4, 8, 16, 30, 30, 30]


def test_the_runner_sees_which_stop_signal_make_is_handling(monkeypatch):
    """GNU make sets a stop signal back to its default when it gets it (then waits for the
    runner): the signal it no longer catches is the one to stop on; make gone is SIGHUP.
    This process stands for make (SIGUSR2 for the stop signal)."""
    from dashboard import stack

    me = os.getpid()
    monkeypatch.setattr(stack.os, "getppid", lambda: me)
    previous = signal.signal(signal.SIGUSR2, lambda *_: None)
    try:
        assert signal.SIGUSR2 in stack.caught_signals(me)
        assert stack.signal_make_got(me, {signal.SIGUSR2}) is None
        signal.signal(signal.SIGUSR2, signal.SIG_DFL)  # what make's handler does first
        assert signal.SIGUSR2 not in stack.caught_signals(me)
        assert stack.signal_make_got(me, {signal.SIGUSR2}) == signal.SIGUSR2
    finally:
        signal.signal(signal.SIGUSR2, previous)
    monkeypatch.setattr(stack.os, "getppid", lambda: 1)  # make is gone: the runner is an orphan
    assert stack.signal_make_got(me, {signal.SIGUSR2}) == signal.SIGHUP
    monkeypatch.setattr(stack.os, "getppid", lambda: me)
    assert stack.make_parent() is None  # a python parent is not make: not watched
    assert stack.caught_signals(2**22 + 12345) is None
