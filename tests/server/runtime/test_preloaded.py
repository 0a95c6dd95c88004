"""A process of the pool starts with what the forkserver preloaded recorded (`preloaded.MODULES`) and
frozen (`gc.freeze`: no collection in it walks torch's or sympy's objects)."""

from __future__ import annotations

import gc
import sys
import time
from typing import Any

from distcheck.runtime.spares_start import process_context


def _report(queue: Any) -> None:
    preloaded = sys.modules.get("distcheck.runtime.preloaded")
    t0 = time.perf_counter()
    gc.collect()
    queue.put(
        {
            "frozen": gc.get_freeze_count(),
            "modules": sorted(getattr(preloaded, "MODULES", ())),
            "collect_s": time.perf_counter() - t0,
        }
    )


def test_a_pool_process_has_the_preload_recorded_and_frozen() -> None:
    ctx = process_context()
    queue = ctx.SimpleQueue()
    proc = ctx.Process(target=_report, args=(queue,))
    proc.start()
    try:
        seen = queue.get()
    finally:
        proc.join(60)
    assert {"torch", "torch.distributed", "distcheck.runtime.launch"} <= set(seen["modules"])
    assert seen["frozen"] > 10_000, seen["frozen"]
    assert __name__ not in seen["modules"], "a module imported after the preload is not in the record"
