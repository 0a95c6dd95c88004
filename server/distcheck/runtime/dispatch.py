"""The interception layer: named handlers that make a single-process wrapper correct on one rank.

`HandlerMode` is a `TorchFunctionMode`, so it sits above autograd: its replacements are built from
differentiable ops and collectives and are differentiated correctly. It handles

- `per_system_reduce`: per-atom → per-system reductions keyed by the system index (`index_add`,
  `scatter_add`, `scatter_reduce`, `segment_reduce`, `bincount`, `Tensor.sum` over the atoms of a
  one-system batch): halo rows are masked out, the owned partial is reduced, then all-reduced.
- `halo_scatter_correction[<op>]` (scatter mode `halo_correction` only): per-edge → per-atom
  aggregations. The aggregate's halo rows are partials; they are summed into their owners and the
  halo rows refreshed from the owners (`halo_read`).
- `custom_op[ns::op]`: opaque `torch.ops` kernels declared in the spec, with argument and output
  transforms.

Ops inside `@torch.jit.script` code never reach a torch-function mode. `ScatterObserver` (a
`TorchDispatchMode`, below autograd) only *observes*: it counts scatter-like aten ops into
per-system-shaped outputs that the Python layer did not see, as `unintercepted[<op>]`, so an
aggregation the handlers missed is reported by name instead of silently giving wrong numbers.
In-place ops keep in-place semantics: the caller's tensor holds the corrected value.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

from ..spec import CustomOp
from .context import RankContext
from .exchange import (
    all_reduce_max,
    all_reduce_min,
    all_reduce_sum,
    halo_forward,
    halo_reverse,
    is_replicated,
)

__all__ = ["HandlerMode", "ScatterObserver"]

_T = torch.Tensor

_INDEX_ADD = {torch.index_add, _T.index_add, _T.index_add_}
_SCATTER_ADD = {torch.scatter_add, _T.scatter_add, _T.scatter_add_}
_SCATTER_REDUCE = {torch.scatter_reduce, _T.scatter_reduce, _T.scatter_reduce_}
_SUM = {torch.sum, _T.sum}
_AUTOGRAD = {torch.autograd.grad, torch.autograd.backward, _T.backward}
_INPLACE = {_T.index_add_, _T.scatter_add_, _T.scatter_reduce_}
_OP_NAMES: dict[Any, str] = {}
for _f in _INDEX_ADD | _SCATTER_ADD | _SCATTER_REDUCE:
    _OP_NAMES[_f] = _f.__name__


def _bind(args: Sequence[Any], kwargs: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    out = dict(zip(names, args))
    out.update(kwargs)
    return out


class _Guard:
    """Shared flag so the dispatch observer ignores aten ops issued under a Python-level call."""

    depth = 0


class HandlerMode(TorchFunctionMode):
    """Routes the ops a single-process wrapper uses through the runtime's handlers for one rank."""

    def __init__(self, ctx: RankContext, custom_ops: Sequence[CustomOp] = ()) -> None:
        super().__init__()
        self.ctx = ctx
        self.custom_ops = {c.op: c for c in custom_ops}

    # -- classification ------------------------------------------------------------------------
    def _is_system_index(self, index: Any) -> bool:
        sys_idx = self.ctx.system_index
        if sys_idx is None or not isinstance(index, torch.Tensor) or index.ndim < 1:
            return False
        if index is sys_idx:
            return True
        if index.shape[0] != sys_idx.shape[0] or index.dtype != sys_idx.dtype:
            return False
        col = index if index.ndim == 1 else index.reshape(index.shape[0], -1)[:, 0]
        return bool(torch.equal(col.to(sys_idx.device), sys_idx))

    def _is_edge_to_atom(self, target_rows: int, index: Any) -> bool:
        if self.ctx.scatter_mode != "halo_correction" or not self.ctx.distributed:
            return False
        if not isinstance(index, torch.Tensor) or index.ndim < 1:
            return False
        n = self.ctx.num_local
        return target_rows == n and index.shape[0] != n and n != self.ctx.num_systems

    # -- entry point --------------------------------------------------------------------------
    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        _Guard.depth += 1
        try:
            handler = None if self.ctx.suspended else self._route(func, args, kwargs)
            if handler is not None:
                return handler()
            return func(*args, **kwargs)
        finally:
            _Guard.depth -= 1

    def _route(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
        ctx = self.ctx
        if func in _INDEX_ADD or func in _SCATTER_ADD or func in _SCATTER_REDUCE:
            names = ("input", "dim", "index", "source") if func in _INDEX_ADD else ("input", "dim", "index", "src")
            a = _bind(args, kwargs, names + (("reduce", "include_self") if func in _SCATTER_REDUCE else ()))
            target = a.get("input")
            if not isinstance(target, torch.Tensor) or a.get("dim") not in (0, -target.ndim):
                return None
            index = a["index"]
            if ctx.system_reductions and ctx.distributed and self._is_system_index(index):
                return lambda: self._per_system_scatter(func, a)
            if self._is_edge_to_atom(int(a["input"].shape[0]), index):
                return lambda: self._edge_to_atom(func, args, kwargs, a)
            return None
        if func is torch.segment_reduce:
            return self._segment_reduce(args, kwargs)
        if func in (torch.repeat_interleave, _T.repeat_interleave):
            return self._repeat_interleave(args, kwargs)
        if func is torch.bincount:
            a = _bind(args, kwargs, ("input", "weights", "minlength"))
            if ctx.system_reductions and ctx.distributed and self._is_system_index(a["input"]):
                return lambda: self._bincount(a)
            return None
        if func in _SUM:
            return self._sum(args, kwargs)
        if func in _AUTOGRAD and ctx.distributed:
            return lambda: self._autograd(func, args, kwargs)
        name = getattr(func, "_qualified_op_name", None) or getattr(func, "name", None)
        if isinstance(name, Callable):  # type: ignore[arg-type]
            name = None
        if name is None and hasattr(func, "_schema"):
            name = func._schema.name
        if isinstance(name, str) and self.custom_ops:
            key = name.replace(".default", "")
            if key in self.custom_ops:
                return lambda: self._custom_op(self.custom_ops[key], func, args, kwargs)
        return None

    # -- handlers -------------------------------------------------------------------------------
    def _mask_rows(self, x: torch.Tensor, fill: float = 0.0) -> torch.Tensor:
        mask = self.ctx.row_mask(int(x.shape[0]), x)
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        return torch.where(mask.reshape(shape), x, torch.full_like(x, fill))

    def _finish_inplace(self, func: Any, target: torch.Tensor, result: torch.Tensor) -> torch.Tensor:
        if func in _INPLACE:
            needs_graph = target.requires_grad or result.requires_grad
            with contextlib.nullcontext() if needs_graph else torch.no_grad():
                target.copy_(result)
            return target
        return result

    def _per_system_scatter(self, func: Any, a: dict[str, Any]) -> torch.Tensor:
        ctx = self.ctx
        ctx.count("per_system_reduce")
        target: torch.Tensor = a["input"]
        index: torch.Tensor = a["index"]
        src: torch.Tensor = a["source"] if "source" in a else a["src"]
        if func in _INDEX_ADD:
            alpha = a.get("alpha", 1)
            partial = torch.zeros_like(target).index_add(0, index, self._mask_rows(src), alpha=alpha)
            result = target + all_reduce_sum(partial, ctx)
        elif func in _SCATTER_ADD:
            partial = torch.zeros_like(target).scatter_add(0, index, self._mask_rows(src))
            result = target + all_reduce_sum(partial, ctx)
        else:
            result = self._scatter_reduce(target, index, src, a.get("reduce", "sum"), a.get("include_self", True))
        return self._finish_inplace(func, target, result)

    def _scatter_reduce(
        self, target: torch.Tensor, index: torch.Tensor, src: torch.Tensor, reduce: str, include_self: bool
    ) -> torch.Tensor:
        ctx = self.ctx
        if reduce in ("sum", "mean"):
            part = torch.zeros_like(target).scatter_add(0, index, self._mask_rows(src))
            total = all_reduce_sum(part, ctx)
            if reduce == "sum":
                return target + total if include_self else torch.where(_touched(target, index, ctx), total, target)
            ones = self._mask_rows(torch.ones_like(src))
            count = all_reduce_sum(torch.zeros_like(target).scatter_add(0, index, ones), ctx)
            if include_self:
                return (target + total) / (count + 1)
            return torch.where(count > 0, total / count.clamp(min=1), target)
        if reduce in ("amax", "amin"):
            is_max = reduce == "amax"
            fill = float("-inf") if is_max else float("inf")
            base = torch.full_like(target, fill)
            part = base.scatter_reduce(0, index, self._mask_rows(src, fill), reduce, include_self=True)
            glob = all_reduce_max(part, ctx) if is_max else all_reduce_min(part, ctx)
            if include_self:
                return torch.maximum(target, glob) if is_max else torch.minimum(target, glob)
            return torch.where(torch.isinf(glob), target, glob)
        raise NotImplementedError(
            f"distcheck: scatter_reduce(reduce={reduce!r}) keyed by the system index has no distributed handler; "
            "use 'sum', 'mean', 'amax' or 'amin', or declare the helper that calls it in third_party_helpers"
        )

    def _bincount(self, a: dict[str, Any]) -> torch.Tensor:
        ctx = self.ctx
        ctx.count("per_system_reduce")
        idx: torch.Tensor = a["input"]
        weights = a.get("weights")
        mask = ctx.row_mask(int(idx.shape[0]), idx)
        w = mask.to(torch.float64) if weights is None else torch.where(mask, weights, torch.zeros_like(weights))
        minlength = max(int(a.get("minlength") or 0), ctx.num_systems)
        local = torch.bincount(idx, weights=w, minlength=minlength)
        total = all_reduce_sum(local, ctx)
        return total.round().to(torch.long) if weights is None else total

    def _segment_reduce(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
        ctx = self.ctx
        a = _bind(args, kwargs, ("data", "reduce"))
        data, lengths = a.get("data"), a.get("lengths")
        if not (ctx.system_reductions and ctx.distributed and isinstance(data, torch.Tensor)):
            return None
        if lengths is None or int(a.get("axis", 0)) != 0 or data.shape[0] != ctx.num_local:
            return None
        lengths = self._local_lengths(lengths)
        if lengths is None:
            return None
        reduce = a["reduce"]

        def run() -> torch.Tensor:
            ctx.count("per_system_reduce")
            if reduce in ("sum", "mean"):
                total = all_reduce_sum(torch.segment_reduce(self._mask_rows(data), "sum", lengths=lengths), ctx)
                if reduce == "sum":
                    return total
                ones = self._mask_rows(torch.ones(data.shape[0], dtype=data.dtype, device=data.device))
                count = all_reduce_sum(torch.segment_reduce(ones, "sum", lengths=lengths), ctx)
                shape = (count.shape[0],) + (1,) * (total.ndim - 1)
                return total / count.clamp(min=1).reshape(shape)
            if reduce in ("max", "min"):
                fill = float("-inf") if reduce == "max" else float("inf")
                part = torch.segment_reduce(self._mask_rows(data, fill), reduce, lengths=lengths)
                return all_reduce_max(part, ctx) if reduce == "max" else all_reduce_min(part, ctx)
            raise NotImplementedError(
                f"distcheck: segment_reduce(reduce={reduce!r}) over systems has no distributed handler; "
                "use 'sum', 'mean', 'max' or 'min'"
            )

        return run

    def _local_lengths(self, lengths: Any) -> torch.Tensor | None:
        """This rank's per-system row counts when `lengths` are per-system counts (local or global:
        a count computed with `bincount` under the handlers is already global)."""
        local, glob = self.ctx.local_counts, self.ctx.global_counts
        if local is None or glob is None:
            return None
        given = torch.as_tensor(lengths)
        if given.shape != local.shape:
            return None
        given = given.to(local.device, torch.long)
        if torch.equal(given, local) or torch.equal(given, glob):
            return local.to(torch.as_tensor(lengths).device)
        return None

    def _repeat_interleave(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
        """Per-system values broadcast to atoms by per-system counts use this rank's counts."""
        ctx = self.ctx
        a = _bind(args, kwargs, ("input", "repeats", "dim"))
        x, repeats = a.get("input"), a.get("repeats")
        if not (ctx.distributed and isinstance(x, torch.Tensor) and isinstance(repeats, torch.Tensor)):
            return None
        if x.ndim == 0 or x.shape[0] != ctx.num_systems or (a.get("dim") not in (None, 0) and x.ndim > 1):
            return None
        local = self._local_lengths(repeats)
        if local is None or torch.equal(local, repeats.to(local.device)):
            return None

        def run() -> torch.Tensor:
            ctx.count("per_system_broadcast")
            return torch.repeat_interleave(x, local, **{k: v for k, v in a.items() if k not in ("input", "repeats")})

        return run

    def _sum(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
        ctx = self.ctx
        if not (ctx.system_reductions and ctx.distributed and ctx.num_systems == 1):
            return None
        a = _bind(args, kwargs, ("input", "dim", "keepdim"))
        x = a.get("input")
        if not isinstance(x, torch.Tensor) or x.ndim == 0 or x.shape[0] != ctx.num_local or ctx.num_local <= 1:
            return None
        if not x.is_floating_point():
            return None
        dim = a.get("dim")
        if isinstance(dim, (list, tuple)):
            dim = tuple(dim)
            if dim not in ((0,), (-x.ndim,)):
                return None
        elif dim is not None and dim not in (0, -x.ndim):
            return None
        keepdim = bool(a.get("keepdim", False))
        dtype = a.get("dtype")

        def run() -> torch.Tensor:
            ctx.count("per_system_reduce")
            masked = self._mask_rows(x)
            if dim is None:
                part = masked.sum(dtype=dtype) if dtype is not None else masked.sum()
            else:
                part = masked.sum(dim=0, keepdim=keepdim, dtype=dtype)
            return all_reduce_sum(part, ctx)

        return run

    def _autograd(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Differentiate with seeds of replicated outputs scaled by 1/world_size.

        Every rank holds the same replicated scalar (an energy) and differentiates it; with exact
        all-reduce adjoints that would count it world_size times, so each rank seeds 1/world_size.
        """
        if func is torch.autograd.grad:
            a = _bind(args, kwargs, ("outputs", "inputs", "grad_outputs"))
            seed_key = "grad_outputs"
        elif func is torch.autograd.backward:
            a = _bind(args, kwargs, ("tensors", "grad_tensors"))
            seed_key = "grad_tensors"
        else:
            a = _bind(args, kwargs, ("tensors", "gradient"))
            seed_key = "gradient"
        out_key = "outputs" if func is torch.autograd.grad else "tensors"
        outs = a[out_key]
        single = isinstance(outs, torch.Tensor)
        outputs = [outs] if single else list(outs)
        seeds = a.get(seed_key)
        seed_list = [seeds] if isinstance(seeds, torch.Tensor) or seeds is None else list(seeds)
        if len(seed_list) == 1 and len(outputs) > 1 and seeds is None:
            seed_list = [None] * len(outputs)
        scaled = []
        for out, seed in zip(outputs, seed_list):
            if is_replicated(out):
                self.ctx.count("replicated_seed")
                base = torch.ones_like(out) if seed is None else seed
                seed = base / self.ctx.world_size
            scaled.append(seed)
        new = dict(a)
        new[seed_key] = scaled[0] if single else tuple(scaled)
        if func is _T.backward:
            tensor = new.pop("tensors")
            return _T.backward(tensor, **new)
        return func(**new)

    def _edge_to_atom(
        self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any], a: dict[str, Any]
    ) -> torch.Tensor:
        ctx = self.ctx
        ctx.count(f"halo_scatter_correction[{_OP_NAMES.get(func, 'scatter')}]")
        target: torch.Tensor = a["input"]
        zero = torch.zeros_like(target)
        if func in _INDEX_ADD:
            agg = zero.index_add(0, a["index"], a["source"], alpha=a.get("alpha", 1))
        elif func in _SCATTER_ADD:
            agg = zero.scatter_add(0, a["index"], a["src"])
        else:
            reduce = a.get("reduce", "sum")
            if reduce != "sum":
                # Max/mean of edge messages cannot be completed from partials here; refresh only.
                result = func(*args, **kwargs) if func not in _INPLACE else _T.scatter_reduce(*args, **kwargs)
                ctx.count("halo_read")
                return self._finish_inplace(func, target, halo_forward(result, ctx))
            agg = zero.scatter_add(0, a["index"], a["src"])
            if not a.get("include_self", True):
                return self._finish_inplace(func, target, halo_forward(halo_reverse(agg, ctx), ctx))
        ctx.count("halo_read")
        result = halo_forward(target + halo_reverse(agg, ctx), ctx)
        return self._finish_inplace(func, target, result)

    def _custom_op(self, op: CustomOp, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        ctx = self.ctx
        ctx.count(f"custom_op[{op.op}]")
        new_args = list(args)
        for key, transform in op.arg_transforms.items():
            i = int(key)
            if i >= len(new_args) or not isinstance(new_args[i], torch.Tensor) or transform == "none":
                continue
            if transform == "gather_inputs" and ctx.distributed:
                new_args[i] = halo_forward(new_args[i], ctx)
            elif transform == "slice_owned":
                new_args[i] = new_args[i][ctx.row_mask(int(new_args[i].shape[0]), new_args[i])]
        out = func(*new_args, **kwargs)
        single = isinstance(out, torch.Tensor)
        outs = [out] if single else list(out)
        for key, transform in op.output_transforms.items():
            i = int(key)
            if i >= len(outs) or not isinstance(outs[i], torch.Tensor) or transform == "none" or not ctx.distributed:
                continue
            if transform == "scatter_outputs":
                outs[i] = halo_forward(halo_reverse(outs[i], ctx), ctx)
            elif transform == "all_reduce_sum":
                outs[i] = all_reduce_sum(outs[i], ctx)
        return outs[0] if single else type(out)(outs)


def _touched(target: torch.Tensor, index: torch.Tensor, ctx: RankContext) -> torch.Tensor:
    hit = torch.zeros_like(target).scatter_add(0, index, torch.ones_like(index, dtype=target.dtype))
    return all_reduce_sum(hit, ctx) > 0


_SCATTER_ATEN = (
    "aten::index_add",
    "aten::index_add_",
    "aten::scatter_add",
    "aten::scatter_add_",
    "aten::scatter_reduce",
    "aten::scatter_reduce_",
    "aten::index_put",
    "aten::index_put_",
    "aten::_index_put_impl_",
    "aten::segment_reduce",
)


class ScatterObserver(TorchDispatchMode):  # type: ignore[no-untyped-call,misc]
    """Counts scatter-like aten ops into per-system-shaped outputs issued outside Python-level calls.

    Those come from TorchScript, C++ extensions or other code the handler layer cannot see; each is
    counted as `unintercepted[<aten op>]` in the rank's handler counts.
    """

    def __init__(self, ctx: RankContext) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ctx = ctx

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if _Guard.depth == 0:
            name = func._schema.name
            if name in _SCATTER_ATEN and args and isinstance(args[0], torch.Tensor):
                target = args[0]
                if (
                    target.ndim >= 1
                    and target.shape[0] == self.ctx.num_systems
                    and self.ctx.num_systems < self.ctx.num_local
                ):
                    self.ctx.count(f"unintercepted[{name.replace('aten::', 'aten.')}]")
        return func(*args, **kwargs)
