"""The daemon's runner slot gives each target a runner no other target's code ran in (`lsp.runner_slot`):
a validation of another target goes to the standby runner (started ahead once a validation ended, no
user code yet) or a fresh one, the old runner is stopped, and a runner that retires after its answer is
replaced without a word to the user. Runner processes are stood in for (no torch here); the runner's own
side (it refuses another target, retires after an import that changed torch) is
`tests/server/validate/test_runner_targets.py`'s."""

from __future__ import annotations

import asyncio
import itertools
from collections import deque
from collections.abc import Coroutine
from typing import Any

import pytest

from distcheck.jobs.serving import serving_key
from distcheck.lsp import runner_slot
from distcheck.lsp.runner_slot import RunnerSlot

pytestmark = pytest.mark.asyncio

A = {"factory": "/w/a.py:model_factory", "sample": None, "root": "/w", "python_path": []}
B = {"factory": "/w/b.py:model_factory", "sample": None, "root": "/w", "python_path": []}
_pids = itertools.count(1000)


class FakeRunner:
    """What the slot uses of a `RunnerClient`."""

    def __init__(self, on_exit: Any, on_idle: Any) -> None:
        self.on_exit, self.on_idle = on_exit, on_idle
        self.pid = next(_pids)
        self.ready = asyncio.Event()
        self.exited = False
        self.started = False
        self.serves: str | None = None
        self.retiring: list[str] | None = None
        self.stderr_tail: deque[str] = deque()

    @property
    def alive(self) -> bool:
        return self.started and not self.exited

    def may_serve(self, key: str) -> bool:
        return self.alive and self.retiring is None and self.serves in (None, key)

    async def start(self) -> None:
        self.started = True
        self.ready.set()

    async def wait_ready(self, timeout: float) -> None:
        await self.ready.wait()

    def exit(self, expected: bool) -> None:
        self.exited = True
        self.on_exit(self, 0 if expected else -9, expected)

    async def stop(self) -> None:
        self.exit(True)

    async def kill(self) -> list[int]:
        self.exit(True)
        return [self.pid]

    async def cleanup_orphans(self) -> list[int]:
        return []

    def validated(self, target: dict[str, Any]) -> None:
        """A validation of `target` ran and ended on this runner."""
        self.serves = serving_key(target)
        self.on_idle(self)


class Daemon:
    """The slot with fake runners, and what it told the user."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.shown: list[tuple[str, str]] = []
        self.tasks: list[asyncio.Task[Any]] = []
        self.made: list[FakeRunner] = []

        def spawn(coro: Coroutine[Any, Any, Any], name: str) -> object:
            task = asyncio.ensure_future(coro)
            self.tasks.append(task)
            return task

        self.slot = RunnerSlot(lambda level, m: None, lambda level, m: self.shown.append((level, m)), spawn, list)

        def client(slot: RunnerSlot) -> FakeRunner:
            made = FakeRunner(slot._exited, slot._idle)
            self.made.append(made)
            return made

        monkeypatch.setattr(runner_slot.RunnerSlot, "_client", client)

    async def settle(self) -> None:
        while self.tasks:
            await self.tasks.pop(0)

    async def validate(self, target: dict[str, Any]) -> FakeRunner:
        runner = await self.slot.ensure(target)
        assert isinstance(runner, FakeRunner) and runner.may_serve(serving_key(target))
        runner.validated(target)
        await self.settle()
        return runner


async def test_another_target_gets_the_standby_and_the_old_runner_stops(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Daemon(monkeypatch)
    first = await d.validate(A)
    standby = d.slot.standby
    assert isinstance(standby, FakeRunner) and standby.alive and standby.serves is None  # started after the run
    assert await d.validate(A) is first, "the same target keeps its runner"
    second = await d.validate(B)
    assert second is standby and first.exited, "B ran where A's code had run"
    assert d.slot.standby is not None and d.slot.standby not in (first, second)  # the next one, ahead
    third = await d.validate(A)
    assert third not in (first, second) and second.exited
    assert d.shown == [], "switching runners is nothing to tell the user"


async def test_a_runner_that_retires_after_its_answer_is_replaced_quietly(monkeypatch: pytest.MonkeyPatch) -> None:
    d = Daemon(monkeypatch)
    first = await d.validate(A)
    standby = d.slot.standby
    first.retiring = ["torch.Tensor.index_add_ was replaced by the validated code"]
    first.exit(True)  # it exits by itself after the answer that said so
    await d.settle()
    assert d.slot.runner is standby
    assert await d.validate(A) is standby, "the same target, in a fresh runner"
    assert d.shown == []


async def test_a_fresh_runner_serves_any_target_and_the_standby_stops_with_the_slot(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    d = Daemon(monkeypatch)
    runner = await d.slot.ensure(B)
    assert isinstance(runner, FakeRunner) and runner.serves is None and d.slot.standby is None
    runner.validated(B)
    await d.settle()
    standby = d.slot.standby
    assert isinstance(standby, FakeRunner)
    standby.exit(False)  # a standby that dies is dropped, the user is not bothered
    assert d.slot.standby is None and d.shown == []
    runner.validated(B)
    await d.settle()
    standby = d.slot.standby
    assert isinstance(standby, FakeRunner) and standby.alive
    await d.slot.stop(kill=False)
    assert runner.exited and standby.exited
