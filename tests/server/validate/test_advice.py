"""No wrong advice: each rule checks its evidence, a mutation that makes things worse is rolled back, the
report stands on one best attempt, an unknown cause is said with its evidence, a crash keeps its trace.

Models in `accuracy_models/advice.py` and `accuracy_models/rank_split.py` (world size 2, < 200 atoms).
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import torch
from accuracy_models import advice, rank_split

from distcheck import TraceReport, validate_on_cpu
from distcheck.report import Attempt, OutputVerdict, best_attempt_index
from distcheck.report.parts import ReportMeta
from distcheck.runtime.consolidate import RankRows
from distcheck.runtime.run_result import DistributedRun
from distcheck.spec import MLIPSpec
from distcheck.validate import autofix
from distcheck.validate.autofix import RULES, FixContext, Rule
from distcheck.validate.diff import compare_outputs

HERE = os.path.dirname(os.path.abspath(__file__))
ADVICE = os.path.join(HERE, "accuracy_models", "advice.py")
SPLIT = os.path.join(HERE, "accuracy_models", "rank_split.py")
TIMEOUT = 60.0
BARE: dict[str, Any] = {"format": "distcheck-spec", "version": 1}


# -- rules check their evidence ---------------------------------------------------------------------


@pytest.mark.procs
def test_autograd_forces_are_never_made_owned_only() -> None:
    """The energy goes through a reduction no handler routes (a one-hot matrix product): each rank's energy
    counts its own rows, and under `local` owned-only forces would happen to match. The old rules switched
    to local, then read the forces from owned rows "(not autograd-derived)". Neither may fire."""
    report = validate_on_cpu(f"{ADVICE}:factory_onehot_readout", advice.sample_batch(), timeout_sec=TIMEOUT)
    assert not report.ok and report.verdict == "failed"
    for a in report.attempts:
        assert "forces" not in a.spec.owned_only_outputs, a.rationale
        assert "not autograd-derived" not in a.rationale
        assert a.spec.distribution.policy.scatter_mode == "halo_correction", a.rationale
    # the cause named instead: ranks disagree on the energy, first in the module with the matrix product
    [split] = report.attempts[0].rank_disagreements
    assert split.output == "energy" and split.ranks == [0, 1]
    assert split.first_module is not None and split.first_module.module == "readout"
    assert report.next_action.startswith("FAIL — ranks 0, 1 disagree on energy")
    assert "review output_kinds" not in report.next_action


def _context(
    spec: MLIPSpec, ranks: list[dict[str, torch.Tensor]], ref: dict[str, torch.Tensor], **ref_extra: Any
) -> FixContext:
    rows = [
        RankRows(local_ids=torch.tensor([0, 1, 2]), owned_mask=torch.tensor([True, True, False])),
        RankRows(local_ids=torch.tensor([2, 1]), owned_mask=torch.tensor([True, False])),
    ]
    run = DistributedRun(
        outputs={},
        rank_outputs=ranks,
        records=[],
        rows=rows,
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
    reference = {"outputs": ref, **ref_extra}
    return FixContext(spec=spec, verdicts=verdicts, reference=reference, run=run, atol=1e-8, rtol=1e-8)


SWITCH = {r.name: r for r in RULES}["switch_per_node_consolidation"]


@pytest.mark.parametrize("trace", [{"f": True}, {}, None])
def test_owned_only_needs_a_trace_that_says_not_autograd_derived(trace: dict[str, bool] | None) -> None:
    # Owned-only would match (each copy holds the full value), but the trace says autograd-derived or nothing.
    ref = {"f": torch.tensor([1.0, 2.0, 3.0])}
    copies = [{"f": torch.tensor([1.0, 2.0, 3.0])}, {"f": torch.tensor([3.0, 2.0])}]
    spec = MLIPSpec.from_dict({**BARE, "output_kinds": {"f": "per_node"}})
    extra = {} if trace is None else {"autograd_derived": trace}
    assert SWITCH.apply(_context(spec, copies, ref, **extra)) is None


@pytest.mark.parametrize("trace", [{"q": False}, {}, None])
def test_summing_copies_needs_a_trace_that_says_autograd_derived(trace: dict[str, bool] | None) -> None:
    # Summing would match (contributions split over copies), but the trace says not derived or nothing.
    ref = {"q": torch.tensor([1.0, 2.0, 3.0])}
    parts = [{"q": torch.tensor([1.0, 1.5, 1.0])}, {"q": torch.tensor([2.0, 0.5])}]
    spec = MLIPSpec.from_dict({**BARE, "output_kinds": {"q": "per_node"}, "owned_only_outputs": ["q"]})
    extra = {} if trace is None else {"autograd_derived": trace}
    assert SWITCH.apply(_context(spec, parts, ref, **extra)) is None


def test_a_rank_that_holds_the_whole_value_is_not_a_partial() -> None:
    rule = {r.name: r for r in RULES}["all_reduce_partial_output"]
    spec = MLIPSpec.from_dict({**BARE, "output_kinds": {"g": "global"}})
    ref = {"g": torch.tensor(1.0)}
    # rank 0 holds the reference value and rank 1 holds 0: the sum matches by coincidence only
    assert rule.apply(_context(spec, [{"g": torch.tensor(1.0)}, {"g": torch.tensor(0.0)}], ref)) is None
    fixed = rule.apply(_context(spec, [{"g": torch.tensor(0.25)}, {"g": torch.tensor(0.75)}], ref))
    assert fixed is not None and fixed[0].all_reduce_outputs == ["g"]


# -- a worse mutation is rolled back; one best attempt -----------------------------------------------


def _shrink_halo(ctx: FixContext) -> tuple[MLIPSpec, str] | None:
    """A rule whose mutation makes every model here worse (a halo far shallower than the cutoff)."""
    spec = ctx.spec.copy()
    spec.distribution.policy.halo_width = 1.0
    return spec, "shrank the halo to 1 Å"


@pytest.mark.procs
def test_a_worse_mutation_is_rolled_back_and_the_next_starts_from_the_better_spec(monkeypatch: Any) -> None:
    monkeypatch.setattr(autofix, "RULES", (Rule("shrink_halo", True, _shrink_halo), *RULES))
    spec = {**BARE, "owned_only_outputs": ["forces"]}  # a spec bug switch_per_node_consolidation fixes
    report = validate_on_cpu(f"{SPLIT}:factory_correct", rank_split.sample_batch(), spec=spec, timeout_sec=TIMEOUT)
    rules = [a.rule for a in report.attempts]
    assert rules == [None, "shrink_halo", "switch_per_node_consolidation"], rules
    worse = report.attempts[1]
    assert worse.rolled_back is not None and worse.rolled_back.to_attempt == 0
    assert "made the comparison worse" in worse.rolled_back.reason
    fixed = report.attempts[2]
    assert fixed.passed and fixed.reused_run  # re-consolidated attempt 0's run, not attempt 1's
    assert fixed.spec.distribution.policy.halo_width is None and fixed.spec.owned_only_outputs == []
    assert report.ok and report.best_index == 2 and report.spec == fixed.spec
    # attempts are numbered from 1 in every message (docs/diagnostics.md): index 0 is "attempt 1"
    assert "rolled back to attempt 1:" in report.next_action and "attempt 0" not in report.next_action
    assert "than attempt 1" in worse.rolled_back.reason or "where attempt 1" in worse.rolled_back.reason
    assert TraceReport.from_json(report.to_json()).attempts[1].rolled_back == worse.rolled_back


@pytest.mark.procs
def test_headline_and_spec_stand_on_the_better_attempt(monkeypatch: Any) -> None:
    """No rule fixes this model; the one mutation tried makes it worse: the report keeps attempt 0."""
    monkeypatch.setattr(autofix, "RULES", (Rule("shrink_halo", True, _shrink_halo), *RULES))
    report = validate_on_cpu(f"{SPLIT}:factory_last_rank", rank_split.sample_batch(), timeout_sec=TIMEOUT)
    assert [a.rule for a in report.attempts] == [None, "shrink_halo"]
    first, worse = report.attempts
    assert worse.rolled_back is not None and len(worse.failing_outputs) >= len(first.failing_outputs)
    assert report.best_index == 0 and report.best_attempt is first and report.spec == first.spec
    assert report.spec.distribution.policy.halo_width is None
    assert report.to_dict()["best_attempt"] == 0
    energy = first.verdicts["energy"].max_abs_diff
    assert energy is not None and f"max |Δ| {energy:.3g}" in report.next_action.split("\n")[0]


def _attempt(index: int, rel: float | None, *, passed: bool = False, failing: int = 1) -> Attempt:
    verdicts = {
        f"o{i}": OutputVerdict(f"o{i}", "per_node", passed, rel, rel, "ok" if passed else "mismatch", None, 0, 3)
        for i in range(failing)
    }
    return Attempt(index, MLIPSpec(), f"try {index}", None, passed, {}, {}, verdicts, {}, None, [], None, {}, {}, {})


def test_one_rule_for_the_best_attempt() -> None:
    # a later attempt as bad by count but worse by size never replaces an earlier one
    assert best_attempt_index([_attempt(0, 0.1), _attempt(1, 0.5)]) == 0
    assert best_attempt_index([_attempt(0, 0.5), _attempt(1, 0.1)]) == 1
    assert best_attempt_index([_attempt(0, 0.1, failing=2), _attempt(1, 9.0)]) == 1
    assert best_attempt_index([_attempt(0, math.nan), _attempt(1, 1e9)]) == 1  # NaN counts as the worst
    assert best_attempt_index([_attempt(0, 0.1), _attempt(1, None, passed=True), _attempt(2, None, passed=True)]) == 1
    assert best_attempt_index([]) is None
    attempts = [_attempt(0, 0.1), _attempt(1, 0.5)]
    report = TraceReport(ok=False, spec=MLIPSpec(), attempts=attempts, next_action="", meta=ReportMeta())
    assert report.best_attempt is attempts[0]  # computed with the same rule when not given
    # the stored index is what every reader uses: JSON keeps it, even one a recomputation would not pick
    chosen = TraceReport(ok=False, spec=MLIPSpec(), attempts=attempts, next_action="", meta=ReportMeta(), best_index=1)
    again = TraceReport.from_json(chosen.to_json())
    assert again.best_index == 1 and again.best_attempt is again.attempts[1]
    with pytest.raises(ValueError, match="best_index"):
        TraceReport(ok=False, spec=MLIPSpec(), attempts=attempts, next_action="", meta=ReportMeta(), best_index=2)
    broken = chosen.to_dict()
    broken["best_attempt"] = 5
    with pytest.raises(ValueError, match="best_attempt"):
        TraceReport.from_dict(broken)


# -- an unknown cause is said, with the evidence ------------------------------------------------------


@pytest.mark.procs
def test_unknown_cause_shows_what_was_checked_instead_of_a_generic_list() -> None:
    report = validate_on_cpu(f"{ADVICE}:factory_anchor", advice.sample_batch(), timeout_sec=TIMEOUT)
    assert not report.ok
    text = report.next_action
    assert "review output_kinds" not in text
    tried = len(report.attempts) - 1  # a rule that acted on a hypothesis is a fix tried, not "no evidence"
    why = f"the {tried} fix(es) auto-fix tried did not make it pass" if tried else "no auto-fix rule found evidence"
    assert f"cause unknown: {why}" in text.split("\n")[0]
    assert "- unrouted aggregations: 0 found" in text
    assert "- ranks disagreeing on a replicated output: none" in text
    assert "- first divergent module: none found" in text
    for a in report.attempts[1:]:  # a rule tried on a hypothesis says so, never a false certainty
        assert "the per-edge aggregations are not halo-aware" not in a.rationale


# -- a crash keeps what was recorded before it --------------------------------------------------------


@pytest.mark.procs
def test_a_crashed_attempt_keeps_its_dispatch_trace_and_modules() -> None:
    report = validate_on_cpu(f"{ADVICE}:factory_crash", advice.sample_batch(), timeout_sec=TIMEOUT)
    assert report.verdict == "error"
    [attempt] = report.attempts
    assert attempt.error is not None and attempt.error.rank == 1 and attempt.error.type == "FileNotFoundError"
    culprit = attempt.crash_traces[0]
    assert culprit.rank == 1 and culprit.phase == "forward"
    assert culprit.modules == ["embed", "interaction"] and culprit.last_module == "interaction"
    assert culprit.handler_counts.get("per_system_reduce") == 1  # readout's sum ran before it raised
    assert any(k.startswith("halo_scatter_correction") for k in culprit.handler_counts)
    assert attempt.handler_counts and all(attempt.handler_counts[k] >= v for k, v in culprit.handler_counts.items())
    assert "before the crash, rank 1 (forward)" in report.next_action
    assert "the last module that returned was interaction" in report.next_action
    assert TraceReport.from_json(report.to_json()) == report
