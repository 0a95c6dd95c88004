"""Cancellation, one run per target, and a runner that dies: no process may outlive a validation."""

from __future__ import annotations

import asyncio
import os
import signal
import time
from pathlib import Path

import psutil
import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException

from .harness import Session, add_slow_target, copy_examples, lsp_session

pytestmark = [pytest.mark.asyncio, pytest.mark.slow, pytest.mark.procs]


def _tree(pid: int) -> dict[int, float]:
    """Every descendant of `pid` (pid → create time), zombies left out."""
    out: dict[int, float] = {}
    try:
        children = psutil.Process(pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return out
    for child in children:
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out[child.pid] = child.create_time()
        except psutil.NoSuchProcess:
            continue
    return out


def _alive(procs: dict[int, float]) -> list[int]:
    alive = []
    for pid, created in procs.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


async def _wait_gone(procs: dict[int, float], timeout: float) -> float:
    t0 = time.monotonic()
    while _alive(procs):
        if time.monotonic() - t0 > timeout:
            raise AssertionError(f"still alive after {timeout} s: {_alive(procs)}")
        await asyncio.sleep(0.02)
    return time.monotonic() - t0


async def _fresh_runner_only(s: Session, old_runner: int, timeout: float = 60.0) -> int:
    """Wait for a new, ready runner; then every descendant of the server is it or below it."""
    deadline = time.monotonic() + timeout
    while True:
        info = await s.debug_info()
        runner = info["runner"]
        if runner and runner["ready"] and runner["pid"] != old_runner:
            break
        assert time.monotonic() < deadline, f"no fresh runner: {info}"
        await asyncio.sleep(0.2)
    server = info["pid"]
    new_runner = int(runner["pid"])
    # What the old runner left is being killed: give it a bounded moment to go.
    while True:
        allowed = {new_runner, *_tree(new_runner)}
        extra = set(_tree(server)) - allowed
        if not extra or time.monotonic() > deadline + 10:
            break
        await asyncio.sleep(0.1)
    assert not extra, f"processes left besides the fresh runner: {extra}"
    return new_runner


async def _wait_progress(s: Session, token: str, text: str, since: int) -> None:
    def hit(event: object) -> bool:
        params = getattr(event, "params", None)
        value = getattr(params, "value", None)
        return getattr(params, "token", None) == token and isinstance(value, dict) and value.get("message") == text

    await s.rec.wait_for(lambda e: e.method == "$/progress" and hit(e), since=since, timeout=120)


async def _wait_end(s: Session, token: str, since: int) -> None:
    def hit(event: object) -> bool:
        params = getattr(event, "params", None)
        value = getattr(params, "value", None)
        return getattr(params, "token", None) == token and isinstance(value, dict) and value.get("kind") == "end"

    await s.rec.wait_for(lambda e: e.method == "$/progress" and hit(e), since=since, timeout=30)


@pytest.mark.timeout(180)
async def test_cancel_kills_every_process_and_second_request_is_refused(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    slow = add_slow_target(ws)
    async with lsp_session(ws) as s:
        mark = s.rec.mark()
        first, second = await asyncio.gather(
            s.command("distcheck.validate", slow),
            s.command("distcheck.validate", slow),
            return_exceptions=True,
        )
        results = [first, second]
        started = [r for r in results if isinstance(r, dict)]
        refused = [r for r in results if isinstance(r, BaseException)]
        assert len(started) == 1 and len(refused) == 1, results
        assert isinstance(refused[0], JsonRpcException) and refused[0].code == -32002
        assert "already running" in refused[0].message
        token = started[0]["token"]

        await _wait_progress(s, token, "rank 1 started", mark)
        info = await s.debug_info()
        old_runner = int(info["runner"]["pid"])
        ranks = info["runs"][slow]["ranks"]
        before = _tree(info["pid"])
        assert old_runner in before and all(int(p) in before for p in ranks.values())

        s.client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
        took = await _wait_gone(before, timeout=3.0)
        assert took < 1.5, f"cancel took {took:.2f} s"
        await _wait_end(s, token, mark)
        assert s.progress_messages(token, mark)[-1] == ("end", "cancelled")
        new_runner = await _fresh_runner_only(s, old_runner)

        # distcheck.cancel stops a run too, and the target can be validated again afterwards
        mark = s.rec.mark()
        started2 = await s.command("distcheck.validate", "pair_potential")
        await _wait_progress(s, started2["token"], "reference run", mark)
        before = _tree(info["pid"])
        result = await s.command("distcheck.cancel", "pair_potential")
        assert result["cancelled"] == ["pair_potential"]
        await _wait_gone({p: t for p, t in before.items()}, timeout=3.0)
        await _fresh_runner_only(s, new_runner)
        assert not s.rec.of("distcheck/report", mark)


@pytest.mark.timeout(180)
async def test_runner_killed_mid_run_is_restarted_and_the_user_is_told(tmp_path: Path) -> None:
    ws = copy_examples(tmp_path)
    slow = add_slow_target(ws)
    async with lsp_session(ws) as s:
        mark = s.rec.mark()
        started = await s.command("distcheck.validate", slow)
        token = started["token"]
        await _wait_progress(s, token, "rank 1 started", mark)
        info = await s.debug_info()
        old_runner = int(info["runner"]["pid"])
        before = _tree(info["pid"])

        os.kill(old_runner, signal.SIGKILL)
        shown = await s.rec.wait_for(
            lambda e: e.method == "window/showMessage" and "stopped unexpectedly" in e.params.message,
            since=mark,
            timeout=30,
        )
        assert shown.params.type == types.MessageType.Warning
        assert "restarted" in shown.params.message and slow in shown.params.message
        assert "Run the validation again" in shown.params.message
        logs = [m.message for m in s.rec.of("window/logMessage", mark)]
        assert any("stopped unexpectedly" in m for m in logs)
        await _wait_gone(before, timeout=5.0)
        await _wait_end(s, token, mark)
        end = s.progress_messages(token, mark)
        assert end[-1][0] == "end" and "interrupted" in str(end[-1][1])
        await _fresh_runner_only(s, old_runner)

        # the restarted runner validates
        mark = s.rec.mark()
        await s.command("distcheck.validate", "pair_potential")
        payload = await s.wait_report("pair_potential", mark)
        assert payload["report"]["verdict"] == "passed"
