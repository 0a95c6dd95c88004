"""Bounded auto-fix: halo widening stops at what the model needs and never degenerates the partition;
per-edge-derivative virials get back to `halo_correction`; strain partials are found whatever their
leading 1."""

from __future__ import annotations

import os
from typing import Any

import pytest

from distcheck import validate_on_cpu
from distcheck.batch import Batch
from distcheck.runtime.factory import load_object
from distcheck.runtime.partition import partition_batch
from distcheck.spec import MLIPSpec
from distcheck.validate.halo_bounds import max_halo_width, widened_halo

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitivity_models")
RUNAWAY = os.path.join(HERE, "runaway.py")
VIRIAL = os.path.join(HERE, "edge_virial.py")
STRAIN = os.path.join(HERE, "strain_partial.py")
SHALLOW = os.path.join(HERE, "shallow_depth.py")

pytestmark = pytest.mark.timeout(180)


def _sample(path: str) -> Batch:
    batch: Batch = load_object(f"{path}:sample_batch")()
    return batch


def _remote_everywhere(batch: Batch, width: float) -> bool:
    part = partition_batch(batch, 2, width)
    return all(c["remote"] > 0 for r in part.ranks for c in r.per_system)


@pytest.mark.procs
def test_no_runaway_widening_when_the_halo_already_covers_the_field() -> None:
    report = validate_on_cpu(f"{RUNAWAY}:model_factory", _sample(RUNAWAY), timeout_sec=60)
    assert report.verdict == "failed", report.next_action  # not "inconclusive" of its own making
    assert "widen_halo" not in [a.rule for a in report.attempts]
    assert all(not a.degenerate for a in report.attempts)
    assert all(a.spec.distribution.policy.halo_width == 4.0 for a in report.attempts)
    assert report.receptive_field is not None and report.receptive_field.measured_field == pytest.approx(3.2)
    assert "DEGENERATE" not in report.next_action and "forces" in report.next_action.split("\n")[0]


@pytest.mark.procs
def test_widening_stops_at_the_measured_field() -> None:
    spec = load_object(f"{SHALLOW}:SPEC")
    spec = {**spec, "distribution": {"policy": {**spec["distribution"]["policy"], "halo_width": 4.0}}}
    report = validate_on_cpu(f"{SHALLOW}:factory_declared_right", _sample(SHALLOW), spec=spec, timeout_sec=60)
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "widen_halo"]
    assert report.spec.distribution.policy.halo_width == pytest.approx(9.5)  # 3 measured hops × 3 Å + skin


@pytest.mark.parametrize("status", ["unbounded", "not_measured"])
def test_unknown_field_doubles_but_never_degenerates(status: str) -> None:
    batch = _sample(SHALLOW)
    spec = MLIPSpec.coerce(load_object(f"{SHALLOW}:SPEC"))
    spec.distribution.policy.halo_width = 2.0
    reference = {"receptive_field": {"status": status, "cutoff": 3.0, "measured_depth": None}}
    bound = max_halo_width(batch, 2, 2.0)
    assert _remote_everywhere(batch, bound) and not _remote_everywhere(batch, bound + 0.05)
    widths: list[float] = []
    for _ in range(20):
        halo = {"halo_width": spec.distribution.policy.halo_width, "required_width": 3.0, "matches": True}
        step = widened_halo(spec, halo, reference, batch, 2)
        if step is None:
            break
        spec = step[0]
        assert spec.distribution.policy.halo_width is not None
        widths.append(spec.distribution.policy.halo_width)
    assert widths and widths == sorted(widths) and len(widths) < 20
    assert widths[-1] == pytest.approx(bound, abs=0.01) and _remote_everywhere(batch, widths[-1])


def test_halo_correction_is_never_widened_past_its_cutoff() -> None:
    spec = MLIPSpec()
    halo = {"halo_width": 5.5, "required_width": 5.0, "matches": True}
    assert widened_halo(spec, halo, {}, None, 2) is None
    spec.distribution.policy.halo_width = 5.5
    assert widened_halo(spec, halo, {}, None, 2) is None  # the old rule doubled an explicit halo here


@pytest.mark.procs
def test_per_edge_virial_goes_back_to_halo_correction() -> None:
    report = validate_on_cpu(f"{VIRIAL}:model_factory", _sample(VIRIAL), timeout_sec=60)
    first = report.attempts[0]
    assert first.failing_outputs == ["stress"] and first.spec.distribution.policy.scatter_mode == "local"
    assert report.ok, report.next_action
    rules = [a.rule for a in report.attempts]
    assert rules[1] == "edge_virial_to_halo_correction", rules
    assert "per-edge derivatives" in report.attempts[1].rationale and "per-atom virial" in report.attempts[1].rationale
    assert report.spec.distribution.policy.scatter_mode == "halo_correction"


@pytest.mark.procs
@pytest.mark.parametrize("factory", ["model_factory", "factory_flat_stress"])
def test_strain_partial_found_whatever_the_leading_one(factory: str) -> None:
    bare: dict[str, Any] = {"format": "distcheck-spec", "version": 1}
    report = validate_on_cpu(f"{STRAIN}:{factory}", _sample(STRAIN), spec=bare, auto_fix=False, timeout_sec=60)
    assert report.spec.all_reduce_outputs == ["stress"], report.meta.inference_notes
    assert report.ok and len(report.attempts) == 1, report.next_action
