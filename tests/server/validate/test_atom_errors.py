"""Per-atom error data (`validate.diff.atom_errors` -> `report.atoms.AtomErrors`): bounded size, the
profile binned as by hand, the geometry the partition used."""

from __future__ import annotations

import json
import math

import pytest
import torch

from distcheck.batch import Batch
from distcheck.report.atoms import AtomErrors, component_name
from distcheck.runtime.partition import partition_batch
from distcheck.validate.diff import atom_errors


def _open_line(xs: list[float]) -> Batch:
    pos = torch.zeros(len(xs), 3, dtype=torch.float64)
    pos[:, 0] = torch.tensor(xs, dtype=torch.float64)
    return Batch(
        pos, torch.ones(len(xs), dtype=torch.long), cell=torch.zeros(3, 3), pbc=torch.zeros(3, dtype=torch.bool)
    )


def test_size_is_bounded_for_a_100k_atom_report() -> None:
    n = 100_000
    gen = torch.Generator().manual_seed(0)
    pos = torch.rand(n, 3, generator=gen, dtype=torch.float64) * torch.tensor([200.0, 20.0, 20.0], dtype=torch.float64)
    batch = Batch(pos, torch.ones(n, dtype=torch.long), cell=torch.zeros(3, 3), pbc=torch.zeros(3, dtype=torch.bool))
    part = partition_batch(batch, 2, 5.0)
    ref = torch.randn(n, 3, generator=gen, dtype=torch.float64)
    got = ref + 1e-3 * torch.randn(n, 3, generator=gen, dtype=torch.float64)
    rec = atom_errors("forces", got, ref, batch, part)
    assert len(rec.worst) == 16 and len(rec.profile) == 64 and len(rec.ranks) == 2
    assert len(json.dumps(rec.to_dict())) < 8_000  # independent of n
    assert rec.n_atoms == n
    diffs = [w.abs_diff for w in rec.worst]
    assert diffs == sorted(diffs, reverse=True)
    assert diffs[0] == pytest.approx(float((got - ref).abs().max()))


def test_profile_and_worst_match_a_hand_computation() -> None:
    # 8 atoms on x in [0, 7]; 2 ranks cut at 3.5; 4 bins of width 1.75.
    batch = _open_line([0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0])
    part = partition_batch(batch, 2, 1.0)
    ref = torch.zeros(8, 3, dtype=torch.float64)
    got = ref.clone()
    got[1, 2] = 0.5  # bin 0 (1.0 / 1.75), component z, rank 0
    got[3, 1] = 0.2  # bin 1 (3.0 / 1.75 = 1.7), component y, rank 0
    got[5, 0] = 0.9  # bin 2 (5.0 / 1.75 = 2.9), component x, rank 1
    got[6, 1] = -0.3  # bin 3 (6.0 / 1.75 = 3.4), component y, rank 1
    rec = atom_errors("forces", got, ref, batch, part, worst=3, bins=4)
    assert rec.profile == pytest.approx([0.5, 0.2, 0.9, 0.3])
    assert [(w.index, w.rank, w.component) for w in rec.worst] == [(5, 1, 0), (1, 0, 2), (6, 1, 1)]
    assert [w.position for w in rec.worst] == pytest.approx([5.0, 1.0, 6.0])
    assert [component_name(w.component) for w in rec.worst] == ["x", "z", "y"]


def test_a_nonfinite_atom_ranks_first() -> None:
    batch = _open_line([0.0, 1.0, 2.0, 3.0])
    part = partition_batch(batch, 2, 1.0)
    ref = torch.zeros(4, 3, dtype=torch.float64)
    got = ref.clone()
    got[0, 0] = 10.0
    got[2, 1] = math.nan
    rec = atom_errors("forces", got, ref, batch, part, worst=2, bins=2)
    assert rec.worst[0].index == 2 and math.isinf(rec.worst[0].abs_diff)


@pytest.mark.parametrize("periodic", [False, True])
def test_geometry_matches_the_partition(periodic: bool) -> None:
    gen = torch.Generator().manual_seed(1)
    n = 60
    pos = torch.rand(n, 3, generator=gen, dtype=torch.float64) * torch.tensor([30.0, 8.0, 8.0], dtype=torch.float64)
    if periodic:
        cell, pbc = torch.diag(torch.tensor([30.0, 8.0, 8.0], dtype=torch.float64)), torch.ones(3, dtype=torch.bool)
    else:
        cell, pbc = torch.zeros(3, 3, dtype=torch.float64), torch.zeros(3, dtype=torch.bool)
    batch = Batch(pos, torch.ones(n, dtype=torch.long), cell=cell, pbc=pbc)
    part = partition_batch(batch, 3, 2.0)
    ref = torch.zeros(n, 3, dtype=torch.float64)
    got = ref + torch.rand(n, 3, generator=gen, dtype=torch.float64)
    rec = atom_errors("forces", got, ref, batch, part, worst=n)
    cut = part.cuts[0]
    assert (rec.axis, rec.periodic, rec.length) == (cut.axis, cut.periodic, pytest.approx(cut.length))
    assert rec.halo_width == 2.0
    assert [r.rank for r in rec.ranks] == [0, 1, 2]
    assert rec.ranks[0].lo == 0.0 and rec.ranks[-1].hi == pytest.approx(cut.length)
    for w in rec.worst:  # every atom lies in the slab of the rank that owns it
        assert w.rank == int(part.owner[w.index])
        slab = rec.ranks[w.rank]
        assert slab.lo - 1e-9 <= w.position <= slab.hi + 1e-9
    again = AtomErrors._read(rec.to_dict(), ())
    assert again.to_dict() == rec.to_dict()


def test_refuses_mismatched_shapes() -> None:
    batch = _open_line([0.0, 1.0])
    part = partition_batch(batch, 2, 1.0)
    with pytest.raises(ValueError, match="per-atom"):
        atom_errors("forces", torch.zeros(2, 3), torch.zeros(3, 3), batch, part)
