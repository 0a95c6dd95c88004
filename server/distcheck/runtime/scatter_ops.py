"""One description of every scatter-like torch call the handlers route, whatever its spelling.

`parse_scatter` reads `index_add`, `scatter_add`, `scatter_reduce`, `index_reduce`, accumulating
`index_put` and `scatter(..., reduce=...)` — as `torch.<op>`, `Tensor.<op>`, `Tensor.<op>_` or with
`out=` — into a `Scatter` along dim 0 with a scatter-style index (one entry per source element), so a
handler computes any of them as `scatter_add` / `scatter_reduce` on fresh tensors. `finish` gives the
caller what the original call would have: the result, written into the caller's tensor for in-place
forms, into `out` for `out=` forms.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = ["ATOM_ROWS_ATTR", "SCATTER_FUNCS", "AtomRows", "Scatter", "atom_rows", "finish", "parse_scatter"]

_T = torch.Tensor
_INDEX_ADD = {torch.index_add, _T.index_add, _T.index_add_}
_SCATTER_ADD = {torch.scatter_add, _T.scatter_add, _T.scatter_add_}
_SCATTER_REDUCE = {torch.scatter_reduce, _T.scatter_reduce, _T.scatter_reduce_}
_INDEX_REDUCE = {torch.index_reduce, _T.index_reduce, _T.index_reduce_}
_INDEX_PUT = {torch.index_put, _T.index_put, _T.index_put_}
_SCATTER = {torch.scatter, _T.scatter, _T.scatter_}
_INPLACE = {_T.index_add_, _T.scatter_add_, _T.scatter_reduce_, _T.index_reduce_, _T.index_put_, _T.scatter_}
SCATTER_FUNCS = _INDEX_ADD | _SCATTER_ADD | _SCATTER_REDUCE | _INDEX_REDUCE | _INDEX_PUT | _SCATTER
"""Every torch callable `parse_scatter` reads."""

_REDUCE_NAMES = {"add": "sum", "sum": "sum", "multiply": "prod", "prod": "prod", "mean": "mean"}
ATOM_ROWS_ATTR = "_distcheck_atom_rows"


@dataclass(frozen=True)
class AtomRows:
    """What a tensor selected from a per-atom tensor by a boolean mask holds: per row, whether this
    rank owns that atom, and its system."""

    owned: torch.Tensor
    systems: torch.Tensor


def atom_rows(x: Any) -> AtomRows | None:
    """The `AtomRows` tag of `x` when its rows are a masked selection of this rank's atoms."""
    rows = getattr(x, ATOM_ROWS_ATTR, None) if isinstance(x, torch.Tensor) else None
    if isinstance(rows, AtomRows) and x.ndim >= 1 and x.shape[0] == rows.owned.shape[0]:
        return rows
    return None


@dataclass
class Scatter:
    """A scatter-like call along dim 0: `target[index[i, …], …] ⊕= src[i, …]` with `⊕` = `reduce`
    (`sum`, `mean`, `amax`, `amin`, `prod`); `rows_index` is the 1-D index of source rows (the
    system or atom each source row goes to)."""

    func: Any
    name: str
    target: torch.Tensor
    index: torch.Tensor
    rows_index: torch.Tensor
    src: torch.Tensor
    reduce: str
    include_self: bool
    out: torch.Tensor | None
    call_args: tuple[Any, ...] = ()
    call_kwargs: Mapping[str, Any] = field(default_factory=dict)

    def call_original(self) -> Any:
        """The call as written, unchanged (this rank's partial where it aggregates across ranks)."""
        return self.func(*self.call_args, **self.call_kwargs)

    @property
    def label(self) -> str:
        """`scatter_reduce(amax)`, `index_add`: the op as the user wrote it."""
        plain = {"index_add", "scatter_add"}
        return (
            self.name
            if self.name in plain or (self.name == "index_put" and self.reduce == "sum")
            else (f"{self.name}({self.reduce})")
        )


def _bind(args: Sequence[Any], kwargs: Mapping[str, Any], names: Sequence[str]) -> dict[str, Any]:
    out = dict(zip(names, args))
    out.update(kwargs)
    return out


def parse_scatter(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Scatter | None:
    """The call as a `Scatter`, or None when it is not an aggregation along dim 0 (another dim, a
    plain write, a non-tensor target, an index of another shape)."""
    if func in _INDEX_PUT:
        a = _bind(args, kwargs, ("input", "indices", "values", "accumulate"))
        indices = a.get("indices")
        if not a.get("accumulate") or not isinstance(indices, (list, tuple)) or len(indices) != 1:
            return None
        a.update(dim=0, index=indices[0], source=a.get("values"), reduce="sum")
        name = "index_put"
    elif func in _INDEX_ADD or func in _INDEX_REDUCE:
        a = _bind(args, kwargs, ("input", "dim", "index", "source", "reduce"))
        name = "index_add" if func in _INDEX_ADD else "index_reduce"
        if func in _INDEX_ADD:
            a["reduce"] = "sum"
    elif func in _SCATTER_ADD or func in _SCATTER_REDUCE or func in _SCATTER:
        a = _bind(args, kwargs, ("input", "dim", "index", "src", "reduce"))
        if func in _SCATTER:
            if "value" in a:
                a["src"] = a.pop("value")
            if a.get("reduce") is None:
                return None  # a plain scatter writes, it does not aggregate
        name = "scatter_add" if func in _SCATTER_ADD else ("scatter" if func in _SCATTER else "scatter_reduce")
        if func in _SCATTER_ADD:
            a["reduce"] = "sum"
    else:
        return None
    target, index = a.get("input"), a.get("index")
    if not isinstance(target, torch.Tensor) or target.ndim == 0 or not isinstance(index, torch.Tensor):
        return None
    if a.get("dim") not in (0, -target.ndim) or index.ndim == 0 or index.dtype == torch.bool:
        return None
    src = a.get("source", a.get("src"))
    if not isinstance(src, torch.Tensor):
        if not isinstance(src, (int, float)) or name in ("index_add", "index_reduce", "index_put"):
            return None
        src = torch.full(index.shape, float(src), dtype=target.dtype, device=target.device)
    reduce = _REDUCE_NAMES.get(str(a.get("reduce")), str(a.get("reduce")))
    if name in ("index_add", "index_reduce", "index_put"):
        if index.ndim != 1 or src.ndim != target.ndim or src.shape[0] != index.shape[0]:
            return None
        alpha = a.get("alpha", 1)
        if alpha != 1:
            src = src * alpha
        rows_index = index
        index = index.reshape((-1,) + (1,) * (src.ndim - 1)).expand(src.shape)
    else:
        if index.ndim != src.ndim:
            return None
        if tuple(src.shape) != tuple(index.shape):
            src = src[tuple(slice(0, s) for s in index.shape)]
        rows_index = index.reshape(index.shape[0], -1)[:, 0]
    include_self = bool(a.get("include_self", True))
    return Scatter(
        func, name, target, index, rows_index, src, reduce, include_self, a.get("out"), tuple(args), dict(kwargs)
    )


def finish(sc: Scatter, result: torch.Tensor) -> torch.Tensor:
    """What the original call returns: `result`, written into the target for an in-place form and
    into `out=` when given."""
    dest = sc.target if sc.func in _INPLACE else sc.out
    if dest is None:
        return result
    needs_graph = dest.requires_grad or result.requires_grad
    with contextlib.nullcontext() if needs_graph else torch.no_grad():
        dest.copy_(result)
    return dest
