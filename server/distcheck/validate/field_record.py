"""The receptive-field measurement as the validator uses it: the typed record (`receptive_record`), the
depth a halo must cover (`effective_depth`) and the halo set from the measured field before the
first run (`apply_measured_field`). No torch here; `receptive` measures.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ..report import ReceptiveField
from ..runtime.model import DEFAULT_SKIN
from ..spec import MLIPSpec

__all__ = ["apply_measured_field", "effective_depth", "receptive_record"]


def receptive_record(reference: Mapping[str, Any]) -> ReceptiveField | None:
    """The typed record of the reference's measurement (None when the reference carries none): the
    measured field is the longer cutoff's (declared depth × the cutoff the reach implies) when that
    explains the reach, else measured depth × cutoff."""
    raw = reference.get("receptive_field")
    if not isinstance(raw, Mapping):
        return None
    info = reference.get("wrapper") or {}
    declared = info.get("num_interactions")
    cutoff = raw.get("cutoff")
    measured = raw.get("measured_depth")
    depth = int(declared) if declared else 1
    remedy = str(raw.get("remedy") or "none")
    field = raw.get("field")
    if field is None and measured is not None and cutoff is not None:
        field = float(cutoff) * int(measured)
    suggested = raw.get("suggested_cutoff")
    return ReceptiveField(
        status=str(raw.get("status", "not_measured")),
        cutoff=None if cutoff is None else float(cutoff),
        declared_depth=None if declared is None else int(declared),
        declared_field=None if cutoff is None else float(cutoff) * depth,
        measured_depth=None if measured is None else int(measured),
        measured_field=None if field is None else float(field),
        basis=str(raw.get("basis", "")),
        probes=int(raw.get("probes", 0)),
        under_declared=remedy == "cutoff" or (measured is not None and int(measured) > depth),
        note=str(raw.get("note", "")),
        lower_bound=bool(raw.get("lower_bound", False)),
        reach_hops=None if raw.get("reach_hops") is None else int(raw["reach_hops"]),
        reach_angstrom=None if raw.get("reach_angstrom") is None else float(raw["reach_angstrom"]),
        noise_floor=None if raw.get("noise_floor") is None else float(raw["noise_floor"]),
        remedy=remedy,
        suggested_cutoff=None if suggested is None else float(suggested),
    )


def effective_depth(reference: Mapping[str, Any]) -> int | None:
    """The depth the halo must cover: the declared `num_interactions`, or the measured depth when larger
    (None when neither is known). A reach a longer cutoff explains keeps the declared depth (the
    measurement's `measured_depth` is then the declared one)."""
    declared = (reference.get("wrapper") or {}).get("num_interactions")
    measured = (reference.get("receptive_field") or {}).get("measured_depth")
    known = [int(d) for d in (declared, measured) if d]
    return max(known) if known else None


def apply_measured_field(spec: MLIPSpec, field: ReceptiveField | None) -> tuple[MLIPSpec, str | None]:
    """The spec to run first and a note: under `local`, an under-declared field (a depth, or a cutoff,
    too small) sets `halo_width` to the measured field plus the skin (the field is the reach in Å
    when a longer cutoff explains it, not hops × the declared cutoff), unless the spec gives
    `halo_width` already (only a prior sets it: inference never does), which is then only flagged
    (halo completeness reports it and auto-fix widens it). `field.halo_width_set` records the change."""
    policy = spec.distribution.policy
    if field is None or not field.under_declared or field.measured_field is None:
        return spec, None
    if policy.kind != "halo" or policy.scatter_mode != "local":
        return spec, None
    if policy.halo_width is not None:
        return spec, None
    width = round(field.measured_field + DEFAULT_SKIN, 6)
    fixed = spec.copy()
    fixed.distribution.policy.halo_width = width
    field.halo_width_set = width
    declared = f"num_interactions = {field.declared_depth or 1} ({field.declared_field:g} Å)"
    if field.remedy == "cutoff":
        return fixed, (
            f"the wrapper declares {declared} but the reference shows {field.basis} moving atoms up to "
            f"{field.reach_angstrom:g} Å from a displaced one, which a cutoff of "
            f"{field.measured_field / (field.declared_depth or 1):.4g} Å explains (not more hops): halo_width set to "
            f"{width:g} Å before the first run"
        )
    return fixed, (
        f"the wrapper declares {declared} but "
        f"the reference shows {field.measured_depth} hops ({field.measured_field:g} Å, from {field.basis}): "
        f"halo_width set to {width:g} Å before the first run"
    )
