"""Inference and auto-fix for multi-layer models whose neighbour sums are not scatters (AIMNet2's kind).

No third-party package needed: these run everywhere. A model that passes messages more than once but
aggregates neighbours with dense sums over a padded neighbour matrix gives the runtime nothing to
halo-correct, so `halo_correction` can never refresh its halo rows: inference picks `local`, and
auto-fix switches an explicit `halo_correction` to `local`.
"""

from __future__ import annotations

from typing import Any

import torch

from distcheck.spec import MLIPSpec
from distcheck.validate.autofix import RULES, FixContext
from distcheck.validate.inference import infer_spec

RULE = {r.name: r for r in RULES}
OUTPUTS = {"energy": torch.zeros(1), "forces": torch.zeros(10, 3)}


def _reference(depth: int | None, counts: dict[str, int], cutoffs: list[float]) -> dict[str, Any]:
    return {
        "wrapper": {"num_interactions": depth, "cutoff": 4.0, "distribution_spec": None, "output_kinds": None},
        "outputs": OUTPUTS,
        "autograd_derived": {"forces": True},
        "counts": counts,
        "neighbor_cutoffs": cutoffs,
    }


def test_inference_picks_local_for_dense_multilayer_aggregation() -> None:
    spec, notes = infer_spec(_reference(3, {"per_system_reduce[scatter_add_]": 1}, [4.0]), 10, 1)
    assert spec.distribution.policy.scatter_mode == "local"
    assert any("passes messages 3 times" in n for n in notes)


def test_inference_keeps_halo_correction_otherwise() -> None:
    for depth, counts in ((1, {}), (None, {}), (3, {"edge_aggregation[index_add]": 3})):
        spec, notes = infer_spec(_reference(depth, counts, [4.0]), 10, 1)
        assert spec.distribution.policy.scatter_mode == "halo_correction", (depth, counts)
        assert "scatter_mode = halo_correction" in notes
    explicit = {
        "format": "distcheck-spec",
        "version": 1,
        "distribution": {"policy": {"scatter_mode": "halo_correction"}},
    }
    spec, _ = infer_spec(_reference(3, {}, [4.0]), 10, 1, prior=explicit)
    assert spec.distribution.policy.scatter_mode == "halo_correction"  # a given field is never overridden


def _context(depth: int | None, counts: dict[str, int], handler_counts: dict[str, int]) -> FixContext:
    spec = MLIPSpec.from_dict({"format": "distcheck-spec", "version": 1, "output_kinds": {"energy": "per_graph"}})
    return FixContext(
        spec=spec,
        verdicts={"energy": {"passed": False}},
        reference=_reference(depth, counts, [4.0]),
        run=None,
        handler_counts=handler_counts,
    )


def test_autofix_switches_dense_multilayer_model_to_local() -> None:
    result = RULE["halo_correction_to_local"].apply(_context(3, {}, {"per_system_reduce": 2}))
    assert result is not None
    spec, why = result
    assert spec.distribution.policy.scatter_mode == "local" and spec.distribution.policy.halo_width is None
    assert "passes messages 3 times" in why and "padded neighbour matrix" in why


def test_autofix_leaves_single_layer_or_scattering_models_alone() -> None:
    assert RULE["halo_correction_to_local"].apply(_context(1, {}, {})) is None
    assert RULE["halo_correction_to_local"].apply(_context(None, {}, {})) is None
    assert RULE["halo_correction_to_local"].apply(_context(3, {"edge_aggregation[scatter_add_]": 2}, {})) is None
