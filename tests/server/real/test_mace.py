"""MACE (mace-torch 0.3.16, e3nn 0.4.4): passes with the inferred spec; seeded consolidation bugs fixed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from distcheck import validate_on_cpu

pytest.importorskip("mace.modules", reason="MACE needs `pip install distcheck[mace]` (mace-torch==0.3.16)")

from conftest import flagged, round_trip, same_spec, validate
from examples.real import mace_model
from examples.real.common import sample_problems

pytestmark = pytest.mark.procs

KINDS = {"energy": "per_graph", "forces": "per_node", "stress": "per_graph"}


def test_wrapper_outputs_torchscript_parts_and_forces() -> None:
    wrapper, batch = mace_model.model_factory(), mace_model.sample_batch()
    scripted = [m for m in wrapper.modules() if isinstance(m, torch.jit.ScriptModule)]
    assert len(scripted) == 18  # e3nn 0.4.4 codegen: invisible to Python-level interception
    out = wrapper(batch)
    assert {k: tuple(v.shape) for k, v in out.items()} == {"energy": (1,), "forces": (384, 3), "stress": (1, 3, 3)}
    assert all(v.dtype == torch.float64 for v in out.values())
    assert float(out["forces"].abs().max()) > 0.1  # large enough that the validator's atol means something
    atom, axis, h = 11, 0, 1e-5
    plus, minus = mace_model.sample_batch(), mace_model.sample_batch()
    plus.positions[atom, axis] += h
    minus.positions[atom, axis] -= h
    numeric = -float((wrapper(plus)["energy"] - wrapper(minus)["energy"]).detach().sum()) / (2 * h)
    assert abs(numeric - float(out["forces"][atom, axis].detach())) < 1e-6 * max(1.0, abs(numeric))
    assert sample_problems(batch, wrapper.num_interactions * wrapper.cutoff + 0.5) == []


def test_passes_with_the_inferred_spec(tmp_path: Path) -> None:
    """At world size 2 (`test_two_systems_per_batch` does world size 4)."""
    world_size = 2
    report = validate(mace_model, world_size)
    assert report.ok, report.next_action
    assert report.fix_applied is None and len(report.attempts) == 1
    spec = report.spec
    assert same_spec(spec, mace_model.SPEC)
    assert spec.output_kinds == KINDS
    assert spec.all_reduce_outputs == ["stress"] and spec.owned_only_outputs == []
    assert spec.distribution.policy.scatter_mode == "halo_correction"
    assert spec.distribution.third_party_helpers == []
    counts = report.attempts[0].handler_counts
    # scatter_sum: 2 message aggregations per rank (halo-corrected) and 2 per-system sums (e0, interaction
    # energy) + MACE's `positions.sum() * 0` in the displacement per rank.
    assert counts["halo_scatter_correction[scatter_add]"] == 2 * world_size
    assert counts["per_system_reduce"] == 3 * world_size
    assert not any(k.startswith("unintercepted") for k in counts)
    assert flagged(report) == [] and report.attempts[0].helper_diagnostics == []
    assert max(report.attempts[0].max_rel_diff.values()) < 1e-9
    round_trip(report, mace_model, world_size, tmp_path)


def test_seeded_bug_energy_reduced_twice() -> None:
    spec = copy.deepcopy(mace_model.SPEC)
    spec["all_reduce_outputs"] = ["energy", "stress"]
    report = validate(mace_model, 2, spec=spec)
    assert report.attempts[0].failing_outputs == ["energy"]
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "drop_double_all_reduce"]
    assert report.attempts[1].reused_run  # a consolidation-only fix: no new distributed run
    assert report.spec.all_reduce_outputs == ["stress"]


def test_seeded_bug_stress_partial_not_reduced(tmp_path: Path) -> None:
    spec = copy.deepcopy(mace_model.SPEC)
    spec["all_reduce_outputs"] = []
    report = validate(mace_model, 2, spec=spec)
    assert report.attempts[0].failing_outputs == ["stress"]
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "all_reduce_partial_output"]
    assert report.spec.all_reduce_outputs == ["stress"]
    round_trip(report, mace_model, 2, tmp_path)


def test_two_systems_per_batch() -> None:
    report = validate_on_cpu(
        mace_model.model_factory, mace_model.sample_batch_multi(), world_size=4, atol=1e-8, rtol=1e-6
    )
    assert report.ok, report.next_action
    assert report.fix_applied is None and report.spec.all_reduce_outputs == ["stress"]
    assert report.attempts[0].verdicts["stress"].n_total == 2 * 9
    counts = report.attempts[0].handler_counts  # as in test_passes_with_the_inferred_spec, per rank
    assert counts["halo_scatter_correction[scatter_add]"] == 2 * 4
    assert counts["per_system_reduce"] == 3 * 4
    assert not any(k.startswith("unintercepted") for k in counts)
