"""Regions of the user's model run under `torch.utils.checkpoint`: recomputed inside the backward under
the handler state their forward ran under, and counted once.

A non-reentrant checkpoint (`checkpoint(fn, ..., use_reentrant=False)`, `checkpoint_sequential`, any
wrapper built on them) keeps no activations of `fn`: when the backward first needs one, it runs `fn`
again (from a saved-tensor unpack hook) and checks that every tensor it saves has the shape, dtype and
device the forward's had. The backward runs inside `torch.autograd.grad`, which the rank's
`dispatch.HandlerMode` issues from its own `__torch_function__`, where the mode is off: without this
module the recomputation runs unrouted, saves other tensors than the handlers' forward did (a
`CheckpointError`), and would compute this rank's partial aggregates if it did not.

`recomputed_under(handler, ctx)`, entered with the rank's `HandlerMode`, wraps the function torch
recomputes (`torch.utils.checkpoint._checkpoint_without_reentrant_generator`'s `fn`, looked up at each
call, so every spelling of the call reaches it): where the handlers were on at the checkpoint call, its
recomputation runs through them again (`_Recompute`, as `function_adjoint.AdjointMode` sends a
Function's recomputing backward), with the suspension the forward had, and with early stop off, so
every rank runs the region's collectives whole and in the same order (a `set_checkpoint_early_stop`
around the call still rules). What the recomputation counts
is the forward's again: `counted_once` puts the handler counts and unrouted records back as they were
(the report's counts are per forward). The reentrant form (`use_reentrant=True`) is a
`torch.autograd.Function` (`CheckpointFunction`), handled as any user Function
(`runtime.autograd_functions`: its backward recomputes with autograd on).

A recomputation on a rank that still saves other tensors than its forward (the handlers routed it
otherwise; the single-process run got past the same check) is named with the checkpoint call's
file:line and the step that fixes it (`renamed_mismatch`: a `RecomputeMismatch` raised from torch's
`CheckpointError` where the rank's handlers differentiate).
"""

from __future__ import annotations

import contextlib
import copy
import os
import sys
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch.utils.checkpoint as torch_checkpoint
from torch.overrides import TorchFunctionMode, _get_current_function_mode_stack

from .context import RankContext
from .unrouted import user_frame

__all__ = ["Counted", "RecomputeMismatch", "counted_once", "recomputed_under", "renamed_mismatch"]

_GENERATOR = "_checkpoint_without_reentrant_generator"


@dataclass
class Counted:
    """What `counted_once` saw: whether the block counted any handler (`routed`)."""

    routed: bool = False


@contextmanager
def counted_once(ctx: RankContext) -> Iterator[Counted]:
    """Run a recomputation of the forward: on exit (also on error) the handler counts, the unrouted
    records and their per-line call counts are what they were on entry; `Counted.routed` says whether
    the block counted any handler."""
    counts = Counter(ctx.handler_counts)
    unrouted = copy.deepcopy(ctx.unrouted)
    calls = dict(ctx.unrouted_calls)
    seen = Counted()
    try:
        yield seen
    finally:
        seen.routed = sum(ctx.handler_counts.values()) > sum(counts.values())
        ctx.handler_counts.clear()
        ctx.handler_counts.update(counts)
        ctx.unrouted.clear()
        ctx.unrouted.update(unrouted)
        ctx.unrouted_calls.clear()
        ctx.unrouted_calls.update(calls)


def _modes() -> list[Any]:
    """The torch-function modes on the stack now, innermost last."""
    return list(_get_current_function_mode_stack())  # type: ignore[no-untyped-call]


class _Recompute(TorchFunctionMode):
    """Sends every torch call of a recomputation through `handler` (the rank's `HandlerMode`)."""

    def __init__(self, handler: Any) -> None:
        super().__init__()
        self.handler = handler  # the rank's `dispatch.HandlerMode`

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        return self.handler.__torch_function__(func, types, args, kwargs or {})


@dataclass(frozen=True)
class RegionSite:
    """Where the user called `checkpoint` (their innermost frame at the call)."""

    file: str | None
    line: int | None


_LAST: list[RegionSite] = []  # the region recomputed last in this process (named on a mismatch)


class _Region:
    """`fn` as the checkpoint recomputes it: under the handler state of the forward's call."""

    def __init__(self, fn: Callable[..., Any], handler: TorchFunctionMode, ctx: RankContext, site: RegionSite) -> None:
        self.fn = fn
        self.handler = handler
        self.ctx = ctx
        self.site = site
        self.routed = handler in _modes()
        self.suspended = ctx.suspended

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        _LAST[:] = [self.site]
        if not self.routed:
            return self.fn(*args, **kwargs)
        ctx, suspended = self.ctx, self.ctx.suspended
        on = self.handler in _modes()  # unpacked in the forward itself
        mode = contextlib.nullcontext() if on else _Recompute(self.handler)
        ctx.suspended = self.suspended
        try:
            with counted_once(ctx), mode:
                return self.fn(*args, **kwargs)
        finally:
            ctx.suspended = suspended


@contextmanager
def recomputed_under(handler: TorchFunctionMode, ctx: RankContext) -> Iterator[None]:
    """While the block runs, a non-reentrant checkpoint called with `handler` on recomputes its region
    through `handler` under `ctx`'s suspension at the call, early stop off, counted once (see the module
    docstring); torch's function is put back on exit, also on error."""
    original = getattr(torch_checkpoint, _GENERATOR)

    def generator(fn: Callable[..., Any], preserve_rng_state: bool = True, *rest: Any, **kwargs: Any) -> Any:
        given = list(rest)  # context_fn, determinism_check, debug, early_stop, *args
        if len(given) >= 4:
            given[3] = False
        caller = user_frame(sys._getframe(1))
        site = RegionSite(
            os.path.abspath(caller.f_code.co_filename) if caller is not None else None,
            caller.f_lineno if caller is not None else None,
        )
        return original(_Region(fn, handler, ctx, site), preserve_rng_state, *given, **kwargs)

    setattr(torch_checkpoint, _GENERATOR, generator)
    try:
        yield
    finally:
        setattr(torch_checkpoint, _GENERATOR, original)


class RecomputeMismatch(RuntimeError):
    """A checkpointed region whose recomputation saved other tensors than its forward did."""


def renamed_mismatch(error: BaseException) -> BaseException:
    """`error`, or, when it is torch's `CheckpointError` (raised on a rank: the single-process run
    recomputed the region alike), a `RecomputeMismatch` naming the region recomputed last (the
    checkpoint call's file:line) and the step that fixes it."""
    if not isinstance(error, torch_checkpoint.CheckpointError):
        return error
    site = _LAST[0] if _LAST else RegionSite(None, None)
    where = f" at {site.file}:{site.line}" if site.file is not None else ""
    said = next((line for line in str(error).splitlines() if line.strip()), "")
    return RecomputeMismatch(
        f"the region checkpointed{where} (torch.utils.checkpoint) saved other tensors when the backward "
        "recomputed it on this rank than in its forward, while the single-process run recomputed it alike: "
        "distcheck's handlers did not route its recomputation as they routed its forward. Validate the model "
        "with that function called directly instead of through checkpoint (checkpointing changes memory use, "
        f"not values). torch said: {said}"
    )
