"""The `function_to_local` auto-fix rule: a per-edge → per-atom aggregation inside the user's own
`torch.autograd.Function` that the runtime cannot route exactly (`runtime.autograd_functions`: its
exchange is not linear, or the hand-written backward never gathers the gradient by its index) is
computed whole on every rank under scatter mode `local`, with a halo as deep as the receptive field,
so nothing has to cross ranks inside the Function.

Evidence, all of it required: an output failed under a halo policy whose scatter mode routes per-edge →
per-atom aggregations (`halo_correction`, `owned_complete`), and some rank named such an aggregation
inside a Function's forward (`function_mark.function_of`). It needs a new run. The switch and its
halo are `halo_bounds.to_local`'s (a `Skip` when that halo would make the partition degenerate).
`autofix.RULES` lists it before the other switches to `local`, whose rationales name other causes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..report import merge_unrouted
from ..runtime.function_mark import function_of
from .halo_bounds import Skip, to_local
from .unrouted import describe

if TYPE_CHECKING:
    from .autofix import FixContext, RuleResult

__all__ = ["function_to_local"]


def function_to_local(ctx: FixContext) -> RuleResult:
    """The spec switched to scatter mode `local` and why, naming the Function and the aggregation's line;
    None without the evidence above."""
    policy = ctx.spec.distribution.policy
    if ctx.run is None or not ctx.failing or policy.kind != "halo":
        return None
    if policy.scatter_mode not in ("halo_correction", "owned_complete"):
        return None
    seen = merge_unrouted([(r.rank, r.unrouted) for r in ctx.run.records])
    inside = [u for u in seen if function_of(u.function) is not None and u.aggregation == "per_edge_to_per_atom"]
    if not inside:
        return None
    current = ctx.halo_completeness.get("halo_width")
    switched = to_local(ctx.spec, ctx.reference, ctx.batch, ctx.world_size, None if current is None else float(current))
    if isinstance(switched, Skip):
        return switched
    spec, halo = switched
    classes = ", ".join(dict.fromkeys(function_of(u.function) or "?" for u in inside))
    return spec, (
        f"the backward of {classes} (torch.autograd.Function) is its own code, so the exchange distcheck adds to "
        f"{'; '.join(describe(u) for u in inside[:3])} is missing from the gradients; switched scatter_mode to "
        f"local, where each rank computes these aggregations whole (halo as deep as the receptive field: {halo})"
    )
