"""What one rank knows while it runs: its partition rows, its process group, its dispatch trace."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import torch

from .partition import HeldRows

__all__ = ["RankContext", "current_context", "use_context"]


@dataclass
class RankContext(HeldRows):
    """One rank's view of the decomposition and its running records.

    `local_ids[k]` is the global atom id of local row `k`; `owned_mask[k]` is True for owned rows.
    `group` is the `torch.distributed` process group (None when running without one, world_size 1).
    `unrouted` holds the aggregations no handler routed (`runtime.unrouted.record_unrouted`), one plain
    record per op and location with its count.
    """

    rank: int
    world_size: int
    num_global_atoms: int
    num_systems: int
    local_ids: torch.Tensor
    owned_mask: torch.Tensor
    scatter_mode: str = "halo_correction"
    halo_width: float = 0.0
    system_reductions: bool = True
    group: Any = None
    device: torch.device = field(default_factory=lambda: torch.device("cpu"))
    system_index: torch.Tensor | None = None
    local_counts: torch.Tensor | None = None
    global_counts: torch.Tensor | None = None
    handler_counts: Counter[str] = field(default_factory=Counter)
    timings: dict[str, float] = field(default_factory=lambda: {"collectives": 0.0})
    requested_cutoffs: list[float] = field(default_factory=list)
    suspended: int = 0
    unrouted: dict[tuple[Any, ...], dict[str, Any]] = field(default_factory=dict)
    unrouted_calls: dict[tuple[Any, ...], int] = field(default_factory=dict)

    @property
    def distributed(self) -> bool:
        """Whether collectives must run (more than one rank)."""
        return self.world_size > 1

    def count(self, handler: str, n: int = 1) -> None:
        """Record that `handler` fired."""
        self.handler_counts[handler] += n

    def unrouted_records(self) -> list[dict[str, Any]]:
        """The unrouted aggregations as plain dicts (`report.UnroutedOp` fields), in first-seen order."""
        return [dict(r) for r in self.unrouted.values()]

    @contextmanager
    def timed(self, key: str) -> Iterator[None]:
        """Accumulate the wall time of the block under `timings[key]`."""
        t0 = time.perf_counter()
        try:
            yield
        finally:
            self.timings[key] = self.timings.get(key, 0.0) + time.perf_counter() - t0

    @contextmanager
    def handlers_suspended(self) -> Iterator[None]:
        """Run distcheck's own bookkeeping ops (neighbour lists, slicing) without interception."""
        self.suspended += 1
        try:
            yield
        finally:
            self.suspended -= 1

    def row_mask(self, rows: int, like: torch.Tensor) -> torch.Tensor:
        """Owned mask for a tensor with `rows` leading rows (extra padding rows count as not owned)."""
        mask = self.owned_mask.to(like.device)
        if rows == mask.shape[0]:
            return mask
        if rows > mask.shape[0]:
            pad = torch.zeros(rows - mask.shape[0], dtype=torch.bool, device=like.device)
            return torch.cat([mask, pad])
        raise ValueError(
            f"rank {self.rank}: a per-atom tensor has {rows} rows but this rank holds {mask.shape[0]} atoms"
        )


_STACK: list[RankContext] = []


def current_context() -> RankContext | None:
    """The context of the rank running now in this process, or None outside a distributed forward.

    Helper replacements named in a spec (`kind: "python"`) call this to find owned rows.
    """
    return _STACK[-1] if _STACK else None


@contextmanager
def use_context(ctx: RankContext) -> Iterator[RankContext]:
    """Make `ctx` the current context for the duration of the block."""
    _STACK.append(ctx)
    try:
        yield ctx
    finally:
        _STACK.pop()
