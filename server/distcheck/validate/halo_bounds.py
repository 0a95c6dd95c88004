"""Bounded auto-fix: how far a halo may be widened, and the rule back from `local` for per-edge virials.

`widen_halo` must never make a validation degenerate by its own doing, nor widen past what can
help. `widened_halo` therefore aims at what the model needs (the halo completeness' required width,
or under `local` the receptive field measured in the reference, whichever is larger, plus the skin),
proposes nothing once the halo already covers it, and never goes past `max_halo_width`: the widest
halo at which every rank still has remote atoms in every system that had some (a rank holding a
whole system tests nothing about domain boundaries). Only when the field is unknown (not measured,
or unbounded because a per-system quantity feeds back into every atom) does it double the halo
under `local`, still within that bound, and says how many interactions of the declared cutoff the
wider halo holds (if it passes, `report.halo_depth` reads the depth off it).

`edge_virial_to_halo_correction`: a model whose forces come from per-edge derivatives (autograd with
respect to the edge vectors) and whose stress comes from a per-atom virial split over both atoms of
an edge cannot pass stress under `local`: an owned energy's edge to a halo atom puts half its virial
on the halo row, which the per-system sum reads as a copy and drops. Under `halo_correction` every
edge lives on its owned centre's rank and the halo halves are summed into their owners, so stress
is right there; the rule switches back when forces pass and only per-system outputs fail.

Every rule that picks a halo states the width it runs with. `local_halo` is the one derivation of a
`local` halo from what was measured (the deeper of the declared and measured depths × the cutoff, or
the reach measured in Å when that is farther, plus the skin); `degenerate_halo` says why a wider halo
would leave some rank holding a whole system, and a rule whose halo would is skipped (`Skip`), never
tried: the report records why (`report.SkippedFix`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..batch import Batch
from ..runtime.model import DEFAULT_SKIN
from ..runtime.partition import partition_batch
from ..spec import MLIPSpec

__all__ = [
    "LocalHalo",
    "Skip",
    "degenerate_halo",
    "edge_virial_to_halo_correction",
    "local_halo",
    "max_halo_width",
    "one_cutoff_words",
    "to_local",
    "widened_halo",
]

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


@dataclass(frozen=True)
class Skip:
    """A rule with evidence whose fix is not tried: `reason` says why and what would let it run;
    `halo_width` (Å) is the halo it would have needed."""

    reason: str
    halo_width: float | None = None


def degenerate_halo(batch: Batch | None, world_size: int, width: float | None, current: float | None) -> str | None:
    """Why a halo of `width` Å, widened from `current`, would make the partition degenerate by the fix's
    own doing (some system that had remote atoms on every rank at `current` would be held whole by a
    rank), with the widest halo that would not and what to do; None when it would not (or cannot be
    told: no sample, one rank, a width unknown or no wider than `current`)."""
    if batch is None or world_size < 2 or width is None or current is None or width <= current + _EPS:
        return None
    keep = _remote_everywhere(batch, world_size, current, None)
    lost = keep - _remote_everywhere(batch, world_size, width, keep)
    if not lost:
        return None
    bound = max_halo_width(batch, world_size, current)
    names = ", ".join(str(i) for i in sorted(lost))
    return (
        f"a {width:.4g} Å halo would leave a rank holding system{'s' if len(lost) > 1 else ''} {names} whole (no "
        f"remote atom), so the attempt could prove nothing (the widest halo that keeps remote atoms on every rank "
        f"is {bound:.4g} Å); validate with a larger sample (longer along one axis) or fewer ranks"
    )


@dataclass(frozen=True)
class LocalHalo:
    """The halo `local` needs: `width` (Å; None when the wrapper declares no cutoff, so the runtime's
    derivation stands), `words` how it follows from what was measured, and `spec_width`, what the spec
    sets (None when the width is what the runtime derives from the declared depth anyway)."""

    width: float | None
    words: str
    spec_width: float | None


def _wrapper_number(reference: Mapping[str, Any], key: str) -> float | None:
    value = (reference.get("wrapper") or {}).get(key)
    return None if value is None or isinstance(value, bool) else float(value)


def local_halo(reference: Mapping[str, Any]) -> LocalHalo:
    """The halo `local` needs, from the reference (see the module docstring): the deeper of the
    wrapper's `num_interactions` and the measured depth, times the cutoff, or the measured reach in Å
    when it is farther, plus the skin."""
    raw = reference.get("receptive_field") or {}
    declared = int(_wrapper_number(reference, "num_interactions") or 1)
    cutoff = _wrapper_number(reference, "cutoff")
    if cutoff is None and raw.get("cutoff") is not None:
        cutoff = float(raw["cutoff"])
    if cutoff is None:
        return LocalHalo(None, f"derived from the wrapper ({declared} interaction(s), no cutoff declared)", None)
    measured = int(raw.get("measured_depth") or 0) if raw.get("status") == "measured" else 0
    reach = raw.get("reach_angstrom") if raw.get("status") == "measured" else None
    depth = max(declared, measured, 1)
    where = "measured" if measured > declared else "declared"
    need, words = depth * cutoff, f"{depth} × {cutoff:.4g} Å ({where} depth × cutoff)"
    if reach is not None and float(reach) > need + _EPS:
        need, words = float(reach), f"{float(reach):.4g} Å (the reach measured in the reference)"
    width = round(need + DEFAULT_SKIN, 4)
    derived = round(declared * cutoff + DEFAULT_SKIN, 4)
    words = f"{width:.4g} Å = {words} + {DEFAULT_SKIN:g} Å skin"
    return LocalHalo(width, words, None if abs(width - derived) <= _EPS else width)


def one_cutoff_words(reference: Mapping[str, Any]) -> str:
    """The one-cutoff halo `halo_correction` and `owned_complete` run with, as a message states it."""
    cutoff = _wrapper_number(reference, "cutoff")
    if cutoff is None:
        return "a one-cutoff halo"
    return f"a {cutoff + DEFAULT_SKIN:.4g} Å halo (one cutoff, {cutoff:.4g} Å, + {DEFAULT_SKIN:g} Å skin)"


def to_local(
    spec: MLIPSpec, reference: Mapping[str, Any], batch: Batch | None, world_size: int, current: float | None
) -> tuple[MLIPSpec, str] | Skip:
    """`spec` switched to scatter mode `local` with the halo `local_halo` gives, and that halo in words;
    a `Skip` when that halo, wider than `current` (the attempt's), would make the partition degenerate
    (`degenerate_halo`)."""
    halo = local_halo(reference)
    reason = degenerate_halo(batch, world_size, halo.width, current)
    if reason is not None:
        return Skip(f"switching scatter_mode to local needs a halo of {halo.words}, but {reason}", halo.width)
    fixed = spec.copy()
    fixed.distribution.policy.scatter_mode = "local"
    fixed.distribution.policy.halo_width = halo.spec_width
    return fixed, halo.words


def _measured_field(reference: Mapping[str, Any]) -> tuple[str, float | None]:
    """`("measured", Å)` for a field measured whole (depth × cutoff, or the reach in Å when farther); a
    lower bound reads as `("lower bound", Å)`."""
    raw = reference.get("receptive_field") or {}
    status = str(raw.get("status", "not_measured"))
    depth, cutoff = raw.get("measured_depth"), raw.get("cutoff")
    if status == "measured" and depth and cutoff:
        reach = float(raw.get("reach_angstrom") or 0.0)
        return ("lower bound" if raw.get("lower_bound") else status), max(float(depth) * float(cutoff), reach)
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
    cutoff = _wrapper_number(reference, "cutoff")
    fits = math.floor(target / cutoff + _EPS) if cutoff else 0
    if field is None and policy.scatter_mode == "local" and cutoff and fits >= 1:
        text += f", which holds {fits} interaction(s) of the declared {cutoff:.4g} Å cutoff ({fits * cutoff:.4g} Å)"
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
        f"lives on its owned centre's rank and halo halves are summed into their owners ({one_cutoff_words(reference)})"
    )
