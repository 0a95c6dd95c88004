"""Auto-fix rules into and out of scatter mode `owned_complete` (models that build their own graph).

`halo_correction_to_owned_complete`: under `halo_correction` a wrapper that asked for no neighbour
list through `batch.neighbor_list` but whose per-edge aggregations the handlers corrected builds its
own graph over every local row, so summing halo partials into owners double counts the edges that
cross ranks. The refresh-only policy fits it with a one-cutoff halo: switched to it first.

`owned_complete_to_local`: the policy holds only when every per-atom state a later layer reads is
the result of a per-edge → per-atom aggregation the handlers refresh. Failing outputs under it with a
halo at least one cutoff deep (a shallower one is `widen_halo`'s) are its evidence that some state
escapes the refresh: no aggregation went through a scatter at all (a dense matrix product, a sum over
a padded neighbour matrix), or a per-atom quantity is computed outside one (a degree counted from a
dense distance matrix). `local`, with a halo as deep as the receptive field, needs no refresh: the
halo `halo_bounds.local_halo` derives from the measured depth and reach, and the rule is skipped when
that halo would make the partition degenerate (`halo_bounds.to_local`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..report.handler_counts import fired
from ..spec import MLIPSpec
from .halo_bounds import Skip, one_cutoff_words, to_local

if TYPE_CHECKING:
    from .autofix import FixContext

__all__ = ["halo_correction_to_owned_complete", "owned_complete_to_local", "refreshed_count"]

_EPS = 1e-6


def refreshed_count(handler_counts: Mapping[str, int]) -> int:
    """How many per-edge → per-atom aggregations the ranks refreshed under `owned_complete`."""
    return fired(handler_counts, "halo_refresh")


def halo_correction_to_owned_complete(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    """`halo_correction` → `owned_complete` for a wrapper that builds its own graph (see the module
    docstring); None unless outputs fail, per-edge aggregations were corrected and the reference
    asked `batch.neighbor_list` for nothing."""
    policy = ctx.spec.distribution.policy
    if policy.kind != "halo" or policy.scatter_mode != "halo_correction" or not ctx.failing:
        return None
    if not fired(ctx.handler_counts, "halo_scatter_correction") or ctx.reference.get("neighbor_cutoffs"):
        return None
    spec = ctx.spec.copy()
    spec.distribution.policy.scatter_mode = "owned_complete"
    spec.distribution.policy.halo_width = None
    return spec, (
        "the backbone builds its own neighbour list (halo-unaware), so halo_correction double counts the edges "
        f"that cross ranks; switched scatter_mode to owned_complete: {one_cutoff_words(ctx.reference)} whose rows "
        "are overwritten by their owners' values after each aggregation (local would need a halo as deep as the "
        "receptive field)"
    )


def _shallow(halo: Mapping[str, Any]) -> bool:
    """Whether the halo completeness says the halo is shallower than the one cutoff the mode needs."""
    width, required = halo.get("halo_width"), halo.get("required_width")
    if halo.get("matches", True) or width is None or required is None:
        return False
    return float(width) + _EPS < float(required)


def owned_complete_to_local(ctx: FixContext) -> tuple[MLIPSpec, str] | Skip | None:
    """`owned_complete` → `local` when outputs fail with a halo at least one cutoff deep (see the
    module docstring), with the halo `halo_bounds.local_halo` derives, stated in the rationale with
    which evidence: no refreshed aggregation, or refreshed ones with outputs still off; a `Skip` when
    that halo would make the partition degenerate."""
    policy = ctx.spec.distribution.policy
    if policy.kind != "halo" or policy.scatter_mode != "owned_complete" or not ctx.failing:
        return None
    if _shallow(ctx.halo_completeness):
        return None  # a halo shallower than the first layer's edges: widen_halo, not another mode
    current = ctx.halo_completeness.get("halo_width")
    switched = to_local(ctx.spec, ctx.reference, ctx.batch, ctx.world_size, None if current is None else float(current))
    if isinstance(switched, Skip):
        return switched
    spec, halo = switched
    refreshed = refreshed_count(ctx.handler_counts)
    if not refreshed:
        why = (
            "no per-edge → per-atom aggregation went through a scatter the runtime sees (e.g. a dense matrix "
            "product or a sum over a padded neighbour matrix), so the halo rows were never refreshed from their "
            "owners"
        )
    else:
        why = (
            f"{refreshed} aggregation(s) were refreshed from their owners, yet {', '.join(ctx.failing)} differ: "
            "some per-atom quantity is computed outside those aggregations (e.g. a degree or density counted "
            "from a dense distance matrix), and its halo rows are wrong"
        )
    return spec, (
        f"under owned_complete {why}; switched scatter_mode to local, which needs no refresh (halo as deep as "
        f"the receptive field: {halo})"
    )
