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

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from .context import RankContext
from .kernel_calls import kernel_call
from .unrouted import aten_kind, record_unrouted

__all__ = ["PythonLevel", "ScatterObserver", "classify_aten"]


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
                    self.ctx.count(f"unintercepted[{name}]")
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
        self.ctx.count(f"unintercepted[{op}]")
        if PythonLevel.opaque:
            record_unrouted(self.ctx, op, aggregation, "custom_op", function=PythonLevel.opaque[-1])
        else:
            record_unrouted(self.ctx, op, aggregation, "native", aten=name, roots=self.roots)
