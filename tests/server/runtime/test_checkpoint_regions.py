"""`runtime.checkpoint_regions` in one process: a checkpointed region's recomputation runs through the
handler that was on at the checkpoint call, counted once, and a recomputation that saves other tensors
is named at the checkpoint call's line. The handler here is a stand-in mode (the ranks' own runs are
tests/server/validate/test_checkpointed.py)."""

from __future__ import annotations

import inspect
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pytest
import torch
import torch.utils.checkpoint as torch_checkpoint
from torch.overrides import TorchFunctionMode
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from distcheck.runtime.checkpoint_regions import RecomputeMismatch, counted_once, recomputed_under, renamed_mismatch
from distcheck.runtime.context import RankContext


def _ctx() -> RankContext:
    return RankContext(
        rank=0, world_size=2, num_global_atoms=4, num_systems=1,
        local_ids=torch.arange(4), owned_mask=torch.ones(4, dtype=torch.bool),
    )  # fmt: skip


class Handler(TorchFunctionMode):
    """Counts each `sin` it routes as `routed`; with `differ`, routes it otherwise once it has routed it
    once (a sin on an added leading dim: the saved input's shape changes)."""

    def __init__(self, ctx: RankContext, differ: bool = False) -> None:
        super().__init__()
        self.ctx, self.differ, self.seen = ctx, differ, 0

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if func in (torch.sin, torch.Tensor.sin):
            self.ctx.count("routed")
            self.ctx.unrouted.setdefault(("sin",), {"count": 0})["count"] += 1
            self.seen += 1
            if self.differ and self.seen > 1:
                return torch.sin(args[0].unsqueeze(0)).squeeze(0)
        return func(*args, **kwargs)


def region(x: torch.Tensor) -> torch.Tensor:
    return torch.sin(x) * 2.0


# each spelling: the call, the same without checkpoint, how many regions the backward recomputes
# (checkpoint_sequential runs its last segment as it is)
CALLS = {
    "checkpoint": (lambda x: checkpoint(region, x, use_reentrant=False), region, 1),
    "checkpoint_sequential": (
        lambda x: checkpoint_sequential([region, region, region], 3, x, use_reentrant=False),
        lambda x: region(region(region(x))),
        2,
    ),
}


@pytest.mark.parametrize("call", sorted(CALLS))
def test_the_recomputation_runs_through_the_handler_counted_once(call: str) -> None:
    ctx = _ctx()
    handler = Handler(ctx)
    x = torch.linspace(0.1, 1.0, 4, dtype=torch.float64, requires_grad=True)
    run, plain, regions = CALLS[call]
    with recomputed_under(handler, ctx), handler:
        y = run(x)
        forward = handler.seen
        (grad,) = torch.autograd.grad(y.sum(), x)  # the mode is on: torch pops it while it handles grad
    assert handler.seen == forward + regions  # the backward recomputed every region through the handler
    assert ctx.handler_counts["routed"] == forward and ctx.unrouted[("sin",)]["count"] == forward
    (expected,) = torch.autograd.grad(plain(x).sum(), x)
    assert torch.equal(grad, expected)


def test_without_the_handler_at_the_call_the_recomputation_runs_as_written() -> None:
    ctx = _ctx()
    handler = Handler(ctx)
    x = torch.linspace(0.1, 1.0, 4, dtype=torch.float64, requires_grad=True)
    with recomputed_under(handler, ctx):
        torch.autograd.grad(checkpoint(region, x, use_reentrant=False).sum(), x)
    assert handler.seen == 0 and not ctx.handler_counts


def test_torch_gets_its_function_back_also_on_error() -> None:
    ctx = _ctx()
    original = torch_checkpoint._checkpoint_without_reentrant_generator
    with pytest.raises(KeyError), recomputed_under(Handler(ctx), ctx):
        assert torch_checkpoint._checkpoint_without_reentrant_generator is not original
        raise KeyError
    assert torch_checkpoint._checkpoint_without_reentrant_generator is original


def test_a_recomputation_that_saves_other_tensors_is_named_at_the_checkpoint_call() -> None:
    ctx = _ctx()
    handler = Handler(ctx, differ=True)
    x = torch.linspace(0.1, 1.0, 4, dtype=torch.float64, requires_grad=True)
    with recomputed_under(handler, ctx), handler:
        y = CALLS["checkpoint"][0](x)
        with pytest.raises(torch_checkpoint.CheckpointError) as caught:
            torch.autograd.grad(y.sum(), x)
    named = renamed_mismatch(caught.value)
    assert isinstance(named, RecomputeMismatch)
    line = inspect.getsourcelines(CALLS["checkpoint"][0])[1]
    assert f"at {os.path.abspath(__file__)}:{line}" in str(named)
    assert "called directly instead of through checkpoint" in str(named)
    other = RuntimeError("something else")
    assert renamed_mismatch(other) is other


def test_counted_once_puts_back_what_the_block_counted() -> None:
    ctx = _ctx()
    ctx.count("kept")
    ctx.unrouted[("op",)] = {"count": 1}
    with counted_once(ctx) as seen:
        ctx.count("kept")
        ctx.count("new")
        ctx.unrouted[("op",)]["count"] += 1
        ctx.unrouted_calls[("op", "f", 1)] = 1
    assert seen.routed
    assert dict(ctx.handler_counts) == {"kept": 1} and ctx.unrouted == {("op",): {"count": 1}}
    assert not ctx.unrouted_calls
    with counted_once(ctx) as seen:
        pass
    assert not seen.routed
