"""A stop signal that comes while `lifeline.helpers_ignore_sigint` starts the pool's helpers is held, not
lost: whichever thread the kernel hands it to, the handler that was there before runs once the body is
done (a Ctrl-C lost there left the CLI waiting on a reference run that sleeps), and never mid-body."""

from __future__ import annotations

import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType

import pytest

from distcheck.processes import lifeline


class Stop(BaseException):
    pass


@pytest.fixture
def other_thread() -> Iterator[threading.Thread]:
    """A thread that does not block stop signals (as torch's worker threads do not)."""
    done = threading.Event()
    thread = threading.Thread(target=done.wait, daemon=True)
    thread.start()
    yield thread
    done.set()
    thread.join(5)


@pytest.fixture
def raising_handlers() -> Iterator[list[int]]:
    """SIGINT, SIGTERM and SIGHUP raise `Stop` in the main thread (as the CLI's handlers do); the list
    records which ran."""
    ran: list[int] = []

    def handler(signum: int, frame: FrameType | None) -> None:
        ran.append(signum)
        raise Stop(signum)

    sigs = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, handler) for s in sigs}
    yield ran
    for s, h in previous.items():
        signal.signal(s, h)


def _wait_delivered(thread: threading.Thread, sig: int, timeout_s: float = 30.0) -> None:
    """Until `sig`, sent to `thread`, is no longer pending there: a thread the kernel has not scheduled yet
    (a loaded machine) takes it only when it next runs, which could be after the body, and the test
    would then see the handler run outside it."""
    path = f"/proc/self/task/{thread.native_id}/status"
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        with open(path, encoding="ascii") as status:
            pending = next(int(line.split()[1], 16) for line in status if line.startswith("SigPnd:"))
        if not pending & (1 << (sig - 1)):
            return
        time.sleep(0.001)
    raise AssertionError(f"signal {sig} still pending on the other thread after {timeout_s} s")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGHUP], ids=lambda s: s.name)
@pytest.mark.parametrize("to", ["other-thread", "main-thread"])
def test_a_stop_signal_in_the_body_is_handled_after_it(
    sig: signal.Signals, to: str, other_thread: threading.Thread, raising_handlers: list[int]
) -> None:
    reached_end = False
    with pytest.raises(Stop):
        with lifeline.helpers_ignore_sigint():
            target = other_thread.ident if to == "other-thread" else threading.get_ident()
            assert target is not None
            signal.pthread_kill(target, sig)
            if to == "other-thread":
                _wait_delivered(other_thread, sig)
            for _ in range(200_000):  # bytecodes: a handler the main thread ran mid-body would raise here
                pass
            assert raising_handlers == [], "the handler ran inside the body"
            reached_end = True
    assert reached_end
    assert raising_handlers == [sig]
    assert signal.getsignal(sig) is not signal.SIG_IGN


def test_nothing_is_raised_when_no_signal_came(raising_handlers: list[int]) -> None:
    with lifeline.helpers_ignore_sigint():
        pass
    assert raising_handlers == []
    assert not signal.pthread_sigmask(signal.SIG_BLOCK, set()) & {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@pytest.mark.procs
def test_a_helper_started_in_the_body_has_ctrl_c_blocked() -> None:
    """The helper (exec'd like multiprocessing's) keeps the mask until it ignores SIGINT itself, so a
    Ctrl-C to the terminal's process group does not kill it while it imports."""
    probe = "print(int([l for l in open('/proc/self/status') if l.startswith('SigBlk')][0].split()[1], 16))"
    with lifeline.helpers_ignore_sigint():
        out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=60)
    blocked = int(out.stdout)
    assert blocked & (1 << (signal.SIGINT - 1)), out
