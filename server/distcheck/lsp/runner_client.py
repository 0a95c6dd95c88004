"""The daemon's side of the runner pipe: start `python -m distcheck.jobs.runner`, talk JSON lines,
track every process it starts, and kill all of them on request — all without blocking the event loop.

`RunnerClient.start()` launches the runner with the daemon's interpreter in its own session
(`start_new_session=True`), so it leads its own process group. While a validation runs, the client
records the pids of the rank processes (`rank_started` events) and snapshots the runner's
descendants a few times a second in a worker thread, so that when the runner dies (or is killed)
every process it started can still be found: the reference run and each rank lead their own
process groups, and orphans are no longer the runner's descendants.

`kill()` stops the runner's group (SIGSTOP, so nothing new is forked), kills the process group of
every descendant and every recorded process, then the runner's own group, and waits for them to go
— within a second in practice. Killed so, the runner and its forkserver cannot remove their run
directories (`processes.run_dirs`, multiprocessing's socket directory among them): once the runner
has exited, however it exited, the client sweeps the runner's (`sweep`).

A runner serves one target (`jobs.serving`): `serves` is the key of the target it was sent, and
`may_serve(key)` says whether it may take a validation of another; a runner that answered with
`"retire"` (its target's code changed what cannot be put back) or refused a target exits by itself,
which is an expected exit (`retiring` says why).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import orjson

from ..jobs.serving import RETIRED_ERROR, serving_key
from ..processes.run_dirs import sweep_run_dirs
from .runner_tree import Tracked, kill_all, snapshot

__all__ = ["RunCancelled", "RunnerClient", "RunnerDied", "RunnerError"]

EventCallback = Callable[[str, Mapping[str, Any]], None]
LogCallback = Callable[[str, str], None]
ExitCallback = Callable[["RunnerClient", "int | None", bool], None]
IdleCallback = Callable[["RunnerClient"], None]

_LINE_LIMIT = 256 * 1024 * 1024
_SNAPSHOT_EVERY = 0.25


class RunnerError(Exception):
    """The runner answered a request with an error: `type`, `message`, `hint`, traceback `frames`, the
    `user_frame` at fault and the `cause` the user's code raised (one line), when known."""

    def __init__(self, error: Mapping[str, Any]) -> None:
        self.type = str(error.get("type", "Error"))
        self.message = str(error.get("message", ""))
        self.hint = str(error.get("hint", ""))
        frames = error.get("frames")
        self.frames: list[dict[str, Any]] = [dict(f) for f in frames if isinstance(f, Mapping)] if frames else []
        self.traceback = str(error.get("traceback", ""))
        found = error.get("user_frame")  # the runner's `runtime.frames` rule: the daemon never guesses
        self.user_frame: dict[str, Any] | None = dict(found) if isinstance(found, Mapping) else None
        cause = error.get("cause")  # what the user's code raised, one line ("SyntaxError: ...")
        self.cause: str | None = cause if isinstance(cause, str) and cause else None
        report = error.get("report")  # a setup error's one-attempt report, shown instead of the last one
        self.report: dict[str, Any] | None = dict(report) if isinstance(report, Mapping) else None
        super().__init__(self.message)


class RunnerDied(Exception):
    """The runner exited while a request was pending: `returncode` (negative: killed by that signal)."""

    def __init__(self, returncode: int | None, stderr_tail: str) -> None:
        self.returncode = returncode
        self.stderr_tail = stderr_tail
        super().__init__(f"the distcheck runner exited ({describe_exit(returncode)})")


class RunCancelled(Exception):
    """The request was cancelled: the runner and everything it started were killed."""


def describe_exit(returncode: int | None) -> str:
    """`"killed by SIGKILL"`, `"exit code 1"`, ... for a process return code."""
    if returncode is None:
        return "still running"
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return f"exit code {returncode}"


@dataclass
class _Pending:
    future: asyncio.Future[Any]
    on_event: EventCallback | None = None


class RunnerClient:
    """One runner process and its pipe. Not reusable: after it exits, make a new one."""

    def __init__(
        self,
        *,
        cwd: str,
        log: LogCallback,
        on_exit: ExitCallback,
        python: str | None = None,
        env: Mapping[str, str] | None = None,
        on_idle: IdleCallback | None = None,
    ) -> None:
        self.cwd = cwd
        self.log = log
        self.on_exit = on_exit
        self.on_idle = on_idle
        self.serves: str | None = None
        """The `serving_key` of the target this runner was sent (None before its first validation)."""
        self.retiring: list[str] | None = None
        """Why the runner exits by itself after its last answer (None while it serves on)."""
        self.python = python or sys.executable
        self.env = dict(env) if env is not None else None
        self.proc: asyncio.subprocess.Process | None = None
        self.info: dict[str, Any] = {}
        self.ready = asyncio.Event()
        self.exited = asyncio.Event()
        self.returncode: int | None = None
        self.stderr_tail: deque[str] = deque(maxlen=40)
        self._pending: dict[int, _Pending] = {}
        self._next_id = 0
        self._tracked = Tracked()
        self._killing = False
        self._tasks: list[asyncio.Task[Any]] = []
        self._busy = 0
        self.started_at = 0.0

    # ---- lifecycle

    @property
    def pid(self) -> int | None:
        """The runner's pid (None before `start`)."""
        return self.proc.pid if self.proc is not None else None

    @property
    def alive(self) -> bool:
        """Started and not exited."""
        return self.proc is not None and not self.exited.is_set()

    def may_serve(self, key: str) -> bool:
        """Whether this runner may validate the target whose `serving_key` is `key`: alive, not retiring,
        and fresh or already serving that target."""
        return self.alive and self.retiring is None and self.serves in (None, key)

    def _environment(self) -> dict[str, str]:
        env = dict(os.environ if self.env is None else self.env)
        here = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        current = [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
        if here not in current:
            env["PYTHONPATH"] = os.pathsep.join([here, *current])
        env.setdefault("PYTHONUNBUFFERED", "1")
        # With the private working directory this keeps every directory of the user's out of the
        # runner's import path at start-up (Python 3.11+; older ones rely on the directory alone).
        env["PYTHONSAFEPATH"] = "1"
        return env

    async def start(self) -> None:
        """Launch the runner and start reading its output; `ready` is set once it answers a ping."""
        self.started_at = time.monotonic()
        self.proc = await asyncio.create_subprocess_exec(
            self.python,
            "-m",
            "distcheck.jobs.runner",
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            cwd=self.cwd,
            env=self._environment(),
            start_new_session=True,
            limit=_LINE_LIMIT,
        )
        self.log("info", f"started the runner (pid {self.proc.pid}): {self.python} -m distcheck.jobs.runner")
        self._tasks = [
            asyncio.create_task(self._read_stdout(), name="distcheck-runner-stdout"),
            asyncio.create_task(self._read_stderr(), name="distcheck-runner-stderr"),
        ]
        self._tasks.append(asyncio.create_task(self._handshake(), name="distcheck-runner-ping"))

    async def _handshake(self) -> None:
        with contextlib.suppress(RunnerDied, RunnerError, RunCancelled, asyncio.CancelledError):
            self.info = await self.request("ping", None)
            self.ready.set()
            seconds = time.monotonic() - self.started_at
            self.log(
                "info",
                f"runner ready in {seconds:.1f} s (pid {self.pid}, torch {self.info.get('torch')}, "
                f"CUDA {'available' if self.info.get('cuda') else 'not available'})",
            )

    async def wait_ready(self, timeout: float) -> None:
        """Wait for the ping's answer; `RunnerDied` if the runner exits first, `TimeoutError` past `timeout`."""
        if self.ready.is_set():
            return
        ready = asyncio.ensure_future(self.ready.wait())
        exited = asyncio.ensure_future(self.exited.wait())
        try:
            await asyncio.wait({ready, exited}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
        finally:
            ready.cancel()
            exited.cancel()
        if self.ready.is_set():
            return
        if self.exited.is_set():
            raise RunnerDied(self.returncode, "\n".join(self.stderr_tail))
        raise TimeoutError(f"the runner did not answer within {timeout:.0f} s")

    async def stop(self) -> None:
        """Ask the runner to exit; kill everything if it does not within two seconds."""
        if not self.alive:
            return
        self._killing = True
        with contextlib.suppress(Exception):
            self._write({"id": None, "method": "shutdown"})
        try:
            await asyncio.wait_for(self.exited.wait(), timeout=2.0)
        except asyncio.TimeoutError:
            await self.kill()

    async def kill(self) -> list[int]:
        """Kill the runner and every process it started (see the module docstring); pending requests
        raise `RunCancelled`. Returns the pids that were killed."""
        self._killing = True
        root = self.pid if self.alive else None
        tracked = dict(self._tracked.procs)
        ranks = set(self._tracked.rank_pids)
        killed = await asyncio.to_thread(kill_all, root, tracked, ranks, 1.0)
        if self.proc is not None:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.exited.wait(), timeout=2.0)
        await self.sweep()
        return killed

    async def cleanup_orphans(self) -> list[int]:
        """After an unexpected exit: kill what the runner left behind (recorded processes only), then
        `sweep`."""
        tracked = dict(self._tracked.procs)
        ranks = set(self._tracked.rank_pids)
        killed = await asyncio.to_thread(kill_all, None, tracked, ranks, 1.0) if tracked or ranks else []
        await self.sweep()
        return killed

    async def sweep(self) -> list[str]:
        """Once the runner has exited: remove its run directories whose lock is free (all of them,
        unless a process it started still holds one); the removed paths. Never raises."""
        if self.pid is None or self.returncode is None:
            return []
        tmpdir = self._environment().get("TMPDIR") or None
        try:
            return await asyncio.to_thread(sweep_run_dirs, self.pid, tmpdir)
        except Exception as exc:  # the sweep is the runner's tidying, never the daemon's failure
            self.log("warning", f"could not remove the runner's temporary directories: {exc}")
            return []

    # ---- requests

    def _write(self, message: Mapping[str, Any]) -> None:
        if self.proc is None or self.proc.stdin is None:
            raise RunnerDied(self.returncode, "")
        self.proc.stdin.write(orjson.dumps(message) + b"\n")

    async def request(self, method: str, params: Any, on_event: EventCallback | None = None) -> Any:
        """Send one request and wait for its answer; raises `RunnerError`, `RunnerDied` or `RunCancelled`."""
        if not self.alive:
            raise RunnerDied(self.returncode, "\n".join(self.stderr_tail))
        self._next_id += 1
        req_id = self._next_id
        future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        self._pending[req_id] = _Pending(future, on_event)
        message: dict[str, Any] = {"id": req_id, "method": method}
        if params is not None:
            message["params"] = params
        try:
            self._write(message)
            assert self.proc is not None and self.proc.stdin is not None
            await self.proc.stdin.drain()
        except (ConnectionError, RunnerDied) as exc:
            self._pending.pop(req_id, None)
            raise RunnerDied(self.returncode, "\n".join(self.stderr_tail)) from exc
        try:
            return await future
        finally:
            self._pending.pop(req_id, None)

    async def validate(self, params: Mapping[str, Any], on_event: EventCallback | None) -> tuple[dict[str, Any], Any]:
        """Run a validation: (report JSON object, notice). The runner serves this target from now on."""
        self.serves = serving_key(params.get("target"))
        self._busy += 1
        snapshots = asyncio.create_task(self._snapshots(), name="distcheck-runner-snapshots")
        try:
            result = await self.request("validate", dict(params), on_event)
        finally:
            self._busy -= 1
            snapshots.cancel()
            if self.on_idle is not None:
                try:
                    self.on_idle(self)
                except Exception as exc:
                    self.log("error", f"runner idle handler failed: {type(exc).__name__}: {exc}")
        report, notice = result
        return report, notice

    async def _snapshots(self) -> None:
        while self.alive and self.pid is not None:
            found = await asyncio.to_thread(snapshot, self.pid)
            self._tracked.procs.update(found)
            await asyncio.sleep(_SNAPSHOT_EVERY)

    def forget_processes(self) -> None:
        """Drop the record of processes (after a validation finished and they are gone)."""
        self._tracked = Tracked()

    # ---- reading

    def _dispatch(self, message: Mapping[str, Any]) -> None:
        req_id = message.get("id")
        pending = self._pending.get(req_id) if isinstance(req_id, int) else None
        if "event" in message:
            event = str(message["event"])
            info = message.get("info") or {}
            if event == "rank_started" and isinstance(info, Mapping) and isinstance(info.get("pid"), int):
                self._tracked.rank_pids.add(int(info["pid"]))
            if pending is not None and pending.on_event is not None:
                try:
                    pending.on_event(event, info if isinstance(info, Mapping) else {})
                except Exception as exc:  # a progress callback must never break the pipe
                    self.log("error", f"progress callback failed: {type(exc).__name__}: {exc}")
            return
        retire = message.get("retire")
        error = message.get("error")
        refused = isinstance(error, Mapping) and error.get("type") == RETIRED_ERROR
        if retire or refused:  # it exits after this answer: expected, not a crash
            if isinstance(retire, list):
                why = [str(r) for r in retire]
            else:
                why = [str(error.get("message", "")) if isinstance(error, Mapping) else str(retire)]
            self.retiring = why or ["retired"]
            self._killing = True
            self.log("info", f"the runner (pid {self.pid}) retires after this validation: {'; '.join(self.retiring)}")
        if pending is None or pending.future.done():
            return
        if "error" in message:
            error = message["error"]
            pending.future.set_exception(RunnerError(error if isinstance(error, Mapping) else {"message": error}))
        elif "result" in message:
            pending.future.set_result((message["result"], message.get("notice")))
        elif message.get("pong"):
            pending.future.set_result(dict(message))

    async def _read_stdout(self) -> None:
        assert self.proc is not None and self.proc.stdout is not None
        stream = self.proc.stdout
        try:
            while True:
                try:
                    line = await stream.readline()
                except ValueError as exc:  # a line over the limit
                    self.log("error", f"dropped an oversized line from the runner: {exc}")
                    continue
                if not line:
                    break
                try:
                    message = orjson.loads(line)
                except orjson.JSONDecodeError:
                    self.log("warning", f"runner wrote a line that is not JSON: {line[:200]!r}")
                    continue
                if isinstance(message, Mapping):
                    self._dispatch(message)
        finally:
            await self._finish()

    async def _read_stderr(self) -> None:
        assert self.proc is not None and self.proc.stderr is not None
        stream = self.proc.stderr
        while True:
            try:
                line = await stream.readline()
            except ValueError:
                continue
            if not line:
                return
            text = line.decode("utf-8", "replace").rstrip()
            self.stderr_tail.append(text)
            self.log("debug", f"[runner] {text}")

    async def _finish(self) -> None:
        assert self.proc is not None
        try:
            self.returncode = await asyncio.wait_for(self.proc.wait(), timeout=5.0)
        except asyncio.TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                self.proc.kill()
            self.returncode = await self.proc.wait()
        await self.sweep()
        expected = self._killing
        tail = "\n".join(self.stderr_tail)
        for pending in list(self._pending.values()):
            if not pending.future.done():
                pending.future.set_exception(RunCancelled() if expected else RunnerDied(self.returncode, tail))
        self._pending.clear()
        self.exited.set()
        self.log(
            "info" if expected else "warning",
            f"runner (pid {self.pid}) exited ({describe_exit(self.returncode)})",
        )
        try:
            self.on_exit(self, self.returncode, expected)
        except Exception as exc:
            self.log("error", f"runner exit handler failed: {type(exc).__name__}: {exc}")
