"""What a run of the ranks gives back: each rank's record (`RankRecord`) and the consolidated run
(`DistributedRun`), assembled from the ranks' results under the spec (`assemble_run`). The same for
ranks started here (`processes.launch`) and ranks a launcher started (`group`). Consolidation
computes through `pristine`: a torch function the user's module replaced in this process never
touches the ranks' outputs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

import torch

from ..batch import Batch
from ..report import UnroutedOp
from ..spec import MLIPSpec
from .consolidate import Consolidated, RankRows, consolidate

RETIRING = "retiring"  # processes.resident.RETIRING (runtime/ imports nothing of processes/)

__all__ = ["RETIRED_TIMING", "DistributedRun", "RankLifecycle", "RankRecord", "assemble_run"]

RETIRED_TIMING = "ranks_retired"
"""The key of a run's timings (and so of its attempt's) set to the number of ranks that retired after it:
the run's user code changed their process in a way that cannot be put back (a torch function replaced,
a global module hook, an op registered, ...), so the next run starts fresh ranks where that import
applies once, as in a fresh process. `DistributedRun.retired` says what changed."""


class RankLifecycle(str, Enum):
    """How the ranks of one run came to be (the table is `distcheck.processes`' docstring)."""

    FRESH = "fresh"
    """Forked from the forkserver for this run; they end with it."""
    SPARE = "spare"
    """Warm spares claimed for this run; they end with it."""
    PREPARED = "prepared"
    """Spares that built this run's wrappers before it (their factory ran ahead of the run)."""
    RESIDENT = "resident"
    """Ranks of an earlier run of the same validation, kept alive for this one."""
    LAUNCHED = "launched"
    """Ranks a launcher (`torchrun`) started; they run every attempt of the job."""


@dataclass
class RankRecord:
    """What one rank held and did: atom counts, handler firings, timings, peak memory, and the
    aggregations no handler routed (`unrouted`)."""

    rank: int
    device: str
    owned: int
    halo: int
    remote: int
    per_system: list[dict[str, int]]
    handler_counts: dict[str, int]
    timings: dict[str, float]
    requested_cutoffs: list[float]
    halo_width: float
    peak_memory_bytes: int = 0
    unrouted: list[UnroutedOp] = field(default_factory=list)
    weights: dict[str, list[float]] | None = None  # model_build.weights_fingerprint of the rank's model

    def __post_init__(self) -> None:
        # ranks send plain dicts (their results are loaded with weights_only=True)
        self.unrouted = [u if isinstance(u, UnroutedOp) else UnroutedOp.from_dict(u) for u in self.unrouted]


@dataclass
class DistributedRun:
    """Consolidated outputs of a distributed run plus everything each rank reported."""

    outputs: dict[str, torch.Tensor]
    rank_outputs: list[dict[str, torch.Tensor]]
    records: list[RankRecord]
    rows: list[RankRows]
    spec: MLIPSpec
    kinds: dict[str, str]
    replica_spread: dict[str, float]
    world_size: int
    backend: str
    devices: list[str]
    num_atoms: int
    num_systems: int
    instrumentation: list[Any] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    lifecycle: RankLifecycle = RankLifecycle.FRESH
    """How the ranks came to be; `PREPARED` ranks built their wrappers before the run."""
    retired: list[str] = field(default_factory=list)
    """Why resident ranks serve no further run after this one (`processes.resident.RETIRING`: what the
    model changed in the process that cannot be put back, one line each; [] when they may). The
    attempt's timings say so too (`RETIRED_TIMING`)."""

    def reconsolidate(self, spec: MLIPSpec) -> Consolidated:
        """Consolidate the same rank outputs under another spec (no new run: pure post-processing)."""
        return consolidate(self.rank_outputs, self.rows, spec, self.num_atoms, self.num_systems)

    @property
    def rank_phases(self) -> dict[str, float]:
        """Each phase a rank timed (`rendezvous`, `factory`, `wait_peers`, `forward`, `collectives`), its
        slowest rank's seconds, as `rank_<phase>`."""
        slowest: dict[str, float] = {}
        for rec in self.records:
            for k, v in rec.timings.items():
                slowest[f"rank_{k}"] = max(slowest.get(f"rank_{k}", 0.0), float(v))
        return slowest

    @property
    def handler_counts(self) -> dict[str, int]:
        """Handler firings summed over ranks."""
        total: dict[str, int] = {}
        for rec in self.records:
            for k, v in rec.handler_counts.items():
                total[k] = total.get(k, 0) + v
        return total


def assemble_run(
    results: Sequence[dict[str, Any]],
    spec: MLIPSpec,
    batch: Batch,
    *,
    backend: str,
    devices: Sequence[str],
    timings: dict[str, float],
) -> DistributedRun:
    """A `DistributedRun` from what every rank's `forward_rank` returned, consolidated under `spec`; a
    rank that retired (`RETIRING` in its result) is counted in `timings[RETIRED_TIMING]`."""
    retired = _retired(results)
    if retired:
        timings = {**timings, RETIRED_TIMING: float(sum(1 for res in results if res.get(RETIRING)))}
    rows = [RankRows(local_ids=res["local_ids"], owned_mask=res["owned_mask"]) for res in results]
    rank_outputs = [res["outputs"] for res in results]
    merged = consolidate(rank_outputs, rows, spec, batch.num_atoms, batch.num_systems)
    return DistributedRun(
        outputs=merged.outputs,
        rank_outputs=rank_outputs,
        records=[RankRecord(**res["record"]) for res in results],
        rows=rows,
        spec=spec,
        kinds=merged.kinds,
        replica_spread=merged.replica_spread,
        world_size=len(results),
        backend=backend,
        devices=list(devices),
        num_atoms=batch.num_atoms,
        num_systems=batch.num_systems,
        instrumentation=[res.get("instrumentation") for res in results],
        timings=timings,
        retired=retired,
    )


def _retired(results: Sequence[dict[str, Any]]) -> list[str]:
    """What made the ranks retire, each reason once (a rank's `RETIRING` is a list of them, or True)."""
    found: list[str] = []
    for res in results:
        why = res.get(RETIRING)
        reasons = [str(w) for w in why] if isinstance(why, (list, tuple)) else ([RETIRING] if why else [])
        found += [w for w in reasons if w not in found]
    return found
