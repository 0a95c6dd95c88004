"""A user's `torch.autograd.Function` backward, run so that it mirrors the exchanges the handlers added
to the aggregations in its forward (`runtime.autograd_functions` records them and runs the backward).

`AdjointMode` follows which tensors the backward computes from its incoming gradients. A gather of
such a tensor along dim 0 by a recorded aggregation's index (`index_select`, `[index]`, `gather`,
`take_along_dim`: the adjoint of a scatter), with the aggregation's rows, first puts it through the
exchange's adjoint, computed by autograd on the handler's own exchange (`exchange_adjoint`), then
applies the record's `post` (a per-system gather keeps the owned rows). What the backward computes
with grad mode on from anything but the gradients (a recomputation of the forward) goes through the
rank's `dispatch.HandlerMode`, as a forward does; calls of autograd itself go straight through (their
seeds are the backward's, never a replicated output's).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from .context import RankContext
from .edge_handlers import Exchange
from .unrouted import Site

__all__ = ["AdjointMode", "AdjointRecord", "exchange_adjoint", "tensors_in"]

_T = torch.Tensor
_GATHERS = {torch.index_select, _T.index_select, _T.__getitem__, torch.gather, _T.gather}
_GATHERS |= {torch.take_along_dim, _T.take_along_dim}
_AUTOGRAD = {torch.autograd.grad, torch.autograd.backward, _T.backward}


@dataclass
class AdjointRecord:
    """One routed aggregation inside a Function's forward, as its backward needs it."""

    rank: RankContext
    label: str
    aggregation: str
    site: Site
    rows: torch.Tensor | None  # the 1-D index of source rows (None: named, no exact adjoint)
    num_rows: int = 0
    exchange: Exchange | None = None
    post: Callable[[torch.Tensor], torch.Tensor] | None = None  # applied to the gather's result
    gathered: bool = False


def tensors_in(value: Any) -> list[torch.Tensor]:
    """The tensors `value` is or holds (in lists and tuples, at any depth), in order."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, (list, tuple)):
        return [t for v in value for t in tensors_in(v)]
    return []


def _gather_rows(func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> torch.Tensor | None:
    """The 1-D row index of a gather along dim 0 (the source is its first argument), or None."""
    names = ("input", "index") if func is _T.__getitem__ else ("input", "dim", "index")
    if func in (torch.take_along_dim, _T.take_along_dim):
        names = ("input", "indices", "dim")
    a = dict(zip(names, args))
    a.update(kwargs)
    source, index = a.get("input"), a.get("index", a.get("indices"))
    if func is _T.__getitem__:
        if isinstance(index, tuple) and index and all(k in (slice(None), Ellipsis) for k in index[1:]):
            index = index[0]
    elif a.get("dim") not in (0, -getattr(source, "ndim", 1)):
        return None
    if not isinstance(source, torch.Tensor) or source.ndim == 0 or not isinstance(index, torch.Tensor):
        return None
    if index.dtype in (torch.bool, torch.uint8) or index.is_floating_point() or index.ndim == 0:
        return None
    return index if index.ndim == 1 else index.reshape(index.shape[0], -1)[:, 0]


class AdjointMode(TorchFunctionMode):
    """Runs a Function's backward: the gather of a gradient by a recorded aggregation's index reads
    the exchange's adjoint of that gradient (see the module docstring). What the backward computes
    with autograd on from anything but the gradients (a recomputation of the forward) goes through
    `handler`, the rank's handlers, as a forward does; calls of autograd itself excepted (their seeds
    are the backward's, never a replicated output's)."""

    def __init__(self, records: Sequence[AdjointRecord], grads: Sequence[torch.Tensor], handler: Any) -> None:
        super().__init__()
        self.records = [r for r in records if r.rows is not None and r.exchange is not None]
        # by identity, each tensor kept alive while the backward runs (so no id is reused)
        self.from_grads: dict[int, torch.Tensor] = {id(g): g for g in grads}
        self.handler = handler  # the rank's `dispatch.HandlerMode`, or None

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        derived = any(id(t) in self.from_grads for t in tensors_in(args) + tensors_in(list(kwargs.values())))
        if self.handler is not None and not derived and torch.is_grad_enabled() and func not in _AUTOGRAD:
            return self.handler.__torch_function__(func, types, args, kwargs)
        record = self._record(func, args, kwargs) if func in _GATHERS and self.records and derived else None
        if record is not None:
            assert record.exchange is not None
            record.gathered = True
            args = (exchange_adjoint(record.exchange, args[0]), *args[1:])
        out = func(*args, **kwargs)
        if record is not None and record.post is not None and isinstance(out, torch.Tensor):
            out = record.post(out)
        if derived:
            self.from_grads.update((id(t), t) for t in tensors_in(out))
        return out

    def _record(self, func: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> AdjointRecord | None:
        """The record whose aggregation this gather (of a tensor computed from the gradients) is the
        adjoint of: the same row index, a source with the aggregation's rows."""
        rows = _gather_rows(func, args, kwargs)
        if rows is None or not args:
            return None
        source = args[0]
        if not isinstance(source, torch.Tensor) or id(source) not in self.from_grads:
            return None
        for record in self.records:
            assert record.rows is not None
            if int(source.shape[0]) != record.num_rows or rows.shape != record.rows.shape:
                continue
            if torch.equal(rows, record.rows.to(rows.device)):
                return record
        return None


def exchange_adjoint(exchange: Exchange, grad: torch.Tensor) -> torch.Tensor:
    """`J^T grad` for the linear `exchange` (its Jacobian `J`), by autograd through the exchange itself."""
    with torch.enable_grad():
        p = torch.zeros_like(grad).detach().requires_grad_(True)
        (out,) = torch.autograd.grad(exchange(p), p, grad, create_graph=grad.requires_grad)
    return out
