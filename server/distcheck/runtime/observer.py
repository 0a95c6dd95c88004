"""`ScatterObserver`: below autograd, names the aggregations the Python-level handlers never saw.

Ops inside `@torch.jit.script` code, inside `torch.ops` kernels and in C++ never reach a
torch-function mode, so `HandlerMode` cannot route them. This `TorchDispatchMode` sees them as aten
ops issued while no Python-level torch call is running (`PythonLevel.depth == 0`, or inside an opaque
kernel that `HandlerMode` ran with the depth reset). It changes no number: each aggregation it
recognises is counted as `unintercepted[<aten op>]` in the handler counts and named, with its
source location, in `RankContext.unrouted` (`runtime.unrouted`).

Recognised: scatter-like ops along dim 0 (`index_add`, `scatter_add`, `scatter_reduce`,
`index_reduce`, `scatter` with a reduce, accumulating `index_put`) into a per-system target (from
atoms or from edges) or, under `halo_correction` or `owned_complete` (neither corrected nor refreshed
there), into a per-atom target from a per-edge index;
`segment_reduce` of per-atom data; `bincount` of a per-atom index; `sum`/`mean` over the atoms; and
an opaque (non-aten) kernel called from TorchScript or C++ whose shapes show one of those
(`kernel_calls.kernel_call`), named after itself with its ready `custom_ops` entry (one called from
Python is named by `HandlerMode`, at the user's line).
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, TypeVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from ..report.handler_counts import handler_count
from .context import RankContext
from .kernel_calls import kernel_call
from .unrouted import aten_kind, record_unrouted

__all__ = ["PythonLevel", "ScatterObserver", "classify_aten", "dynamo_disabled_lazily"]


class PythonLevel:
    """Shared state between the two modes: `depth` > 0 while a Python-level torch call runs (so
    the observer ignores the aten ops it issues); `opaque` names the undeclared `torch.ops` kernels
    running now (their aten ops are observed and attributed to them)."""

    depth: ClassVar[int] = 0
    opaque: ClassVar[list[str]] = []


_SCATTERS = {
    "aten::index_add",
    "aten::scatter_add",
    "aten::scatter_reduce",
    "aten::index_reduce",
    "aten::scatter",
    "aten::index_put",
}
_TOTALS = {"aten::sum", "aten::mean", "aten::nansum"}


def _bind(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> dict[str, Any]:
    names = [a.name for a in func._schema.arguments]
    bound = dict(zip(names, args))
    bound.update(kwargs)
    return bound


def _rows(x: Any) -> int | None:
    return int(x.shape[0]) if isinstance(x, torch.Tensor) and x.ndim >= 1 else None


def classify_aten(ctx: RankContext, name: str, a: Mapping[str, Any]) -> str | None:
    """The `UnroutedOp.aggregation` an aten op `name` with bound arguments `a` performs on this rank,
    or None when it is not an aggregation across atoms, edges or systems."""
    n, b = ctx.num_local, ctx.num_systems
    kind = aten_kind(name)
    if kind in _SCATTERS:
        target = a.get("self")
        if not isinstance(target, torch.Tensor) or target.ndim == 0:
            return None
        if kind == "aten::index_put":
            indices = a.get("indices") or []
            if not a.get("accumulate") or len(indices) != 1:
                return None
            index = indices[0]
        else:
            if kind == "aten::scatter" and a.get("reduce") is None:
                return None  # a plain scatter writes, it does not aggregate
            if a.get("dim") not in (0, -target.ndim):
                return None
            index = a.get("index")
        rows, index_rows = int(target.shape[0]), _rows(index)
        if index_rows is None or n <= b:
            return None
        if rows == b and index_rows == n:
            return "per_atom_to_per_system"
        if rows == b and index_rows != b:
            return "per_edge_to_per_system"
        if rows == n and index_rows != n and ctx.scatter_mode in ("halo_correction", "owned_complete"):
            return "per_edge_to_per_atom"
        return None
    if kind == "aten::segment_reduce":
        has_segments = a.get("lengths") is not None or a.get("offsets") is not None
        return "per_atom_to_per_system" if _rows(a.get("data")) == n and has_segments else None
    if kind == "aten::bincount":
        index = a.get("self")
        if _rows(index) == n and isinstance(index, torch.Tensor) and not index.is_floating_point():
            return "per_atom_to_per_system"
        return None
    if kind in _TOTALS:
        x = a.get("self")
        if not isinstance(x, torch.Tensor) or not x.is_floating_point() or _rows(x) != n or n <= 1 or n == b:
            return None
        dim = a.get("dim")
        dims = [] if dim is None else ([dim] if isinstance(dim, int) else list(dim))
        if not dims or any(d in (0, -x.ndim) for d in dims):
            return "per_atom_total"
    return None


_Mode = TypeVar("_Mode", bound=type)


def dynamo_disabled_lazily(cls: _Mode) -> _Mode:
    """Class decorator for a `TorchDispatchMode` subclass: its `__torch_dispatch__` imports TorchDynamo
    only once something else has.

    `TorchDispatchMode` wraps a subclass's `__torch_dispatch__` in `torch._disable_dynamo`, whose
    first call imports `torch._dynamo` (seconds on a busy CPU, `bench/RESULTS.md`: in every rank's
    first forward, or in the forkserver's start-up when preloaded) only to keep TorchDynamo
    from tracing into the method. Dynamo traces nothing in a process that never imported it: until
    something does, the method runs as it is; from then on, behind dynamo's own `disable`, as before.
    The wrapper keeps the disabled method on the raw one as `__dynamo_disable`; a torch that no longer
    does ignores this, and imports dynamo as it always did."""
    raw = getattr(cls.__dict__.get("__torch_dispatch__"), "__wrapped__", None)
    if not callable(raw):
        return cls
    method: Callable[..., Any] = raw
    disabled: list[Callable[..., Any]] = []

    def dispatch(*args: Any, **kwargs: Any) -> Any:
        if not disabled:
            dynamo = sys.modules.get("torch._dynamo")
            if dynamo is None or not hasattr(dynamo, "disable"):
                return method(*args, **kwargs)
            try:
                disabled.append(dynamo.disable(method, recursive=True, wrapping=False))
            except TypeError:  # a torch whose `disable` has no `wrapping`
                disabled.append(dynamo.disable(method, recursive=True))
        return disabled[0](*args, **kwargs)

    setattr(method, "__dynamo_disable", dispatch)
    return cls


@dynamo_disabled_lazily
class ScatterObserver(TorchDispatchMode):  # type: ignore[no-untyped-call,misc]
    """Counts and names the aggregations issued outside Python-level calls (TorchScript, `torch.ops`
    kernels, C++): `unintercepted[<aten op>]` in the handler counts, an entry in `ctx.unrouted`.

    `roots` are callables the wrapper is made of that may be scripted (the wrapper itself): when no
    user frame calls into TorchScript, their graphs give the op's location.
    """

    def __init__(self, ctx: RankContext, roots: Sequence[Any] = ()) -> None:
        super().__init__()  # type: ignore[no-untyped-call]
        self.ctx = ctx
        self.roots = list(roots)

    def __torch_dispatch__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if PythonLevel.depth == 0 and not self.ctx.suspended:
            name = func._schema.name
            if not name.startswith(("aten::", "prim::")):  # an opaque kernel: judged by what goes in and out
                out = func(*args, **kwargs)
                if PythonLevel.opaque and PythonLevel.opaque[-1] == name:
                    return out  # called from Python: `HandlerMode` names it at the user's line
                found = kernel_call(self.ctx, name, args, kwargs, out)
                if found is not None:
                    self.ctx.count(handler_count("unintercepted", name))
                    record_unrouted(self.ctx, name, found[0], "custom_op", function=name, kernel=found[1])
                return out
            kind = aten_kind(name)
            if kind in _SCATTERS or kind in _TOTALS or kind in ("aten::segment_reduce", "aten::bincount"):
                aggregation = classify_aten(self.ctx, name, _bind(func, args, kwargs))
                if aggregation is not None:
                    self._name(name, aggregation)
        return func(*args, **kwargs)

    def _name(self, name: str, aggregation: str) -> None:
        op = name.replace("aten::", "aten.")
        self.ctx.count(handler_count("unintercepted", op))
        if PythonLevel.opaque:
            record_unrouted(self.ctx, op, aggregation, "custom_op", function=PythonLevel.opaque[-1])
        else:
            record_unrouted(self.ctx, op, aggregation, "native", aten=name, roots=self.roots)
