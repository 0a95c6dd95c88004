"""The interception layer: named handlers that make a single-process wrapper correct on one rank.

`HandlerMode` is a `TorchFunctionMode`, so it sits above autograd: its replacements are built from
differentiable ops and collectives and are differentiated correctly. It routes

- `per_system_reduce` (`reduce_handlers`): per-atom → per-system reductions — scatter-like ops keyed
  by the system index in every spelling (`scatter_ops`), `segment_reduce` by lengths or offsets,
  `bincount` / `unique` counts, `sum` / `mean` over the atoms of any batch or of a boolean-mask
  selection of them (`e[batch == s].sum()`): halo rows are masked out, the owned partial is reduced,
  then all-reduced;
- `halo_scatter_correction[<op>]` (`edge_handlers`, scatter mode `halo_correction` only): per-edge →
  per-atom aggregations (sum, mean, amax, amin), completed over the ranks holding each atom;
- `custom_op[ns::op]`: opaque `torch.ops` kernels declared in the spec, with argument and output
  transforms; `replicated_seed`: autograd seeds of replicated outputs.

What it does not route is named: a scatter-like call in a form no handler covers is recorded as an
unrouted op (`runtime.unrouted`) at its Python line, and an undeclared `torch.ops` kernel runs with
the Python-level depth reset, so the `ScatterObserver` (`observer.py`, below autograd) names the
aggregations inside it — as it names those inside TorchScript, which never reach this mode; the kernel
itself is named at its call line when its shapes show an aggregation (`kernel_calls`), with the
`custom_ops` entry that routes it.
In-place and `out=` forms keep their semantics: the caller's tensor holds the corrected value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..report.handler_counts import handler_count
from ..spec import CustomOp
from . import autograd_functions, checkpoint_regions, edge_handlers, reduce_handlers
from .autograd_functions import name_in_function, route_in_function, running_function, system_sum_in_function
from .call_args import op_positions
from .context import RankContext
from .exchange import all_reduce_sum, halo_forward, halo_reverse, is_replicated
from .kernel_calls import kernel_call, mutates
from .observer import PythonLevel, ScatterObserver
from .scatter_ops import ATOM_ROWS_ATTR, SCATTER_FUNCS, AtomRows, Scatter, atom_rows, finish, parse_scatter
from .unrouted import record_unrouted

__all__ = ["HandlerMode", "ScatterObserver"]

_T = torch.Tensor
_SUM = {torch.sum, _T.sum}
_MEAN = {torch.mean, _T.mean}
_BINCOUNT = {torch.bincount, _T.bincount}
_UNIQUE = {torch.unique, _T.unique, torch.unique_consecutive, _T.unique_consecutive}
_AUTOGRAD = {torch.autograd.grad, torch.autograd.backward, _T.backward}
_OPS = (torch._ops.OpOverload, torch._ops.OpOverloadPacket)


def _bind(args: Sequence[Any], kwargs: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    out = dict(zip(names, args))
    out.update(kwargs)
    return out


def _op_name(func: Any) -> str | None:
    name = getattr(func, "_qualified_op_name", None) or getattr(func, "name", None)
    if callable(name):
        name = None
    if name is None and hasattr(func, "_schema"):
        name = func._schema.name
    return name.replace(".default", "") if isinstance(name, str) else None


def _named_in_function(
    ctx: RankContext, handler: Callable[[], Any] | None, label: str, aggregation: str
) -> Callable[[], Any] | None:
    """`handler`, which also names its reduction when it runs inside a `torch.autograd.Function`'s
    forward: its all-reduce has no counterpart in the Function's hand-written backward
    (`autograd_functions.name_in_function`)."""
    if handler is None:
        return None
    routed = handler

    def run() -> Any:
        call = running_function()
        if call is not None:
            name_in_function(ctx, label, aggregation, call)
        return routed()

    return run


class HandlerMode(TorchFunctionMode):
    """Routes the ops a single-process wrapper uses through the runtime's handlers for one rank."""

    def __init__(self, ctx: RankContext, custom_ops: Sequence[CustomOp] = ()) -> None:
        super().__init__()
        self.ctx = ctx
        self.custom_ops = {c.op: c for c in custom_ops}
        autograd_functions.use_handler(self)
        self._regions: list[Any] = []

    def __enter__(self) -> HandlerMode:
        """On: also a checkpointed region's recomputation runs through this mode (`checkpoint_regions`)."""
        regions = checkpoint_regions.recomputed_under(self, self.ctx)
        regions.__enter__()
        self._regions.append(regions)
        super().__enter__()  # type: ignore[no-untyped-call]
        return self

    def __exit__(self, *exc: Any) -> None:
        try:
            super().__exit__(*exc)  # type: ignore[no-untyped-call]
        finally:
            self._regions.pop().__exit__(None, None, None)

    # -- entry point --------------------------------------------------------------------------
    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        PythonLevel.depth += 1
        try:
            if autograd_functions.pending() and torch.is_grad_enabled():
                autograd_functions.resolve_pending()
            if self.ctx.suspended:
                return func(*args, **kwargs)
            handler = self._route(func, args, kwargs)
            if handler is not None:
                return handler()
            if isinstance(func, _OPS) and self.ctx.distributed:
                return self._opaque(func, args, kwargs)
            out = func(*args, **kwargs)
            if self.ctx.distributed and self.ctx.system_reductions:
                self._tag_atom_rows(func, args, out)
            return out
        finally:
            PythonLevel.depth -= 1

    def _route(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Callable[[], Any] | None:
        ctx = self.ctx
        if func in SCATTER_FUNCS:
            sc = parse_scatter(func, args, kwargs)
            return self._scatter(sc) if sc is not None and ctx.distributed else None
        reductions = ctx.system_reductions and ctx.distributed
        if func is torch.segment_reduce:
            found = reduce_handlers.segment_reduce(ctx, args, kwargs) if reductions else None
            return _named_in_function(ctx, found, "segment_reduce", "per_atom_to_per_system")
        if func in (torch.repeat_interleave, _T.repeat_interleave):
            return reduce_handlers.repeat_interleave(ctx, args, kwargs)
        if func in _BINCOUNT:
            a = _bind(args, kwargs, ("input", "weights", "minlength"))
            if reductions and reduce_handlers.is_system_index(ctx, a["input"]):
                return lambda: reduce_handlers.bincount(ctx, a)
            return None
        if func in _UNIQUE:
            return reduce_handlers.unique_systems(ctx, func, args, kwargs) if reductions else None
        if func in _SUM or func in _MEAN:
            found = reduce_handlers.atom_total(ctx, func in _MEAN, args, kwargs) if reductions else None
            return _named_in_function(ctx, found, "mean" if func in _MEAN else "sum", "per_atom_total")
        if func in _AUTOGRAD and ctx.distributed:
            return lambda: self._autograd(func, args, kwargs)
        name = _op_name(func) if self.custom_ops else None
        if name is not None and name in self.custom_ops:
            return lambda: self._custom_op(self.custom_ops[name], func, args, kwargs)
        return None

    def _scatter(self, sc: Scatter) -> Callable[[], Any] | None:
        ctx = self.ctx
        rows = int(sc.target.shape[0])
        if ctx.system_reductions and rows == ctx.num_systems and rows < ctx.num_local:
            owned = reduce_handlers.system_owned(ctx, sc)
            index_rows = int(sc.rows_index.shape[0])
            if owned is None and index_rows in (ctx.num_local, ctx.num_systems):
                return None  # keyed by something other than the system index: not a per-system reduction
            aggregation = "per_atom_to_per_system" if owned is not None else "per_edge_to_per_system"

            def per_system() -> Any:
                result = None
                if owned is not None:
                    call = running_function()
                    result = (
                        reduce_handlers.per_system_scatter(ctx, sc, owned)
                        if call is None
                        else system_sum_in_function(ctx, sc, owned, call)
                    )
                if result is None:
                    record_unrouted(ctx, sc.label, aggregation, "python")
                    return sc.call_original()
                ctx.count(handler_count("per_system_reduce"))
                return finish(sc, result)

            return per_system
        if edge_handlers.is_edge_to_atom(ctx, sc):

            def per_atom() -> Any:
                call = running_function()
                result = edge_handlers.edge_to_atom(ctx, sc) if call is None else route_in_function(ctx, sc, call)
                if result is None:
                    record_unrouted(ctx, sc.label, "per_edge_to_per_atom", "python")
                    return sc.call_original()
                return finish(sc, result)

            return per_atom
        return None

    # -- what is not routed -----------------------------------------------------------------------
    def _opaque(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """An undeclared `torch.ops` kernel: run it with the Python-level depth reset, so the dispatch
        observer names the aggregations inside it, then name the kernel itself at the user's call line
        when its shapes show it aggregates atoms or edges (`kernel_calls`: roles, the ready entry)."""
        name = _op_name(func) or str(func)
        if name.startswith(("aten::", "prim::")):
            return func(*args, **kwargs)
        saved = PythonLevel.depth
        PythonLevel.depth = 0
        PythonLevel.opaque.append(name)
        try:
            out = func(*args, **kwargs)
        finally:
            PythonLevel.opaque.pop()
            PythonLevel.depth = saved
        rerun = None if mutates(func) else (lambda a, k: func(*a, **k))
        found = kernel_call(self.ctx, name, args, kwargs, out, op_positions(func, len(args), kwargs), rerun)
        if found is not None:
            self.ctx.count(handler_count("unintercepted", name))
            record_unrouted(self.ctx, name, found[0], "custom_op", function=name, kernel=found[1])
        return out

    def _tag_atom_rows(self, func: Any, args: Sequence[Any], out: Any) -> None:
        """Tag `e[mask]` (a boolean mask over atom rows) with which of its rows this rank owns, and pass
        the tag on to results with the same rows, so reductions over the selection are routed."""
        if not isinstance(out, torch.Tensor) or out.ndim == 0:
            return
        rows: AtomRows | None = None
        if func is _T.__getitem__ and len(args) >= 2 and isinstance(args[0], torch.Tensor):
            key = args[1][0] if isinstance(args[1], tuple) and args[1] else args[1]
            if isinstance(key, torch.Tensor) and key.dtype == torch.bool and key.ndim == 1:
                source = atom_rows(args[0])
                n = int(args[0].shape[0]) if args[0].ndim else -1
                if source is not None and key.shape[0] == n:
                    rows = AtomRows(source.owned[key.to(source.owned.device)], source.systems[key])
                elif n == self.ctx.num_local and key.shape[0] == n and self.ctx.system_index is not None:
                    mask = key.to(self.ctx.owned_mask.device)
                    rows = AtomRows(
                        self.ctx.owned_mask[mask], self.ctx.system_index[mask.to(self.ctx.system_index.device)]
                    )
        if rows is None:
            for arg in args:
                found = atom_rows(arg)
                if found is not None and found.owned.shape[0] == out.shape[0]:
                    rows = found
                    break
        if rows is not None and rows.owned.shape[0] == out.shape[0]:
            try:
                setattr(out, ATOM_ROWS_ATTR, rows)
            except (AttributeError, RuntimeError):
                pass

    # -- handlers -------------------------------------------------------------------------------
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
                self.ctx.count(handler_count("replicated_seed"))
                base = torch.ones_like(out) if seed is None else seed
                seed = base / self.ctx.world_size
            scaled.append(seed)
        new = dict(a)
        new[seed_key] = scaled[0] if single else tuple(scaled)
        try:
            if func is _T.backward:
                tensor = new.pop("tensors")
                return _T.backward(tensor, **new)
            return func(**new)
        except RuntimeError as e:  # a checkpointed region recomputed differently: named at its call
            renamed = checkpoint_regions.renamed_mismatch(e)
            if renamed is e:
                raise
            raise renamed from e

    def _custom_op(self, op: CustomOp, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        ctx = self.ctx
        ctx.count(handler_count("custom_op", op.op))
        slots: dict[int, tuple[Any, Any]] = {}  # position → (the list or dict holding it, its key there)
        new_args, new_kwargs = list(args), dict(kwargs)
        slots.update((i, (new_args, i)) for i in range(len(new_args)))
        slots.update((i, (new_kwargs, k)) for k, i in op_positions(func, len(args), kwargs).items())
        for key, transform in op.arg_transforms.items():
            slot = slots.get(int(key))
            if slot is None or not isinstance(slot[0][slot[1]], torch.Tensor) or transform == "none":
                continue
            holder, at = slot
            if transform == "gather_inputs" and ctx.distributed:
                holder[at] = halo_forward(holder[at], ctx)
            elif transform == "slice_owned":
                holder[at] = holder[at][ctx.row_mask(int(holder[at].shape[0]), holder[at])]
        out = func(*new_args, **new_kwargs)
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
