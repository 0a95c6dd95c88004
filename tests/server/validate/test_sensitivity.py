"""Sensitivity beyond tolerance: errors within atol/rtol but far above the round-off floor are suspicious.

The floor is measured inside the validation by a replicated control run; a model declared one
interaction too shallow whose per-system feedback hides its field from the receptive-field probe
passed before (errors 10⁶–10⁸× round-off, below atol/rtol).
"""

from __future__ import annotations

import math
import os
from typing import Any

import pytest
import torch

from distcheck import TraceReport, validate_on_cpu
from distcheck.report import Attempt, OutputVerdict
from distcheck.runtime.factory import load_object
from distcheck.spec import MLIPSpec
from distcheck.validate.sensitivity import SUSPICIOUS_RATIO, RoundoffMeter, control_spec, epsilon_floor

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitivity_models")
COUPLED = os.path.join(HERE, "global_coupled.py")
SHALLOW = os.path.join(HERE, "shallow_depth.py")

pytestmark = pytest.mark.timeout(180)


def _validate(path: str, factory: str = "model_factory", **kw: Any) -> TraceReport:
    return validate_on_cpu(f"{path}:{factory}", load_object(f"{path}:sample_batch")(), timeout_sec=60, **kw)


@pytest.mark.procs
def test_sub_tolerance_bug_is_suspicious_not_passed() -> None:
    report = _validate(COUPLED, auto_fix=False)
    attempt = report.attempts[0]
    # within atol/rtol on every element...
    assert all(v.n_failing == 0 for v in attempt.verdicts.values())
    # ...and yet not a pass: each output is suspicious, with its ratio to the measured floor
    assert not report.ok and report.verdict == "failed"
    assert {v.status for v in attempt.verdicts.values()} == {"suspicious"}
    assert {s.name for s in attempt.suspicious} == {"energy", "forces"}
    assert all(s.ratio > 1e4 and s.threshold == SUSPICIOUS_RATIO for s in attempt.suspicious)
    assert report.roundoff is not None and report.roundoff.status == "measured"
    assert all(c is not None and c < 1e-12 for c in report.roundoff.control_abs_diff.values())
    # the cause is named, and the fix that works is offered
    head = report.next_action.split("\n")[0]
    assert head.startswith("FAIL — SUSPICIOUS: energy") and "round-off floor" in head and "replicated control" in head
    assert "halo shallower than the receptive field" in head and "halo_width" in head
    text = report.render_text()
    assert "suspicious: energy" in text and "round-off floor (replicated control run" in text
    again = TraceReport.from_json(report.to_json())
    assert again == report and again.attempts[0].suspicious == attempt.suspicious


@pytest.mark.procs
def test_auto_fix_widens_the_halo_until_the_error_is_round_off() -> None:
    report = _validate(COUPLED)
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "widen_halo"]
    assert report.attempts[0].suspicious and not report.attempts[1].suspicious
    width = report.spec.distribution.policy.halo_width
    assert width is not None and width > 9.0  # the real field is three 3 Å hops
    assert all(v.status == "ok" for v in report.attempts[1].verdicts.values())


@pytest.mark.procs
def test_correct_model_runs_no_control_and_is_not_suspicious() -> None:
    report = _validate(SHALLOW, "factory_declared_right")
    assert report.ok and report.verdict == "passed", report.next_action
    assert report.roundoff is not None and report.roundoff.status == "not_needed"
    assert report.roundoff.seconds == 0.0
    assert not any(a.suspicious for a in report.attempts)


# -- the meter on its own (no ranks) ----------------------------------------------------------------


class _Run:
    def __init__(self, outputs: dict[str, torch.Tensor]) -> None:
        self.outputs = outputs


def _attempt(diffs: dict[str, float]) -> Attempt:
    verdicts = {n: OutputVerdict(n, "per_graph", True, d, d, "ok", None, 0, 1) for n, d in diffs.items()}
    return Attempt(0, MLIPSpec(), "", None, True, dict(diffs), dict(diffs), verdicts, {}, None, [], None, {}, {}, {})


@pytest.mark.parametrize(
    ("error", "control", "suspicious"),
    [
        (1e-9, 1e-14, True),  # 10⁵× the floor: suspicious
        (1e-12, 1e-14, False),  # 100× the epsilon floor at most: no control needed, not suspicious
        (1e-9, 1e-10, False),  # the control is as noisy: round-off of this model, not a bug
    ],
)
def test_meter_judges_against_the_measured_floor(error: float, control: float, suspicious: bool) -> None:
    ref = {"energy": torch.tensor([100.0], dtype=torch.float64)}
    calls: list[MLIPSpec] = []

    def run(spec: MLIPSpec) -> Any:
        calls.append(spec)
        return _Run({"energy": ref["energy"] + control})

    meter = RoundoffMeter(ref, {"energy": "per_graph"}, run, 1e-5, 1e-4)
    attempt = _attempt({"energy": error})
    raw = {"energy": {"passed": True, "status": "ok"}}
    found = meter.judge(attempt, raw)
    assert bool(found) is suspicious and attempt.passed is not suspicious
    assert (raw["energy"]["status"] == "suspicious") is suspicious
    needed = error > SUSPICIOUS_RATIO * epsilon_floor(ref["energy"], 1e-5)
    assert len(calls) == (1 if needed else 0)
    if calls:
        assert calls[0].distribution.policy.kind == "replicated"
    meter.judge(_attempt({"energy": error}), {})
    assert len(calls) <= 1  # measured once per validation


def test_control_spec_keeps_consolidation() -> None:
    spec = MLIPSpec.from_dict(
        {
            "format": "distcheck-spec",
            "version": 1,
            "all_reduce_outputs": ["stress"],
            "output_kinds": {"stress": "per_graph"},
        }
    )
    spec.distribution.policy.halo_width = 4.0
    control = control_spec(spec)
    assert control.distribution.policy.kind == "replicated" and control.all_reduce_outputs == ["stress"]
    assert spec.distribution.policy.kind == "halo" and math.isclose(spec.distribution.policy.halo_width, 4.0)
