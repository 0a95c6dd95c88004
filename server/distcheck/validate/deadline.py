"""The time a validation may take: `timeout_sec` for each run, `deadline_sec` for the whole.

`timeout_sec` bounds one run (the single-process reference, or one attempt's ranks). `deadline_sec`
(None: no deadline) bounds the whole validation: each run gets at most the time that is left, and
once it has passed no new attempt starts.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from ..report import DeadlineReached
from ..runtime.errors import DistributedError, RankTimeout

__all__ = ["Budget"]

_SHORTEST_RUN = 1e-3
"""A run is never given a timeout of 0 or less (run_distributed refuses it): at least a millisecond."""


@dataclass
class Budget:
    """The clock of one validation, started at `start` (`time.perf_counter()`)."""

    timeout_sec: float
    deadline_sec: float | None
    start: float = field(default_factory=time.perf_counter)
    clipped: bool = False
    """Whether the last `run_timeout()` was cut below `timeout_sec` by the deadline."""

    def elapsed(self) -> float:
        """Seconds since the start."""
        return time.perf_counter() - self.start

    def expired(self) -> bool:
        """Whether there is a deadline and it has passed."""
        return self.deadline_sec is not None and self.elapsed() >= self.deadline_sec

    def run_timeout(self, clip: bool = True) -> float:
        """The timeout of the next run: `timeout_sec`, or (when `clip`) what is left of the deadline when
        that is less."""
        if self.deadline_sec is None or not clip:
            self.clipped = False
            return self.timeout_sec
        left = self.deadline_sec - self.elapsed()
        self.clipped = left < self.timeout_sec
        return max(min(self.timeout_sec, left), _SHORTEST_RUN)

    def cut_short(self, err: DistributedError) -> bool:
        """Whether `err` (from the last run) is a timeout the deadline imposed rather than `timeout_sec`."""
        return self.clipped and isinstance(err, RankTimeout)

    def reached(self, stage: str, attempts: int) -> DeadlineReached:
        """The report's record that the deadline stopped the validation at `stage` after `attempts` attempts."""
        assert self.deadline_sec is not None
        return DeadlineReached(
            deadline_sec=float(self.deadline_sec), elapsed_sec=self.elapsed(), attempts=attempts, stage=stage
        )
