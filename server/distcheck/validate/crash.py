"""What a crashed attempt keeps: the culprit's error with the user's line, each raising rank's dispatch
trace and the modules that had returned.

`worker_error` turns a `DistributedError` into the report's `WorkerError`: the first failure's type,
message, phase and frames, the translated hint, and its `user_frame` (found in the rank by
`runtime.frames`, the one rule for "which frame is the user's"). `setup_report` is the one-attempt
report of a validation that could not start (a SyntaxError in the model file, a bad option): what
replaces the previous report, so the reader sees the error and where it is.

A rank whose forward raises attaches what it recorded so far to its error record
(`runtime.rank.error_record`: `partial = {"handler_counts", "instrumentation": {"modules"}}`); the
parent reads it back with the failure (`RankFailure.partial`). Here it becomes the report's
`CrashTrace` records and the attempt's handler counts (summed over the ranks that left a trace).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from .. import __version__
from ..report import Attempt, CrashTrace, HaloCompleteness, PartitionHealth, TraceReport, WorkerError
from ..report import Frame as ReportFrame
from ..report.parts import ReportMeta, TargetInfo
from ..runtime.errors import DistributedError, Frame, RankFailure
from ..spec import MLIPSpec
from .errors import translate

__all__ = ["crash_handler_counts", "crash_traces", "report_frame", "setup_report", "worker_error"]


def report_frame(frame: Frame | None) -> ReportFrame | None:
    """The report's copy of a runtime frame (None stays None)."""
    return None if frame is None else ReportFrame(file=frame.file, line=frame.line, function=frame.function)


def worker_error(err: DistributedError) -> WorkerError:
    """The report's error for a failed distributed run: its culprit (`err.primary`) translated into a
    hint (peak memory per rank quoted when known), its frames and its user frame."""
    memory_by_rank = {f.rank: f.peak_memory_bytes for f in err.failures if f.peak_memory_bytes is not None}
    first = err.primary
    if first is None:
        return WorkerError(
            type=type(err).__name__,
            message=str(err),
            rank=None,
            phase="",
            frames=[],
            hint=translate({"type": type(err).__name__, "message": str(err), "phase": ""}),
        )
    frames = [ReportFrame(file=f.file, line=f.line, function=f.function) for f in first.frames]
    return WorkerError(
        type=first.type,
        message=first.message,
        rank=first.rank,
        phase=first.phase,
        frames=frames,
        hint=translate(first, memory_by_rank=memory_by_rank) if memory_by_rank else translate(first),
        traceback=first.traceback or first.log_tail,
        user_frame=report_frame(first.user_frame),
    )


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


def setup_report(error: WorkerError, target: str | None) -> TraceReport:
    """The report of a validation that did not start: one attempt holding `error` (phase "setup"), the
    default spec, verdict "error", `next_action` the error and its hint, `target.name` = `target`."""
    attempt = Attempt(
        index=0,
        spec=MLIPSpec(),
        rationale="setup: the validation did not start",
        rule=None,
        passed=False,
        max_abs_diff={},
        max_rel_diff={},
        verdicts={},
        handler_counts={},
        error=error,
        helper_diagnostics=[],
        layer_divergence=None,
        partition_health=PartitionHealth(),
        halo_completeness=HaloCompleteness(),
        timings={},
    )
    action = f"FAIL — {error.message}\nwhat to do: {error.hint}" if error.hint else f"FAIL — {error.message}"
    meta = ReportMeta(versions={"distcheck": __version__})
    described = TargetInfo(name=target) if target is not None else None
    return TraceReport(ok=False, spec=MLIPSpec(), attempts=[attempt], next_action=action, meta=meta, target=described)
