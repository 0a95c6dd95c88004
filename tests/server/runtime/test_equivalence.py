"""Every example under its correct spec matches the single-process run atom by atom (fp64, gloo)."""

from __future__ import annotations

import importlib

import pytest

from conftest import assert_matches, reference
from distcheck import run_distributed

pytestmark = pytest.mark.procs

EXAMPLES = ["pair_potential", "mpnn", "charge_eq", "stress_model", "helper_model", "unaware_model"]


def _spec(module: object) -> object:
    return getattr(module, "CORRECT_SPEC", None) or module.model_factory().distribution_spec  # type: ignore[attr-defined]


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("name", EXAMPLES)
def test_single_system(name: str, world_size: int) -> None:
    module = importlib.import_module(f"examples.{name}")
    batch = module.sample_batch()
    run = run_distributed(module.model_factory, batch, _spec(module), world_size=world_size)
    assert_matches(run.outputs, reference(module.model_factory, batch), 1e-10)
    for rec in run.records:
        assert rec.owned > 0 and rec.halo > 0 and rec.remote > 0, rec


@pytest.mark.parametrize("world_size", [2, 4])
@pytest.mark.parametrize("name", ["pair_potential", "mpnn", "charge_eq", "stress_model", "helper_model"])
def test_multi_system(name: str, world_size: int) -> None:
    module = importlib.import_module(f"examples.{name}")
    batch = module.sample_batch_multi()
    run = run_distributed(module.model_factory, batch, _spec(module), world_size=world_size)
    assert_matches(run.outputs, reference(module.model_factory, batch), 1e-10)


def test_open_cluster() -> None:
    from examples import mpnn

    batch = mpnn.sample_batch_cluster()
    run = run_distributed(mpnn.model_factory, batch, _spec(mpnn), world_size=2)
    assert_matches(run.outputs, reference(mpnn.model_factory, batch), 1e-10)


def test_local_mode_with_deep_halo_matches() -> None:
    """`local` needs no per-layer exchange when the halo covers the receptive field."""
    from examples import mpnn

    spec = dict(_spec(mpnn))  # type: ignore[call-overload]
    spec["distribution"] = {"policy": {"kind": "halo", "scatter_mode": "local"}}
    batch = mpnn.sample_batch()
    run = run_distributed(mpnn.model_factory, batch, spec, world_size=2)
    assert_matches(run.outputs, reference(mpnn.model_factory, batch), 1e-10)
    assert "halo_read" not in run.handler_counts
    assert run.records[0].halo_width == pytest.approx(3 * 4.0 + 0.5)


def test_replicated_policy_is_a_control() -> None:
    from examples import charge_eq

    spec = dict(_spec(charge_eq))  # type: ignore[call-overload]
    spec["distribution"] = {"policy": {"kind": "replicated"}}
    batch = charge_eq.sample_batch()
    run = run_distributed(charge_eq.model_factory, batch, spec, world_size=2)
    assert_matches(run.outputs, reference(charge_eq.model_factory, batch), 1e-10)
    assert all(rec.remote == 0 for rec in run.records)
