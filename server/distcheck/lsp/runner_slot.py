"""The daemon's runner child: started with the first validation, replaced when it may not serve the
next one, restarted when it dies.

The runner is started lazily (nothing that could import the workspace's code runs before the user
asks for a validation), in a private directory, never the workspace. When it exits unexpectedly the
user is told why — it could not start (torch or distcheck missing for this interpreter), or it
stopped during a validation — and a fresh one is started, unless it died more than `MAX_RESTARTS`
times within `RESTART_WINDOW` seconds: then it stays down until the next validation asks for it.

A runner imports its target's code into its own process, so it serves that target only
(`jobs.serving`, `jobs.runner`): `ensure(target)` hands a validation of another target to a fresh
runner and stops the old one, and a runner whose target changed what cannot be put back exits after
its answer (an expected exit: the next validation gets a fresh runner). So that switching stays fast,
once a runner has finished a validation a *standby* runner is started beside it (torch imported, its
process pool warm, no user code): the next runner taken is the standby when it is alive.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from .. import importguard
from ..jobs.serving import serving_key
from .runner_client import RunnerClient, describe_exit

__all__ = ["MAX_RESTARTS", "READY_TIMEOUT", "RESTART_WINDOW", "RunnerSlot"]

READY_TIMEOUT = 180.0
MAX_RESTARTS = 3
RESTART_WINDOW = 60.0


class RunnerSlot:
    """Holds the runner (`runner`, None while there is none) and the lock a validation holds it by.

    `log(level, message)` and `show(level, message)` reach the user; `spawn(coro, name)` starts a
    background task; `active()` names the validations holding the runner (for the exit message).
    """

    def __init__(
        self,
        log: Callable[[str, str], None],
        show: Callable[[str, str], None],
        spawn: Callable[[Coroutine[Any, Any, Any], str], object],
        active: Callable[[], list[str]],
    ) -> None:
        self._log = log
        self._show = show
        self._spawn = spawn
        self._active = active
        self.runner: RunnerClient | None = None
        self.standby: RunnerClient | None = None
        """A runner started ahead (no user code yet), taken when the runner may not serve a validation."""
        self.lock = asyncio.Lock()
        self.shutting_down = False
        self._exits: list[float] = []
        self._broken: str | None = None

    @property
    def ready(self) -> bool:
        """True when a runner is up and has imported torch."""
        return self.runner is not None and self.runner.ready.is_set()

    def forgive(self) -> None:
        """A new validation was asked for: a runner that stopped restarting may start again."""
        if self._broken is not None:
            self._broken = None
            self._exits.clear()

    async def ensure(self, target: Mapping[str, Any] | None = None) -> RunnerClient:
        """The running, ready runner for a validation of `target` (a `Target.to_wire()`; None: any),
        started if needed, or a fresh one when the current one serves another target or retires;
        `TimeoutError` when it never gets ready."""
        runner = self.runner
        if runner is not None and runner.alive and target is not None and not runner.may_serve(serving_key(target)):
            self._log("info", f"the runner (pid {runner.pid}) serves another target: switching to a fresh one")
            self.runner = None
            self._spawn(runner.stop(), "distcheck-runner-retire")
            runner = None
        if runner is None or not runner.alive:
            runner = await self.start()
        await runner.wait_ready(READY_TIMEOUT)
        return runner

    async def start(self) -> RunnerClient:
        """Start a runner unless one is alive (the standby when it is); returns it (maybe not ready yet)."""
        if self.runner is not None and self.runner.alive:
            return self.runner
        standby, self.standby = self.standby, None
        if standby is not None and standby.alive and standby.serves is None:
            self.runner = standby
            self._log("info", f"took the standby runner (pid {standby.pid})")
            return standby
        runner = self._client()
        self.runner = runner
        await runner.start()
        return runner

    def _client(self) -> RunnerClient:
        # Never the workspace: the runner must import nothing from it before a validation asks it to.
        return RunnerClient(cwd=importguard.private_dir(), log=self._log, on_exit=self._exited, on_idle=self._idle)

    def _idle(self, runner: RunnerClient) -> None:
        """A validation ended on `runner`: start the standby now, unless there is one or nothing needs it."""
        if runner is not self.runner or not runner.alive or self.shutting_down:
            return
        if self.standby is not None and self.standby.alive:
            return
        self._spawn(self._start_standby(), "distcheck-runner-standby")

    async def _start_standby(self) -> None:
        if self.shutting_down or (self.standby is not None and self.standby.alive):
            return
        standby = self._client()
        self.standby = standby
        await standby.start()
        self._log("info", f"started a standby runner (pid {standby.pid})")

    async def stop(self, kill: bool) -> None:
        """Stop the runner (and the standby) for good (`kill` when a validation holds it: do not wait)."""
        self.shutting_down = True
        standby, self.standby = self.standby, None
        if standby is not None:
            await standby.kill()
        runner = self.runner
        if runner is not None:
            if kill:
                await runner.kill()
            else:
                await runner.stop()

    def _exited(self, runner: RunnerClient, returncode: int | None, expected: bool) -> None:
        if runner is self.standby:
            self.standby = None
            if not expected and not self.shutting_down:
                self._log("warning", f"the standby runner stopped ({describe_exit(returncode)})")
            return
        if runner is not self.runner or self.shutting_down:
            return
        self.runner = None
        if expected:
            why = f" ({'; '.join(runner.retiring)})" if runner.retiring else ""
            self._log("info", f"runner stopped as asked{why}; starting a fresh one")
            self._spawn(self.start(), "distcheck-runner-restart")
            return
        active = self._active()
        self._spawn(runner.cleanup_orphans(), "distcheck-runner-cleanup")
        tail = "\n".join(list(runner.stderr_tail)[-10:])
        now = time.monotonic()
        self._exits = [t for t in self._exits if now - t < RESTART_WINDOW] + [now]
        if not runner.ready.is_set():
            last = runner.stderr_tail[-1] if runner.stderr_tail else "no output"
            reason = (
                f"The distcheck runner could not start ({describe_exit(returncode)}: {last}). Check that torch and "
                f"distcheck are installed for {sys.executable} (the distcheck output channel has the details)"
            )
        else:
            during = f" while validating {', '.join(active)}" if active else ""
            reason = (
                f"The distcheck runner (pid {runner.pid}) stopped unexpectedly ({describe_exit(returncode)}){during}"
            )
        self._log("warning", f"{reason}\nlast runner output:\n{tail}")
        if len(self._exits) > MAX_RESTARTS:
            self._broken = reason
            self._show(
                "error",
                f"{reason}. It stopped {len(self._exits)} times in a minute, so it is not restarted; fix the "
                "problem, then run Distcheck: Validate to start it again.",
            )
            return
        again = " Run the validation again." if active else ""
        self._show("warning", f"{reason}. It has been restarted.{again}")
        self._spawn(self.start(), "distcheck-runner-restart")
