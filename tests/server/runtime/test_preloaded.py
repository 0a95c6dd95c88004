"""A process of the pool starts with what the forkserver preloaded recorded (`preloaded.MODULES`) and
frozen (`gc.freeze`: no collection in it walks torch's or sympy's objects)."""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

import pytest

from distcheck.processes.forkserver import process_context


def _report(queue: Any) -> None:
    preloaded = sys.modules.get("distcheck.processes.preloaded")
    t0 = time.perf_counter()
    gc.collect()
    queue.put(
        {
            "frozen": gc.get_freeze_count(),
            "modules": sorted(getattr(preloaded, "MODULES", ())),
            "collect_s": time.perf_counter() - t0,
        }
    )


@pytest.mark.procs
def test_a_pool_process_has_the_preload_recorded_and_frozen() -> None:
    ctx = process_context()
    queue = ctx.SimpleQueue()
    proc = ctx.Process(target=_report, args=(queue,))
    proc.start()
    try:
        seen = queue.get()
    finally:
        proc.join(60)
    assert {"torch", "torch.distributed", "distcheck.processes.launch"} <= set(seen["modules"])
    assert seen["frozen"] > 10_000, seen["frozen"]
    assert __name__ not in seen["modules"], "a module imported after the preload is not in the record"


def test_a_resident_rank_forgets_only_user_modules_imported_after_the_preload(monkeypatch: Any, tmp_path: Any) -> None:
    """`forget_user_modules` does not look at what the forkserver preloaded (it never holds the user's
    code, and a rank has thousands of such modules): a user file imported later is forgotten."""
    import types

    from distcheck.processes.resident import forget_user_modules
    from distcheck.runtime import frames

    early, late = types.ModuleType("early_user_like"), types.ModuleType("late_user_module")
    for module in (early, late):
        path = tmp_path / f"{module.__name__}.py"
        path.write_text("")
        module.__file__ = str(path)
        monkeypatch.setitem(sys.modules, module.__name__, module)
    snapshot = types.ModuleType("distcheck.processes.preloaded")
    snapshot.MODULES = frozenset({early.__name__})  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, snapshot.__name__, snapshot)
    ours = {str(tmp_path / f"{m.__name__}.py") for m in (early, late)}
    monkeypatch.setattr(frames, "is_user_file", lambda path: path in ours)  # this process's others stay
    forgotten = forget_user_modules()
    assert late.__name__ in forgotten and late.__name__ not in sys.modules
    assert early.__name__ not in forgotten and sys.modules[early.__name__] is early
