"""The marker rule of the test tiers (docs/testing.md): in the fast tier every way of starting a process
fails the test, and `make test-fast` deselects the tests marked `procs`. No process is started here."""

from __future__ import annotations

import asyncio
import multiprocessing
import multiprocessing.util
import os
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def tiers(request: pytest.FixtureRequest) -> ModuleType:
    """The repository's root conftest.py, which holds the guard (`import conftest` is ambiguous here)."""
    for plugin in request.config.pluginmanager.get_plugins():
        if getattr(plugin, "__file__", None) == str(ROOT / "conftest.py"):
            return plugin  # type: ignore[no-any-return]
    raise AssertionError("the root conftest.py is not loaded")


@pytest.fixture
def guard(tiers: ModuleType) -> Iterator[Any]:
    """A guard of this test's own, on (wrapping the session's, if any: it raises first)."""
    own = tiers._ProcessGuard()
    own.test = "this test"
    own.install()
    own.active = True
    try:
        yield own
    finally:
        own.uninstall()


def _asyncio_exec() -> None:
    async def main() -> None:
        await asyncio.create_subprocess_exec("true")

    asyncio.run(main())


WAYS: dict[str, Callable[[], object]] = {
    "subprocess.run": lambda: subprocess.run(["true"], check=False),
    "os.popen": lambda: os.popen("true"),
    "os.system": lambda: os.system("true"),
    "os.fork": lambda: os.fork(),
    "os.posix_spawn": lambda: os.posix_spawn("/bin/true", ["true"], dict(os.environ)),
    "asyncio.create_subprocess_exec": _asyncio_exec,
    "multiprocessing fork": lambda: multiprocessing.get_context("fork").Process(target=print).start(),
    "multiprocessing forkserver": lambda: multiprocessing.get_context("forkserver").Process(target=print).start(),
    "multiprocessing spawn": lambda: multiprocessing.get_context("spawn").Process(target=print).start(),
    "multiprocessing.util.spawnv_passfds": lambda: multiprocessing.util.spawnv_passfds("/bin/true", ["true"], ()),
}


@pytest.mark.parametrize("way", sorted(WAYS))
def test_every_way_of_starting_a_process_fails(tiers: ModuleType, guard: Any, way: str) -> None:
    with pytest.raises(tiers.ProcessStartInFastTier, match=rf"@pytest\.mark\.{tiers.PROCS_MARKER}"):
        WAYS[way]()
    assert guard.attempts, "recorded too, so code that swallows the error does not pass the test"


def test_uninstall_restores(tiers: ModuleType) -> None:
    before = subprocess.Popen._execute_child  # type: ignore[attr-defined]
    own = tiers._ProcessGuard()
    own.install()
    assert subprocess.Popen._execute_child is not before  # type: ignore[attr-defined]
    own.uninstall()
    assert subprocess.Popen._execute_child is before  # type: ignore[attr-defined]


def test_fast_tier_selects_with_the_marker_expression(tiers: ModuleType) -> None:
    makefile = (ROOT / "Makefile").read_text()
    recipe = re.search(r"^pytest-fast:.*\n((?:\t.*\n)+)", makefile, re.M)
    assert recipe, "Makefile has a pytest-fast target"
    assert f"{tiers.TIER_ENV}=fast" in recipe.group(1)
    assert f'-m "{tiers.FAST_TIER_MARKEXPR}"' in recipe.group(1)
    assert re.search(r"^test-fast:.*\bpytest-fast\b", makefile, re.M)
    assert re.search(r"^\.PHONY:.*\btest-fast\b", makefile, re.M)
    assert f'"{tiers.PROCS_MARKER}: starts a process' in (ROOT / "pyproject.toml").read_text()


def test_the_session_guard_is_on_exactly_in_the_fast_tier(tiers: ModuleType) -> None:
    assert (tiers._guard is not None) == tiers.fast_tier()
    if tiers._guard is not None:
        assert tiers._guard.active
        assert tiers._guard.test.endswith("::test_the_session_guard_is_on_exactly_in_the_fast_tier")
