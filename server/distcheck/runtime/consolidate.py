"""Turning per-rank outputs into global outputs, per output kind, in global atom order."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..spec import MLIPSpec
from . import pristine as P
from .model import WrapperError

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


@P.shielded()
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
    outputs taken from rank 0 (0.0 when every rank agrees). Computed through `pristine` (none of it
    goes through a torch function the user's code may have replaced).

    Outputs that cannot be combined raise `WrapperError` naming the output and the rank: an output
    some ranks returned and others did not, a per-node output without one row per local atom, an
    all-reduced output whose shape differs between ranks, values torch cannot add up.
    """
    if not rank_outputs:
        raise ValueError("no rank outputs to consolidate")
    names = list(rank_outputs[0].keys())
    _check_same_names(rank_outputs, names)
    outputs: dict[str, torch.Tensor] = {}
    kinds: dict[str, str] = {}
    spread: dict[str, float] = {}
    for name in names:
        first = rank_outputs[0][name]
        declared = spec.output_kinds.get(name)
        kind = declared or infer_output_kind(first, int(rows[0].local_ids.shape[0]), num_systems)
        kinds[name] = kind
        values = [out[name] for out in rank_outputs]
        why = f"output_kinds.{name} is {kind}" if declared else f"{name} is {kind} by rank 0's shape"
        try:
            if kind == "per_node":
                outputs[name] = _per_node(name, values, rows, spec, num_atoms, why)
            elif name in spec.all_reduce_outputs:
                _check_same_shape(name, values, "all-reduced (all_reduce_outputs)")
                outputs[name] = P.sum(P.stack(values), dim=0)
            else:
                outputs[name] = P.clone(first)
                spread[name] = max((_spread(v, first) for v in values[1:]), default=0.0)
        except RuntimeError as exc:  # dtypes or devices torch cannot combine
            raise WrapperError(
                f"output {name!r} cannot be combined over the ranks ({_shapes(values)}): {exc}; return the "
                "same dtype and trailing shape on every rank",
                output=name,
            ) from exc
    return Consolidated(outputs=outputs, kinds=kinds, replica_spread=spread)


def _check_same_names(rank_outputs: Sequence[Mapping[str, torch.Tensor]], names: Sequence[str]) -> None:
    expected = set(names)
    for r, out in enumerate(rank_outputs[1:], start=1):
        got = set(out)
        if got == expected:
            continue
        missing, extra = sorted(expected - got), sorted(got - expected)
        name, who, whose = (missing[0], f"rank {r}", "rank 0") if missing else (extra[0], "rank 0", f"rank {r}")
        raise WrapperError(
            f"output {name!r} came from {whose} but not from {who} (rank 0 returned {sorted(expected)}, rank {r} "
            f"{sorted(got)}); the wrapper must return the same outputs on every rank, whatever atoms the rank "
            "holds",
            output=name,
            rank=r,
        )


def _per_node(
    name: str,
    values: Sequence[torch.Tensor],
    rows: Sequence[RankRows],
    spec: MLIPSpec,
    num_atoms: int,
    why: str,
) -> torch.Tensor:
    """One row per global atom: each atom's owned row, or the sum of its copies' rows."""
    for r, (val, rr) in enumerate(zip(values, rows)):
        n_local = int(rr.local_ids.shape[0])
        if val.ndim == 0 or val.shape[0] != n_local:
            got = "a scalar" if val.ndim == 0 else f"shape {list(val.shape)}"
            raise WrapperError(
                f"output {name!r} is per-node ({why}) but rank {r} returned {got} for its {n_local} atoms: a "
                f"per-node output needs one row per atom of the batch the wrapper is given ({n_local} rows on "
                f"rank {r}, batch.num_atoms); return one row per atom, or set output_kinds.{name} to per_graph or "
                "global if it is not per atom",
                output=name,
                rank=r,
            )
    _check_same_shape(name, values, "per-node", trailing=True)
    first = values[0]
    glob = P.new_zeros(first, (num_atoms, *first.shape[1:]))
    for val, rr in zip(values, rows):
        if name in spec.owned_only_outputs:
            P.setitem(glob, P.getitem(rr.local_ids, rr.owned_mask), P.getitem(val, rr.owned_mask))
        else:
            P.index_add_(glob, 0, rr.local_ids, val)
    return glob


def _check_same_shape(name: str, values: Sequence[torch.Tensor], what: str, *, trailing: bool = False) -> None:
    """Every rank's value has rank 0's shape (past the first dimension when `trailing`)."""
    first = values[0]
    for r, val in enumerate(values[1:], start=1):
        if (val.shape[1:] != first.shape[1:]) if trailing else (val.shape != first.shape):
            part = "trailing shape" if trailing else "shape"
            a, b = (list(first.shape[1:]), list(val.shape[1:])) if trailing else (list(first.shape), list(val.shape))
            raise WrapperError(
                f"output {name!r} is {what} but its {part} is {a} on rank 0 and {b} on rank {r}; return the same "
                f"{part} on every rank (sizes from batch.num_systems, not from the atoms a rank holds)",
                output=name,
                rank=r,
            )


def _shapes(values: Sequence[torch.Tensor]) -> str:
    return ", ".join(f"rank {r}: {str(v.dtype).removeprefix('torch.')} {list(v.shape)}" for r, v in enumerate(values))


def _spread(value: torch.Tensor, reference: torch.Tensor) -> float:
    if value.shape != reference.shape:
        return float("inf")
    if P.numel(value) == 0:
        return 0.0
    return P.float_of(P.amax(P.abs(P.sub(P.to(value, P.float64), P.to(reference, P.float64)))))
