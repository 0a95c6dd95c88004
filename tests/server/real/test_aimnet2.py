"""AIMNet2 (aimnet 0.2.5): the flat input, `aimnet.nbops.mol_sum` flagged and adapted, seeded bugs fixed."""

from __future__ import annotations

import copy
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch

from distcheck import validate_on_cpu

pytest.importorskip("aimnet.models", reason="AIMNet2 needs `pip install distcheck[aimnet]` (aimnet==0.2.5)")

from conftest import flagged, handled, round_trip, same_spec, validate
from examples.real import aimnet2
from examples.real.common import sample_problems

MOL_SUM = "aimnet.nbops.mol_sum"
REMEDY = {"kind": "reduction", "module_path": "aimnet.nbops", "attr_name": "mol_sum", "atom_arg": 0, "atom_dim": 0}


def test_flat_input_has_the_padding_atom_last() -> None:
    wrapper, batch = aimnet2.model_factory(), aimnet2.sample_batch()
    n = batch.num_atoms
    data = wrapper.flat_input(batch, batch.positions.clone())
    assert data["coord"].shape == (n + 1, 3) and data["coord"].dtype == torch.float64
    assert int(data["numbers"][-1]) == 0 and bool((data["numbers"][:-1] > 0).all())
    assert data["mol_idx"].shape == (n + 1,) and bool((data["mol_idx"].diff() >= 0).all())
    nbmat, shifts = data["nbmat"], data["shifts"]
    assert nbmat.shape[0] == n + 1 and bool((nbmat[-1] == n).all())
    assert shifts.shape == (*nbmat.shape, 3) and bool((shifts[nbmat == n] == 0).all())
    # Every edge of the vesin list appears once, padded slots only at the end of a row.
    nl = batch.neighbor_list(wrapper.cutoff)
    real = nbmat[:-1] < n
    assert int(real.sum()) == nl.num_edges
    assert bool((real[:, 1:] <= real[:, :-1]).all())
    assert sample_problems(batch, wrapper.num_interactions * wrapper.cutoff + 0.5) == []


def test_mol_sum_is_called_seven_times_and_forces_are_the_energy_gradient(monkeypatch: pytest.MonkeyPatch) -> None:
    import aimnet.nbops

    wrapper, batch = aimnet2.model_factory(), aimnet2.sample_batch()
    callers: Counter[str] = Counter()
    original = aimnet.nbops.mol_sum

    def counting(x: torch.Tensor, data: dict[str, torch.Tensor]) -> torch.Tensor:
        callers[sys._getframe(1).f_code.co_name] += 1
        return original(x, data)

    monkeypatch.setattr(aimnet.nbops, "mol_sum", counting)
    out = wrapper(batch)
    assert callers == {"nse": 4, "_update_q": 2, "forward": 1}
    assert out["energy"].shape == (1,) and out["forces"].shape == (batch.num_atoms, 3)
    total_charge = float(out["charges"].detach().sum())
    assert abs(total_charge - float(batch.charge.sum())) < 1e-3  # charge equilibration (its epsilon is 1e-6)
    # float64 throughout: a central difference matches the autograd force closely.
    atom, axis, h = 37, 2, 1e-5
    plus, minus = aimnet2.sample_batch(), aimnet2.sample_batch()
    plus.positions[atom, axis] += h
    minus.positions[atom, axis] -= h
    numeric = -float((wrapper(plus)["energy"] - wrapper(minus)["energy"]).detach().sum()) / (2 * h)
    assert abs(numeric - float(out["forces"][atom, axis].detach())) < 1e-6 * max(1.0, abs(numeric))


@pytest.mark.procs
def test_mol_sum_is_flagged_then_adapted(tmp_path: Path) -> None:
    """At world size 2 (`test_two_molecules_per_batch` does world size 4)."""
    world_size = 2
    report = validate(aimnet2, world_size)
    first = report.attempts[0]
    assert not first.passed and set(first.failing_outputs) == {"energy", "forces", "charges"}
    assert flagged(report) == [MOL_SUM]
    diag = next(h for h in first.helper_diagnostics if h.qualname == MOL_SUM)
    assert diag.pattern == "per_system_reduction" and diag.consistency_passed is False
    assert diag.likely_remedy == REMEDY
    assert diag.n_calls_ref == 7 and diag.n_calls_per_rank == dict.fromkeys(range(world_size), 7)
    assert diag.source is not None and diag.source["file"].endswith("aimnet/nbops.py")
    # Inference chose `local`: AIMNet2 sums over its padded neighbour matrix, which cannot be halo-corrected.
    assert report.attempts[0].spec.distribution.policy.scatter_mode == "local"
    assert same_spec(report.attempts[0].spec, aimnet2.SPEC) and same_spec(report.spec, aimnet2.CORRECT_SPEC)
    assert any("passes messages 3 times" in note for note in report.meta.inference_notes)

    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "declare_helper_adapter"]
    assert report.fix_applied is not None and MOL_SUM in report.fix_applied
    assert [h.to_dict() for h in report.spec.distribution.third_party_helpers] == [REMEDY]
    assert report.spec.owned_only_outputs == ["charges"] and report.spec.all_reduce_outputs == []
    assert handled(report) == [MOL_SUM] and flagged(report, -1) == []
    counts = report.attempts[-1].handler_counts
    assert counts[f"adapter[{MOL_SUM}]"] == 7 * world_size
    assert not any(k.startswith("unintercepted") for k in counts)
    assert max(report.attempts[-1].max_rel_diff.values()) < 1e-9
    round_trip(report, aimnet2, world_size, tmp_path)


def _correct_spec(**policy: Any) -> dict[str, Any]:
    spec = copy.deepcopy(aimnet2.CORRECT_SPEC)
    spec["distribution"]["policy"].update(policy)
    return spec


@pytest.mark.procs
def test_seeded_bug_halo_correction_is_switched_to_local(tmp_path: Path) -> None:
    """With the adapter but `halo_correction`, halo rows are never refreshed: auto-fix goes `local`."""
    report = validate(aimnet2, 2, spec=_correct_spec(scatter_mode="halo_correction"))
    assert not report.attempts[0].passed and "forces" in report.attempts[0].failing_outputs
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "halo_correction_to_local"]
    assert "padded neighbour matrix" in report.attempts[1].rationale
    assert report.spec.distribution.policy.scatter_mode == "local"
    assert handled(report) == [MOL_SUM]
    round_trip(report, aimnet2, 2, tmp_path)


@pytest.mark.procs
def test_seeded_bug_shallow_local_halo_is_widened() -> None:
    """`local` with a one-cutoff halo misses the 2nd and 3rd shells: widened to 3 x 4 Å + 0.5 Å."""
    report = validate(aimnet2, 2, spec=_correct_spec(halo_width=4.5))
    first = report.attempts[0]
    assert not first.passed and first.halo_completeness.matches is False
    assert first.halo_completeness.required_width == pytest.approx(12.0)
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "widen_halo"]
    assert report.spec.distribution.policy.halo_width == pytest.approx(12.5)


@pytest.mark.procs
def test_two_molecules_per_batch() -> None:
    """Per-molecule sums of two systems (charges +1 and -1) at world size 4: every rank holds a slab of
    each; mol_sum is flagged on every rank and adapted."""
    world_size = 4
    report = validate_on_cpu(
        aimnet2.model_factory, aimnet2.sample_batch_multi(), world_size=world_size, atol=1e-8, rtol=1e-6
    )
    assert flagged(report) == [MOL_SUM]
    diag = next(h for h in report.attempts[0].helper_diagnostics if h.qualname == MOL_SUM)
    assert diag.n_calls_ref == 7 and diag.n_calls_per_rank == dict.fromkeys(range(world_size), 7)
    assert report.ok, report.next_action
    assert [a.rule for a in report.attempts] == [None, "declare_helper_adapter"]
    assert report.attempts[-1].handler_counts[f"adapter[{MOL_SUM}]"] == 7 * world_size
    assert report.attempts[-1].verdicts["energy"].n_total == 2
