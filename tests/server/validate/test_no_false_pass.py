"""No false pass: a replicated output that differs between ranks fails the attempt, whatever rank 0 holds.

Every replicated output (per-graph or global, not all-reduced) is compared rank against rank as well
as against the reference. Each variant of `accuracy_models/rank_split.py` breaks it in another shape;
each must fail with the output, the ranks (and the systems) named, the first module whose per-system
value differs across ranks when there is one, and no auto-fix that cannot make ranks agree.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
from accuracy_models import rank_split

from distcheck import TraceReport, validate_on_cpu
from distcheck.spec import MLIPSpec
from distcheck.validate.replicas import check_replicas, first_divergent_module

HERE = os.path.dirname(os.path.abspath(__file__))
MODELS = os.path.join(HERE, "accuracy_models", "rank_split.py")
TIMEOUT = 60.0

# (factory, sample, output, systems, off_reference, first module)
CASES: list[tuple[str, Any, str, list[int], list[int], str | None]] = [
    ("factory_rank_constant", rank_split.sample_batch, "energy", [0], [1], "shift"),
    ("factory_multi_system", rank_split.sample_batch_multi, "energy", [1], [1], "shift"),
    ("factory_last_rank", rank_split.sample_batch, "energy", [0], [1], "shift"),
    ("factory_reduction_order", rank_split.sample_batch, "offset", [], [1], None),
    ("factory_global_split", rank_split.sample_batch, "total", [], [], None),
]


def _validate(factory: str, sample: Any, **options: Any) -> TraceReport:
    return validate_on_cpu(f"{MODELS}:{factory}", sample(), timeout_sec=TIMEOUT, **options)


@pytest.mark.procs
@pytest.mark.parametrize(("factory", "sample", "output", "systems", "off_reference", "module"), CASES)
def test_ranks_that_disagree_fail_and_are_named(
    factory: str, sample: Any, output: str, systems: list[int], off_reference: list[int], module: str | None
) -> None:
    report = _validate(factory, sample)
    assert not report.ok and report.verdict == "failed", report.next_action
    first = report.attempts[0]
    assert not first.passed and output in first.failing_outputs
    [found] = [d for d in first.rank_disagreements if d.output == output]
    assert found.ranks == [0, 1] and found.off_reference == off_reference and found.systems == systems
    assert found.max_abs > 0
    if module is None:
        assert found.first_module is None
    else:
        assert found.first_module is not None and found.first_module.module == module
        assert found.first_module.ranks == [1] and found.first_module.systems == systems
        assert found.first_module.cls.endswith(".Shift")
    head = report.next_action.split("\n")[0]
    assert head.startswith("FAIL — ranks 0, 1 disagree on " + output), head
    assert module is None or f"first module whose per-system value differs across ranks: {module}" in head
    # No rule can make the ranks agree here: none fired (halo rules wait while ranks disagree).
    assert [a.rule for a in report.attempts] == [None], [(a.rule, a.rationale) for a in report.attempts]
    assert TraceReport.from_json(report.to_json()) == report


@pytest.mark.procs
def test_the_same_model_without_the_bug_passes_with_no_disagreement() -> None:
    for sample in (rank_split.sample_batch, rank_split.sample_batch_multi):
        report = _validate("factory_correct", sample)
        assert report.ok, report.next_action
        assert report.attempts[0].rank_disagreements == []


@pytest.mark.procs
def test_rank_disagreement_within_each_rank_tolerance_still_fails() -> None:
    """Each rank within tolerance of the reference, but not of the other: the verdict fails on the split."""
    report = _validate("factory_global_split", rank_split.sample_batch, auto_fix=False)
    verdict = report.attempts[0].verdicts["total"]
    assert not verdict.passed and verdict.status == "mismatch"
    assert verdict.max_abs_diff is not None and verdict.max_abs_diff < 1e-3  # the worst rank vs the reference
    assert "total (ranks disagree; each within tolerance of the reference)" in report.next_action


# -- the comparison itself, without processes -------------------------------------------------------

SPEC = MLIPSpec.from_dict(
    {"format": "distcheck-spec", "version": 1, "output_kinds": {"e": "per_graph", "s": "per_graph", "g": "global"}}
)


def _verdicts(names: list[str]) -> dict[str, dict[str, Any]]:
    return {
        n: {
            "name": n,
            "kind": "x",
            "passed": True,
            "max_abs_diff": 0.0,
            "max_rel_diff": 0.0,
            "status": "ok",
            "worst_index": None,
            "n_failing": 0,
            "n_total": 1,
        }
        for n in names
    }


def test_check_replicas_judges_every_rank_and_skips_all_reduced_outputs() -> None:
    ref = {"e": torch.tensor([1.0, 2.0]), "s": torch.tensor([3.0, 3.0]), "g": torch.tensor(5.0)}
    spec = SPEC.copy()
    spec.all_reduce_outputs.append("s")  # a partial per rank by design: never a disagreement
    ranks = [
        {"e": torch.tensor([1.0, 2.0]), "s": torch.tensor([1.0, 1.0]), "g": torch.tensor(5.0)},
        {"e": torch.tensor([1.0, 2.5]), "s": torch.tensor([2.0, 2.0]), "g": torch.tensor(5.0)},
        {"e": torch.tensor([1.0, 2.0]), "s": torch.tensor([0.0, 0.0]), "g": torch.tensor(5.5)},
    ]
    kinds = {"e": "per_graph", "s": "per_graph", "g": "global"}
    verdicts, found = check_replicas(ranks, kinds, spec, ref, _verdicts(["e", "s", "g"]), 1e-6, 1e-6)
    assert [d.output for d in found] == ["e", "g"]
    e, g = found
    assert e.ranks == [0, 1, 2] and e.off_reference == [1] and e.systems == [1] and e.max_abs == pytest.approx(0.5)
    assert g.ranks == [0, 1, 2] and g.off_reference == [2] and g.systems == []
    assert not verdicts["e"]["passed"] and verdicts["e"]["max_abs_diff"] == pytest.approx(0.5)  # the worst rank's
    assert verdicts["s"]["passed"]


def test_first_divergent_module_is_the_first_per_system_record_that_differs() -> None:
    def rec(key: str, level: str, value: list[float]) -> dict[str, Any]:
        return {"key": key, "module": key.split("#")[0], "class": "m.C", "level": level, "value": torch.tensor(value)}

    reference = [rec("a#0", "per_atom", [1.0]), rec("b#0", "per_system", [2.0, 3.0]), rec("c#0", "per_system", [4.0])]
    rank0 = [rec("a#0", "per_atom", [0.4]), rec("b#0", "per_system", [2.0, 3.0]), rec("c#0", "per_system", [4.0])]
    rank1 = [rec("a#0", "per_atom", [0.6]), rec("b#0", "per_system", [2.0, 3.5]), rec("c#0", "per_system", [9.0])]
    found = first_divergent_module(reference, [rank0, rank1], 1e-6, 1e-6)
    assert found is not None and found.module == "b" and found.ranks == [1] and found.systems == [1]
    assert first_divergent_module(reference, [rank0, rank0], 1e-6, 1e-6) is None
    assert first_divergent_module(reference, [rank0, []], 1e-6, 1e-6) is None  # a rank without records
