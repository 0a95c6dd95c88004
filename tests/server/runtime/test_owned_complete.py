"""Scatter mode `owned_complete`: a one-cutoff halo refreshed from the owners after each aggregation.

The models build their own radius graph (`examples/self_graph.py`). Those whose per-atom state
changes only through per-edge → per-atom scatters (in several spellings) match the reference under
the policy with a halo one cutoff deep, where `local` needs three; those that break its assumption
(a dense aggregation, a per-atom quantity computed outside any scatter, a halo shallower than the
first layer's edges) give wrong numbers under it, as they would in production.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from conftest import assert_matches, max_rel, reference
from distcheck.processes.launch import run_distributed
from distcheck.runtime.model import DEFAULT_SKIN
from examples import self_graph

pytestmark = pytest.mark.procs

CUTOFF = 3.0
LAYERS = 3
TIMEOUT = 60.0

PASSING: list[Callable[[], Any]] = [
    self_graph.model_factory,
    self_graph.scatter_add_factory,
    self_graph.helper_factory,
    self_graph.updated_factory,
]


def _spec(mode: str, halo_width: float | None = None) -> dict[str, Any]:
    spec = copy.deepcopy(self_graph.SPEC)
    spec["distribution"]["policy"].update(scatter_mode=mode, halo_width=halo_width)
    return spec


@pytest.mark.parametrize("factory", PASSING, ids=lambda f: f.__name__)
def test_scatter_models_match_with_a_one_cutoff_halo(factory: Callable[[], Any]) -> None:
    batch = self_graph.sample_batch()
    ref = reference(factory, batch)
    run = run_distributed(factory, batch, _spec("owned_complete"), world_size=2, timeout_sec=TIMEOUT)
    assert_matches(run.outputs, ref, 1e-10)  # energy, and forces through the refresh's backward
    for rec in run.records:
        assert rec.halo_width == pytest.approx(CUTOFF + DEFAULT_SKIN)
        assert rec.owned > 0 and rec.halo > 0 and rec.remote > 0, rec
        refreshed = sum(v for k, v in rec.handler_counts.items() if k.startswith("halo_refresh["))
        assert refreshed >= LAYERS, rec.handler_counts
        assert not any(k.startswith("halo_scatter_correction") for k in rec.handler_counts)


def test_local_needs_three_cutoffs_of_halo_for_the_same_model() -> None:
    batch = self_graph.sample_batch()
    factory = self_graph.model_factory
    owned = run_distributed(factory, batch, _spec("owned_complete"), world_size=2, timeout_sec=TIMEOUT)
    local = run_distributed(factory, batch, _spec("local"), world_size=2, timeout_sec=TIMEOUT)
    ref = reference(factory, batch)
    assert_matches(local.outputs, ref, 1e-10)
    for a, b in zip(owned.records, local.records, strict=True):
        assert b.halo_width == pytest.approx(LAYERS * CUTOFF + DEFAULT_SKIN)
        assert a.halo < b.halo
    # `local` with the one-cutoff halo that suffices for owned_complete is wrong: nothing refreshes
    short = run_distributed(factory, batch, _spec("local", CUTOFF + DEFAULT_SKIN), world_size=2, timeout_sec=TIMEOUT)
    assert max_rel(short.outputs["forces"], ref["forces"]) > 1e-6


def test_refresh_is_not_a_correction_of_partials() -> None:
    """The same self-graph model under `halo_correction` (halo partials summed into owners) double
    counts the edges among the rows it built itself: the two exchanges are not interchangeable."""
    batch = self_graph.sample_batch()
    factory = self_graph.model_factory
    run = run_distributed(factory, batch, _spec("halo_correction"), world_size=2, timeout_sec=TIMEOUT)
    assert max_rel(run.outputs["forces"], reference(factory, batch)["forces"]) > 1e-6


@pytest.mark.parametrize(
    ("factory", "why"),
    [
        (self_graph.dense_factory, "aggregation by a dense matrix product: halo rows never refreshed"),
        (self_graph.degree_factory, "a per-atom degree counted outside any scatter: wrong on halo atoms"),
    ],
    ids=["dense", "degree"],
)
def test_models_that_break_the_assumption_fail_under_it(factory: Callable[[], Any], why: str) -> None:
    batch = self_graph.sample_batch()
    ref = reference(factory, batch)
    run = run_distributed(factory, batch, _spec("owned_complete"), world_size=2, timeout_sec=TIMEOUT)
    assert max_rel(run.outputs["forces"], ref["forces"]) > 1e-6, why
    local = run_distributed(factory, batch, _spec("local"), world_size=2, timeout_sec=TIMEOUT)
    assert_matches(local.outputs, ref, 1e-10)


def test_a_halo_shallower_than_the_first_layer_edges_fails() -> None:
    batch = self_graph.sample_batch()
    factory = self_graph.model_factory
    # lattice planes 2.6 Å apart (±0.2 Å), cut halfway: 1.3 Å of halo holds part of the next plane only
    run = run_distributed(factory, batch, _spec("owned_complete", 1.3), world_size=2, timeout_sec=TIMEOUT)
    assert all(rec.halo > 0 for rec in run.records)
    assert max_rel(run.outputs["forces"], reference(factory, batch)["forces"]) > 1e-6


def test_an_aggregation_inside_torchscript_is_named_and_refreshed_once_eager() -> None:
    batch = self_graph.sample_batch()
    factory = self_graph.scripted_factory
    ref = reference(factory, batch)
    run = run_distributed(factory, batch, _spec("owned_complete"), world_size=2, timeout_sec=TIMEOUT)
    assert max_rel(run.outputs["forces"], ref["forces"]) > 1e-6  # never refreshed while compiled
    seen = [u for rec in run.records for u in rec.unrouted]
    assert any(u.aggregation == "per_edge_to_per_atom" and u.origin == "torchscript" for u in seen), seen
    eager = _spec("owned_complete")
    eager["distribution"]["torchscript"] = "eager"
    fixed = run_distributed(factory, batch, eager, world_size=2, timeout_sec=TIMEOUT)
    assert_matches(fixed.outputs, ref, 1e-10)
    assert all(rec.handler_counts.get("halo_refresh[index_add]") == LAYERS for rec in fixed.records)
