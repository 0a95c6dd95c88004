"""The receptive field measured in the reference against `cutoff × num_interactions`.

A wrapper that declares fewer interactions than it runs is flagged before any rank runs, and under
`local` its halo is set from the measured field, so the first attempt passes at round-off instead
of passing (before) with an error 10⁸× round-off hidden under the tolerances.
"""

from __future__ import annotations

import os
from typing import Any

import pytest

from distcheck import TraceReport, validate_on_cpu
from distcheck.batch import Batch
from distcheck.runtime.factory import load_object
from distcheck.validate.receptive import measure_receptive_field
from examples import charge_eq, helper_model, mpnn, pair_potential, unaware_model

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitivity_models")
SHALLOW = os.path.join(HERE, "shallow_depth.py")
COUPLED = os.path.join(HERE, "global_coupled.py")

pytestmark = pytest.mark.timeout(180)


def _sample(path: str) -> Batch:
    batch: Batch = load_object(f"{path}:sample_batch")()
    return batch


@pytest.mark.procs
@pytest.mark.parametrize(
    ("factory", "layers", "declared"), [("model_factory", 3, 2), ("factory_two_declared_one", 2, 1)]
)
def test_under_declared_depth_is_flagged_and_fixed_before_any_rank_runs(
    factory: str, layers: int, declared: int
) -> None:
    report = validate_on_cpu(f"{SHALLOW}:{factory}", _sample(SHALLOW), timeout_sec=60)
    field = report.receptive_field
    assert field is not None and field.status == "measured"
    assert field.declared_depth == declared and field.measured_depth == layers and field.under_declared
    assert field.measured_field == pytest.approx(3.0 * layers)
    # fixed before the first run: attempt 0 already has the halo of the measured field, and passes at round-off
    width = 3.0 * layers + 0.5
    assert field.halo_width_set == pytest.approx(width)
    first = report.attempts[0]
    assert first.spec.distribution.policy.halo_width == pytest.approx(width)
    assert f"halo_width set to {width:g} Å before the first run" in first.rationale
    assert report.ok and len(report.attempts) == 1, report.next_action
    assert all((v.max_abs_diff or 0.0) < 1e-12 for v in first.verdicts.values())
    # the cause is named and the lasting fix given
    assert (
        "UNDER-DECLARED" in report.next_action
        and f"set num_interactions = {layers} on the wrapper" in report.next_action
    )
    assert "UNDER-DECLARED" in report.render_text()
    assert TraceReport.from_json(report.to_json()).receptive_field == field


@pytest.mark.procs
def test_an_explicit_halo_is_flagged_not_overridden() -> None:
    spec = load_object(f"{SHALLOW}:SPEC")
    spec = {**spec, "distribution": {"policy": {**spec["distribution"]["policy"], "halo_width": 6.5}}}
    report = validate_on_cpu(f"{SHALLOW}:model_factory", _sample(SHALLOW), spec=spec, auto_fix=False, timeout_sec=60)
    field = report.receptive_field
    assert field is not None and field.under_declared and field.halo_width_set is None
    assert report.attempts[0].spec.distribution.policy.halo_width == 6.5
    halo = report.attempts[0].halo_completeness
    assert halo.matches is False and halo.required_width == pytest.approx(9.0)  # the measured depth
    assert not report.ok and report.next_action.startswith("FAIL — halo too shallow")


@pytest.mark.procs
def test_declared_right_is_not_flagged() -> None:
    report = validate_on_cpu(f"{SHALLOW}:factory_declared_right", _sample(SHALLOW), timeout_sec=60)
    field = report.receptive_field
    assert field is not None and field.measured_depth == 3 and not field.under_declared
    assert report.ok and report.attempts[0].spec.distribution.policy.halo_width is None
    assert "UNDER-DECLARED" not in report.next_action


# -- the measurement on its own, in this process ---------------------------------------------------


def _measure(module: Any, factory: Any = None) -> dict[str, Any]:
    wrapper = (factory or module.model_factory)()
    derived = {"forces": True}
    return measure_receptive_field(wrapper, module.sample_batch(), cutoff=float(wrapper.cutoff), derived=derived)


@pytest.mark.parametrize(
    ("module", "depth"),
    [(mpnn, 3), (pair_potential, 1), (unaware_model, 2), (charge_eq, 1)],
)
def test_measured_depth_of_the_examples(module: Any, depth: int) -> None:
    found = _measure(module)
    assert found["status"] == "measured" and found["measured_depth"] == depth, found


def test_a_two_layer_mpnn_is_two_deep() -> None:
    found = _measure(mpnn, lambda: mpnn.model_factory(num_interactions=2))
    assert found["measured_depth"] == 2


def test_feedback_through_a_per_system_sum_bounds_nothing() -> None:
    found = _measure(helper_model)
    assert found["status"] == "unbounded" and found["measured_depth"] is None
    coupled = load_object(f"{COUPLED}:model_factory")()
    partial = measure_receptive_field(coupled, _sample(COUPLED), cutoff=3.0, derived={"forces": True})
    assert partial["status"] == "measured" and partial["lower_bound"] and partial["measured_depth"] == 1


def test_no_cutoff_is_not_measured() -> None:
    found = measure_receptive_field(
        pair_potential.model_factory(), pair_potential.sample_batch(), cutoff=None, derived={}
    )
    assert found["status"] == "not_measured" and "cutoff" in found["note"]
