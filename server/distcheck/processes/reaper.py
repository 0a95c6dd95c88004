"""Processes a validation is done with: killed before it returns, waited for off its path on a GPU.

`retire(procs, devices, then)` sends SIGKILL to every process of `procs` and to everything it started
(`supervise.kill_now`) before it returns: none of them computes, writes or holds a collective any more.
Waiting for them to end is another matter. A process holding a CUDA context takes a noticeable
fraction of a second to end after SIGKILL while the driver tears the context down and gives its memory
back (`bench/RESULTS_gpu.md`), and a validation ends two or three such processes (its reference run,
its ranks). Processes on a CUDA device are therefore reaped by a
background thread, which then runs `then` (removing their run directory); CPU processes end within
milliseconds and are reaped before `retire` returns, as before.

What is handed over is always reaped: the owner waits for it when it exits (`atexit`, at most
`EXIT_WAIT_S`), before its pool and forkserver are stopped, and `settle` waits on demand. Like every
process of a validation, the retired ones die with their owner however it ends (`lifeline`). No torch.
"""

from __future__ import annotations

import atexit
import contextlib
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from .supervise import kill_now, reap

__all__ = ["EXIT_WAIT_S", "pending", "retire", "settle", "slow_to_die"]

EXIT_WAIT_S = 10.0
"""How long the owner's exit waits for processes still being reaped."""

_LOCK = threading.Lock()
_THREADS: set[threading.Thread] = set()
_EXIT_HOOK: list[bool] = []


def slow_to_die(devices: Sequence[str]) -> bool:
    """Whether processes that ran on `devices` take long to end once killed: they hold a CUDA context."""
    return any(str(d).startswith("cuda") for d in devices)


def retire(procs: Sequence[Any], devices: Sequence[str], then: Callable[[], None] | None = None) -> None:
    """Kill `procs` (each with its tree) now; reap them and run `then` now on the CPU, in the
    background when they ran on a CUDA device (`slow_to_die`)."""
    procs = list(procs)
    kill_now(procs)
    if not slow_to_die(devices):
        _finish(procs, then)
        return
    thread = threading.Thread(target=_reap_then_forget, args=(procs, then), name="distcheck-reaper", daemon=True)
    with _LOCK:
        if not _EXIT_HOOK:  # registered after the pool's and the forkserver's hooks: runs before them
            atexit.register(settle, EXIT_WAIT_S)
            _EXIT_HOOK.append(True)
        _THREADS.add(thread)
    thread.start()


def pending() -> int:
    """How many handed-over groups of processes are still being reaped."""
    with _LOCK:
        return len(_THREADS)


def settle(timeout: float | None = None) -> bool:
    """Wait until every process handed to the background has been reaped (and its `then` has run), at
    most `timeout` seconds; whether none is left."""
    deadline = None if timeout is None else time.monotonic() + timeout
    while True:
        with _LOCK:
            threads = list(_THREADS)
        if not threads:
            return True
        for thread in threads:
            thread.join(None if deadline is None else max(deadline - time.monotonic(), 0.0))
        if deadline is not None and time.monotonic() >= deadline:
            return pending() == 0


def _finish(procs: list[Any], then: Callable[[], None] | None) -> None:
    reap(procs)
    if then is not None:
        then()


def _reap_then_forget(procs: list[Any], then: Callable[[], None] | None) -> None:
    try:
        with contextlib.suppress(Exception):  # a run directory already gone, a process reaped elsewhere
            _finish(procs, then)
    finally:
        with _LOCK:
            _THREADS.discard(threading.current_thread())
