"""Keeping spares warm: the pool's state and the keeper thread that forks spares until the wants are met.

`SpareKeeper` holds the idle spares, what is wanted per device, the packages spares import, the
bounds (`spares.settings`) and the counters, all under one condition. Its thread (started by the first
want) forks a spare for a device short of its want, within `max_spares` and `max_gpu_bytes` (estimated
from what warm spares of that device report), and only once the forkserver has armed itself; it drops
spares that died and, once a want expired, every idle one. A spare forked for a want that went away
meanwhile is retired at once. The thread blocks every asynchronous signal: they are the main thread's.
What callers ask of the pool is `spares.pool.SparePool`, built on this. No torch.
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Sequence
from typing import Any

from ..forkserver import forkserver_context, forkserver_ready, main_hidden
from .process import Spare
from .settings import pool_bounds

__all__ = ["SpareKeeper"]


class SpareKeeper:
    """The idle spares of this process, per device, and the keeper thread that refills them."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._idle: list[Spare] = []
        self._wanted: dict[str, int] = {}
        self._packages: tuple[str, ...] = ()
        self._expires = 0.0
        self._starting: dict[str, int] = {}
        self._thread: threading.Thread | None = None
        self._closed = False
        self._paused = 0
        bounds = pool_bounds()
        self.max_spares = bounds.max_spares
        self.max_gpu_bytes: int | None = bounds.max_gpu_bytes
        self.idle_timeout_s = bounds.idle_timeout_s
        self.keep_s: float | None = bounds.keep_s
        self.counts = {"started": 0, "claimed_warm": 0, "claimed_warming": 0, "started_on_claim": 0, "retired": 0}
        self._gpu_estimate: dict[str, int] = {}

    def _ensure_thread(self) -> None:
        if self._thread is None or not self._thread.is_alive():
            self._thread = threading.Thread(target=self._keep, name="distcheck-spares", daemon=True)
            self._thread.start()

    def _keep(self) -> None:
        # Signals are the main thread's: one delivered here would not interrupt the main thread's
        # blocking call (Ctrl-C while it waits for the pool to import torch would go unnoticed).
        synchronous = {signal.SIGSEGV, signal.SIGBUS, signal.SIGFPE, signal.SIGILL, signal.SIGABRT}
        signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals() - synchronous)
        started = False
        while True:
            with self._cond:
                busy = self._wanted or self._idle
                if not started:  # right after a start, look for the next deficit at once
                    self._cond.wait(timeout=(0.05 if not forkserver_ready() else 1.0) if busy else None)
                if self._closed:
                    return
                dead = [s for s in self._idle if s.exitcode is not None]
                self._idle = [s for s in self._idle if s.exitcode is None]
                expired: list[Spare] = []
                if self._wanted and time.monotonic() > self._expires:
                    self._wanted.clear()
                    expired, self._idle = self._idle, []
                device = self._next_device() if not self._paused and forkserver_ready() else None
                if device is not None:
                    self._starting[device] = self._starting.get(device, 0) + 1
                packages = self._packages
                ctx = forkserver_context()
            self._retire(dead + expired, count=bool(expired))
            started = False
            if device is None:
                continue
            spare: Spare | None = None
            try:
                if ctx is not None and forkserver_ready():  # never restart it from here (see `want`)
                    spare = self._start(ctx, device, packages)
            except Exception:
                spare = None
            with self._cond:
                have = sum(1 for s in self._idle if s.device == device)
                keep = not self._closed and packages == self._packages and have < self._wanted.get(device, 0)
                if keep and spare is not None:
                    self._idle.append(spare)
            if spare is not None and not keep:  # no longer wanted while it was being forked
                spare.retire()
            with self._cond:
                self._starting[device] -= 1
                self._cond.notify_all()
            started = spare is not None
            if spare is None:
                time.sleep(0.5)  # the forkserver is gone or refused: wait for the next `want`

    def _next_device(self) -> str | None:
        """A device short of its wanted spares, within the bounds (called with the lock held)."""
        total = len(self._idle) + sum(self._starting.values())
        if total >= self.max_spares:
            return None
        for device, n in self._wanted.items():
            have = sum(1 for s in self._idle if s.device == device) + self._starting.get(device, 0)
            if have >= n:
                continue
            if self.max_gpu_bytes is not None and device.startswith("cuda"):
                for s in self._idle:
                    if s.device == device and s.ready() and s.info is not None:
                        est = int(s.info.get("gpu_bytes", 0))
                        self._gpu_estimate[device] = max(self._gpu_estimate.get(device, 0), est)
                if (have + 1) * self._gpu_estimate.get(device, 0) > self.max_gpu_bytes:
                    continue
            return device
        return None

    def _wait_starts(self, timeout: float = 30.0) -> None:
        """Wait (lock held, bounded) until no spare is being forked: one that is would appear after
        the caller dropped the idle ones. The keeper retires it, since nothing wants it any more."""
        deadline = time.monotonic() + timeout
        while any(self._starting.values()) and time.monotonic() < deadline:
            self._cond.wait(0.05)

    def _start(self, ctx: Any, device: str, packages: tuple[str, ...]) -> Spare:
        """Fork one spare for `device` from `ctx` (it then warms up on its own: `spares.child`)."""
        from .child import spare_main

        parent, child = ctx.Pipe(duplex=True)
        plan = {"device": device, "packages": list(packages), "idle_timeout_s": self.idle_timeout_s}
        proc = ctx.Process(target=spare_main, args=(child, plan), name="distcheck-spare", daemon=False)
        try:
            with main_hidden():
                proc.start()
        finally:
            child.close()
        self.counts["started"] += 1
        return Spare(proc, parent, device, packages, ctx)

    def _retire(self, spares: Sequence[Spare], count: bool = True) -> None:
        for s in spares:
            s.retire()
        if count:
            self.counts["retired"] += len(spares)
