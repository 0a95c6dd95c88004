"""Spec inference: the wrapper's own spec is the prior; what it leaves out is read off the reference.

- output kinds from shapes (`[N, …]` per_node, `[B, …]` per_graph, else global);
- per-node outputs that are not autograd-derived (charges) are read from owned rows only; autograd
  outputs (forces) are summed over copies;
- per-graph autograd outputs other than the energy (strain stress) are per-rank partials: all-reduced;
- `scatter_mode`: `halo_correction` when neighbours come from `batch.neighbor_list` (halo-aware),
  `owned_complete` when the wrapper aggregates over edges it found itself (a backbone that builds its
  own graph: with a one-cutoff halo its owned atoms see complete neighbourhoods, and the halo rows are
  refreshed from their owners after each aggregation; auto-fix moves to `local` when the outputs say
  some per-atom state escapes those aggregations), and
  `local` when it passes messages more than once (`num_interactions` > 1) but none of its
  neighbour aggregations is a scatter the runtime can correct (AIMNet2 sums over a padded
  neighbour matrix), so halo rows could never be refreshed between layers;
- `system_reductions` on (the handler is exact whether or not the wrapper reduces per system).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import orjson

from ..runtime.consolidate import infer_output_kind
from ..spec import MLIPSpec

__all__ = ["infer_spec"]


_ALL_FIELDS = {
    "output_kinds",
    "all_reduce_outputs",
    "owned_only_outputs",
    "system_reductions",
    "policy.scatter_mode",
    "policy.kind",
    "policy.halo_width",
}


def _prior(raw: Any) -> tuple[MLIPSpec, set[str]]:
    """The prior spec and which of its fields were given (the rest may be inferred)."""
    if raw is None:
        return MLIPSpec(), set()
    if isinstance(raw, (str, os.PathLike)):
        raw = orjson.loads(Path(raw).read_bytes()) if Path(raw).exists() else raw
    if isinstance(raw, dict):
        explicit = set(raw)
        policy = (raw.get("distribution") or {}).get("policy")
        if isinstance(policy, dict):
            explicit |= {f"policy.{k}" for k in policy}
        return MLIPSpec.from_dict(raw), explicit
    return MLIPSpec.coerce(raw), set(_ALL_FIELDS)


def infer_spec(
    reference: dict[str, Any], num_atoms: int, num_systems: int, prior: Any = None
) -> tuple[MLIPSpec, list[str]]:
    """The spec to validate first, and one note per inferred (not given) field.

    `prior` (a spec, dict or path) replaces the wrapper's `distribution_spec`; the fields it leaves
    out are inferred. An `MLIPSpec` object counts as complete.
    """
    info = reference["wrapper"]
    spec, explicit = _prior(prior if prior is not None else info.get("distribution_spec"))
    notes: list[str] = []
    outputs = reference["outputs"]
    derived: dict[str, bool] = reference.get("autograd_derived", {})
    given_kinds = dict(info.get("output_kinds") or {})
    for name, value in outputs.items():
        if name in spec.output_kinds:
            continue
        kind = given_kinds.get(name) or infer_output_kind(value, num_atoms, num_systems)
        spec.output_kinds[name] = kind
        notes.append(f"output_kinds.{name} = {kind} (from its shape {list(value.shape)})")
    if "owned_only_outputs" not in explicit:
        for name, kind in spec.output_kinds.items():
            if kind == "per_node" and not derived.get(name, False) and name not in spec.owned_only_outputs:
                spec.owned_only_outputs.append(name)
                notes.append(f"{name} is per-node and not autograd-derived: read from owned rows only")
    if "all_reduce_outputs" not in explicit:
        for name, kind in spec.output_kinds.items():
            # a global output of a one-system batch ([3, 3] against a [1, 3, 3] strain) is per graph too
            if kind in ("per_graph", "global") and derived.get(name, False) and name not in spec.all_reduce_outputs:
                spec.all_reduce_outputs.append(name)
                notes.append(f"{name} is a per-graph autograd output (a per-rank partial): all-reduced")
    if "policy.scatter_mode" not in explicit:
        counts: dict[str, int] = reference.get("counts", {})
        aggregates = sum(v for k, v in counts.items() if k.startswith("edge_aggregation"))
        measured = (reference.get("receptive_field") or {}).get("measured_depth")
        depth = max(int(info.get("num_interactions") or 1), int(measured or 0))
        if aggregates and not reference.get("neighbor_cutoffs"):
            spec.distribution.policy.scatter_mode = "owned_complete"
            notes.append(
                "the wrapper aggregates over edges it did not get from batch.neighbor_list (it builds its own "
                "graph): scatter_mode = owned_complete (a one-cutoff halo whose rows are refreshed from their "
                "owners after each aggregation, instead of local's halo as deep as the receptive field)"
            )
        elif not aggregates and reference.get("neighbor_cutoffs") and depth > 1:
            spec.distribution.policy.scatter_mode = "local"
            notes.append(
                f"the wrapper passes messages {depth} times but none of its neighbour aggregations is a scatter "
                "the runtime can correct (e.g. sums over a padded neighbour matrix): scatter_mode = local"
            )
        else:
            notes.append(f"scatter_mode = {spec.distribution.policy.scatter_mode}")
    return spec, notes
