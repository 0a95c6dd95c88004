"""What callers ask of the spare pool: spares wanted, claimed, paused, lowered and dropped.

`SparePool` (one per process, `spares.pool()`) adds to the keeper's state (`spares.keeper`): `want`
asks for spares per device for a while, `claim` takes one (a warm one first, else one forked at once),
`paused` holds the refill back, `lower` wants fewer, `settle` ends a validation (kept warm for
`keep_s` or dropped), `trim` and `close` drop everything; `report` says what is held
(`spares.report`). With spares off (`spares.settings.enabled`) it asks for nothing and claims none.
No torch.
"""

from __future__ import annotations

import atexit
import contextlib
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from .. import lifeline
from .keeper import SpareKeeper
from .process import Spare
from .report import pool_report
from .settings import enabled

__all__ = ["SparePool"]


class SparePool(SpareKeeper):
    """The idle spares of this process, per device, and the keeper thread that refills them."""

    def __init__(self) -> None:
        super().__init__()
        atexit.register(self.close)

    def want(self, counts: Mapping[str, int], packages: Sequence[str] = (), hold_s: float | None = None) -> None:
        """Have at least `counts[device]` spares of each device warm or warming, now and after each claim,
        for `hold_s` seconds (default `idle_timeout_s`), with `packages` imported. Returns at once;
        the forkserver is started here (the calling thread must be the one that may start helpers:
        the main thread), the spares in the background."""
        if not enabled() or self._closed:
            return
        from ..forkserver import process_context

        with lifeline.helpers_ignore_sigint():
            process_context()
        stale: list[Spare] = []
        with self._cond:
            for device, n in counts.items():
                self._wanted[device] = max(self._wanted.get(device, 0), int(n))
            merged = tuple(dict.fromkeys(packages))  # the coming validation's, not an earlier target's
            if merged != self._packages:  # idle spares with other packages are replaced
                self._packages = merged
                stale = [s for s in self._idle if set(s.packages) != set(merged)]
                self._idle = [s for s in self._idle if s not in stale]
            self._expires = time.monotonic() + (hold_s if hold_s is not None else self.idle_timeout_s)
            self._ensure_thread()
            self._cond.notify_all()
        self._retire(stale)

    def claim(self, device: str) -> Spare | None:
        """A spare for `device`: an idle one (a warm one first), else one forked now. None when spares
        are off. A claim triggers the refill of what `want` asked for."""
        if not enabled() or self._closed:
            return None
        with self._cond:
            alive = [s for s in self._idle if s.device == device and s.exitcode is None]
            alive.sort(key=lambda s: not s.ready())
            spare = alive[0] if alive else None
            if spare is not None:
                self._idle.remove(spare)
                self.counts["claimed_warm" if spare.ready() else "claimed_warming"] += 1
                self._cond.notify_all()
                return spare
            packages = self._packages
        from ..forkserver import process_context

        with lifeline.helpers_ignore_sigint():
            ctx = process_context()
        self.counts["started_on_claim"] += 1
        return self._start(ctx, device, packages)

    @contextlib.contextmanager
    def paused(self) -> Iterator[None]:
        """No background refill in the body (claims still fork at once): for a validation on a machine
        with too few cores to run its processes and warm new spares at the same time."""
        with self._cond:
            self._paused += 1
        try:
            yield
        finally:
            with self._cond:
                self._paused -= 1
                self._cond.notify_all()

    def lower(self, counts: Mapping[str, int]) -> None:
        """Want at most `counts[device]` spares of these devices from now on (what is idle stays until
        claimed or expired); no-op while `keep_warm` holds spares for the next validation."""
        with self._cond:
            if self.keep_s:
                return
            for device, n in counts.items():
                if device in self._wanted:
                    self._wanted[device] = min(self._wanted[device], int(n))

    def settle(self) -> None:
        """End of a validation: keep the wanted spares warm for `keep_s` when `keep_warm` asked for it,
        else drop every idle spare now."""
        with self._cond:
            if self.keep_s:
                self._expires = time.monotonic() + self.keep_s
                self._cond.notify_all()
                return
        self.trim()

    def trim(self) -> None:
        """Drop every idle spare and every want now."""
        with self._cond:
            self._wanted.clear()
            self._wait_starts()
            idle, self._idle = self._idle, []
        self._retire(idle)

    def close(self) -> None:
        """Stop refilling and drop the idle spares (at exit: multiprocessing would wait for them)."""
        with self._cond:
            self._closed = True
            busy = any(self._starting.values())
            self._cond.notify_all()
        if busy:  # a spare still being forked (the pool importing torch): the forkserver takes it along
            lifeline.stop_forkserver()
        self.trim()

    def report(self) -> dict[str, Any]:
        """What the pool holds (`spares.report.pool_report`): idle spares per device, warm or still
        warming, their memory as they reported it, the wants, the bounds and the counters."""
        with self._cond:
            idle = list(self._idle)
            for s in idle:
                s.ready()  # reads a warm-up report that came in (under the lock, as the keeper does)
            wanted = dict(self._wanted)
        return pool_report(
            idle,
            enabled=enabled(),
            wanted=wanted,
            packages=self._packages,
            max_spares=self.max_spares,
            max_gpu_bytes=self.max_gpu_bytes,
            idle_timeout_s=self.idle_timeout_s,
            keep_s=self.keep_s,
            counts=self.counts,
        )
