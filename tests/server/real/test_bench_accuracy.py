"""`bench/accuracy.py`'s real-package section (issue 32, item 9) cannot rot: its row machinery runs one
small case (SchNet, correct) end to end, and its "advice consistent with attempts" check is shown on
hand-built reports, one per way advice can contradict the attempts (and the lines it must not blame).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from typing import Any

import pytest

from distcheck.report import Attempt, TraceReport
from distcheck.report.fixes import SpecFix
from distcheck.spec import MLIPSpec

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "bench"))
checks = importlib.import_module("accuracy_checks")


def _spec(**policy: Any) -> MLIPSpec:
    base = {"kind": "halo", "scatter_mode": "halo_correction", "gather_mode": "halo_read", "halo_width": None}
    data = {"format": "distcheck-spec", "version": 1, "distribution": {"policy": {**base, **policy}}}
    data["output_kinds"] = {"energy": "per_graph", "forces": "per_node"}
    return MLIPSpec.from_dict(data)


def _attempt(index: int, spec: MLIPSpec, passed: bool, halo: float, **more: Any) -> Attempt:
    return Attempt(
        index=index, spec=spec, rationale=more.pop("rationale", "prior"), rule=more.pop("rule", None), passed=passed,
        max_abs_diff={}, max_rel_diff={}, verdicts={}, handler_counts={}, error=None, helper_diagnostics=[],
        layer_divergence=None, partition_health={}, halo_completeness={"halo_width": halo}, timings={}, **more,
    )  # fmt: skip


def _report(attempts: list[Attempt], next_action: str, depth: int = 1, cutoff: float = 3.0) -> TraceReport:
    meta = {"wrapper": {"num_interactions": depth, "cutoff": cutoff}}
    return TraceReport(ok=any(a.passed for a in attempts), spec=attempts[-1].spec, attempts=attempts,
                       next_action=next_action, meta=meta)  # type: ignore[arg-type]  # fmt: skip


def _given_and_tried(tried: SpecFix, tried_spec: MLIPSpec) -> list[Attempt]:
    from distcheck.report import Rollback

    return [
        _attempt(0, _spec(), False, 5.5),
        _attempt(1, tried_spec, False, 5.5, rule=tried.rule, fixes=[tried], rolled_back=Rollback(0, "worse")),
    ]


INCONSISTENT = {
    "advises a rolled-back change": (
        _given_and_tried(
            SpecFix("run_torchscript_eagerly", "set", ["distribution", "torchscript"], "eager"),
            _spec(),
        ),
        'FAIL — forces differ\nset distribution.torchscript "eager" (auto-fix does)',
        1,
        "attempt 1 tried",
    ),
    "advises a switch already in the spec as given": (
        [_attempt(0, _spec(scatter_mode="local"), False, 5.5)],
        'FAIL — forces differ\nset scatter_mode = "local" in the spec',
        3,
        "already has",
    ),
    "advises the depth already declared": (
        [_attempt(0, _spec(scatter_mode="local"), False, 15.5)],
        "FAIL — forces differ\nreceptive field: UNDER-DECLARED; set num_interactions = 3 on the wrapper",
        3,
        "already declares 3",
    ),
    "advises a depth whose halo already failed": (
        [_attempt(0, _spec(scatter_mode="local"), False, 15.5)],
        "FAIL — forces differ\nset num_interactions = 3 on the wrapper",
        1,
        "attempt 0 ran its halo",
    ),
    "advises a halo no wider than one that failed": (
        [
            _attempt(0, _spec(), False, 5.5),
            _attempt(1, _spec(halo_width=12.0), False, 12.0, rule="widen_halo"),
        ],
        "FAIL — forces differ\nwiden the halo: set halo_width = 10.5 Å",
        1,
        "attempt 1 ran with 12",
    ),
    "advises the cutoff already declared": (
        [_attempt(0, _spec(), False, 5.5)],
        "FAIL — forces differ\nreceptive field: UNDER-DECLARED; set cutoff = 3 on the wrapper",
        1,
        "already declares 3",
    ),
    "advises a cutoff whose halo already failed": (
        [_attempt(0, _spec(), False, 5.5), _attempt(1, _spec(halo_width=8.0), False, 8.0, rule="widen_halo")],
        "FAIL — forces differ\nset cutoff = 7.5 on the wrapper",
        1,
        "attempt 1 ran a halo of 8",
    ),
}


@pytest.mark.parametrize("case", list(INCONSISTENT), ids=list(INCONSISTENT))
def test_inconsistent_advice_is_caught(case: str) -> None:
    attempts, advice, depth, why = INCONSISTENT[case]
    consistent, reason = checks.advice_consistent(_report(attempts, advice, depth=depth))
    assert not consistent and why in reason, reason


CONSISTENT = {
    "deeper than declared, not yet run": (
        [_attempt(0, _spec(scatter_mode="local"), False, 5.5)],
        "FAIL — forces differ\nset num_interactions = 3 on the wrapper",
        1,
    ),
    "names the rolled-back try as a fact": (
        _given_and_tried(SpecFix("run_torchscript_eagerly", "set", ["distribution", "torchscript"], "eager"), _spec()),
        'FAIL — forces differ\nauto-fix tried torchscript "eager" and rolled it back\n'
        'attempt 1 (run_torchscript_eagerly): torchscript "eager" was worse',
        1,
    ),
    "a cutoff longer than declared, not yet covered": (
        [_attempt(0, _spec(), False, 3.5)],
        "FAIL — forces differ\nset cutoff = 5 on the wrapper",
        1,
    ),
    "a halo wider than any that ran": (
        [_attempt(0, _spec(), False, 5.5)],
        "FAIL — forces differ\nset halo_width = 10.5 Å",
        1,
    ),
}


@pytest.mark.parametrize("case", list(CONSISTENT), ids=list(CONSISTENT))
def test_consistent_advice_passes(case: str) -> None:
    attempts, advice, depth = CONSISTENT[case]
    assert checks.advice_consistent(_report(attempts, advice, depth=depth)) == (True, "")


@pytest.mark.procs
def test_the_real_section_runs_one_case() -> None:
    pytest.importorskip("torch_geometric")
    accuracy = importlib.import_module("accuracy")
    case = next(c for c in accuracy.REAL_CASES if c.name == "schnet")
    assert {c.package for c in accuracy.REAL_CASES} == {"torch_geometric", "mace", "aimnet"}
    row = accuracy.run(case)
    cells = [c.strip() for c in row.strip("|").split("|")]
    assert cells[:6] == ["schnet", "pass", "pass", "—", "not needed", "yes"], row
    assert cells[6].endswith(" s")
    assert accuracy.summary([row]).startswith("1/1 verdicts right, 0 false passes, 0 false alarms")
