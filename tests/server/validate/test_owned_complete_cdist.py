"""A model that builds its own graph with `torch.cdist` (all pairs closer than the cutoff, self
excluded; `cdist_models`) under the owned-complete halo policy, end to end at world size 2 (gloo):
inference chooses `owned_complete` and it passes first time with a one-cutoff halo; the right spec
passes; a wrong one fails (`halo_correction` double counts the halo's edges, `local` with a one-cutoff
halo is too shallow for 3 layers) and auto-fix moves the first to `owned_complete`."""

from __future__ import annotations

import copy
from typing import Any

import cdist_models as models
import pytest

from distcheck import TraceReport, validate_on_cpu
from distcheck.runtime.model import DEFAULT_SKIN

pytestmark = pytest.mark.procs

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 60.0}


def _validate(spec: dict[str, Any], **options: Any) -> TraceReport:
    return validate_on_cpu(models.model_factory, models.sample_batch(), spec=copy.deepcopy(spec), **OPTIONS, **options)


def _modes(report: TraceReport) -> list[tuple[str | None, str, bool]]:
    return [(a.rule, a.spec.distribution.policy.scatter_mode, a.passed) for a in report.attempts]


def test_inference_chooses_owned_complete_and_it_passes_with_a_one_cutoff_halo() -> None:
    report = _validate(models.BARE)
    assert report.ok and _modes(report) == [(None, "owned_complete", True)], report.next_action
    first = report.attempts[0]
    assert first.halo_completeness.halo_width == pytest.approx(models.CUTOFF + DEFAULT_SKIN)
    assert first.handler_counts.get("halo_refresh[index_add]", 0) > 0, first.handler_counts
    assert report.receptive_field is not None


def test_the_right_spec_passes_and_a_wrong_one_fails_then_is_fixed() -> None:
    right = _validate(models.SPEC, auto_fix=False)
    assert right.verdict == "passed", right.next_action
    wrong = _validate(models.WRONG_SPEC, auto_fix=False)
    assert wrong.verdict == "failed" and not wrong.attempts[0].verdicts["forces"].passed
    assert "owned_complete" in wrong.next_action.split("\n")[0]
    fixed = _validate(models.WRONG_SPEC)
    assert _modes(fixed) == [
        (None, "halo_correction", False),
        ("halo_correction_to_owned_complete", "owned_complete", True),
    ]
    assert fixed.ok and fixed.spec.distribution.policy.scatter_mode == "owned_complete"


def test_local_with_a_one_cutoff_halo_is_too_shallow_for_three_layers() -> None:
    shallow = copy.deepcopy(models.SPEC)
    shallow["distribution"]["policy"].update(scatter_mode="local", halo_width=models.CUTOFF + DEFAULT_SKIN)
    report = _validate(shallow, auto_fix=False)
    assert report.verdict == "failed" and not report.attempts[0].verdicts["forces"].passed
