"""DESIGN section 4: each failure mode is reproduced by a wrong spec and gives the predicted numbers."""

from __future__ import annotations

import copy
from typing import Any

import pytest
import torch

from conftest import assert_matches, handler_ref, max_rel, reference
from distcheck import run_distributed
from distcheck.runtime import load_object
from examples import charge_eq, helper_model, mpnn, stress_model, unaware_model

pytestmark = pytest.mark.procs


def _spec(module: Any) -> dict[str, Any]:
    return copy.deepcopy(module.model_factory().distribution_spec)


def test_1_per_system_reduction_counting_halo_atoms() -> None:
    """Without the per-system handler each rank's energy is the sum over owned AND halo atoms."""
    factory = handler_ref("factory_index_add")
    batch = load_object(handler_ref("sample_single"))()
    ref = reference(load_object(factory), batch)
    spec = {
        "format": "distcheck-spec",
        "version": 1,
        "system_reductions": False,
        "output_kinds": {"energy": "per_graph", "forces": "per_node", "atomic_energies": "per_node"},
        "owned_only_outputs": ["atomic_energies"],
    }
    run = run_distributed(factory, batch, spec, world_size=2)
    per_atom = ref["atomic_energies"]
    for rank_out, rows in zip(run.rank_outputs, run.rows):
        expected = per_atom[rows.local_ids].sum()  # owned + halo rows
        assert torch.allclose(rank_out["energy"][0], expected, rtol=1e-10)
        assert float(rank_out["energy"][0]) > float(per_atom[rows.local_ids[rows.owned_mask]].sum())
    assert max_rel(run.outputs["energy"], ref["energy"]) > 1e-3


def test_2_output_reduced_twice_is_world_size_times_reference() -> None:
    spec = _spec(mpnn)
    spec["all_reduce_outputs"] = ["energy"]
    batch = mpnn.sample_batch()
    ref = reference(mpnn.model_factory, batch)
    for world_size in (2, 4):
        run = run_distributed(mpnn.model_factory, batch, spec, world_size=world_size)
        assert torch.allclose(run.outputs["energy"], world_size * ref["energy"], rtol=1e-10)
        assert max_rel(run.outputs["forces"], ref["forces"]) < 1e-10


def test_3_strain_stress_is_a_per_rank_partial() -> None:
    spec = _spec(stress_model)
    spec["all_reduce_outputs"] = []
    batch = stress_model.sample_batch()
    ref = reference(stress_model.model_factory, batch)
    run = run_distributed(stress_model.model_factory, batch, spec, world_size=2)
    assert max_rel(run.outputs["stress"], ref["stress"]) > 1e-2
    partial_sum = sum(out["stress"] for out in run.rank_outputs)
    assert max_rel(partial_sum, ref["stress"]) < 1e-10  # the partials add up to the reference
    assert max_rel(run.outputs["forces"], ref["forces"]) < 1e-10


def test_4_autograd_forces_read_from_owned_rows_miss_halo_contributions() -> None:
    spec = _spec(mpnn)
    spec["owned_only_outputs"] = ["forces"]
    batch = mpnn.sample_batch()
    ref = reference(mpnn.model_factory, batch)
    run = run_distributed(mpnn.model_factory, batch, spec, world_size=2)
    wrong = (run.outputs["forces"] - ref["forces"]).abs().amax(dim=1) > 1e-8
    halo_somewhere = torch.zeros(batch.num_atoms, dtype=torch.bool)
    for rows in run.rows:
        halo_somewhere[rows.local_ids[~rows.owned_mask]] = True
    assert wrong.any()
    assert not (wrong & ~halo_somewhere).any(), "only atoms that have halo copies can miss contributions"
    assert max_rel(run.outputs["energy"], ref["energy"]) < 1e-10


def test_5_too_shallow_halo_in_local_mode_breaks_boundary_atoms() -> None:
    spec = _spec(mpnn)
    spec["distribution"]["policy"].update(scatter_mode="local", halo_width=4.5)  # 1 cutoff for 3 layers
    batch = mpnn.sample_batch()
    ref = reference(mpnn.model_factory, batch)
    run = run_distributed(mpnn.model_factory, batch, spec, world_size=2)
    err = (run.outputs["forces"] - ref["forces"]).abs().amax(dim=1)
    assert float(err.max()) > 1e-6
    # The damage sits at the slab boundaries (z = 0 and z = L/2 at world_size 2) and fades inwards.
    length = float(batch.cell[0, 2, 2])
    z = torch.remainder(batch.positions[:, 2], length / 2)
    to_boundary = torch.minimum(z, length / 2 - z)
    near, far = err[to_boundary < 4.0], err[to_boundary > 12.0]
    assert far.numel() > 0 and near.numel() > 0
    assert float(near.median()) > 10 * float(far.median())
    fixed = _spec(mpnn)
    fixed["distribution"]["policy"].update(scatter_mode="local")
    assert_matches(run_distributed(mpnn.model_factory, batch, fixed, world_size=2).outputs, ref, 1e-10)


def test_6_halo_unaware_backbone_under_halo_correction_double_counts() -> None:
    batch = unaware_model.sample_batch()
    ref = reference(unaware_model.model_factory, batch)
    run = run_distributed(unaware_model.model_factory, batch, unaware_model.WRONG_SPEC, world_size=2)
    assert max_rel(run.outputs["forces"], ref["forces"]) > 1e-2
    assert run.handler_counts.get("halo_scatter_correction[index_add]", 0) > 0
    fixed = run_distributed(unaware_model.model_factory, batch, unaware_model.SPEC, world_size=2)
    assert_matches(fixed.outputs, ref, 1e-10)


def test_7_third_party_helper_behind_the_runtimes_back() -> None:
    batch = helper_model.sample_batch()
    ref = reference(helper_model.model_factory, batch)
    run = run_distributed(helper_model.model_factory, batch, _spec(helper_model), world_size=2)
    assert max_rel(run.outputs["energy"], ref["energy"]) > 1e-3
    assert run.handler_counts.get("unintercepted[aten.index_add]", 0) > 0, run.handler_counts
    fixed = run_distributed(helper_model.model_factory, batch, helper_model.CORRECT_SPEC, world_size=2)
    assert_matches(fixed.outputs, ref, 1e-10)
    assert fixed.handler_counts["adapter[examples.thirdparty.nbops.mol_sum]"] > 0


def test_charges_summed_over_halo_copies_are_wrong() -> None:
    spec = _spec(charge_eq)
    spec["owned_only_outputs"] = []
    batch = charge_eq.sample_batch()
    ref = reference(charge_eq.model_factory, batch)
    run = run_distributed(charge_eq.model_factory, batch, spec, world_size=2)
    assert max_rel(run.outputs["charges"], ref["charges"]) > 1e-2
    # Consolidation is post-processing: the right rule fixes the same rank outputs without a new run.
    fixed = run.reconsolidate(run.spec.__class__.coerce(_spec(charge_eq)))
    assert_matches(fixed.outputs, ref, 1e-10)
