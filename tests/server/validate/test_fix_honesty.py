"""Fixes are reported as fixes, and each states the halo it runs with (issue 32, items 1 and 2).

Item 1: every change distcheck makes to the spec as given — before the first run (the halo widened to
the measured receptive field) or by an auto-fix rule — is an `Attempt.fixes` entry named by its rule, and
a pass on such an attempt is "passed_after_fix" with `fix_applied`, `fix_edits()` (what JUnit and the
editor's quick fix write) and the CLI's exit code following. Inference filling in what nobody declared is
no fix. Item 2: the switches to `local` derive their halo from the measured depth or reach (plus the skin),
state that exact width, and are skipped, with the reason recorded, when that halo would leave a rank
holding a whole system. The end-to-end cases are `test_fix_honesty_e2e.py`.
"""

from __future__ import annotations

from typing import Any

import pytest
import torch

from distcheck import cli_exit
from distcheck.batch import Batch
from distcheck.report import Attempt, OutputVerdict, TraceReport
from distcheck.report.fixes import PRE_RUN_RULE, SkippedFix, SpecFix
from distcheck.report.junit import fix_changes, junit_xml
from distcheck.report.parts import ReportMeta
from distcheck.runtime.model import DEFAULT_SKIN
from distcheck.spec import MLIPSpec
from distcheck.validate.autofix import RULES, FixContext, propose
from distcheck.validate.fix_record import FirstSpec, FixLedger
from distcheck.validate.halo_bounds import Skip, local_halo
from examples.structures import make_batch, periodic_slab_system

RULE = {r.name: r for r in RULES}
BARE: dict[str, Any] = {"format": "distcheck-spec", "version": 1}
CUTOFF = 3.0
HALO = ("distribution", "policy", "halo_width")


def _spec(**policy: Any) -> MLIPSpec:
    return MLIPSpec.from_dict({**BARE, "output_kinds": {"forces": "per_node"}, "distribution": {"policy": policy}})


def _attempt(index: int, spec: MLIPSpec, passed: bool, rule: str | None = None) -> Attempt:
    v = OutputVerdict("forces", "per_node", passed, 0.0, 0.0, "ok" if passed else "mismatch", None, 0, 3)
    return Attempt(index, spec, f"try {index}", rule, passed, {}, {}, {"forces": v}, {}, None, [], None, {}, {}, {})


def _report(attempts: list[Attempt]) -> TraceReport:
    best = next((a.index for a in attempts if a.passed), 0)
    return TraceReport(
        ok=attempts[best].passed,
        spec=attempts[best].spec,
        attempts=attempts,
        next_action="OK",
        meta=ReportMeta(),
        best_index=best,
    )


# ---- item 1: the one rule


def test_a_pass_under_a_spec_changed_before_the_first_run_is_a_fix() -> None:
    fixed = _attempt(0, _spec(scatter_mode="local", halo_width=9.5), True, PRE_RUN_RULE)
    fixed.fixes = [SpecFix(PRE_RUN_RULE, "set", list(HALO), 9.5)]
    report = _report([fixed])
    assert report.verdict == "passed" and report.state == "passed_after_fix"
    assert report.fix_applied == "try 0"
    assert report.fix_edits() == [{"op": "set", "path": list(HALO), "value": 9.5}]
    assert fix_changes(report) == ["set distribution.policy.halo_width to 9.5"]
    assert cli_exit.code_of(report.state) == cli_exit.code_of("passed_after_fix") != cli_exit.code_of("passed")
    assert junit_xml(report, "t").find(".//failure[@type='fixed-pass']") is not None
    again = TraceReport.from_json(report.to_json())  # the typed record survives the JSON
    assert again.state == "passed_after_fix" and again.attempts[0].fixes[0].value == 9.5
    assert again.to_dict()["state"] == "passed_after_fix" and again.to_dict()["fix_applied"] == "try 0"


def test_a_pass_under_the_spec_as_given_is_a_plain_pass_and_older_reports_keep_their_rule() -> None:
    plain = _report([_attempt(0, _spec(scatter_mode="local"), True)])
    assert plain.state == "passed" and plain.fix_applied is None and plain.fix_edits() == []
    assert "fixes" not in plain.to_dict()["attempts"][0]  # written only when there is one
    # a report without `fixes` (older): a later attempt that passed is still a fix, its changes computed
    older = _report(
        [
            _attempt(0, _spec(scatter_mode="local"), False),
            _attempt(1, _spec(scatter_mode="local", halo_width=7.0), True, "widen_halo"),
        ]
    )
    assert older.state == "passed_after_fix" and older.fix_edits() == [{"op": "set", "path": list(HALO), "value": 7.0}]


class _Loop:
    """The engine's use of the ledger: stamp each attempt, propose from a base."""

    def __init__(self, given: MLIPSpec, first: MLIPSpec, rule: str | None) -> None:
        self.ledger = FixLedger.start(FirstSpec(first, given, [], "r", None, rule, []))
        self.attempts: list[Attempt] = []

    def record(self, attempt: Attempt) -> None:
        self.ledger.stamp(attempt)
        self.attempts.append(attempt)

    def propose_from(self, base: Attempt, spec: MLIPSpec, rule: str) -> None:
        self.ledger.propose_from(base, spec, rule)


def _loop(given: MLIPSpec, first: MLIPSpec, rule: str | None) -> _Loop:
    return _Loop(given, first, rule)


def test_each_attempt_carries_what_changed_from_the_spec_as_given_named_by_its_rule() -> None:
    given = _spec(scatter_mode="local")
    widened = _spec(scatter_mode="local", halo_width=9.5)
    loop = _loop(given, widened, PRE_RUN_RULE)
    loop.record(_attempt(0, widened, False, PRE_RUN_RULE))
    assert [(f.rule, f.path, f.value) for f in loop.attempts[0].fixes] == [(PRE_RUN_RULE, list(HALO), 9.5)]
    # an auto-fix on top: its own change named by it, the pre-run one kept with its name
    both = widened.copy()
    both.system_reductions = not both.system_reductions
    loop.propose_from(loop.attempts[0], both, "enable_system_reductions")
    loop.record(_attempt(1, both, False, "enable_system_reductions"))
    assert {(f.rule, f.path[-1]) for f in loop.attempts[1].fixes} == {
        (PRE_RUN_RULE, "halo_width"),
        ("enable_system_reductions", "system_reductions"),
    }
    # rolled back to attempt 0, another rule from there: the rolled-back change is gone, not misnamed
    wider = _spec(scatter_mode="local", halo_width=12.0)
    loop.propose_from(loop.attempts[0], wider, "widen_halo")
    loop.record(_attempt(2, wider, True, "widen_halo"))
    assert [(f.rule, f.path[-1], f.value) for f in loop.attempts[2].fixes] == [("widen_halo", "halo_width", 12.0)]
    # inference's own choices (the spec as given) are no fix: an unchanged first attempt carries none
    plain = _loop(given, given, None)
    plain.record(_attempt(0, given, True))
    assert plain.attempts[0].fixes == [] and _report(plain.attempts).state == "passed"


# ---- item 2: the halo a switch to local states is the one it runs with


def _batch(cells: int) -> Batch:
    return make_batch([periodic_slab_system((3, 3, cells), seed=3)])


def _reference(declared: int, measured: int | None, reach: float | None = None) -> dict[str, Any]:
    field = None
    if measured is not None:
        field = {"status": "measured", "measured_depth": measured, "cutoff": CUTOFF, "reach_angstrom": reach}
    return {
        "wrapper": {"num_interactions": declared, "cutoff": CUTOFF, "distribution_spec": None, "output_kinds": None},
        "outputs": {"energy": torch.zeros(1), "forces": torch.zeros(10, 3)},
        "autograd_derived": {"forces": True},
        "counts": {"edge_aggregation[index_add]": 3},
        "neighbor_cutoffs": [],
        "receptive_field": field,
    }


def _context(mode: str, reference: dict[str, Any], batch: Batch | None, counts: dict[str, int]) -> FixContext:
    return FixContext(
        spec=_spec(scatter_mode=mode),
        verdicts={"forces": {"passed": False}},
        reference=reference,
        run=None,
        handler_counts=counts,
        halo_completeness={"matches": True, "halo_width": CUTOFF + DEFAULT_SKIN, "required_width": CUTOFF},
        batch=batch,
    )


SWITCHES = [
    ("owned_complete_to_local", "owned_complete", {"halo_refresh[index_add]": 3}),
    ("owned_complete_to_local", "owned_complete", {}),
    ("halo_correction_to_local", "halo_correction", {"halo_scatter_correction[index_add]": 3}),
]


@pytest.mark.parametrize(("rule", "mode", "counts"), SWITCHES)
@pytest.mark.parametrize(
    ("declared", "measured", "reach", "width"),
    [
        (1, 3, None, 3 * CUTOFF + DEFAULT_SKIN),  # measured deeper than declared
        (2, 3, None, 3 * CUTOFF + DEFAULT_SKIN),
        (1, 2, 8.2, 8.2 + DEFAULT_SKIN),  # a reach in Å that depth × cutoff does not cover
    ],
)
def test_a_switch_to_local_runs_the_halo_it_states(
    rule: str, mode: str, counts: dict[str, int], declared: int, measured: int, reach: float | None, width: float
) -> None:
    result = RULE[rule].apply(_context(mode, _reference(declared, measured, reach), _batch(24), counts))
    assert isinstance(result, tuple), result
    spec, why = result
    assert spec.distribution.policy.scatter_mode == "local"
    assert spec.distribution.policy.halo_width == pytest.approx(width)  # not the declared depth's halo
    assert f"{width:.4g} Å" in why, why


@pytest.mark.parametrize(("rule", "mode", "counts"), SWITCHES)
def test_a_switch_to_local_matching_the_declared_depth_leaves_the_halo_derived(
    rule: str, mode: str, counts: dict[str, int]
) -> None:
    result = RULE[rule].apply(_context(mode, _reference(3, 3), _batch(24), counts))
    assert isinstance(result, tuple), result
    spec, why = result
    assert spec.distribution.policy.halo_width is None  # what the runtime derives: 3 × 3 Å + skin
    assert f"{3 * CUTOFF + DEFAULT_SKIN:.4g} Å = 3 × 3 Å" in why, why


@pytest.mark.parametrize(("rule", "mode", "counts"), SWITCHES)
@pytest.mark.parametrize(("cells", "declared", "measured"), [(16, 1, 3), (10, 1, 2), (6, 2, 2)])
def test_a_switch_whose_halo_would_be_degenerate_is_not_tried_and_says_why(
    rule: str, mode: str, counts: dict[str, int], cells: int, declared: int, measured: int
) -> None:
    ctx = _context(mode, _reference(declared, measured), _batch(cells), counts)
    width = max(declared, measured) * CUTOFF + DEFAULT_SKIN
    result = RULE[rule].apply(ctx)
    assert isinstance(result, Skip), result
    assert result.halo_width == pytest.approx(width) and f"{width:.4g} Å" in result.reason
    assert "whole" in result.reason and "larger sample" in result.reason
    skipped: list[SkippedFix] = []
    proposal = propose(ctx, set(), [RULE[rule], RULE["widen_halo"]], skipped=skipped)  # the rule, then the next one
    assert proposal is None or proposal.spec.distribution.policy.scatter_mode != "local"
    assert [s.rule for s in skipped] == [rule] and skipped[0].reason == result.reason


def test_local_halo_reads_what_was_measured() -> None:
    assert local_halo(_reference(2, None)).width == pytest.approx(2 * CUTOFF + DEFAULT_SKIN)  # not measured
    assert local_halo(_reference(2, None)).spec_width is None
    assert local_halo(_reference(1, 4)).spec_width == pytest.approx(4 * CUTOFF + DEFAULT_SKIN)
    no_cutoff = _reference(2, None)
    no_cutoff["wrapper"]["cutoff"] = None
    assert local_halo(no_cutoff).width is None
