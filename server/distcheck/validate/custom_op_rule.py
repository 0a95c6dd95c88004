"""The `declare_custom_ops` auto-fix rule: add the ready `distribution.custom_ops` entry of each
undeclared `torch.ops` kernel the ranks saw aggregating atoms or edges.

Evidence, all of it required: an output failed; some rank named an undeclared kernel (origin
`"custom_op"`) with a `KernelCall` whose entry is ready (`unrouted.custom_op_entries`: its shapes
fit a transform, every call of it needs the same one); the helper trace found no watched helper at
fault (that rule owns the case); and no aggregation ran inside TorchScript that running it eagerly
could route first. It needs a new run. `RULE` is the table entry (`autofix.Rule`): `autofix.RULES`
lists it right after `run_torchscript_eagerly`.
"""

from __future__ import annotations

from ..report import merge_unrouted
from ..spec import CustomOp, MLIPSpec
from .autofix import FixContext, Rule
from .unrouted import custom_op_entries, describe, eager_remedy_applies

__all__ = ["RULE", "declare_custom_ops"]


def declare_custom_ops(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    """The spec with every ready kernel entry added, and why; None without the evidence above."""
    if ctx.run is None or not ctx.failing:
        return None
    if any(d.get("suspected_gap") and d.get("likely_remedy") for d in ctx.helper_diagnostics):
        return None
    seen = merge_unrouted([(r.rank, r.unrouted) for r in ctx.run.records])
    if eager_remedy_applies(ctx.spec, seen):
        return None
    ready, _ = custom_op_entries(ctx.spec, seen)
    if not ready:
        return None
    spec = ctx.spec.copy()
    for entry in ready:
        spec.distribution.custom_ops.append(CustomOp.from_dict(entry))
    kernels = [u for u in seen if u.op in {e["op"] for e in ready} and u.kernel is not None]
    shown = "; ".join(describe(u) for u in kernels[:3])
    return spec, (
        f"undeclared torch.ops kernel{'s' if len(ready) > 1 else ''} aggregated across atoms or edges on each rank "
        f"({shown}); declared {', '.join(e['op'] for e in ready)} in distribution.custom_ops with the transforms "
        "its shapes call for"
    )


RULE = Rule("declare_custom_ops", True, declare_custom_ops)
"""The rule as `autofix.RULES` holds it."""
