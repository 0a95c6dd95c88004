"""A command's last step: every process distcheck started for it has ended before the command returns.

multiprocessing leaves its forkserver and its resource tracker to notice their owner's exit on their
own, a moment after it (the forkserver then kills what is under it, see `lifeline`). Both inherit the
owner's stdout and stderr, so a pipe reading a command's output (`distcheck validate … | tee`, a CI
step, `subprocess.run(capture_output=True)`) stays open until the last of them is gone. `adopt_orphans`
(at the start of a command) and `end_helpers` (at its end) close that gap: the spare pool is dropped,
the forkserver and the tracker are asked to stop and waited for (bounded), and whatever is still
under the command after that, orphans adopted from a dying subtree included, is killed.

For processes that are distcheck's command and nothing else (the CLI): `end_helpers` kills every
process under the caller. No torch.
"""

from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from typing import Any

from . import lifeline, reaper, spares

__all__ = ["Ended", "adopt_orphans", "end_helpers"]

_POLL_S = 0.01


@dataclass
class Ended:
    """What `end_helpers` did: the helpers that stopped when asked (`stopped`) and the pids it had to
    kill (`killed`: a helper past its bound, or a process still under the command after them)."""

    stopped: list[str] = field(default_factory=list)
    killed: list[int] = field(default_factory=list)


def adopt_orphans() -> bool:
    """Make this process the subreaper of its subtree, so a process orphaned under it (its parent
    died before it) stays under it and `end_helpers` finds it. Returns whether the kernel agreed."""
    return lifeline.become_subreaper()


def end_helpers(timeout_s: float = 10.0) -> Ended:
    """Wait for the processes being reaped in the background (`reaper`), drop the spare pool, stop the
    forkserver (it kills its subtree on the way out) and the resource tracker, each waited for up to
    `timeout_s` and killed after that, then kill every process still under this one. Returns what it
    did; never raises."""
    ended = Ended()
    with contextlib.suppress(Exception):  # killed already: their reaping, and their run directories' removal
        reaper.settle(timeout_s)
    with contextlib.suppress(Exception):
        spares.close_pool()
    for name, stop in (("forkserver", _stop_forkserver), ("resource tracker", _stop_resource_tracker)):
        try:
            killed = stop(timeout_s)
        except Exception:  # a helper in a state multiprocessing did not expect: the sweep below takes it
            continue
        if killed is None:
            continue
        if killed:
            ended.killed.extend(killed)
        else:
            ended.stopped.append(name)
    with contextlib.suppress(Exception):
        ended.killed.extend(lifeline.kill_tree())
    _wait_gone(ended.killed, timeout_s)
    return ended


def _stop_forkserver(timeout_s: float) -> list[int] | None:
    """Close the forkserver's alive pipe (it then cleans up and exits) and wait for it. None when there
    is none, [] when it stopped, else the pids killed."""
    from multiprocessing import forkserver, util

    server: Any = forkserver._forkserver  # type: ignore[attr-defined]
    with server._lock:
        pid = server._forkserver_pid
        if pid is None:
            return None
        with contextlib.suppress(OSError):
            os.close(server._forkserver_alive_fd)
        killed = _wait_or_kill(pid, timeout_s)
        address = server._forkserver_address
        if address and not util.is_abstract_socket_namespace(address):
            with contextlib.suppress(OSError):
                os.unlink(address)
        server._forkserver_pid = server._forkserver_alive_fd = server._forkserver_address = None
    return killed


def _stop_resource_tracker(timeout_s: float) -> list[int] | None:
    """Close the tracker's pipe (it then unlinks what was leaked and exits) and wait for it. None when
    this process started none, [] when it stopped, else the pids killed."""
    from multiprocessing import resource_tracker

    tracker: Any = resource_tracker._resource_tracker
    with tracker._lock:
        fd, pid = tracker._fd, tracker._pid
        if fd is None or pid is None:
            return None
        with contextlib.suppress(OSError):
            os.close(fd)
        tracker._fd = tracker._pid = None
        return _wait_or_kill(pid, timeout_s)


def _wait_or_kill(pid: int, timeout_s: float) -> list[int]:
    """Reap child `pid` once it exits, within `timeout_s`; past that kill it with its subtree."""
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            done, _ = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:  # reaped already (or not our child)
            return []
        if done:
            return []
        if time.monotonic() > deadline:
            killed = lifeline.kill_tree([pid])
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)
            return killed
        time.sleep(_POLL_S)


def _wait_gone(pids: list[int], timeout_s: float) -> None:
    """Wait (bounded) until each of `pids` has died: a SIGKILLed process holds its files until the
    kernel has torn it down. Reaps the ones that are this process's children."""
    deadline = time.monotonic() + timeout_s
    left = list(pids)
    while left and time.monotonic() < deadline:
        for pid in list(left):
            with contextlib.suppress(ChildProcessError, OSError):
                os.waitpid(pid, os.WNOHANG)
            if not _running(pid):
                left.remove(pid)
        if left:
            time.sleep(_POLL_S)


def _running(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state not in (b"Z", b"X")
