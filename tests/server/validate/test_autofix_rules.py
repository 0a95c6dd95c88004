"""Each auto-fix rule on its own: its predicate fires on the evidence it is meant for and only then."""

from __future__ import annotations

from typing import Any

import torch

from distcheck.runtime.consolidate import RankRows
from distcheck.runtime.run_result import DistributedRun
from distcheck.spec import MLIPSpec
from distcheck.validate.autofix import RULES, FixContext, propose
from distcheck.validate.diff import compare_outputs

RULE = {r.name: r for r in RULES}

# Three atoms, two ranks: rank 0 owns 0,1 and holds 2 as halo; rank 1 owns 2 and holds 1 as halo.
ROWS = [
    RankRows(local_ids=torch.tensor([0, 1, 2]), owned_mask=torch.tensor([True, True, False])),
    RankRows(local_ids=torch.tensor([2, 1]), owned_mask=torch.tensor([True, False])),
]


def _spec(**fields: Any) -> MLIPSpec:
    base: dict[str, Any] = {"format": "distcheck-spec", "version": 1}
    base.update(fields)
    return MLIPSpec.from_dict(base)


def _context(
    spec: MLIPSpec, rank_outputs: list[dict[str, torch.Tensor]], ref: dict[str, torch.Tensor], **extra: Any
) -> FixContext:
    run = DistributedRun(
        outputs={},
        rank_outputs=rank_outputs,
        records=[],
        rows=ROWS,
        spec=spec,
        kinds={},
        replica_spread={},
        world_size=2,
        backend="gloo",
        devices=["cpu", "cpu"],
        num_atoms=3,
        num_systems=1,
    )
    run.outputs = run.reconsolidate(spec).outputs
    verdicts = compare_outputs(run.outputs, ref, spec.output_kinds, 1e-8, 1e-8)
    return FixContext(
        spec=spec,
        verdicts=verdicts,
        reference={"outputs": ref, **extra.pop("reference", {})},
        run=run,
        world_size=2,
        atol=1e-8,
        rtol=1e-8,
        **extra,
    )


def test_drop_double_all_reduce_only_for_world_size_times() -> None:
    spec = _spec(output_kinds={"energy": "per_graph"}, all_reduce_outputs=["energy"])
    ref = {"energy": torch.tensor([3.0])}
    ctx = _context(spec, [{"energy": torch.tensor([3.0])}, {"energy": torch.tensor([3.0])}], ref)
    fixed, why = RULE["drop_double_all_reduce"].apply(ctx)  # type: ignore[misc]
    assert fixed.all_reduce_outputs == [] and "2×" in why
    ctx = _context(spec, [{"energy": torch.tensor([3.0])}, {"energy": torch.tensor([1.5])}], ref)
    assert RULE["drop_double_all_reduce"].apply(ctx) is None


def test_all_reduce_partial_when_ranks_add_up() -> None:
    spec = _spec(output_kinds={"stress": "per_graph"})
    ref = {"stress": torch.tensor([[1.0, 2.0]])}
    ctx = _context(spec, [{"stress": torch.tensor([[0.25, 0.5]])}, {"stress": torch.tensor([[0.75, 1.5]])}], ref)
    fixed, _ = RULE["all_reduce_partial_output"].apply(ctx)  # type: ignore[misc]
    assert fixed.all_reduce_outputs == ["stress"]
    ctx = _context(spec, [{"stress": torch.tensor([[0.2, 0.5]])}, {"stress": torch.tensor([[0.75, 1.5]])}], ref)
    assert RULE["all_reduce_partial_output"].apply(ctx) is None


def test_switch_per_node_both_directions() -> None:
    ref = {"q": torch.tensor([1.0, 2.0, 3.0])}
    # Each copy holds the atom's full value: summing copies doubles atoms 1 and 2 → owned-only fixes it.
    copies = [{"q": torch.tensor([1.0, 2.0, 3.0])}, {"q": torch.tensor([3.0, 2.0])}]
    spec = _spec(output_kinds={"q": "per_node"})
    plain = {"autograd_derived": {"q": False}}  # the evidence each direction needs: the reference trace
    fixed, why = RULE["switch_per_node_consolidation"].apply(_context(spec, copies, ref, reference=plain))  # type: ignore[misc]
    assert fixed.owned_only_outputs == ["q"] and "owned rows only" in why
    # Contributions split over copies (autograd-like): owned-only misses them → summing fixes it.
    parts = [{"q": torch.tensor([1.0, 1.5, 1.0])}, {"q": torch.tensor([2.0, 0.5])}]
    spec = _spec(output_kinds={"q": "per_node"}, owned_only_outputs=["q"])
    derived = {"autograd_derived": {"q": True}}
    fixed, why = RULE["switch_per_node_consolidation"].apply(_context(spec, parts, ref, reference=derived))  # type: ignore[misc]
    assert fixed.owned_only_outputs == [] and "summing" in why
    # Neither consolidation matches: no proposal.
    wrong = [{"q": torch.tensor([9.0, 1.5, 1.0])}, {"q": torch.tensor([2.0, 0.5])}]
    assert RULE["switch_per_node_consolidation"].apply(_context(spec, wrong, ref, reference=derived)) is None


def test_declare_helper_adapter_from_diagnosis() -> None:
    spec = _spec(output_kinds={"e": "per_graph"})
    remedy = {"kind": "reduction", "module_path": "pkg.ops", "attr_name": "mol_sum", "atom_arg": 0, "atom_dim": 0}
    ref = {"e": torch.tensor([1.0])}
    bad = [{"e": torch.tensor([0.7])}, {"e": torch.tensor([0.7])}]
    flagged = [{"suspected_gap": "sums per system", "likely_remedy": remedy, "already_wrapped": False}]
    fixed, why = RULE["declare_helper_adapter"].apply(_context(spec, bad, ref, helper_diagnostics=flagged))  # type: ignore[misc]
    assert fixed.helper("pkg.ops.mol_sum") is not None and "pkg.ops.mol_sum" in why
    handled = [{"suspected_gap": None, "likely_remedy": None, "already_wrapped": True}]
    assert RULE["declare_helper_adapter"].apply(_context(spec, bad, ref, helper_diagnostics=handled)) is None


def test_enable_system_reductions_needs_trace_evidence() -> None:
    spec = _spec(output_kinds={"e": "per_graph"}, system_reductions=False)
    ref = {"e": torch.tensor([1.0])}
    bad = [{"e": torch.tensor([0.8])}, {"e": torch.tensor([0.8])}]
    ctx = _context(spec, bad, ref, reference={"counts": {"per_system_reduce[index_add]": 1}})
    fixed, _ = RULE["enable_system_reductions"].apply(ctx)  # type: ignore[misc]
    assert fixed.system_reductions is True
    assert RULE["enable_system_reductions"].apply(_context(spec, bad, ref, reference={"counts": {}})) is None


def test_halo_correction_to_local_needs_corrected_aggregations() -> None:
    spec = _spec(output_kinds={"e": "per_graph"})
    ref = {"e": torch.tensor([1.0])}
    bad = [{"e": torch.tensor([1.2])}, {"e": torch.tensor([1.2])}]
    ctx = _context(
        spec, bad, ref, handler_counts={"halo_scatter_correction[index_add]": 4}, reference={"neighbor_cutoffs": []}
    )
    fixed, why = RULE["halo_correction_to_local"].apply(ctx)  # type: ignore[misc]
    assert fixed.distribution.policy.scatter_mode == "local" and "halo-unaware" in why
    assert RULE["halo_correction_to_local"].apply(_context(spec, bad, ref, handler_counts={})) is None


def test_widen_halo_to_the_receptive_field_or_double_an_explicit_width() -> None:
    ref = {"e": torch.tensor([1.0])}
    bad = [{"e": torch.tensor([1.2])}, {"e": torch.tensor([1.2])}]
    spec = _spec(output_kinds={"e": "per_graph"}, distribution={"policy": {"scatter_mode": "local", "halo_width": 4.5}})
    shallow = {"matches": False, "halo_width": 4.5, "required_width": 12.0}
    fixed, _ = RULE["widen_halo"].apply(_context(spec, bad, ref, halo_completeness=shallow))  # type: ignore[misc]
    assert fixed.distribution.policy.halo_width == 12.5
    deep = {"matches": True, "halo_width": 4.5, "required_width": 4.0}
    fixed, _ = RULE["widen_halo"].apply(_context(spec, bad, ref, halo_completeness=deep))  # type: ignore[misc]
    assert fixed.distribution.policy.halo_width == 9.0
    derived = _spec(output_kinds={"e": "per_graph"})
    assert RULE["widen_halo"].apply(_context(derived, bad, ref, halo_completeness=deep)) is None


def test_propose_skips_specs_already_tried() -> None:
    spec = _spec(output_kinds={"energy": "per_graph"}, all_reduce_outputs=["energy"])
    ref = {"energy": torch.tensor([3.0])}
    ctx = _context(spec, [{"energy": torch.tensor([3.0])}, {"energy": torch.tensor([3.0])}], ref)
    first = propose(ctx, set())
    assert first is not None and first.rule == "drop_double_all_reduce" and not first.needs_run
    assert propose(ctx, {first.spec.signature()}) is None
