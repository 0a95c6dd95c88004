"""What a crashed attempt keeps: each raising rank's dispatch trace and the modules that had returned.

A rank whose forward raises attaches what it recorded so far to its error record
(`runtime.rank.error_record`: `partial = {"handler_counts", "instrumentation": {"modules"}}`); the
parent reads it back with the failure (`RankFailure.partial`). Here it becomes the report's
`CrashTrace` records and the attempt's handler counts (summed over the ranks that left a trace).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..report import CrashTrace
from ..runtime.errors import RankFailure

__all__ = ["crash_handler_counts", "crash_traces"]


def _trace(failure: RankFailure) -> CrashTrace | None:
    partial: Any = failure.partial
    if not isinstance(partial, dict):
        return None
    counts = partial.get("handler_counts")
    inst = partial.get("instrumentation")
    modules = inst.get("modules") if isinstance(inst, dict) else None
    return CrashTrace(
        rank=int(failure.rank),
        phase=str(failure.phase),
        handler_counts={str(k): int(v) for k, v in counts.items()} if isinstance(counts, dict) else {},
        modules=[str(m) for m in modules] if isinstance(modules, list) else [],
    )


def crash_traces(failures: Sequence[RankFailure]) -> list[CrashTrace]:
    """One `CrashTrace` per failure that carried a partial record, in the failures' order (culprit first)."""
    return [t for t in (_trace(f) for f in failures) if t is not None]


def crash_handler_counts(traces: Sequence[CrashTrace]) -> dict[str, int]:
    """The handler counts of the traces summed by name (the dispatch trace of the crashed attempt)."""
    total: dict[str, int] = {}
    for t in traces:
        for name, n in t.handler_counts.items():
            total[name] = total.get(name, 0) + int(n)
    return total
