"""Differentiable collectives used by the runtime.

- `all_reduce_sum`: forward sums over ranks; backward sums the incoming gradients over ranks, the
  exact adjoint. Exact adjoints matter for nested global sums (charge equilibration): an identity
  backward drops every cross-rank term of a nonlinear function of a per-system sum. Seeds of
  replicated outputs are scaled by 1/world_size (see `dispatch.HandlerMode`), so differentiating the
  same replicated scalar on every rank does not count it world_size times.
- `halo_forward`: halo rows take their owners' values; backward returns halo-row gradients to the
  owners (summed) and zeroes them on the halo rows.
- `halo_reverse`: owners receive the sum of their halo copies' partial values; backward copies the
  owners' gradients to the halo rows.

Exchanges go through a global-size buffer and one all-reduce: simple, exact and independent of
the backend's support for all-to-all (gloo and NCCL both reduce).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.distributed as dist

from . import beacon
from .context import RankContext

__all__ = [
    "REPLICATED_NODE",
    "all_reduce_max",
    "all_reduce_min",
    "all_reduce_sum",
    "halo_forward",
    "halo_reverse",
    "is_replicated",
]


def _reduce(ctx: RankContext, t: torch.Tensor, op: Any = None) -> torch.Tensor:
    out = t.contiguous().clone()
    if ctx.distributed:
        with ctx.timed("collectives"), beacon.collective("all_reduce"):
            dist.all_reduce(out, op=op if op is not None else dist.ReduceOp.SUM, group=ctx.group)
    return out


class _AllReduceSum(torch.autograd.Function):
    @staticmethod
    def forward(fctx: Any, x: torch.Tensor, ctx: RankContext) -> torch.Tensor:
        fctx.rank_ctx = ctx
        return _reduce(ctx, x)

    @staticmethod
    def backward(fctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None]:
        return _reduce(fctx.rank_ctx, grad), None


class _AllReduceExtreme(torch.autograd.Function):
    @staticmethod
    def forward(fctx: Any, x: torch.Tensor, ctx: RankContext, is_max: bool) -> torch.Tensor:
        out = _reduce(ctx, x, dist.ReduceOp.MAX if is_max else dist.ReduceOp.MIN)
        fctx.save_for_backward(x, out)
        fctx.rank_ctx = ctx
        return out

    @staticmethod
    def backward(fctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        x, out = fctx.saved_tensors
        total = _reduce(fctx.rank_ctx, grad)
        return torch.where(x == out, total, torch.zeros_like(total)), None, None


def all_reduce_sum(x: torch.Tensor, ctx: RankContext) -> torch.Tensor:
    """Sum of `x` over ranks; its backward sums the gradients over ranks (exact adjoint)."""
    return _AllReduceSum.apply(x, ctx)  # type: ignore[no-untyped-call,no-any-return]


REPLICATED_NODE = "_distcheck_replicated"
"""An autograd node with this attribute set is an all-reduce for `is_replicated` (the node of a user's
`torch.autograd.Function` that returns an all-reduced sum as it is: `autograd_functions`)."""


def is_replicated(t: torch.Tensor) -> bool:
    """Whether `t` depends on leaves only through all-reduces (so every rank holds the same value).

    Walks the autograd graph from `t`, stopping at all-reduce nodes (and nodes marked
    `REPLICATED_NODE`); reaching a leaf that requires grad (or an unknown rank-local input) first means
    `t` is rank-local.
    """
    fn = t.grad_fn
    if fn is None:
        return False
    stack, seen = [fn], set()
    stops = (_AllReduceSum._backward_cls, _AllReduceExtreme._backward_cls)  # type: ignore[attr-defined]
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, stops) or getattr(node, REPLICATED_NODE, False):
            continue
        if type(node).__name__ == "AccumulateGrad":
            return False
        stack.extend(nxt for nxt, _ in node.next_functions if nxt is not None)
    return True


def all_reduce_max(x: torch.Tensor, ctx: RankContext) -> torch.Tensor:
    """Element-wise max over ranks; the gradient flows to the rank(s) holding the maximum."""
    return _AllReduceExtreme.apply(x, ctx, True)  # type: ignore[no-untyped-call,no-any-return]


def all_reduce_min(x: torch.Tensor, ctx: RankContext) -> torch.Tensor:
    """Element-wise min over ranks; the gradient flows to the rank(s) holding the minimum."""
    return _AllReduceExtreme.apply(x, ctx, False)  # type: ignore[no-untyped-call,no-any-return]


def _gather_global(ctx: RankContext, x: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
    """Global buffer holding `x[rows]` at their global ids, summed over ranks."""
    buf = x.new_zeros((ctx.num_global_atoms, *x.shape[1:]))
    ids = ctx.local_ids.to(x.device)[rows]
    buf.index_add_(0, ids, x[rows])
    return _reduce(ctx, buf)


def _push_owned_to_halo(ctx: RankContext, x: torch.Tensor, accumulate: bool) -> torch.Tensor:
    owned = ctx.owned_mask.to(x.device)
    halo = ~owned
    buf = _gather_global(ctx, x, owned)
    out = x.clone()
    vals = buf[ctx.local_ids.to(x.device)[halo]]
    out[halo] = out[halo] + vals if accumulate else vals
    return out


def _pull_halo_to_owned(ctx: RankContext, x: torch.Tensor, zero_halo: bool) -> torch.Tensor:
    owned = ctx.owned_mask.to(x.device)
    halo = ~owned
    buf = _gather_global(ctx, x, halo)
    out = x.clone()
    out[owned] = out[owned] + buf[ctx.local_ids.to(x.device)[owned]]
    if zero_halo:
        out[halo] = 0
    return out


class _Halo(torch.autograd.Function):
    """`halo_forward` (`reverse` False) or `halo_reverse` (True); the backward of each is the other."""

    @staticmethod
    def forward(fctx: Any, x: torch.Tensor, ctx: RankContext, reverse: bool) -> torch.Tensor:
        fctx.rank_ctx = ctx
        fctx.reverse = reverse
        if reverse:
            return _pull_halo_to_owned(ctx, x, zero_halo=False)
        return _push_owned_to_halo(ctx, x, accumulate=False)

    @staticmethod
    def backward(fctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        if fctx.reverse:
            return _push_owned_to_halo(fctx.rank_ctx, grad, accumulate=True), None, None
        return _pull_halo_to_owned(fctx.rank_ctx, grad, zero_halo=True), None, None


def _check_rows(x: torch.Tensor, ctx: RankContext) -> None:
    if x.ndim == 0 or x.shape[0] != ctx.num_local:
        raise ValueError(
            f"rank {ctx.rank}: halo exchange needs a per-atom tensor with {ctx.num_local} rows, "
            f"got shape {list(x.shape)}"
        )


def halo_forward(x: torch.Tensor, ctx: RankContext) -> torch.Tensor:
    """Refresh halo rows of the per-atom tensor `x` from their owners (differentiable)."""
    return _halo(x, ctx, reverse=False)


def halo_reverse(x: torch.Tensor, ctx: RankContext) -> torch.Tensor:
    """Add every halo copy's partial value of `x` into its owner's row (differentiable)."""
    return _halo(x, ctx, reverse=True)


def _halo(x: torch.Tensor, ctx: RankContext, reverse: bool) -> torch.Tensor:
    _check_rows(x, ctx)
    if not ctx.distributed:
        return x
    return _Halo.apply(x, ctx, reverse)  # type: ignore[no-untyped-call,no-any-return]
