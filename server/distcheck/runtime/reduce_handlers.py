"""Per-atom → per-system handlers (`per_system_reduce`, `per_system_broadcast`).

Each masks the halo rows out (a halo atom is owned, and counted, by another rank), reduces this
rank's owned partial and all-reduces it, with differentiable collectives, so values and gradients are
the single-process ones. Covered: scatter-like ops keyed by the system index (`scatter_ops`),
`segment_reduce` with per-system `lengths` or `offsets`, `bincount` and `unique`/`unique_consecutive`
counts of the system index (global counts), `sum`/`mean` over the atoms of any batch (the total over
every atom of every system, as in one process), the same over a boolean-mask selection of atoms
(`e[batch == s].sum()`: the tag of `scatter_ops.AtomRows`), and `repeat_interleave` of per-system
values by per-system counts (this rank's counts).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

from ..report.handler_counts import handler_count
from .context import RankContext
from .exchange import all_reduce_max, all_reduce_min, all_reduce_sum
from .scatter_ops import Scatter, atom_rows

__all__ = [
    "atom_total",
    "bincount",
    "is_system_index",
    "linear_system_exchange",
    "local_lengths",
    "mask_rows",
    "per_system_scatter",
    "repeat_interleave",
    "segment_reduce",
    "unique_systems",
]


def _bind(args: Sequence[Any], kwargs: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    out = dict(zip(names, args))
    out.update(kwargs)
    return out


def is_system_index(ctx: RankContext, index: Any) -> bool:
    """Whether `index` (or its first column) is this rank's system index of its atom rows."""
    sys_idx = ctx.system_index
    if sys_idx is None or not isinstance(index, torch.Tensor) or index.ndim < 1:
        return False
    if index is sys_idx:
        return True
    if index.shape[0] != sys_idx.shape[0] or index.dtype != sys_idx.dtype:
        return False
    col = index if index.ndim == 1 else index.reshape(index.shape[0], -1)[:, 0]
    return bool(torch.equal(col.to(sys_idx.device), sys_idx))


def mask_rows(ctx: RankContext, x: torch.Tensor, fill: float = 0.0, owned: torch.Tensor | None = None) -> torch.Tensor:
    """`x` with the rows of atoms this rank does not own set to `fill` (differentiable)."""
    mask = owned.to(x.device) if owned is not None else ctx.row_mask(int(x.shape[0]), x)
    shape = (x.shape[0],) + (1,) * (x.ndim - 1)
    return torch.where(mask.reshape(shape), x, torch.full_like(x, fill))


def system_owned(ctx: RankContext, sc: Scatter) -> torch.Tensor | None:
    """The owned mask of the scatter's source rows when they are atoms keyed by their system (all the
    rank's atoms, or a boolean-mask selection of them), else None."""
    if is_system_index(ctx, sc.rows_index) and sc.src.shape[0] == ctx.num_local:
        return ctx.owned_mask
    rows = atom_rows(sc.src)
    if rows is not None and torch.equal(sc.rows_index.to(rows.systems.device), rows.systems):
        return rows.owned
    return None


def linear_system_exchange(
    ctx: RankContext, sc: Scatter, owned: torch.Tensor
) -> tuple[torch.Tensor, Callable[[torch.Tensor], torch.Tensor]] | None:
    """`(local, exchange)` for a per-system sum or mean: this rank's sum over its owned source rows
    and the map (linear in it: all-reduce, then the mean's division by the global count) that gives
    the single-process result; None for any other reduce."""
    if sc.reduce not in ("sum", "mean"):
        return None
    target, index = sc.target, sc.index
    zeros = torch.zeros_like(target)
    local = zeros.scatter_add(0, index, mask_rows(ctx, sc.src, owned=owned))
    ones = mask_rows(ctx, torch.ones_like(sc.src), owned=owned)
    count = all_reduce_sum(zeros.scatter_add(0, index, ones), ctx)
    if sc.reduce == "sum" and sc.include_self:
        return local, lambda p: target + all_reduce_sum(p, ctx)
    if sc.reduce == "sum":
        return local, lambda p: torch.where(count > 0, all_reduce_sum(p, ctx), target)
    if sc.include_self:
        return local, lambda p: (target + all_reduce_sum(p, ctx)) / (count + 1)
    return local, lambda p: torch.where(count > 0, all_reduce_sum(p, ctx) / count.clamp(min=1), target)


def per_system_scatter(ctx: RankContext, sc: Scatter, owned: torch.Tensor) -> torch.Tensor | None:
    """The single-process result of `sc` into a per-system target, or None for a reduce with no
    distributed form (`prod`)."""
    target, index = sc.target, sc.index
    linear = linear_system_exchange(ctx, sc, owned)
    if linear is not None:
        local, exchange = linear
        return exchange(local)
    if sc.reduce in ("amax", "amin"):
        is_max = sc.reduce == "amax"
        fill = -math.inf if is_max else math.inf
        part = torch.full_like(target, fill).scatter_reduce(
            0, index, mask_rows(ctx, sc.src, fill, owned=owned), sc.reduce, include_self=True
        )
        glob = all_reduce_max(part, ctx) if is_max else all_reduce_min(part, ctx)
        if sc.include_self:
            return torch.maximum(target, glob) if is_max else torch.minimum(target, glob)
        return torch.where(torch.isinf(glob), target, glob)
    return None


def bincount(ctx: RankContext, a: Mapping[str, Any]) -> torch.Tensor:
    """Global per-system atom counts (or weighted sums) of the system index."""
    ctx.count(handler_count("per_system_reduce"))
    idx: torch.Tensor = a["input"]
    weights = a.get("weights")
    mask = ctx.row_mask(int(idx.shape[0]), idx)
    w = mask.to(torch.float64) if weights is None else torch.where(mask, weights, torch.zeros_like(weights))
    minlength = max(int(a.get("minlength") or 0), ctx.num_systems)
    total = all_reduce_sum(torch.bincount(idx, weights=w, minlength=minlength), ctx)
    return total.round().to(torch.long) if weights is None else total


def unique_systems(
    ctx: RankContext, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Callable[[], Any] | None:
    """`unique` / `unique_consecutive` of the system index: every system, its global atom count and, as
    the inverse, the system index itself (the single-process answer)."""
    a = _bind(args, kwargs, ("input",))
    x = a.get("input")
    if a.get("dim") is not None or not is_system_index(ctx, x):
        return None
    assert isinstance(x, torch.Tensor)

    def run() -> Any:
        counts = bincount(ctx, {"input": x})
        values = torch.arange(ctx.num_systems, dtype=x.dtype, device=x.device)
        out: list[torch.Tensor] = [values]
        if a.get("return_inverse"):
            out.append(x.clone())
        if a.get("return_counts"):
            out.append(counts.to(x.device))
        return out[0] if len(out) == 1 else tuple(out)

    return run


def local_lengths(ctx: RankContext, lengths: Any) -> torch.Tensor | None:
    """This rank's per-system row counts when `lengths` are per-system counts (local or global:
    a count computed with `bincount` under the handlers is already global)."""
    local, glob = ctx.local_counts, ctx.global_counts
    if local is None or glob is None:
        return None
    given = torch.as_tensor(lengths)
    if given.shape != local.shape:
        return None
    given = given.to(local.device, torch.long)
    if torch.equal(given, local) or torch.equal(given, glob):
        return local.to(torch.as_tensor(lengths).device)
    return None


def segment_reduce(ctx: RankContext, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
    """`segment_reduce` of per-atom data over systems, by per-system `lengths` or `offsets` (local or
    global counts), reduced over ranks."""
    a = _bind(args, kwargs, ("data", "reduce"))
    data, lengths, offsets = a.get("data"), a.get("lengths"), a.get("offsets")
    if not isinstance(data, torch.Tensor) or int(a.get("axis", 0)) != 0 or data.shape[0] != ctx.num_local:
        return None
    if a.get("indices") is not None or a.get("initial") is not None:
        return None
    if lengths is None and offsets is not None:
        off = torch.as_tensor(offsets)
        if off.ndim != 1 or off.shape[0] < 1:
            return None
        lengths = off[1:] - off[:-1]
    if lengths is None:
        return None
    local = local_lengths(ctx, lengths)
    if local is None:
        return None
    reduce = a["reduce"]
    if reduce not in ("sum", "mean", "max", "min"):
        return None

    def run() -> torch.Tensor:
        ctx.count(handler_count("per_system_reduce"))
        if reduce in ("sum", "mean"):
            total = all_reduce_sum(torch.segment_reduce(mask_rows(ctx, data), "sum", lengths=local), ctx)
            if reduce == "sum":
                return total
            ones = mask_rows(ctx, torch.ones(data.shape[0], dtype=data.dtype, device=data.device))
            count = all_reduce_sum(torch.segment_reduce(ones, "sum", lengths=local), ctx)
            return total / count.clamp(min=1).reshape((count.shape[0],) + (1,) * (total.ndim - 1))
        fill = -math.inf if reduce == "max" else math.inf
        part = torch.segment_reduce(mask_rows(ctx, data, fill), reduce, lengths=local)
        return all_reduce_max(part, ctx) if reduce == "max" else all_reduce_min(part, ctx)

    return run


def repeat_interleave(ctx: RankContext, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
    """Per-system values broadcast to atoms by per-system counts use this rank's counts."""
    a = _bind(args, kwargs, ("input", "repeats", "dim"))
    x, repeats = a.get("input"), a.get("repeats")
    if not (ctx.distributed and isinstance(x, torch.Tensor) and isinstance(repeats, torch.Tensor)):
        return None
    if x.ndim == 0 or x.shape[0] != ctx.num_systems or (a.get("dim") not in (None, 0) and x.ndim > 1):
        return None
    local = local_lengths(ctx, repeats)
    if local is None or torch.equal(local, repeats.to(local.device)):
        return None

    def run() -> torch.Tensor:
        ctx.count(handler_count("per_system_broadcast"))
        return torch.repeat_interleave(x, local, **{k: v for k, v in a.items() if k not in ("input", "repeats")})

    return run


def atom_total(
    ctx: RankContext, mean: bool, args: Sequence[Any], kwargs: Mapping[str, Any]
) -> Callable[[], Any] | None:
    """`sum` / `mean` over the atom rows of a per-atom tensor (any number of systems) or of a
    boolean-mask selection of atoms: the total over every atom held by any rank, as in one process."""
    a = _bind(args, kwargs, ("input", "dim", "keepdim"))
    x = a.get("input")
    if not isinstance(x, torch.Tensor) or x.ndim == 0 or a.get("out") is not None:
        return None
    if not x.is_floating_point():
        return None if mean or x.is_complex() else _atom_count(ctx, x, a)
    rows = atom_rows(x)
    if rows is not None:
        owned = rows.owned
    elif x.shape[0] == ctx.num_local and ctx.num_local > 1 and ctx.num_local != ctx.num_systems:
        owned = ctx.owned_mask
    else:
        return None
    dim = a.get("dim")
    if dim is None:
        dims: tuple[int, ...] | None = None
    else:
        listed = [dim] if isinstance(dim, int) else list(dim)
        dims = tuple(sorted(d % x.ndim for d in listed)) if listed else None
        if dims is not None and 0 not in dims:
            return None
    keepdim, dtype = bool(a.get("keepdim", False)), a.get("dtype")

    def run() -> torch.Tensor:
        ctx.count(handler_count("per_system_reduce"))
        masked = mask_rows(ctx, x, owned=owned)
        if dims is None:
            part = (
                masked.sum(dtype=dtype)
                if not keepdim
                else masked.sum(dim=tuple(range(x.ndim)), keepdim=True, dtype=dtype)
            )
        else:
            part = masked.sum(dim=dims, keepdim=keepdim, dtype=dtype)
        total = all_reduce_sum(part, ctx)
        if not mean:
            return total
        rest = math.prod(int(x.shape[d]) for d in (dims or range(x.ndim)) if d != 0)
        count = all_reduce_sum(owned.to(device=x.device, dtype=total.dtype).sum(), ctx) * rest
        return total / count

    return run


def _atom_count(ctx: RankContext, x: torch.Tensor, a: Mapping[str, Any]) -> Callable[[], Any] | None:
    """`(batch == s).sum()`: a count over a boolean or integer per-atom vector is the count over every
    atom, as in one process (like `bincount` under the handlers)."""
    rows = atom_rows(x)
    owned = rows.owned if rows is not None else None
    if owned is None and x.shape[0] == ctx.num_local and ctx.num_local > 1 and ctx.num_local != ctx.num_systems:
        owned = ctx.owned_mask
    if owned is None or x.ndim != 1 or a.get("dim") not in (None, 0, -1, (0,), [0]) or a.get("keepdim"):
        return None
    if a.get("dtype") is not None:
        return None

    def run() -> torch.Tensor:
        ctx.count(handler_count("per_system_reduce"))
        part = torch.where(owned.to(x.device), x.to(torch.long), torch.zeros((), dtype=torch.long, device=x.device))
        return all_reduce_sum(part.sum().to(torch.float64), ctx).round().to(torch.long)

    return run
