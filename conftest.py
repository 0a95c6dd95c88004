"""Put the repository root on sys.path so tests (and the ranks they start) import `examples`; fixtures
every test directory shares."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable, Generator
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

VOLATILE_REPORT_KEYS = {"timings", "elapsed_sec", "peak_memory_bytes"}
"""Report keys whose values differ between any two runs of one validation."""


def _without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in VOLATILE_REPORT_KEYS}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def _stable_report(report: Any) -> dict[str, Any]:
    stable: dict[str, Any] = json.loads(json.dumps(_without_volatile(report.to_dict()), default=str))
    return stable


@pytest.fixture
def stable_report() -> Callable[[Any], dict[str, Any]]:
    """`stable_report(report)`: the report as plain data without `VOLATILE_REPORT_KEYS` at any depth,
    for comparing the reports of two ways of running one validation."""
    return _stable_report


# ---- test tiers: `make test-fast` runs `-m "not gpu and not procs"` with TEST_TIER_DISTCHECK=fast, and then
# every way of starting a process fails the test at once, naming the marker to add (docs/testing.md).

TIER_ENV = "TEST_TIER_DISTCHECK"
PROCS_MARKER = "procs"
FAST_TIER_MARKEXPR = "not gpu and not procs"
"""The marker expression `make test-fast` passes to pytest (tests/server/test_test_tiers.py checks it)."""


class ProcessStartInFastTier(RuntimeError):
    """A test of the fast tier tried to start a process."""


class _ProcessGuard:
    """Wraps every way a Python process starts another one; while `active`, each raises
    `ProcessStartInFastTier` (and is recorded in `attempts`, so a test that swallows the error still fails)."""

    def __init__(self) -> None:
        self.active = False
        self.test = "?"
        self.attempts: list[str] = []
        self._undo: list[tuple[Any, str, Any]] = []

    def message(self, how: str) -> str:
        return (
            f"{self.test} started a process ({how}) in the fast tier ({TIER_ENV}=fast): tests that start "
            f"a process (a rank, the forkserver, a subprocess, the LSP daemon) must be marked "
            f"@pytest.mark.{PROCS_MARKER} (or `pytestmark = [pytest.mark.{PROCS_MARKER}]` for the module); "
            f"see docs/testing.md"
        )

    def _blocked(self, owner: Any, name: str, describe: Callable[..., str]) -> None:
        original = getattr(owner, name)
        guard = self

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if guard.active:
                how = describe(*args, **kwargs)
                guard.attempts.append(how)
                raise ProcessStartInFastTier(guard.message(how))
            return original(*args, **kwargs)

        wrapper.__name__ = getattr(original, "__name__", name)
        wrapper.__doc__ = getattr(original, "__doc__", None)
        self._undo.append((owner, name, original))
        setattr(owner, name, wrapper)

    def install(self) -> None:
        import _posixsubprocess
        import multiprocessing.process
        import multiprocessing.util
        import subprocess

        def argv(what: str) -> Callable[..., str]:
            def describe(*args: Any, **kwargs: Any) -> str:
                first = next((a for a in args if not isinstance(a, (subprocess.Popen, multiprocessing.process.BaseProcess))), None)
                return f"{what} {first!r}"[:200]

            return describe

        # subprocess.run/call/check_output/Popen, os.popen, asyncio.create_subprocess_exec/_shell (they make
        # a subprocess.Popen), pygls/pytest-lsp's server start (asyncio.create_subprocess_exec)
        self._blocked(subprocess.Popen, "_execute_child", lambda _self, args, *a, **k: f"subprocess.Popen {args!r}"[:200])
        # multiprocessing's forkserver and resource tracker (spawnv_passfds), and anything else that forks and execs
        self._blocked(_posixsubprocess, "fork_exec", lambda *a, **k: f"_posixsubprocess.fork_exec {a[0]!r}"[:200])
        self._blocked(multiprocessing.util, "spawnv_passfds", argv("multiprocessing.util.spawnv_passfds"))
        # every multiprocessing start method (fork, spawn, forkserver — a warm forkserver forks it, not us)
        self._blocked(
            multiprocessing.process.BaseProcess, "start", lambda proc: f"multiprocessing Process.start {proc.name!r}"
        )
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system", "spawnv", "spawnve", "spawnvp", "spawnvpe"):
            if hasattr(os, name):
                self._blocked(os, name, argv(f"os.{name}"))

    def uninstall(self) -> None:
        while self._undo:
            owner, name, original = self._undo.pop()
            setattr(owner, name, original)


_guard: _ProcessGuard | None = None


def fast_tier() -> bool:
    """Whether this session is the fast tier (`make test-fast`)."""
    return os.environ.get(TIER_ENV, "") == "fast"


def process_guard() -> _ProcessGuard:
    """The guard (installed in the fast tier by `pytest_configure`; tests may also install their own)."""
    return _guard if _guard is not None else _ProcessGuard()


def pytest_configure(config: pytest.Config) -> None:
    global _guard
    if fast_tier() and _guard is None:
        _guard = _ProcessGuard()
        _guard.install()


def pytest_unconfigure(config: pytest.Config) -> None:
    global _guard
    if _guard is not None:
        _guard.uninstall()
        _guard = None


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Before any fixture of the test (session and module ones included): guard on unless it is marked `procs`."""
    if _guard is not None:
        _guard.active = item.get_closest_marker(PROCS_MARKER) is None
        _guard.test = item.nodeid
        _guard.attempts.clear()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, object, object]:
    """In the fast tier: fails the test if it tried to start a process, even where the code caught the error."""
    try:
        result = yield
    except ProcessStartInFastTier:
        raise
    except BaseException as exc:
        if _guard is not None and _guard.attempts:
            raise ProcessStartInFastTier(_guard.message("; ".join(_guard.attempts))) from exc
        raise
    if _guard is not None and _guard.attempts:
        raise ProcessStartInFastTier(_guard.message("; ".join(_guard.attempts)))
    return result
