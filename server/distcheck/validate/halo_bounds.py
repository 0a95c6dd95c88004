"""Bounded auto-fix: how far a halo may be widened, and the rule back from `local` for per-edge virials.

`widen_halo` must never make a validation degenerate by its own doing, nor widen past what can
help. `widened_halo` therefore aims at what the model needs (the halo completeness' required width,
or under `local` the receptive field measured in the reference, whichever is larger, plus the skin),
proposes nothing once the halo already covers it, and never goes past `max_halo_width`: the widest
halo at which every rank still has remote atoms in every system that had some (a rank holding a
whole system tests nothing about domain boundaries). Only when the field is unknown (not measured,
or unbounded because a per-system quantity feeds back into every atom) does it double the halo
under `local`, still within that bound.

`edge_virial_to_halo_correction`: a model whose forces come from per-edge derivatives (autograd with
respect to the edge vectors) and whose stress comes from a per-atom virial split over both atoms of
an edge cannot pass stress under `local`: an owned energy's edge to a halo atom puts half its virial
on the halo row, which the per-system sum reads as a copy and drops. Under `halo_correction` every
edge lives on its owned centre's rank and the halo halves are summed into their owners, so stress
is right there; the rule switches back when forces pass and only per-system outputs fail.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..batch import Batch
from ..runtime.model import DEFAULT_SKIN
from ..runtime.partition import partition_batch
from ..spec import MLIPSpec

__all__ = ["edge_virial_to_halo_correction", "max_halo_width", "widened_halo"]

_EPS = 1e-6


def _remote_everywhere(batch: Batch, world_size: int, width: float, systems: set[int] | None) -> set[int]:
    """The systems in which every rank has at least one remote atom at this halo width."""
    part = partition_batch(batch, world_size, width)
    ok = set(range(batch.num_systems)) if systems is None else set(systems)
    for rank in part.ranks:
        for counts in rank.per_system:
            if counts["remote"] == 0:
                ok.discard(int(counts["system"]))
    return ok


def max_halo_width(batch: Batch, world_size: int, current: float) -> float:
    """The widest halo (Å, to 0.01 Å) at which every system that has remote atoms on every rank at
    `current` still has them; `current` when none has (nothing to keep), `inf` for one rank."""
    if world_size < 2:
        return math.inf
    keep = _remote_everywhere(batch, world_size, current, None)
    if not keep:
        return current
    lo, hi = current, max(current * 2.0, 1.0)
    while _remote_everywhere(batch, world_size, hi, keep) == keep:
        lo, hi = hi, hi * 2.0
        if hi > 1e7:
            return math.inf
    while hi - lo > 0.01:
        mid = 0.5 * (lo + hi)
        if _remote_everywhere(batch, world_size, mid, keep) == keep:
            lo = mid
        else:
            hi = mid
    return lo


def _measured_field(reference: Mapping[str, Any]) -> tuple[str, float | None]:
    """`("measured", Å)` for a field measured whole; a lower bound reads as `("lower bound", Å)`."""
    raw = reference.get("receptive_field") or {}
    status = str(raw.get("status", "not_measured"))
    depth, cutoff = raw.get("measured_depth"), raw.get("cutoff")
    if status == "measured" and depth and cutoff:
        return ("lower bound" if raw.get("lower_bound") else status), float(depth) * float(cutoff)
    return status, None


def widened_halo(
    spec: MLIPSpec,
    halo: Mapping[str, Any],
    reference: Mapping[str, Any],
    batch: Batch | None,
    world_size: int,
) -> tuple[MLIPSpec, str] | None:
    """The bounded `widen_halo` mutation (see the module docstring), or None when widening cannot help
    or would leave some rank holding a whole system."""
    policy = spec.distribution.policy
    current = halo.get("halo_width")
    if policy.kind != "halo" or current is None:
        return None
    current = float(current)
    required = halo.get("required_width")
    status, field = _measured_field(reference)
    needs = [float(required)] if required is not None else []
    if policy.scatter_mode == "local" and field is not None:
        needs.append(field)
    if needs and current + _EPS >= max(needs) and (policy.scatter_mode != "local" or status == "measured"):
        return None  # the halo covers what the model needs: a wider one changes nothing
    if needs and current + _EPS < max(needs):
        target = max(needs) + DEFAULT_SKIN
        why = f"the halo ({current:.4g} Å) is shallower than the model needs ({max(needs):.4g} Å"
        why += ", the receptive field measured in the reference)" if field is not None and field >= max(needs) else ")"
    elif policy.scatter_mode == "local":
        target = current * 2.0
        why = (
            f"atoms near the domain boundaries differ with a {current:.4g} Å halo and the receptive field could not "
            f"be measured ({status.replace('_', ' ')})"
        )
    else:
        return None
    bound = max_halo_width(batch, world_size, current) if batch is not None else math.inf
    capped = target > bound
    if capped:
        target = bound
    if target <= current + 0.01:
        return None
    fixed = spec.copy()
    fixed.distribution.policy.halo_width = round(target, 4)
    text = f"{why}; widened distribution.policy.halo_width to {fixed.distribution.policy.halo_width:.4g} Å"
    if capped:
        text += " (the widest halo at which every rank still misses part of every system)"
    return fixed, text


def _edge_gradients(reference: Mapping[str, Any], num_atoms: int) -> bool:
    """Whether the wrapper took autograd gradients with respect to per-edge vectors (`[E, 3]`, E ≠ atoms)."""
    shapes = reference.get("grad_input_shapes") or []
    return any(len(s) == 2 and s[1] == 3 and s[0] != num_atoms for s in shapes)


def edge_virial_to_halo_correction(
    spec: MLIPSpec, failing: list[str], reference: Mapping[str, Any], num_atoms: int
) -> tuple[MLIPSpec, str] | None:
    """Back to `halo_correction` for a per-edge-derivative model whose per-system outputs alone fail
    under `local` (see the module docstring); None unless the evidence is there: the policy is
    `local`, neighbours come from `batch.neighbor_list` (halo-aware), gradients were taken with
    respect to edge vectors, no per-node output fails and some per-graph or global one does."""
    policy = spec.distribution.policy
    if policy.kind != "halo" or policy.scatter_mode != "local" or not failing:
        return None
    kinds = spec.output_kinds
    if any(kinds.get(n) == "per_node" for n in failing):
        return None
    if not reference.get("neighbor_cutoffs") or not _edge_gradients(reference, num_atoms):
        return None
    fixed = spec.copy()
    fixed.distribution.policy.scatter_mode = "halo_correction"
    fixed.distribution.policy.halo_width = None
    names = ", ".join(failing)
    return fixed, (
        f"forces come from per-edge derivatives (autograd with respect to the edge vectors) and {names} from a "
        "per-atom virial: under local, half the virial of an owned atom's edge to a halo atom lands on the halo "
        "row, which the per-system sum drops as a copy; switched scatter_mode to halo_correction, where each edge "
        "lives on its owned centre's rank and halo halves are summed into their owners"
    )
