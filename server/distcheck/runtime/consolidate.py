"""Turning per-rank outputs into global outputs, per output kind, in global atom order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..spec import MLIPSpec

__all__ = ["Consolidated", "RankRows", "consolidate", "infer_output_kind"]


@dataclass(frozen=True)
class RankRows:
    """Which global atom each local row of a rank is, and whether the rank owns it."""

    local_ids: torch.Tensor
    owned_mask: torch.Tensor


@dataclass
class Consolidated:
    """Global outputs, the kind used for each, and how far replicated values differed across ranks."""

    outputs: dict[str, torch.Tensor]
    kinds: dict[str, str]
    replica_spread: dict[str, float]


def infer_output_kind(value: torch.Tensor, num_local: int, num_systems: int) -> str:
    """Kind from shape: `(n_local, …)` → per_node, `(n_systems, …)` → per_graph, otherwise global."""
    if value.ndim >= 1 and value.shape[0] == num_local and num_local != num_systems:
        return "per_node"
    if value.ndim >= 1 and value.shape[0] == num_systems:
        return "per_graph"
    return "global"


def consolidate(
    rank_outputs: Sequence[Mapping[str, torch.Tensor]],
    rows: Sequence[RankRows],
    spec: MLIPSpec,
    num_atoms: int,
    num_systems: int,
) -> Consolidated:
    """Combine rank outputs under `spec`.

    per_graph: the replicated value of rank 0 (or the sum over ranks for `all_reduce_outputs`);
    per_node: each atom's owned row (`owned_only_outputs`) or the sum of all its copies' rows;
    global: rank 0's value. `replica_spread[name]` is the largest difference between ranks for
    outputs taken from rank 0 (0.0 when every rank agrees).
    """
    if not rank_outputs:
        raise ValueError("no rank outputs to consolidate")
    names = list(rank_outputs[0].keys())
    for r, out in enumerate(rank_outputs):
        if list(out.keys()) != names:
            raise ValueError(f"rank {r} returned outputs {sorted(out)} but rank 0 returned {sorted(names)}")
    outputs: dict[str, torch.Tensor] = {}
    kinds: dict[str, str] = {}
    spread: dict[str, float] = {}
    for name in names:
        first = rank_outputs[0][name]
        kind = spec.output_kinds.get(name) or infer_output_kind(first, int(rows[0].local_ids.shape[0]), num_systems)
        kinds[name] = kind
        values = [out[name] for out in rank_outputs]
        if kind == "per_node":
            glob = first.new_zeros((num_atoms, *first.shape[1:]))
            for r, (val, rr) in enumerate(zip(values, rows)):
                if val.shape[0] != rr.local_ids.shape[0]:
                    raise ValueError(
                        f"output {name!r} is declared per_node but rank {r} returned {val.shape[0]} rows "
                        f"for {rr.local_ids.shape[0]} atoms; fix output_kinds.{name}"
                    )
                if name in spec.owned_only_outputs:
                    glob[rr.local_ids[rr.owned_mask]] = val[rr.owned_mask]
                else:
                    glob.index_add_(0, rr.local_ids, val)
            outputs[name] = glob
        elif name in spec.all_reduce_outputs:
            outputs[name] = torch.stack(values).sum(dim=0)
        else:
            outputs[name] = first.clone()
            spread[name] = max((_spread(v, first) for v in values[1:]), default=0.0)
    return Consolidated(outputs=outputs, kinds=kinds, replica_spread=spread)


def _spread(value: torch.Tensor, reference: torch.Tensor) -> float:
    if value.shape != reference.shape:
        return float("inf")
    if value.numel() == 0:
        return 0.0
    return float((value.to(torch.float64) - reference.to(torch.float64)).abs().max())
