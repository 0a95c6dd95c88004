"""Errors raised by the distributed runtime, with what each rank was doing and where it failed."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

__all__ = ["DistributedError", "Frame", "RankFailure", "RankTimeout", "SetupError"]


class SetupError(ValueError):
    """The run cannot start as asked (bad device list, NCCL on a shared GPU, …); nothing was started."""


@dataclass(frozen=True)
class Frame:
    """One traceback frame."""

    file: str
    line: int
    function: str


@dataclass
class RankFailure:
    """Why one rank stopped: its exception (or signal), the phase it was in and the collective it was
    inside then (None outside one), its last output lines. A rank still running at a timeout has type
    `RankStuck` (busy outside any collective: `frames`/`traceback` are its Python stack when it was
    stopped) or `RankWaiting` (waiting for its peers inside `collective`); one that exited without a
    result nor an exception is `RankExited`, one killed by a signal `RankKilled`. `partial` is what a
    rank whose forward raised had recorded before (`{"handler_counts", "instrumentation"}`), else None.
    `user_frame` is the user's line (`runtime.frames`: a SyntaxError's own location, else the innermost
    frame in the user's code; found from `frames` when not given), None when no frame is the user's."""

    rank: int
    type: str
    message: str
    phase: str
    frames: list[Frame] = field(default_factory=list)
    traceback: str = ""
    exitcode: int | None = None
    log_tail: str = ""
    peak_memory_bytes: int | None = None
    collective: str | None = None
    partial: dict[str, Any] | None = None
    user_frame: Frame | None = None

    def __post_init__(self) -> None:
        if self.user_frame is None and self.frames:
            from .frames import innermost_user_frame  # frames imports this module

            self.user_frame = innermost_user_frame(self.frames)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict."""
        return asdict(self)


class DistributedError(RuntimeError):
    """A distributed run failed; `failures[0]` is the culprit: a rank that raised outside a collective,
    was killed or exited without a result comes before the ranks that only saw it vanish."""

    def __init__(self, message: str, failures: list[RankFailure]) -> None:
        super().__init__(message)
        self.failures = failures

    @property
    def primary(self) -> RankFailure | None:
        """The first failure, the one that caused the others."""
        return self.failures[0] if self.failures else None


class RankTimeout(DistributedError):
    """The run passed `timeout_sec` (the bound of each run: the reference run, or one attempt's
    ranks); every rank was killed. `failures[0]` is a rank busy outside any collective when there is
    one (its Python stack attached), then the ranks that waited for it in a collective."""
