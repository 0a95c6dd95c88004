"""Inference and auto-fix choose `owned_complete` for models that build their own graph, and leave it
for `local` when the outputs say some per-atom state escapes the refresh (`examples/self_graph.py`)."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from distcheck import validate_on_cpu
from distcheck.runtime.model import DEFAULT_SKIN
from distcheck.spec import MLIPSpec
from distcheck.validate.autofix import RULES, FixContext, propose
from distcheck.validate.inference import infer_spec
from examples import self_graph

RULE = {r.name: r for r in RULES}
BARE: dict[str, Any] = {"format": "distcheck-spec", "version": 1}  # a prior that leaves the policy to inference
CUTOFF = 3.0


def _reference(counts: dict[str, int], cutoffs: list[float], depth: int = 3) -> dict[str, Any]:
    return {
        "wrapper": {"num_interactions": depth, "cutoff": CUTOFF, "distribution_spec": None, "output_kinds": None},
        "outputs": {"energy": torch.zeros(1), "forces": torch.zeros(10, 3)},
        "autograd_derived": {"forces": True},
        "counts": counts,
        "neighbor_cutoffs": cutoffs,
    }


def test_inference_picks_owned_complete_for_a_self_built_graph_only() -> None:
    self_built = _reference({"edge_aggregation[index_add]": 3}, [])
    spec, notes = infer_spec(self_built, 10, 1)
    assert spec.distribution.policy.scatter_mode == "owned_complete"
    assert any("builds its own graph" in n and "owned_complete" in n for n in notes)
    # neighbours from batch.neighbor_list: halo-aware, halo_correction stays
    spec, _ = infer_spec(_reference({"edge_aggregation[index_add]": 3}, [CUTOFF]), 10, 1)
    assert spec.distribution.policy.scatter_mode == "halo_correction"
    # a given scatter mode is never overridden
    prior = {**BARE, "distribution": {"policy": {"scatter_mode": "local"}}}
    spec, _ = infer_spec(self_built, 10, 1, prior=prior)
    assert spec.distribution.policy.scatter_mode == "local"


def _context(mode: str, handler_counts: dict[str, int], halo: dict[str, Any], cutoffs: list[float]) -> FixContext:
    spec = MLIPSpec.from_dict(
        {**BARE, "distribution": {"policy": {"scatter_mode": mode}}, "output_kinds": {"forces": "per_node"}}
    )
    return FixContext(
        spec=spec,
        verdicts={"forces": {"passed": False}},
        reference=_reference({"edge_aggregation[index_add]": 3}, cutoffs),
        run=None,
        handler_counts=handler_counts,
        halo_completeness=halo,
    )


COMPLETE = {"matches": True, "halo_width": CUTOFF + DEFAULT_SKIN, "required_width": CUTOFF}
SHALLOW = {"matches": False, "halo_width": 1.3, "required_width": CUTOFF}


@pytest.mark.parametrize(
    ("counts", "words"),
    [({}, "never refreshed"), ({"halo_refresh[index_add]": 3}, "3 aggregation(s) were refreshed")],
    ids=["no-refresh", "refreshed-yet-off"],
)
def test_owned_complete_to_local_names_its_evidence(counts: dict[str, int], words: str) -> None:
    fixed, why = RULE["owned_complete_to_local"].apply(_context("owned_complete", counts, COMPLETE, []))  # type: ignore[misc]
    assert fixed.distribution.policy.scatter_mode == "local" and fixed.distribution.policy.halo_width is None
    assert words in why and "3 × 3 Å" in why


def test_a_shallow_halo_is_widened_not_abandoned() -> None:
    ctx = _context("owned_complete", {"halo_refresh[index_add]": 3}, SHALLOW, [])
    assert RULE["owned_complete_to_local"].apply(ctx) is None
    proposal = propose(ctx, set())
    assert proposal is not None and proposal.rule == "widen_halo"
    assert proposal.spec.distribution.policy.scatter_mode == "owned_complete"
    assert proposal.spec.distribution.policy.halo_width == pytest.approx(CUTOFF + DEFAULT_SKIN)


def test_halo_correction_to_owned_complete_needs_a_self_built_graph() -> None:
    corrected = {"halo_scatter_correction[index_add]": 3}
    fixed, why = RULE["halo_correction_to_owned_complete"].apply(  # type: ignore[misc]
        _context("halo_correction", corrected, COMPLETE, [])
    )
    assert fixed.distribution.policy.scatter_mode == "owned_complete" and "halo-unaware" in why
    assert (
        RULE["halo_correction_to_owned_complete"].apply(_context("halo_correction", corrected, COMPLETE, [CUTOFF]))
        is None
    )
    assert RULE["halo_correction_to_owned_complete"].apply(_context("halo_correction", {}, COMPLETE, [])) is None
    # once owned_complete was tried, the next proposal from halo_correction is local
    ctx = _context("halo_correction", corrected, COMPLETE, [])
    tried = {fixed.signature()}
    proposal = propose(ctx, tried)
    assert proposal is not None and proposal.rule == "halo_correction_to_local"


def _modes(report: Any) -> list[tuple[str | None, str, bool]]:
    return [(a.rule, a.spec.distribution.policy.scatter_mode, a.passed) for a in report.attempts]


@pytest.mark.procs
def test_self_graph_model_passes_first_time_with_a_one_cutoff_halo() -> None:
    report = validate_on_cpu(self_graph.model_factory, self_graph.sample_batch(), spec=BARE, timeout_sec=60)
    assert report.ok and _modes(report) == [(None, "owned_complete", True)], report.next_action
    assert report.attempts[0].halo_completeness.halo_width == pytest.approx(CUTOFF + DEFAULT_SKIN)


@pytest.mark.procs
def test_a_degree_counted_outside_the_scatters_moves_to_local() -> None:
    report = validate_on_cpu(self_graph.degree_factory, self_graph.sample_batch(), spec=BARE, timeout_sec=60)
    assert _modes(report) == [(None, "owned_complete", False), ("owned_complete_to_local", "local", True)]
    assert report.ok and "were refreshed" in report.attempts[1].rationale


@pytest.mark.procs
def test_a_dense_aggregation_under_owned_complete_moves_to_local() -> None:
    spec = copy.deepcopy(self_graph.SPEC)
    report = validate_on_cpu(self_graph.dense_factory, self_graph.sample_batch(), spec=spec, timeout_sec=60)
    assert _modes(report) == [(None, "owned_complete", False), ("owned_complete_to_local", "local", True)]
    assert report.ok and "never refreshed" in report.attempts[1].rationale
