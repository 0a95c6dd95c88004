"""SchNet (torch-geometric 2.8.1) with a vesin interaction graph: inferred spec passes; seeded bugs fixed."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import torch

from distcheck import validate_on_cpu

pytest.importorskip("torch_geometric.nn", reason="SchNet needs `pip install distcheck[pyg]` (torch-geometric==2.8.1)")

from conftest import flagged, round_trip, same_spec, validate
from examples.real import schnet
from examples.real.common import sample_problems


def test_interaction_graph_is_periodic_and_differentiable() -> None:
    wrapper, batch = schnet.model_factory(), schnet.sample_batch()
    out = wrapper(batch)
    assert {k: tuple(v.shape) for k, v in out.items()} == {"energy": (1,), "forces": (384, 3)}
    # Periodic: moving one atom by a lattice vector changes nothing.
    shifted = schnet.sample_batch()
    shifted.positions[5] += batch.cell[0, 2]
    again = wrapper(shifted)
    assert torch.allclose(again["energy"], out["energy"], rtol=0, atol=1e-9)
    assert torch.allclose(again["forces"], out["forces"], rtol=0, atol=1e-9)
    # Differentiable: the edge lengths come from the live positions, so forces are the energy gradient.
    atom, axis, h = 200, 1, 1e-5
    plus, minus = schnet.sample_batch(), schnet.sample_batch()
    plus.positions[atom, axis] += h
    minus.positions[atom, axis] -= h
    numeric = -float((wrapper(plus)["energy"] - wrapper(minus)["energy"]).detach().sum()) / (2 * h)
    assert abs(numeric - float(out["forces"][atom, axis].detach())) < 1e-6 * max(1.0, abs(numeric))
    assert sample_problems(batch, wrapper.cutoff + 0.5) == []  # halo_correction: one cutoff + skin
    # `local` needs 3 x 5 Å + 0.5 Å: at world size 2 a 31.2 Å slab plus two such halos covers the box.
    assert sample_problems(batch, wrapper.num_interactions * wrapper.cutoff + 0.5, world_sizes=(4,)) == []


def test_interaction_graph_outside_a_bound_batch_says_so() -> None:
    graph = schnet.VesinInteractionGraph(5.0)
    with pytest.raises(RuntimeError, match="bound"):
        graph(torch.zeros(2, 3, dtype=torch.float64), torch.zeros(2, dtype=torch.long))


@pytest.mark.procs
@pytest.mark.parametrize("world_size", [2, 4])
def test_passes_with_the_inferred_spec(world_size: int, tmp_path: Path) -> None:
    report = validate(schnet, world_size)
    assert report.ok, report.next_action
    assert report.fix_applied is None and len(report.attempts) == 1
    spec = report.spec
    assert same_spec(spec, schnet.SPEC)
    assert spec.output_kinds == {"energy": "per_graph", "forces": "per_node"}
    assert spec.all_reduce_outputs == [] and spec.owned_only_outputs == []
    assert spec.distribution.policy.scatter_mode == "halo_correction"
    counts = report.attempts[0].handler_counts
    assert counts["halo_scatter_correction[scatter_add]"] == 3 * world_size  # one CFConv per interaction
    assert counts["per_system_reduce"] == world_size  # the `add` readout
    assert not any(k.startswith("unintercepted") for k in counts)
    assert flagged(report) == []
    assert max(report.attempts[0].max_rel_diff.values()) < 1e-9
    round_trip(report, schnet, world_size, tmp_path)


@pytest.mark.procs
def test_seeded_bug_system_reductions_off() -> None:
    spec = copy.deepcopy(schnet.SPEC)
    spec["system_reductions"] = False
    report = validate(schnet, 2, spec=spec)
    assert set(report.attempts[0].failing_outputs) == {"energy", "forces"}
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "enable_system_reductions"]
    assert report.spec.system_reductions is True


@pytest.mark.procs
def test_seeded_bug_shallow_local_halo_is_widened(tmp_path: Path) -> None:
    spec = copy.deepcopy(schnet.SPEC)
    spec["distribution"]["policy"].update(scatter_mode="local", halo_width=5.5)
    report = validate(schnet, 4, spec=spec)
    assert report.attempts[0].halo_completeness.matches is False
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "widen_halo"]
    assert report.spec.distribution.policy.halo_width == pytest.approx(15.5)
    round_trip(report, schnet, 4, tmp_path)


@pytest.mark.procs
def test_two_systems_per_batch() -> None:
    report = validate_on_cpu(schnet.model_factory, schnet.sample_batch_multi(), world_size=4, atol=1e-8, rtol=1e-6)
    assert report.ok, report.next_action
    assert report.fix_applied is None
    assert report.attempts[0].verdicts["energy"].n_total == 2
