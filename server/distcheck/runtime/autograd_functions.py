"""Aggregations inside the user's own `torch.autograd.Function`s: routed exactly, or named.

A Function's forward runs with autograd off and its backward is the user's code. The handlers route an
aggregation inside the forward as anywhere else, so the values are exact, but the exchange they add
is in no autograd graph: the user's backward computes this rank's local adjoint, and the gradients
that cross ranks are lost (forces off near the domain boundaries, energies exact).

`running_function` finds, from the Python stack, the Function whose forward is running (any subclass
of `torch.autograd.Function`, by its `apply` and its ctx, never by name). `route_in_function`
(per-edge → per-atom) and `system_sum_in_function` (per-atom → per-system) then route the aggregation
and record it on the Function's ctx (for a Function with `setup_context`, whose forward gets none, on
the node of the Function that returned the aggregation, found once it has: `resolve_pending`; for a
Function applied inside another's forward, which has no node, on the outer one's), whose
backward runs under `function_adjoint.AdjointMode`:

- **exact** when the handler's map of this rank's own aggregate is linear (`edge_handlers.linear_exchange`:
  a sum under `halo_correction`, any reduce under `owned_complete`; `reduce_handlers.linear_system_exchange`:
  a per-system sum or mean): the user's backward gathers the aggregated gradient by the aggregation's
  index (`index_select`, `[index]`, `gather`, `take_along_dim`: the adjoint of a scatter), and that
  gather's source, a tensor computed from the incoming gradients, is first put through the exchange's
  adjoint, computed by autograd on the handler's own exchange; a per-system gather then keeps the
  owned rows, and a Function that returns the all-reduced sum as it is reads as an all-reduce to the
  replicated-seed rule (`exchange.REPLICATED_NODE`). Counted as the handler counts it anywhere else.
- **named** otherwise, when the backward runs: an aggregation whose exchange is not linear (amax, amin),
  one whose gather the backward never made (it computes the adjoint another way), a total over the
  atoms (`name_in_function`: no index to gather by). It is recorded as unrouted at the op's line in the
  Function's forward (`function_mark.function_label`), called from the line that applied the Function.
  An aggregation inside a Function whose inputs need no gradient (forward only) is exact as routed
  and named nowhere.
- **recomputed**: a backward that runs the forward again with autograd on (the memory-saving pattern)
  runs it through the rank's handlers, so its graph holds their differentiable exchanges, exact as any
  forward; nothing of that Function is named then, and what the recomputation counts is not counted
  again (`checkpoint_regions.counted_once`).
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import os
import sys
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from types import FrameType
from typing import Any

import torch
from torch.autograd.function import BackwardCFunction
from torch.overrides import TorchFunctionMode

from . import edge_handlers, reduce_handlers
from .checkpoint_regions import Counted, counted_once
from .context import RankContext
from .exchange import REPLICATED_NODE
from .function_adjoint import AdjointMode, AdjointRecord, tensors_in
from .function_mark import function_label
from .scatter_ops import Scatter
from .unrouted import Site, record_unrouted, user_frame

__all__ = [
    "FunctionCall",
    "name_in_function",
    "pending",
    "resolve_pending",
    "route_in_function",
    "running_function",
    "system_sum_in_function",
    "use_handler",
]

_APPLY = torch.autograd.Function.apply.__func__.__code__  # type: ignore[attr-defined]
_RECORDS = "_distcheck_function_records"


@dataclass
class FunctionCall:
    """The user's Function whose forward is running: its class, its ctx (None for a Function with
    `setup_context`, whose forward gets none), whether its node will take part in a backward (an input
    needs a gradient and grad mode was on at `apply`), where it was applied (the user's line), and the
    Function whose forward applied it, when it was applied inside one (`outer`)."""

    cls: type
    ctx: Any
    needs_grad: bool
    call_file: str | None
    call_line: int | None
    outer: FunctionCall | None = None


def _calls(start: FrameType | None) -> list[FunctionCall]:
    """Every `Function.apply` running in this thread, innermost first."""
    frame, ctx, found = start, None, []
    while frame is not None:
        code = frame.f_code
        if code is _APPLY:
            cls = frame.f_locals.get("cls")
            if not isinstance(cls, type):
                break
            ctx = ctx if ctx is not None and getattr(type(ctx), "_forward_cls", None) is cls else None
            if ctx is not None:
                # its graph edges, set before the forward runs: none when grad mode was off at apply
                needs = any(fn is not None for fn, _ in ctx.next_functions)
            else:
                given = [*frame.f_locals.get("args", ()), *dict(frame.f_locals.get("kwargs") or {}).values()]
                needs = any(t.requires_grad for t in tensors_in(given))
            caller = user_frame(frame.f_back)
            file = os.path.abspath(caller.f_code.co_filename) if caller is not None else None
            found.append(FunctionCall(cls, ctx, needs, file, caller.f_lineno if caller is not None else None))
            ctx = None
        elif code.co_name == "forward" and code.co_argcount >= 1 and ctx is None:
            first = frame.f_locals.get(code.co_varnames[0])
            if isinstance(first, BackwardCFunction):
                ctx = first
        frame = frame.f_back
    for inner, outer in itertools.pairwise(found):
        inner.outer = outer
    return found


def running_function() -> FunctionCall | None:
    """The `torch.autograd.Function` whose backward will mirror an aggregation running now, or None
    when no Function's forward is running in this thread.

    A forward runs with grad mode off, under `Function.apply` (its frame holds the class); its ctx is
    the forward's first argument, an instance of the class's backward node. A Function applied inside
    another's forward (grad mode off) has no node in any graph: the outer Function's backward is the one
    that runs, so the innermost Function with a live node is chosen (one with `setup_context` waits for
    `resolve_pending`, its `outer` the fallback); with none, the innermost, needing no gradient."""
    if torch.is_grad_enabled():
        return None
    calls = _calls(sys._getframe(1))
    for call in calls:
        if call.ctx is None or call.needs_grad:
            return call
    return calls[0] if calls else None


def _live(call: FunctionCall | None) -> FunctionCall | None:
    """The first of `call` and its outer Functions with a ctx whose node takes part in a backward."""
    while call is not None and not (call.ctx is not None and call.needs_grad):
        call = call.outer
    return call


def _site(call: FunctionCall) -> Site:
    user = user_frame(sys._getframe(1))
    file = os.path.abspath(user.f_code.co_filename) if user is not None else None
    line = user.f_lineno if user is not None else None
    return Site(file, line, function_label(call.cls.__qualname__), call.call_file, call.call_line)


def route_in_function(ctx: RankContext, sc: Scatter, call: FunctionCall) -> torch.Tensor | None:
    """The handler's result of the per-edge → per-atom `sc` inside `call`'s forward (None where the
    handler has none), with what the backward needs recorded on the Function's ctx."""
    found = edge_handlers.linear_exchange(ctx, sc)
    if found is None:
        result = edge_handlers.edge_to_atom(ctx, sc)
        if result is not None:
            name_in_function(ctx, sc.label, "per_edge_to_per_atom", call, sc)
        return result
    edge_handlers.count_route(ctx, sc)
    local, exchange = found
    result = exchange(local)
    if call.needs_grad:
        record = AdjointRecord(ctx, sc.label, "per_edge_to_per_atom", _site(call), sc.rows_index, int(local.shape[0]))
        record.exchange = exchange
        _keep(call, record, (result, sc.target, sc.out))
    return result


def system_sum_in_function(
    ctx: RankContext, sc: Scatter, owned: torch.Tensor, call: FunctionCall
) -> torch.Tensor | None:
    """The handler's result of the per-atom → per-system `sc` (owned rows `owned`) inside `call`'s
    forward, None where the handler has none. A sum or mean is recorded for its backward: the gather
    of the per-system gradient by the system index reads the all-reduce's adjoint and keeps the owned
    rows (`reduce_handlers.mask_rows`). When the Function returns the result as it is (and its target
    needs no gradient), its node is marked replicated (`exchange.REPLICATED_NODE`), as an all-reduce is."""
    found = reduce_handlers.linear_system_exchange(ctx, sc, owned)
    if found is None:
        result = reduce_handlers.per_system_scatter(ctx, sc, owned)
        if result is not None:
            name_in_function(ctx, sc.label, "per_atom_to_per_system", call, sc)
        return result
    local, exchange = found
    result = exchange(local)
    if call.needs_grad:
        record = AdjointRecord(ctx, sc.label, "per_atom_to_per_system", _site(call), sc.rows_index, int(local.shape[0]))
        record.exchange = exchange
        record.post = lambda x: reduce_handlers.mask_rows(ctx, x, owned=owned)
        _keep(call, record, (result, sc.target, sc.out), replicated=not sc.target.requires_grad)
    return result


def name_in_function(
    ctx: RankContext, label: str, aggregation: str, call: FunctionCall, sc: Scatter | None = None
) -> None:
    """Record the routed `label` (of `sc`) inside `call`'s forward, to be named when its backward runs;
    never when no input needs a gradient."""
    if call.needs_grad:
        _keep(
            call, AdjointRecord(ctx, label, aggregation, _site(call), None), () if sc is None else (sc.target, sc.out)
        )


@dataclass
class _Pending:
    """A record made inside a Function's forward that waits for the Function to return: the tensors
    the aggregation returned; the node of the Function that returns one of them is its ctx (for a
    Function with `setup_context`, whose forward gets none) and, with `replicated`, is marked so."""

    cls: type
    results: list[weakref.ref[torch.Tensor]]
    record: AdjointRecord | None
    replicated: bool
    outer: FunctionCall | None  # the Function that applied this one, if any (its node may run instead)


_PENDING: list[_Pending] = []


def _keep(
    call: FunctionCall, record: AdjointRecord, results: Sequence[torch.Tensor | None], replicated: bool = False
) -> None:
    refs = [weakref.ref(t) for t in results if t is not None]
    if call.ctx is not None:
        _attach(call.ctx, record)
        if replicated:
            _PENDING.append(_Pending(call.cls, refs, None, True, None))
    else:
        _PENDING.append(_Pending(call.cls, refs, record, replicated, call.outer))


def resolve_pending() -> None:
    """Settle each pending record once its Function has returned (grad mode is back on): attached to
    the node of the Function that returned its aggregation as it is (and that node marked replicated
    when asked), else to the live node of the Function it was applied inside, else named now when the
    Function returned something else (no node to attach to); one inside Functions none of whose nodes
    runs a backward is dropped."""
    while _PENDING:
        waiting = _PENDING.pop(0)
        node = getattr(waiting.cls, "_backward_cls", None)
        tensors = [t for t in (r() for r in waiting.results) if t is not None]
        found = next((t.grad_fn for t in tensors if node is not None and isinstance(t.grad_fn, node)), None)
        if found is not None and waiting.replicated:
            found.__dict__[REPLICATED_NODE] = True
        if waiting.record is None:
            continue
        live = _live(waiting.outer)
        if found is not None:
            _attach(found, waiting.record)
        elif live is not None:
            _attach(live.ctx, waiting.record)  # applied inside another Function's forward: its backward runs
        elif waiting.outer is None:
            _name(waiting.record)  # the Function returned something else: no node to mirror it in


def pending() -> bool:
    """Whether some record waits for its Function's node (`resolve_pending`)."""
    return bool(_PENDING)


_HANDLER: list[Any] = []  # the rank's `dispatch.HandlerMode` (which imports this module)


def use_handler(mode: TorchFunctionMode) -> None:
    """`mode` (the rank's `dispatch.HandlerMode`) routes what a Function's backward recomputes; what
    an earlier run left pending (a forward that ran while grad mode stayed off) is dropped."""
    _PENDING.clear()
    _HANDLER[:] = [mode]


def _name(record: AdjointRecord) -> None:
    record_unrouted(record.rank, record.label, record.aggregation, "python", site=record.site)


def _attach(fctx: Any, record: AdjointRecord) -> None:
    records = fctx.__dict__.get(_RECORDS)
    if records is None:
        records = fctx.__dict__[_RECORDS] = []
        # the engine calls the node's `apply`: this instance's runs the class's under AdjointMode
        fctx.apply = functools.partial(_backward, weakref.ref(fctx))
    records.append(record)


def _backward(ref: weakref.ref[Any], *grads: Any) -> Any:
    fctx = ref()
    if fctx is None:
        raise RuntimeError("distcheck: a torch.autograd.Function's backward ran after its node was freed")
    records: list[AdjointRecord] = fctx.__dict__.get(_RECORDS, [])
    handler = _HANDLER[0] if _HANDLER else None
    once = counted_once(records[0].rank) if records else contextlib.nullcontext(Counted())
    with once as seen, AdjointMode(records, [g for g in grads if isinstance(g, torch.Tensor)], handler):
        out = type(fctx).apply(fctx, *grads)
    if seen.routed:
        return out  # the backward recomputed the forward and the handlers routed it (counted once): exact
    for record in records:
        if record.rows is None or not record.gathered:
            _name(record)
    return out
