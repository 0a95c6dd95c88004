"""Per-edge → per-atom handler (`halo_scatter_correction[<op>]`, scatter mode `halo_correction`).

Under `halo_correction` every directed edge exists on exactly one rank, so an atom's aggregate over
its edges is spread over the ranks holding it: each copy holds a partial. Sums are completed by adding
the halo partials into their owners and refreshing the halo rows (`halo_reverse`, `halo_forward`);
means, maxima and minima by combining every copy's partial sum, count or extreme over ranks
(`combine_copies`), which also leaves every copy, halo rows included, with the atom's value.
"""

from __future__ import annotations

import math

import torch

from .context import RankContext
from .exchange import all_reduce_max, all_reduce_min, all_reduce_sum, halo_forward, halo_reverse
from .scatter_ops import Scatter

__all__ = ["combine_copies", "edge_to_atom", "is_edge_to_atom"]


def is_edge_to_atom(ctx: RankContext, sc: Scatter) -> bool:
    """Whether `sc` aggregates per-edge values into this rank's per-atom rows under `halo_correction`."""
    if ctx.scatter_mode != "halo_correction" or not ctx.distributed:
        return False
    n = ctx.num_local
    return int(sc.target.shape[0]) == n and int(sc.rows_index.shape[0]) != n and n != ctx.num_systems


def combine_copies(ctx: RankContext, x: torch.Tensor, op: str) -> torch.Tensor:
    """Per-atom `x` whose every copy holds a partial: each row becomes the `op` (`sum`, `max`, `min`)
    of all copies of its atom over ranks (differentiable)."""
    ids = ctx.local_ids.to(x.device)
    shape = (ctx.num_global_atoms, *x.shape[1:])
    if op == "sum":
        return all_reduce_sum(x.new_zeros(shape).index_add(0, ids, x), ctx)[ids]
    fill = -math.inf if op == "max" else math.inf
    buf = x.new_full(shape, fill).index_put((ids,), x)
    return (all_reduce_max(buf, ctx) if op == "max" else all_reduce_min(buf, ctx))[ids]


def edge_to_atom(ctx: RankContext, sc: Scatter) -> torch.Tensor | None:
    """The single-process result of the per-edge → per-atom `sc`, or None for `prod`."""
    ctx.count(f"halo_scatter_correction[{sc.name}]")
    target, index, src = sc.target, sc.index, sc.src
    zero = torch.zeros_like(target)
    if sc.reduce == "sum" and sc.include_self:
        ctx.count("halo_read")
        return halo_forward(target + halo_reverse(zero.scatter_add(0, index, src), ctx), ctx)
    if sc.reduce not in ("sum", "mean", "amax", "amin"):
        return None
    count = combine_copies(ctx, zero.scatter_add(0, index, torch.ones_like(src)), "sum")
    if sc.reduce in ("sum", "mean"):
        total = combine_copies(ctx, zero.scatter_add(0, index, src), "sum")
        if sc.reduce == "sum":
            return torch.where(count > 0, total, target)
        if sc.include_self:
            return (target + total) / (count + 1)
        return torch.where(count > 0, total / count.clamp(min=1), target)
    is_max = sc.reduce == "amax"
    fill = -math.inf if is_max else math.inf
    part = torch.full_like(target, fill).scatter_reduce(0, index, src, sc.reduce, include_self=True)
    glob = combine_copies(ctx, part, "max" if is_max else "min")
    if sc.include_self:
        return torch.maximum(target, glob) if is_max else torch.minimum(target, glob)
    return torch.where(count > 0, glob, target)
