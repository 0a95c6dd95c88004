"""Where one run's ranks come from: the one argument `launch.run_distributed` takes about its ranks.

A `RankSource` is asked once per run, with what the run needs (`RankWant`), and answers with a
`RankChoice`: ranks kept from an earlier run that serve this one (`RESIDENT`), spares that built this
run's wrappers ahead (`PREPARED`), or new ones (from the pool's spares or forked now; `run_distributed`
records which). The choice also says where the ranks of a run that ends well are kept for the next.
Ranks built for another factory, world size, devices, backend, rank environment or caller context
(`caller_context`) are never chosen: the source releases or discards them as it answers.

- `NEW_RANKS`: new ranks every run, none kept (the default).
- `ValidationRanks(resident=..., prepared=...)`: one validation's ranks, kept between its runs in
  `resident` (the caller releases it when the validation ends), with `prepared` for the one run
  they were built for.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from ..runtime.run_result import RankLifecycle
from .caller_context import CallerContext
from .resident import ResidentRanks
from .spares.prepared import PreparedRanks

__all__ = ["NEW_RANKS", "NewRanks", "RankChoice", "RankSource", "RankWant", "ValidationRanks"]


@dataclass(frozen=True)
class RankWant:
    """What one run needs of its ranks."""

    factory: str
    torchscript: str
    world_size: int
    devices: tuple[str, ...]
    backend: str
    env: Mapping[str, str]
    caller: CallerContext


@dataclass(frozen=True)
class RankChoice:
    """The ranks chosen for one run: `lifecycle` is `RESIDENT` (`resident` serves it), `PREPARED`
    (`prepared` are its ranks) or `FRESH` (new ranks; `SPARE` once the pool gave spares); `keep_in`,
    where not None, takes the ranks of a run that ends well for the next run."""

    lifecycle: RankLifecycle
    resident: ResidentRanks | None = None
    prepared: PreparedRanks | None = None
    keep_in: ResidentRanks | None = None


class RankSource(Protocol):
    """Chooses the ranks of each run it is asked for."""

    def choose(self, want: RankWant) -> RankChoice:
        """The ranks for a run needing `want`; whatever does not fit it is released or discarded."""
        ...


class NewRanks:
    """New ranks for every run (the pool's spares or forked now); none is kept after it."""

    def choose(self, want: RankWant) -> RankChoice:
        """Always `FRESH`: `run_distributed` starts the ranks."""
        return RankChoice(RankLifecycle.FRESH)


NEW_RANKS = NewRanks()
"""The default source of `run_distributed`."""


@dataclass
class ValidationRanks:
    """One validation's ranks: those kept in `resident` from its earlier run when they serve this one,
    else `prepared` when they were built for exactly this run, else new; a run that ends well leaves
    its ranks in `resident` (when given). `prepared` serves one run at most."""

    resident: ResidentRanks | None = None
    prepared: PreparedRanks | None = field(default=None)

    def choose(self, want: RankWant) -> RankChoice:
        """Resident ranks that serve `want`, else the prepared ones built for it, else new ones; kept
        ranks that do not serve are released, prepared ones that do not fit are discarded."""
        prepared, self.prepared = self.prepared, None
        resident = self.resident
        if resident is not None and resident.serves(want):
            if prepared is not None:
                prepared.discard()
            return RankChoice(RankLifecycle.RESIDENT, resident=resident, keep_in=resident)
        if resident is not None:
            resident.release()
        if prepared is not None:
            if prepared.matches(want.factory, want.torchscript, want.world_size, want.devices, want.caller):
                return RankChoice(RankLifecycle.PREPARED, prepared=prepared, keep_in=resident)
            prepared.discard()
        return RankChoice(RankLifecycle.FRESH, keep_in=resident)
