"""Auto-fix: rule-based spec mutations, each a predicate and a mutation, tried in a fixed order.

Rules that only change consolidation (`drop_double_all_reduce`, `all_reduce_partial_output`,
`switch_per_node_consolidation`) need no new run: they re-consolidate the ranks' outputs and keep
the change only if it makes that output match. The others need a new distributed run.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..option_check import Tolerance, tolerance_of
from ..report import RankDisagreement, merge_unrouted
from ..report.fixes import SkippedFix
from ..report.handler_counts import fired
from ..runtime import pristine as P
from ..runtime.run_result import DistributedRun
from ..spec import HelperAdapter, MLIPSpec
from .diff import compare_output
from .function_rule import function_to_local
from .halo_bounds import Skip, edge_virial_to_halo_correction, to_local, widened_halo
from .owned_complete import halo_correction_to_owned_complete, owned_complete_to_local
from .unrouted import describe, eager_remedy_applies

__all__ = ["RULES", "FixContext", "Proposal", "Rule", "RuleResult", "propose"]

RuleResult = tuple[MLIPSpec, str] | Skip | None
"""What a rule gives: the mutated spec and its rationale, a `Skip` (evidence, but the fix is not tried:
its halo would make the partition degenerate), or None (no evidence)."""


@dataclass
class FixContext:
    """What a rule may look at: the attempt's spec and verdicts, its run, the reference, diagnoses."""

    spec: MLIPSpec
    verdicts: Mapping[str, Mapping[str, Any]]
    reference: Mapping[str, Any]
    run: DistributedRun | None
    helper_diagnostics: Sequence[Mapping[str, Any]] = ()
    halo_completeness: Mapping[str, Any] = field(default_factory=dict)
    handler_counts: Mapping[str, int] = field(default_factory=dict)
    world_size: int = 2
    atol: Tolerance = 1e-5
    rtol: Tolerance = 1e-4
    rank_disagreements: Sequence[RankDisagreement] = ()
    batch: Any = None  # the sample (a `Batch`): bounds how far `widen_halo` may go

    @property
    def failing(self) -> list[str]:
        """Outputs that failed."""
        return [n for n, v in self.verdicts.items() if not v.get("passed")]

    def autograd_derived(self, name: str) -> bool | None:
        """What the reference trace says of output `name`: True when it is what `torch.autograd.grad`
        returned (forces, strain stress), False when it is not, None when the trace does not say."""
        found = (self.reference.get("autograd_derived") or {}).get(name)
        return None if found is None else bool(found)

    def ref(self, name: str) -> torch.Tensor:
        """Reference value of an output."""
        out: torch.Tensor = self.reference["outputs"][name]
        return out

    def matches(self, name: str, value: torch.Tensor) -> bool:
        """Whether `value` passes for output `name` under the tolerances."""
        kind = self.spec.output_kinds.get(name, "global")
        a, t = tolerance_of(self.atol, name, kind), tolerance_of(self.rtol, name, kind)
        return bool(compare_output(name, value, self.ref(name), kind, a, t)["passed"])


@dataclass(frozen=True)
class Proposal:
    """A mutated spec, why, and whether it needs a new distributed run."""

    rule: str
    spec: MLIPSpec
    rationale: str
    needs_run: bool


@dataclass(frozen=True)
class Rule:
    """A named predicate + mutation. `needs_agreeing_ranks`: the rule only fires when no replicated
    output differs between ranks (its mutation cannot make ranks agree, and a disagreement confounds
    the evidence it reads); `propose` checks it."""

    name: str
    needs_run: bool
    apply: Callable[[FixContext], RuleResult]
    needs_agreeing_ranks: bool = False


def _drop_double_all_reduce(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    if ctx.run is None:
        return None
    for name in ctx.failing:
        if name not in ctx.spec.all_reduce_outputs:
            continue
        got, ref = ctx.run.outputs.get(name), ctx.ref(name)
        if got is None or got.shape != ref.shape:
            continue
        atol = tolerance_of(ctx.atol, name, ctx.spec.output_kinds.get(name, "global"))
        with P.shielded():  # the user's replaced torch functions never judge
            scaled = P.mul(P.to(ref, P.float64), ctx.world_size)
            doubled = P.allclose(P.to(got, P.float64), scaled, rtol=1e-6, atol=atol)
        if doubled:
            spec = ctx.spec.copy()
            spec.all_reduce_outputs.remove(name)
            return spec, (
                f"{name} came out {ctx.world_size}× the reference (world_size {ctx.world_size}): the model "
                f"already replicates it, so it was reduced twice; removed it from all_reduce_outputs"
            )
    return None


def _all_reduce_partial(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    if ctx.run is None:
        return None
    for name in ctx.failing:
        if ctx.spec.output_kinds.get(name) not in ("per_graph", "global") or name in ctx.spec.all_reduce_outputs:
            continue
        values = [out[name] for out in ctx.run.rank_outputs if name in out]
        if len(values) != ctx.world_size or any(v.shape != values[0].shape for v in values):
            continue
        if any(ctx.matches(name, v) for v in values):  # a rank holding the whole value is not a partial
            continue
        with P.shielded():
            total = P.sum(P.stack(values), dim=0)
        if ctx.matches(name, total):
            spec = ctx.spec.copy()
            spec.all_reduce_outputs.append(name)
            return spec, (
                f"{name} differs on every rank but the ranks' values add up to the reference: each holds a "
                "partial (e.g. stress by the strain trick); added it to all_reduce_outputs"
            )
    return None


def _switch_per_node(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    """Evidence: the reference trace says whether the output is autograd-derived (summed over copies)
    or not (owned rows only), and the other consolidation makes it match. A switch against the trace
    is never proposed, even when it happens to match (it would hide the real cause)."""
    if ctx.run is None:
        return None
    for name in ctx.failing:
        if ctx.spec.output_kinds.get(name) != "per_node":
            continue
        derived = ctx.autograd_derived(name)
        spec = ctx.spec.copy()
        if name in spec.owned_only_outputs:
            if derived is not True:
                continue
            spec.owned_only_outputs.remove(name)
            how = (
                "summing every copy of an atom (the reference trace shows it is autograd-derived: halo copies "
                "hold contributions)"
            )
        else:
            if derived is not False:
                continue
            spec.owned_only_outputs.append(name)
            how = (
                "reading owned rows only (the reference trace shows it is not autograd-derived: halo copies "
                "repeat the owner's value)"
            )
        if ctx.matches(name, ctx.run.reconsolidate(spec).outputs[name]):
            return spec, f"{name} matches the reference when consolidated by {how}"
    return None


def _helper_gap(d: Mapping[str, Any]) -> bool:
    return bool(d.get("suspected_gap") and d.get("likely_remedy") and not d.get("already_wrapped"))


def _declare_helpers(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    remedies = [d["likely_remedy"] for d in ctx.helper_diagnostics if _helper_gap(d)]
    if not remedies:
        return None
    spec = ctx.spec.copy()
    names = []
    for r in remedies:
        entry = HelperAdapter(**r)
        if spec.helper(entry.qualname) is None:
            spec.distribution.third_party_helpers.append(entry)
            names.append(entry.qualname)
    if not names:
        return None
    return spec, (
        f"declared a `reduction` adapter for {', '.join(names)}: it sums per system behind the runtime's "
        "back, so each rank saw partial sums"
    )


def _run_torchscript_eagerly(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    """Evidence: an aggregation counted inside TorchScript on some rank, under a spec that runs it compiled.
    Leaves the case to `declare_helper_adapter` when the helper trace found the watched helper at fault."""
    if ctx.run is None or not ctx.failing or any(_helper_gap(d) for d in ctx.helper_diagnostics):
        return None
    seen = merge_unrouted([(r.rank, r.unrouted) for r in ctx.run.records])
    if not eager_remedy_applies(ctx.spec, seen):
        return None
    scripted = [u for u in seen if u.origin == "torchscript"]
    spec = ctx.spec.copy()
    spec.distribution.torchscript = "eager"
    return spec, (
        f"{sum(u.count for u in scripted)} aggregation(s) ran inside TorchScript, where the handlers cannot "
        f"route them ({'; '.join(describe(u) for u in scripted[:3])}); set distribution.torchscript to "
        '"eager" so the ranks run the scripted functions as Python'
    )


def _enable_system_reductions(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    if ctx.spec.system_reductions or not ctx.failing:
        return None
    if not any(k.startswith("per_system") for k in ctx.reference.get("counts", {})):
        return None
    spec = ctx.spec.copy()
    spec.system_reductions = True
    return spec, (
        "the model reduces per-atom values per system and system_reductions was off, so each rank "
        "counted its halo atoms; turned system_reductions on"
    )


def _halo_correction_to_local(ctx: FixContext) -> RuleResult:
    policy = ctx.spec.distribution.policy
    if policy.kind != "halo" or policy.scatter_mode != "halo_correction" or not ctx.failing:
        return None
    corrected = fired(ctx.handler_counts, "halo_scatter_correction")
    depth = int((ctx.reference.get("wrapper") or {}).get("num_interactions") or 1)
    scattered = any(k.startswith("edge_aggregation") for k in ctx.reference.get("counts", {}))
    # the halo check found the wrapper halo-unaware (no `batch.neighbor_list`): its advice is this rule's
    unaware = ctx.halo_completeness.get("matches") is False and not ctx.reference.get("neighbor_cutoffs")
    if not corrected and (depth <= 1 or scattered) and not unaware:
        return None
    current = ctx.halo_completeness.get("halo_width")
    switched = to_local(ctx.spec, ctx.reference, ctx.batch, ctx.world_size, None if current is None else float(current))
    if isinstance(switched, Skip):
        return switched
    spec, halo = switched
    deep = f"halo as deep as the receptive field: {halo}"
    if unaware and not corrected:
        return spec, (
            "the model built no neighbour list through batch.neighbor_list and none of its aggregations is a "
            "scatter the runtime can correct, so halo_correction cannot see the edges that cross ranks; "
            f"switched scatter_mode to local ({deep})"
        )
    if not corrected:
        return spec, (
            f"the model passes messages {depth} times but none of its neighbour aggregations is a scatter the "
            "runtime can correct (e.g. sums over a padded neighbour matrix), so halo rows are never refreshed "
            f"between layers; switched scatter_mode to local ({deep})"
        )
    if not ctx.reference.get("neighbor_cutoffs"):
        return spec, (
            "the backbone builds its own neighbour list (halo-unaware), so halo_correction double counts "
            f"cross-rank edges; switched scatter_mode to local ({deep})"
        )
    # neighbours from batch.neighbor_list and corrected scatters, yet outputs differ: a hypothesis only
    return spec, (
        "the outputs differ although every per-edge aggregation was corrected: a per-edge computation may "
        "need edges centred on halo atoms (angles, edge-to-edge messages), which only local mode builds; "
        f"trying scatter_mode local ({deep})"
    )


def _widen_halo(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    if not ctx.failing:
        return None
    # bounded: up to what the model needs (measured field), never to a rank holding a whole system
    return widened_halo(ctx.spec, ctx.halo_completeness, ctx.reference, ctx.batch, ctx.world_size)


def _edge_virial(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    source = ctx.run if ctx.run is not None else ctx.batch
    if source is None:
        return None
    return edge_virial_to_halo_correction(ctx.spec, ctx.failing, ctx.reference, int(source.num_atoms))


RULES: tuple[Rule, ...] = (
    # first: while aggregations run unseen, the other rules' evidence (partials, mismatches) is theirs
    Rule("run_torchscript_eagerly", True, _run_torchscript_eagerly),
    Rule("drop_double_all_reduce", False, _drop_double_all_reduce),
    Rule("all_reduce_partial_output", False, _all_reduce_partial),
    Rule("switch_per_node_consolidation", False, _switch_per_node),
    Rule("declare_helper_adapter", True, _declare_helpers),
    Rule("enable_system_reductions", True, _enable_system_reductions),
    Rule("function_to_local", True, function_to_local, needs_agreeing_ranks=True),
    # a self-built graph: the one-cutoff refresh first, local (halo as deep as the field) when it fails
    Rule("halo_correction_to_owned_complete", True, halo_correction_to_owned_complete, needs_agreeing_ranks=True),
    Rule("halo_correction_to_local", True, _halo_correction_to_local, needs_agreeing_ranks=True),
    Rule("owned_complete_to_local", True, owned_complete_to_local, needs_agreeing_ranks=True),
    Rule("edge_virial_to_halo_correction", True, _edge_virial, needs_agreeing_ranks=True),
    Rule("widen_halo", True, _widen_halo, needs_agreeing_ranks=True),
)


def propose(
    ctx: FixContext, tried: set[str], rules: Sequence[Rule] | None = None, skipped: list[SkippedFix] | None = None
) -> Proposal | None:
    """The first rule that applies and yields a spec not tried yet (by signature); a rule that
    `needs_agreeing_ranks` is skipped while the context has rank disagreements. A rule that gives a
    `Skip` is not tried: it is added to `skipped` (once per rule and reason) and the next rule is asked.
    `rules` defaults to the module's `RULES` as it is at the call (rules are data)."""
    for rule in RULES if rules is None else rules:
        if rule.needs_agreeing_ranks and ctx.rank_disagreements:
            continue
        result = rule.apply(ctx)
        if result is None:
            continue
        if isinstance(result, Skip):
            entry = SkippedFix(rule=rule.name, reason=result.reason, halo_width=result.halo_width)
            if skipped is not None and all((s.rule, s.reason) != (entry.rule, entry.reason) for s in skipped):
                skipped.append(entry)
            continue
        spec, rationale = result
        if spec.signature() in tried:
            continue
        return Proposal(rule=rule.name, spec=spec, rationale=rationale, needs_run=rule.needs_run)
    return None
