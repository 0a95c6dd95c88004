"""A rank's failure as the hint rules read it: one `Failure` whatever it arrived as, and the phrases
every hint builds on (where it happened, who failed, the user's frame).

`normalise(failure)` reads a `RankFailure`, its `to_dict()` or an exception by duck typing. Imports no
torch and no torch-importing part of `distcheck.runtime` (only `runtime.frames`, the user-frame rule),
and no user code.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from ..runtime.frames import innermost_user_frame

if TYPE_CHECKING:
    from ..runtime.errors import RankFailure

__all__ = [
    "PHASE_CONTEXT",
    "Failure",
    "FailureFrame",
    "at",
    "first_line",
    "normalise",
    "phase_context",
    "user_frame",
    "where",
    "who",
]

PHASE_CONTEXT = {
    "starting": "while the rank was starting",
    "rendezvous": "while the ranks rendezvoused (init_process_group)",
    "factory": "while importing the factory",
    "partition": "while partitioning the batch",
    "forward": "during the forward",
    "collect": "while collecting the outputs",
    "done": "after the forward",
    "reference": "during the single-process reference run",
}


class FailureFrame(NamedTuple):
    """One traceback frame of a failure."""

    file: str
    line: int
    function: str


@dataclass
class Failure:
    """A failure in one shape: `rank` None when unknown and negative for the single-process reference
    run; `timed_out` when the run it belongs to was stopped by its timeout."""

    rank: int | None
    type: str
    message: str
    phase: str
    frames: list[FailureFrame] = field(default_factory=list)
    exitcode: int | None = None
    timed_out: bool = False
    collective: str | None = None


def _frame(f: Any) -> FailureFrame:
    """A `Frame`, its dict form or a `(file, line, function)` tuple."""
    if isinstance(f, Mapping):
        return FailureFrame(str(f.get("file", "")), int(f.get("line", 0) or 0), str(f.get("function", "")))
    if hasattr(f, "file") and hasattr(f, "function"):
        return FailureFrame(str(f.file), int(getattr(f, "line", 0) or 0), str(f.function))
    return FailureFrame(str(f[0]), int(f[1] or 0), str(f[2]))


def _is_rank_failure(obj: Any) -> bool:
    return not isinstance(obj, (Mapping, BaseException)) and all(
        hasattr(obj, a) for a in ("rank", "type", "message", "phase")
    )


def normalise(failure: RankFailure | Mapping[str, Any] | BaseException) -> Failure:
    """`failure` as a `Failure`: a `RankFailure` (or anything with its attributes), its `to_dict()` (an
    optional `"timed_out": True` marks a timeout), or an exception (a `DistributedError` / `RankTimeout`
    is read through its first failure; any other exception's frames are its traceback's)."""
    if _is_rank_failure(failure):
        return Failure(
            rank=getattr(failure, "rank", None),
            type=str(getattr(failure, "type", "")),
            message=str(getattr(failure, "message", "")),
            phase=str(getattr(failure, "phase", "")),
            frames=[_frame(f) for f in getattr(failure, "frames", None) or []],
            exitcode=getattr(failure, "exitcode", None),
            collective=getattr(failure, "collective", None),
        )
    if isinstance(failure, BaseException):
        inner = getattr(failure, "primary", None)  # a DistributedError carries its ranks' failures
        if inner is not None and _is_rank_failure(inner):
            norm = normalise(inner)
            norm.timed_out = norm.timed_out or type(failure).__name__ == "RankTimeout"
            return norm
        frames = [
            FailureFrame(os.path.abspath(fs.filename), fs.lineno or 0, fs.name)
            for fs in traceback.extract_tb(failure.__traceback__)
        ]
        return Failure(
            rank=None,
            type=type(failure).__name__,
            message=str(failure),
            phase="",
            frames=frames,
            timed_out=type(failure).__name__ == "RankTimeout",
        )
    assert isinstance(failure, Mapping)
    rank = failure.get("rank")
    exitcode = failure.get("exitcode")
    return Failure(
        rank=int(rank) if rank is not None else None,
        type=str(failure.get("type", "") or ""),
        message=str(failure.get("message", "") or ""),
        phase=str(failure.get("phase", "") or ""),
        frames=[_frame(f) for f in failure.get("frames", None) or []],
        exitcode=int(exitcode) if exitcode is not None else None,
        timed_out=bool(failure.get("timed_out", False)),
        collective=str(failure["collective"]) if failure.get("collective") else None,
    )


def phase_context(phase: str) -> str:
    """`"during the forward"`, `"while importing the factory"`, … for a rank phase (`""` for none)."""
    if not phase:
        return ""
    return PHASE_CONTEXT.get(phase, f"in phase {phase!r}")


def user_frame(frames: list[FailureFrame]) -> FailureFrame | None:
    """The innermost frame in the user's code (`runtime.frames`' rule), or None."""
    return innermost_user_frame(frames)


def where(f: Failure) -> str:
    """`" during the forward on rank 1"` with a leading space (either part may be missing), or `""`."""
    rank = "" if f.rank is None else ("in the reference run" if f.rank < 0 else f"on rank {f.rank}")
    parts = [p for p in (phase_context(f.phase), rank) if p]
    return "".join(" " + p for p in parts)


def who(f: Failure, capital: bool = True) -> str:
    """`"Rank 1"`, `"A rank"` (rank unknown) or `"The single-process reference run"`; lower case unless
    `capital`."""
    if f.rank is None:
        return "A rank" if capital else "a rank"
    if f.rank < 0:
        return "The single-process reference run" if capital else "the single-process reference run"
    return f"Rank {f.rank}" if capital else f"rank {f.rank}"


def at(f: Failure) -> str:
    """`" at file:line in function"` for the user's frame, with a leading space, or `""`."""
    frame = user_frame(f.frames)
    return f" at {frame.file}:{frame.line} in {frame.function}" if frame is not None else ""


def first_line(message: str, limit: int = 200) -> str:
    """The first line of `message`, cut to `limit` characters (ending in `…` when cut)."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    return line if len(line) <= limit else line[: limit - 1] + "…"
