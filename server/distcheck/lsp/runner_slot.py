"""The daemon's one runner child: started with the first validation, restarted when it dies.

The runner is started lazily (nothing that could import the workspace's code runs before the user
asks for a validation), in a private directory, never the workspace. When it exits unexpectedly the
user is told why — it could not start (torch or distcheck missing for this interpreter), or it
stopped during a validation — and a fresh one is started, unless it died more than `MAX_RESTARTS`
times within `RESTART_WINDOW` seconds: then it stays down until the next validation asks for it.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Callable, Coroutine
from typing import Any

from .. import importguard
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

    async def ensure(self) -> RunnerClient:
        """The running, ready runner (started if needed); `TimeoutError` when it never gets ready."""
        runner = self.runner
        if runner is None or not runner.alive:
            runner = await self.start()
        await runner.wait_ready(READY_TIMEOUT)
        return runner

    async def start(self) -> RunnerClient:
        """Start a runner unless one is alive; returns it (maybe not ready yet)."""
        if self.runner is not None and self.runner.alive:
            return self.runner
        # Never the workspace: the runner must import nothing from it before a validation asks it to.
        runner = RunnerClient(cwd=importguard.private_dir(), log=self._log, on_exit=self._exited)
        self.runner = runner
        await runner.start()
        return runner

    async def stop(self, kill: bool) -> None:
        """Stop the runner for good (`kill` when a validation holds it: do not wait for it)."""
        self.shutting_down = True
        runner = self.runner
        if runner is not None:
            if kill:
                await runner.kill()
            else:
                await runner.stop()

    def _exited(self, runner: RunnerClient, returncode: int | None, expected: bool) -> None:
        if runner is not self.runner or self.shutting_down:
            return
        self.runner = None
        if expected:
            self._log("info", "runner stopped as asked; starting a fresh one")
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
