"""The layer diagnostic's per-module differences (`LayerDivergence.modules`): one entry per compared
module call in reference call order, the difference of the ranks' sum (per-atom records) or of one
rank (replicated records) from the reference, at most `MAX_MODULE_DIFFS`, kept through the report's JSON."""

from __future__ import annotations

import math

import torch

from distcheck.report import (
    MAX_MODULE_DIFFS,
    Attempt,
    HaloCompleteness,
    LayerDivergence,
    PartitionHealth,
    TraceReport,
)
from distcheck.report.parts import ReportMeta
from distcheck.spec import MLIPSpec
from distcheck.validate.layers import compare_layers


def _record(i: int, value: torch.Tensor, level: str = "per_atom") -> dict[str, object]:
    return {"key": f"layer{i}#0", "module": f"layers.{i}", "class": "Block", "level": level, "value": value}


def test_each_compared_module_in_call_order_with_its_difference() -> None:
    ref = [_record(0, torch.ones(4)), _record(1, torch.full((4,), 2.0)), _record(2, torch.ones(2), "per_system")]
    # two ranks' partials: layer 0 adds up, layer 1 is off by 10 %, layer 2 (replicated) is rank 0's
    rank0 = [
        _record(0, torch.tensor([1.0, 1.0, 0.0, 0.0])),
        _record(1, torch.tensor([2.0, 2.0, 0, 0])),
        _record(2, torch.ones(2), "per_system"),
    ]
    rank1 = [
        _record(0, torch.tensor([0.0, 0.0, 1.0, 1.0])),
        _record(1, torch.tensor([0, 0, 2.0, 2.2])),
        _record(2, torch.ones(2), "per_system"),
    ]
    found = compare_layers(ref, [rank0, rank1], rtol=1e-6)
    assert [m.module for m in found.modules] == ["layers.0", "layers.1", "layers.2"]
    assert [m.key for m in found.modules] == ["layer0#0", "layer1#0", "layer2#0"]
    diffs = [m.rel_diff for m in found.modules]
    assert diffs[0] == 0.0 and diffs[2] == 0.0 and diffs[1] is not None and math.isclose(diffs[1], 0.1, rel_tol=1e-6)
    assert found.first_divergent is not None and found.first_divergent.module == "layers.1"
    assert found.checked == 3


def test_a_record_missing_on_a_rank_is_not_listed() -> None:
    ref = [_record(0, torch.ones(2)), _record(1, torch.ones(2))]
    found = compare_layers(
        ref, [[_record(0, torch.ones(2))], [_record(0, torch.zeros(2)), _record(1, torch.ones(2))]], 1e-6
    )
    assert [m.module for m in found.modules] == ["layers.0"]


def test_a_deep_model_lists_the_first_modules_only() -> None:
    n = MAX_MODULE_DIFFS + 10
    ref = [_record(i, torch.ones(1), "per_system") for i in range(n)]
    found = compare_layers(ref, [ref, ref], 1e-6)
    assert found.checked == n and len(found.modules) == MAX_MODULE_DIFFS
    assert found.modules[-1].module == f"layers.{MAX_MODULE_DIFFS - 1}"


def test_the_modules_survive_the_report_json() -> None:
    ref = [_record(0, torch.ones(2)), _record(1, torch.ones(2))]
    layer = compare_layers(ref, [ref, [_record(0, torch.zeros(2)), _record(1, torch.full((2,), 0.5))]], 1e-6)
    attempt = Attempt(
        index=0, spec=MLIPSpec(), rationale="", rule=None, passed=False, max_abs_diff={}, max_rel_diff={},
        verdicts={}, handler_counts={}, error=None, helper_diagnostics=[], layer_divergence=layer,
        partition_health=PartitionHealth(), halo_completeness=HaloCompleteness(), timings={},
    )  # fmt: skip
    report = TraceReport(ok=False, spec=MLIPSpec(), attempts=[attempt], next_action="", meta=ReportMeta())
    back = TraceReport.from_json(report.to_json())
    got = back.attempts[0].layer_divergence
    assert isinstance(got, LayerDivergence)
    assert [(m.module, m.rel_diff) for m in got.modules] == [("layers.0", 0.0), ("layers.1", 0.5)]
