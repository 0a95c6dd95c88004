"""Per-edge → per-atom handlers: `halo_scatter_correction[<op>]` (scatter mode `halo_correction`) and
`halo_refresh[<op>]` (scatter mode `owned_complete`).

Under `halo_correction` every directed edge exists on exactly one rank, so an atom's aggregate over
its edges is spread over the ranks holding it: each copy holds a partial. Sums are completed by adding
the halo partials into their owners and refreshing the halo rows (`halo_reverse`, `halo_forward`);
means, maxima and minima by combining every copy's partial sum, count or extreme over ranks
(`combine_copies`), which also leaves every copy, halo rows included, with the atom's value.

Under `owned_complete` the wrapper builds its own graph over every local row and the halo is one
cutoff deep, so an owned atom's aggregate is already complete while a halo atom's misses the
neighbours beyond the halo. The aggregation runs as written (any reduce) and the halo rows are then
overwritten by their owners' values (`halo_forward`): nothing is summed across ranks, and in the
backward the gradient reaching a halo row is summed on its owner (the incomplete halo aggregate gets
none). Per-atom state that changes outside such an aggregation is never refreshed: that is the
policy's assumption, and a model that breaks it gives wrong numbers near the domain boundaries.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

from ..report.handler_counts import handler_count
from .context import RankContext
from .exchange import all_reduce_max, all_reduce_min, all_reduce_sum, halo_forward, halo_reverse
from .scatter_ops import Scatter

__all__ = [
    "REFRESH_MODES",
    "Exchange",
    "combine_copies",
    "count_route",
    "edge_to_atom",
    "is_edge_to_atom",
    "linear_exchange",
    "refresh_owned",
]

REFRESH_MODES = ("halo_correction", "owned_complete")
"""The scatter modes whose per-edge → per-atom aggregations the handlers complete on every rank."""


def is_edge_to_atom(ctx: RankContext, sc: Scatter) -> bool:
    """Whether `sc` aggregates per-edge values into this rank's per-atom rows under a scatter mode that
    completes them (`halo_correction`, `owned_complete`)."""
    if ctx.scatter_mode not in REFRESH_MODES or not ctx.distributed:
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


Exchange = Callable[[torch.Tensor], torch.Tensor]
"""A handler's map of this rank's own aggregate to the aggregate it returns."""


def linear_exchange(ctx: RankContext, sc: Scatter) -> tuple[torch.Tensor, Exchange] | None:
    """`(local, exchange)`: this rank's own aggregate of `sc` and the map the handler applies to it, when
    that map is linear in it (so `runtime.autograd_functions` can take its adjoint): any reduce under
    `owned_complete` (a refresh), a sum under `halo_correction`; None otherwise (mean, amax, amin, prod
    combine copies nonlinearly). The handler's result is `exchange(local)`; nothing is counted here."""
    target, index, src = sc.target, sc.index, sc.src
    if ctx.scatter_mode == "owned_complete":
        # on a copy: an in-place form later writes the result into the target, which autograd may have saved
        local = target.clone().scatter_reduce(0, index, src, sc.reduce, include_self=sc.include_self)
        return local, lambda p: halo_forward(p, ctx)
    if sc.reduce != "sum":
        return None
    zero = torch.zeros_like(target)
    local = zero.scatter_add(0, index, src)
    if sc.include_self:
        return local, lambda p: halo_forward(target + halo_reverse(p, ctx), ctx)
    count = combine_copies(ctx, zero.scatter_add(0, index, torch.ones_like(src)), "sum")
    return local, lambda p: torch.where(count > 0, combine_copies(ctx, p, "sum"), target)


def count_route(ctx: RankContext, sc: Scatter) -> None:
    """Count one routed per-edge → per-atom `sc` under its handler's name."""
    if ctx.scatter_mode == "owned_complete":
        ctx.count(handler_count("halo_refresh", sc.name))
        ctx.count(handler_count("halo_read"))
        return
    ctx.count(handler_count("halo_scatter_correction", sc.name))
    if sc.reduce == "sum" and sc.include_self:
        ctx.count(handler_count("halo_read"))


def refresh_owned(ctx: RankContext, sc: Scatter) -> torch.Tensor:
    """`owned_complete`: `sc` computed on this rank's rows (complete for owned atoms), then every halo
    row overwritten by its owner's value (differentiable; see the module docstring)."""
    count_route(ctx, sc)
    found = linear_exchange(ctx, sc)
    assert found is not None  # every reduce has one under owned_complete
    local, exchange = found
    return exchange(local)


def edge_to_atom(ctx: RankContext, sc: Scatter) -> torch.Tensor | None:
    """The single-process result of the per-edge → per-atom `sc`, or None for `prod` under
    `halo_correction` (a product of partials has no exchange here)."""
    if ctx.scatter_mode == "owned_complete":
        return refresh_owned(ctx, sc)
    count_route(ctx, sc)
    if sc.reduce not in ("sum", "mean", "amax", "amin"):
        return None
    found = linear_exchange(ctx, sc)
    if found is not None:
        local, exchange = found
        return exchange(local)
    target, index, src = sc.target, sc.index, sc.src
    zero = torch.zeros_like(target)
    count = combine_copies(ctx, zero.scatter_add(0, index, torch.ones_like(src)), "sum")
    if sc.reduce == "mean":
        total = combine_copies(ctx, zero.scatter_add(0, index, src), "sum")
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
