"""Is a distributed run able to prove anything? Partition health and halo completeness.

`partition_health` flags degenerate partitions (a rank with no owned, no halo or no remote atoms, or a
single rank): a pass on such a partition does not exercise what distribution can break. It judges
each system of a multi-system batch too (`system_health`): a system some rank holds wholly (no
remote atom), owns nothing of, or has no halo of tests nothing there, so it is named and the
partition counts as degenerate even when the totals over systems look healthy.
`halo_completeness` checks that the halo is as deep as the spec's scatter mode needs.

Both take the `RankRecord`s of a run (anything with the same attributes works) and return the report's
records (`PartitionHealth`, `HaloCompleteness`). No torch needed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..report import HaloCompleteness, PartitionHealth, RankCounts, SystemHealth

if TYPE_CHECKING:
    from ..runtime.run_result import RankRecord

__all__ = ["halo_completeness", "partition_health", "system_health"]

_EPS = 1e-9
"""Å of slack when comparing the halo width with the required width (floating-point round-off)."""


def _fmt(x: float) -> str:
    return f"{x:.4g}"


def partition_health(records: Sequence[RankRecord]) -> PartitionHealth:
    """Per-rank atom counts and a list of reasons the partition is degenerate (empty when healthy):
    one message per degenerate rank (naming every count that is zero) or one for a single-rank run.
    """
    per_rank = {int(r.rank): RankCounts(int(r.owned), int(r.halo), int(r.remote)) for r in records}
    degenerate: list[str] = []
    if not records:
        degenerate.append("no rank reported its partition, so nothing about the distributed run can be checked")
    elif len(records) == 1:
        degenerate.append(
            "world_size is 1: one rank owns every atom, so there is no halo, no remote atom and no collective "
            "that changes a value; a pass proves nothing about distribution; use world_size >= 2"
        )
    else:
        for rank, counts in sorted(per_rank.items()):
            if counts.owned == 0:
                degenerate.append(
                    f"rank {rank} owns no atoms: its domain is empty, so it contributes nothing of its own and "
                    "the run is effectively split over fewer ranks; use a larger sample (longer along one axis) "
                    "or fewer ranks"
                )
            if counts.halo == 0:
                degenerate.append(
                    f"rank {rank} has no halo atoms: no atom of another rank lies within the halo width of its "
                    "domain, so halo exchange and cross-rank edges are never exercised; use a denser or periodic "
                    "sample whose atoms interact across the domain boundary"
                )
            if counts.remote == 0:
                degenerate.append(
                    f"rank {rank} has no remote atoms: every atom is within its halo, so the run never crosses "
                    "a true domain boundary; use a larger sample (longer along one axis) or fewer ranks"
                )
    if len(records) > 1:
        totals = {"no_owned": "owned", "no_halo": "halo", "no_remote": "remote"}
        degenerate += [  # a rank whose totals already show the problem has its message above
            issue.message
            for issue in system_health(records)
            if issue.rank not in per_rank or getattr(per_rank[issue.rank], totals[issue.problem]) != 0
        ]
    return PartitionHealth(per_rank=per_rank, degenerate=degenerate)


_SYSTEM_MESSAGES = {
    "no_remote": (
        "system {s} ({atoms} atoms) is held whole by rank {r} ({owned} owned + {halo} halo, no remote atom): on that "
        "rank it never crosses a domain boundary, so it tests nothing the single-process run does not; make that "
        "system longer than 2 × halo width + its slab (e.g. a supercell along its longest axis) or validate it "
        "in a separate sample"
    ),
    "no_owned": (
        "system {s} ({atoms} atoms): rank {r} owns none of it, so that rank contributes nothing of its own there; "
        "make the system longer along its longest axis, or use fewer ranks"
    ),
    "no_halo": (
        "system {s} ({atoms} atoms): rank {r} holds no halo atom of it, so no edge of that system crosses ranks "
        "there; use a denser or periodic version of that system"
    ),
}


def system_health(records: Sequence[RankRecord]) -> list[SystemHealth]:
    """Per system of a multi-system batch, each rank that cannot test it (`SYSTEM_PROBLEMS`), with a
    message naming the system, the rank and what to do. Empty for a one-system batch (the per-rank
    totals already say it) and for a single rank."""
    if len(records) < 2:
        return []
    systems = {int(c["system"]) for r in records for c in r.per_system}
    if len(systems) < 2:
        return []
    found: list[SystemHealth] = []
    for rec in sorted(records, key=lambda r: int(r.rank)):
        for c in rec.per_system:
            owned, halo, remote = int(c["owned"]), int(c["halo"]), int(c["remote"])
            atoms = owned + halo + remote
            if atoms == 0:
                continue
            for problem, bad in (("no_owned", owned == 0), ("no_halo", halo == 0), ("no_remote", remote == 0)):
                if not bad:
                    continue
                message = _SYSTEM_MESSAGES[problem].format(
                    s=int(c["system"]), atoms=atoms, r=int(rec.rank), owned=owned, halo=halo
                )
                found.append(
                    SystemHealth(int(c["system"]), atoms, int(rec.rank), owned, halo, remote, problem, message)
                )
    return found


def _halo_width(records: Sequence[RankRecord]) -> float | None:
    """The run's halo width (the smallest any rank used), `None` for none or infinite (replicated)."""
    widths = [float(r.halo_width) for r in records]
    if not widths:
        return None
    width = min(widths)
    return width if math.isfinite(width) else None


def halo_completeness(
    records: Sequence[RankRecord],
    policy_kind: str,
    scatter_mode: str,
    cutoff: float | None,
    num_interactions: int | None,
) -> HaloCompleteness:
    """Whether the halo the run used is deep enough for its scatter mode.

    The required width is the largest neighbour-list cutoff the wrapper asked for through
    `batch.neighbor_list` (`records[*].requested_cutoffs`, else `cutoff`): that for `halo_correction`,
    times `num_interactions` for `local`, one cutoff for `owned_complete` (the wrapper's `cutoff` when it
    builds its own graph). A `replicated` policy always matches. Under `halo_correction`,
    a wrapper that built no neighbour list through `batch.neighbor_list` is reported as halo-unaware
    (`matches` False, `required_width` the width `local` needs). Widths in Å, `None` where unknown or
    infinite.
    """
    width = _halo_width(records)
    if policy_kind == "replicated":
        replicated = "The replicated policy gives every rank every atom, so no halo is needed."
        return HaloCompleteness(True, width, None, replicated)
    requested = [float(c) for r in records for c in r.requested_cutoffs]
    reach = max(requested) if requested else (float(cutoff) if cutoff is not None else None)
    depth = int(num_interactions) if num_interactions else None
    layers = depth or 1
    depth_note = (
        ""
        if depth
        else " The wrapper declares no `num_interactions`, so one message-passing layer was assumed; set it if "
        "the model passes messages more than once."
    )
    shown = _fmt(width) if width is not None else "unknown"

    if scatter_mode == "halo_correction" and not requested:
        required = reach * layers if reach is not None else None
        need = f" with `distribution.policy.halo_width` >= {_fmt(required)} Å" if required is not None else ""
        return HaloCompleteness(
            False,
            width,
            required,
            (
                "The wrapper built no neighbour list through `batch.neighbor_list`, so its backbone builds its "
                "own (halo-unaware) one and halo_correction double counts the edges that cross ranks. "
                "Set `distribution.policy.scatter_mode` to 'owned_complete' (a one-cutoff halo refreshed from "
                f"the owners after each aggregation) or to 'local'{need}." + depth_note
            ),
        )
    if reach is None:
        return HaloCompleteness(
            True,
            width,
            None,
            (
                "Cannot check the halo depth: the wrapper has no `cutoff` attribute and asked for no neighbour "
                "list through `batch.neighbor_list`; add `self.cutoff = <Å>` to the wrapper."
            ),
        )
    source = "largest neighbour-list cutoff requested" if requested else "wrapper's cutoff"
    if scatter_mode == "local":
        required = reach * layers
        needs = f"scatter_mode 'local' needs {layers} layer(s) × {_fmt(reach)} Å ({source}) = {_fmt(required)} Å"
    else:
        required = reach
        needs = f"scatter_mode {scatter_mode!r} needs one cutoff, {_fmt(reach)} Å ({source})"
    matches = width is not None and width + _EPS >= required
    if matches:
        interpretation = f"The halo is {shown} Å and {needs}: complete." + (
            depth_note if scatter_mode == "local" else ""
        )
    elif scatter_mode == "local":
        interpretation = (
            f"The halo is {shown} Å but {needs}, so owned atoms near a domain boundary miss contributions "
            f"from atoms beyond the halo. Set `distribution.policy.halo_width` >= {_fmt(required)} Å (or null "
            "to derive it)"
            + (
                ", or switch `scatter_mode` to 'halo_correction'."
                if requested
                else ", or switch `scatter_mode` to 'owned_complete' (one cutoff) if every per-atom state the "
                "layers read comes out of a scatter aggregation."
            )
            + depth_note
        )
    else:
        interpretation = (
            f"The halo is {shown} Å but {needs}, so edges to atoms just beyond the halo are missing. Set "
            f"`distribution.policy.halo_width` >= {_fmt(required)} Å (or null to derive it from the cutoff)."
        )
    return HaloCompleteness(matches, width, required, interpretation)
