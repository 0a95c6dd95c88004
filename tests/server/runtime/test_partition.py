"""Tests for `distcheck.runtime.partition`: ownership, `[owned | halo]` layout and halo completeness."""

from __future__ import annotations

import itertools
import math
from typing import Any

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from distcheck.batch import Batch
from distcheck.runtime.partition import Partition, partition_batch

# Distances this close to the halo width are not required to be in the halo (floating-point slack).
TOL = 1e-7

# -- brute-force reference --------------------------------------------------------------------------


def _basis(cell: np.ndarray) -> np.ndarray:
    """The cell with zero vectors replaced by an orthonormal complement of the others (invertible)."""
    zero = [a for a in range(3) if np.linalg.norm(cell[a]) == 0.0]
    out = cell.astype(np.float64).copy()
    if zero:
        given_vecs = np.array([cell[a] for a in range(3) if a not in zero]).reshape(-1, 3)
        complement = np.linalg.svd(given_vecs)[2][len(given_vecs) :] if len(given_vecs) else np.eye(3)
        for a, v in zip(zero, complement, strict=True):
            out[a] = v
    assert abs(np.linalg.det(out)) > 1e-9
    return out


def min_image_distances(pos: np.ndarray, cell: np.ndarray, pbc: np.ndarray, reach: float) -> np.ndarray:
    """`D[i, j]` = min over periodic images of |r_j + S@cell - r_i|; exact for all values <= `reach`.

    Each pair is first reduced to fractional differences in [-0.5, 0.5] along periodic axes; then
    every integer shift with |S_a| <= 0.5 + reach / spacing_a (enough to reach any image within
    `reach`, spacing = interplanar distance) is tried.
    """
    basis = _basis(cell)
    inv = np.linalg.inv(basis)
    diff = pos[None, :, :] - pos[:, None, :]
    frac = diff @ inv
    ranges = []
    vol = abs(np.linalg.det(basis))
    for a in range(3):
        if pbc[a]:
            frac[..., a] -= np.round(frac[..., a])
            spacing = vol / np.linalg.norm(np.cross(basis[(a + 1) % 3], basis[(a + 2) % 3]))
            k = math.ceil(0.5 + reach / spacing) if math.isfinite(reach) else 1
            ranges.append(range(-k, k + 1))
        else:
            ranges.append(range(0, 1))
    reduced = frac @ basis
    best = np.full(diff.shape[:2], np.inf)
    for shift in itertools.product(*ranges):
        vec = reduced + np.asarray(shift, dtype=np.float64) @ basis
        best = np.minimum(best, np.linalg.norm(vec, axis=-1))
    return best


# -- invariant checks -------------------------------------------------------------------------------


def check_partition(batch: Batch, part: Partition, world_size: int) -> None:
    """Structural properties every partition must have."""
    n = batch.num_atoms
    assert part.world_size == world_size
    assert part.num_atoms == n
    assert len(part.ranks) == world_size
    assert [r.rank for r in part.ranks] == list(range(world_size))
    assert part.owner.shape == (n,) and part.owner.dtype == torch.long
    if n:
        assert int(part.owner.min()) >= 0 and int(part.owner.max()) < world_size
    assert len(part.cuts) == batch.num_systems
    slices = batch.system_slices()

    owned_count = torch.zeros(n, dtype=torch.long)
    for rp in part.ranks:
        ids, mask = rp.local_ids, rp.owned_mask
        assert ids.dtype == torch.long and mask.dtype == torch.bool
        assert ids.shape == mask.shape == (rp.num_local,)
        # every atom at most once per rank; ids are valid global rows
        assert len(set(ids.tolist())) == len(ids)
        if len(ids):
            assert int(ids.min()) >= 0 and int(ids.max()) < n
        owned_count[ids[mask]] += 1
        # owner matches the owned rows exactly
        assert set(ids[mask].tolist()) == set((part.owner == rp.rank).nonzero().flatten().tolist())
        assert not bool((part.owner[ids[~mask]] == rp.rank).any())
        # local rows: system index sorted, and each system block is [owned | halo]
        sys_of_row = batch.batch[ids]
        assert bool((sys_of_row[1:] >= sys_of_row[:-1]).all())
        for s in range(batch.num_systems):
            block = mask[sys_of_row == s].to(torch.int8)
            assert bool((block[1:] <= block[:-1]).all()), f"rank {rp.rank} system {s} is not [owned | halo]"
        # gathering by local_ids reproduces the rows and gives a valid local batch
        local_pos = batch.positions[ids]
        torch.testing.assert_close(
            local_pos, torch.stack([batch.positions[k] for k in ids.tolist()]) if len(ids) else batch.positions[:0]
        )
        local = Batch(
            positions=local_pos,
            atomic_numbers=batch.atomic_numbers[ids],
            cell=batch.cell,
            pbc=batch.pbc,
            batch=sys_of_row,
        )
        assert local.num_atoms == rp.num_local
        # per-system counts
        assert len(rp.per_system) == batch.num_systems
        for s, (sl, row) in enumerate(zip(slices, rp.per_system, strict=True)):
            in_sys = sys_of_row == s
            assert row["system"] == s
            assert row["owned"] == int((mask & in_sys).sum()) == int((part.owner[sl] == rp.rank).sum())
            assert row["halo"] == int((~mask & in_sys).sum())
            assert row["owned"] + row["halo"] + row["remote"] == sl.stop - sl.start
            assert row["remote"] >= 0
        assert rp.num_owned + rp.num_halo == rp.num_local
    # every atom owned by exactly one rank
    assert bool((owned_count == 1).all())

    summary = part.summary()
    assert sorted(summary) == list(range(world_size))
    assert sum(v["owned"] for v in summary.values()) == n
    for rp in part.ranks:
        v = summary[rp.rank]
        assert v["owned"] + v["halo"] + v["remote"] == n
        assert v == {"owned": rp.num_owned, "halo": rp.num_halo, "remote": n - rp.num_local}
        assert v["owned"] == sum(row["owned"] for row in rp.per_system)
        assert v["halo"] == sum(row["halo"] for row in rp.per_system)
        assert v["remote"] == sum(row["remote"] for row in rp.per_system)


def check_halo_complete(batch: Batch, part: Partition, halo_width: float) -> None:
    """Every atom within `halo_width` (through periodic images) of an owned atom is local to that rank."""
    for s, sl in enumerate(batch.system_slices()):
        if sl.stop == sl.start:
            continue
        pos = batch.positions[sl].detach().double().numpy()
        dist = min_image_distances(pos, batch.cell[s].double().numpy(), batch.pbc[s].numpy(), halo_width)
        owner = part.owner[sl].numpy()
        for rp in part.ranks:
            owned = owner == rp.rank
            if not owned.any():
                continue
            needed = (dist[owned] <= halo_width - TOL).any(axis=0) | owned
            local = np.zeros(sl.stop - sl.start, dtype=bool)
            ids = rp.local_ids.numpy()
            ids = ids[(ids >= sl.start) & (ids < sl.stop)] - sl.start
            local[ids] = True
            missing = np.nonzero(needed & ~local)[0]
            assert not len(missing), (
                f"rank {rp.rank}, system {s}: atoms {missing[:10].tolist()} are within {halo_width} Å of an "
                f"owned atom but not local (cut {part.cuts[s]})"
            )


def assert_same_partition(a: Partition, b: Partition) -> None:
    assert torch.equal(a.owner, b.owner)
    assert a.cuts == b.cuts
    assert a.summary() == b.summary()
    for ra, rb in zip(a.ranks, b.ranks, strict=True):
        assert torch.equal(ra.local_ids, rb.local_ids)
        assert torch.equal(ra.owned_mask, rb.owned_mask)
        assert ra.per_system == rb.per_system


# -- strategies -------------------------------------------------------------------------------------


@st.composite
def system_args(draw: st.DrawFn) -> dict[str, Any]:
    """One system: random positions around a random (orthorhombic or triclinic) cell, random pbc."""
    n = draw(st.integers(1, 60))
    pbc = np.array(draw(st.tuples(st.booleans(), st.booleans(), st.booleans())), dtype=bool)
    triclinic = draw(st.booleans())
    lengths = np.array([draw(st.floats(3.0, 12.0)) for _ in range(3)])
    strain = np.array([draw(st.floats(-0.3, 0.3)) for _ in range(6)]) if triclinic else np.zeros(6)
    full = np.diag(lengths) @ (
        np.eye(3) + np.array([[0.0, strain[0], strain[1]], [strain[2], 0.0, strain[3]], [strain[4], strain[5], 0.0]])
    )
    cell = full.copy()
    if not pbc.all():
        open_cell = draw(st.sampled_from(["keep", "zero_open", "zero_all_if_cluster"]))
        if open_cell == "zero_open" or (open_cell == "zero_all_if_cluster" and not pbc.any()):
            cell[~pbc] = 0.0
    seed = draw(st.integers(0, 2**32 - 1))
    snap = draw(st.booleans())
    rng = np.random.default_rng(seed)
    frac = rng.uniform(-0.3, 1.3, (n, 3))
    if snap:
        # put atoms exactly on slab boundaries / cell faces (and sometimes on top of each other)
        frac = np.round(frac * 4.0) / 4.0
    return {"positions": frac @ full, "cell": cell, "pbc": pbc, "numbers": rng.integers(1, 20, n)}


@st.composite
def batches(draw: st.DrawFn) -> Batch:
    systems = draw(st.lists(system_args(), min_size=1, max_size=3))
    return Batch(
        positions=torch.as_tensor(np.concatenate([s["positions"] for s in systems])),
        atomic_numbers=torch.as_tensor(np.concatenate([s["numbers"] for s in systems])),
        cell=torch.as_tensor(np.stack([s["cell"] for s in systems])),
        pbc=torch.as_tensor(np.stack([s["pbc"] for s in systems])),
        batch=torch.as_tensor(np.concatenate([np.full(len(s["numbers"]), k) for k, s in enumerate(systems)])),
    )


# sampled_from / a plain float range keep hypothesis from spending most examples on world_size 1 and halo 0
world_sizes = st.sampled_from([2, 3, 4, 5, 1])
halo_widths = st.one_of(st.floats(1.0, 6.0), st.floats(0.0, 6.0))


# -- property tests ---------------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(batch=batches(), world_size=world_sizes, halo_width=halo_widths)
def test_partition_properties(batch: Batch, world_size: int, halo_width: float) -> None:
    part = partition_batch(batch, world_size, halo_width)
    assert part.halo_width == halo_width
    check_partition(batch, part, world_size)
    check_halo_complete(batch, part, halo_width)
    assert_same_partition(part, partition_batch(batch, world_size, halo_width))
    if world_size == 1:
        (rp,) = part.ranks
        assert bool((part.owner == 0).all())
        assert torch.equal(rp.local_ids, torch.arange(batch.num_atoms))
        assert bool(rp.owned_mask.all()) and rp.num_halo == 0


@settings(max_examples=60, deadline=None)
@given(batch=batches(), world_size=world_sizes, halo_width=halo_widths)
def test_replicated_and_infinite_halo_give_every_rank_every_atom(
    batch: Batch, world_size: int, halo_width: float
) -> None:
    plain = partition_batch(batch, world_size, halo_width)
    for part in (
        partition_batch(batch, world_size, halo_width, replicated=True),
        partition_batch(batch, world_size, math.inf),
    ):
        check_partition(batch, part, world_size)
        # ownership is still the spatial one; only the halo grows
        assert torch.equal(part.owner, plain.owner)
        for rp in part.ranks:
            assert sorted(rp.local_ids.tolist()) == list(range(batch.num_atoms))
            assert part.summary()[rp.rank]["remote"] == 0


@settings(max_examples=60, deadline=None)
@given(batch=batches(), world_size=world_sizes, small=st.floats(0.0, 3.0), extra=st.floats(0.0, 3.0))
def test_halo_grows_monotonically_with_width(batch: Batch, world_size: int, small: float, extra: float) -> None:
    narrow = partition_batch(batch, world_size, small)
    wide = partition_batch(batch, world_size, small + extra)
    assert torch.equal(narrow.owner, wide.owner)
    for rn, rw in zip(narrow.ranks, wide.ranks, strict=True):
        assert set(rn.local_ids.tolist()) <= set(rw.local_ids.tolist())


# -- example-based tests ----------------------------------------------------------------------------


def _box_batch(n: int = 400, seed: int = 0) -> Batch:
    rng = np.random.default_rng(seed)
    pos = rng.uniform(0.0, 1.0, (n, 3)) * np.array([10.0, 10.0, 40.0])
    return Batch(
        positions=torch.as_tensor(pos),
        atomic_numbers=torch.ones(n, dtype=torch.long),
        cell=torch.diag(torch.tensor([10.0, 10.0, 40.0], dtype=torch.float64)),
        pbc=[True, True, True],
    )


@pytest.mark.parametrize("world_size", [2, 4])
def test_periodic_long_box_is_cut_along_long_axis(world_size: int) -> None:
    batch = _box_batch()
    part = partition_batch(batch, world_size, 5.0)
    check_partition(batch, part, world_size)
    check_halo_complete(batch, part, 5.0)
    (cut,) = part.cuts
    assert cut.axis == 2
    assert cut.periodic
    assert cut.length == pytest.approx(40.0)
    for rank, counts in part.summary().items():
        assert counts["owned"] > 0 and counts["halo"] > 0 and counts["remote"] > 0, (rank, counts)
    # slabs: rank r owns exactly the atoms with z in [r, r+1) * 40 / world_size
    z = batch.positions[:, 2]
    expected_owner = torch.clamp(torch.floor(z / (40.0 / world_size)).long(), 0, world_size - 1)
    assert torch.equal(part.owner, expected_owner)
    # halo atoms lie within 5 Å of the rank's slab along z (through the periodic wrap)
    width = 40.0 / world_size
    for rp in part.ranks:
        zh = z[rp.local_ids[~rp.owned_mask]]
        lo, hi = rp.rank * width, (rp.rank + 1) * width
        d = torch.minimum(torch.remainder(lo - zh, 40.0), torch.remainder(zh - hi, 40.0))
        assert bool((d <= 5.0 + 1e-9).all())


@pytest.mark.parametrize("world_size", [2, 4])
def test_periodic_wrap_puts_atoms_near_z0_in_last_rank_halo(world_size: int) -> None:
    base = _box_batch(200, seed=1)
    extra = torch.tensor([[5.0, 5.0, 0.5], [5.0, 5.0, 39.5]], dtype=torch.float64)
    batch = Batch(
        positions=torch.cat([base.positions, extra]),
        atomic_numbers=torch.ones(202, dtype=torch.long),
        cell=base.cell,
        pbc=base.pbc,
    )
    part = partition_batch(batch, world_size, 5.0)
    near_zero, near_top = 200, 201
    last = part.ranks[-1]
    first = part.ranks[0]
    assert int(part.owner[near_zero]) == 0
    assert int(part.owner[near_top]) == world_size - 1
    last_halo = set(last.local_ids[~last.owned_mask].tolist())
    first_halo = set(first.local_ids[~first.owned_mask].tolist())
    assert near_zero in last_halo
    assert near_top in first_halo
    # without periodicity along z the wrap must not happen
    open_z = Batch(
        positions=batch.positions,
        atomic_numbers=batch.atomic_numbers,
        cell=batch.cell,
        pbc=[True, True, False],
    )
    part_open = partition_batch(open_z, world_size, 5.0)
    assert part_open.cuts[0].axis == 2 and not part_open.cuts[0].periodic
    assert near_zero not in set(part_open.ranks[-1].local_ids.tolist())
    assert near_top not in set(part_open.ranks[0].local_ids.tolist())
    check_halo_complete(open_z, part_open, 5.0)


@pytest.mark.parametrize("long_axis", [0, 1, 2])
def test_open_elongated_cluster_cut_along_long_extent(long_axis: int) -> None:
    rng = np.random.default_rng(4)
    extent = np.array([6.0, 6.0, 6.0])
    extent[long_axis] = 50.0
    pos = rng.uniform(0.0, 1.0, (300, 3)) * extent - 3.0
    batch = Batch(positions=torch.as_tensor(pos), atomic_numbers=torch.ones(300, dtype=torch.long))
    part = partition_batch(batch, 3, 4.0)
    check_partition(batch, part, 3)
    check_halo_complete(batch, part, 4.0)
    (cut,) = part.cuts
    assert cut.axis == long_axis
    assert not cut.periodic
    x = batch.positions[:, long_axis]
    # slabs are contiguous along the long direction, in rank order
    for r in range(2):
        assert float(x[part.owner == r].max()) <= float(x[part.owner == r + 1].min())
    for counts in part.summary().values():
        assert counts["owned"] > 0
    # the end ranks have remote atoms (no wrap in an open cluster)
    assert part.summary()[0]["remote"] > 0 and part.summary()[2]["remote"] > 0


@pytest.mark.parametrize("pbc", [[True, True, True], [True, False, True], [False, True, True]])
@pytest.mark.parametrize("seed", range(4))
def test_dense_skewed_cell_halo_complete(seed: int, pbc: list[bool]) -> None:
    """Strongly skewed periodic cells: the period along the cut normal is the interplanar spacing."""
    rng = np.random.default_rng(50 + seed)
    cell = np.array([[8.0, 0.0, 0.0], [4.5, 8.0, 0.0], [4.0, 4.5, 14.0]])
    cell = cell[rng.permutation(3)]
    pos = rng.uniform(-0.2, 1.2, (300, 3)) @ cell
    batch = Batch(
        positions=torch.as_tensor(pos),
        atomic_numbers=torch.ones(300, dtype=torch.long),
        cell=torch.as_tensor(cell),
        pbc=pbc,
    )
    world_size = 2 + seed % 3
    halo = 2.5
    part = partition_batch(batch, world_size, halo)
    check_partition(batch, part, world_size)
    check_halo_complete(batch, part, halo)
    (cut,) = part.cuts
    if cut.periodic:
        normal = np.cross(cell[(cut.axis + 1) % 3], cell[(cut.axis + 2) % 3])
        assert cut.length == pytest.approx(abs(np.linalg.det(cell)) / np.linalg.norm(normal))


def test_multi_system_partitioned_system_by_system() -> None:
    long_box = _box_batch(100, seed=2)
    rng = np.random.default_rng(5)
    cluster = rng.uniform(0.0, 1.0, (50, 3)) * np.array([30.0, 4.0, 4.0])
    batch = Batch(
        positions=torch.cat([long_box.positions, torch.as_tensor(cluster)]),
        atomic_numbers=torch.ones(150, dtype=torch.long),
        cell=torch.stack([long_box.cell[0], torch.zeros(3, 3, dtype=torch.float64)]),
        pbc=[[True, True, True], [False, False, False]],
        batch=torch.tensor([0] * 100 + [1] * 50),
    )
    part = partition_batch(batch, 2, 3.0)
    check_partition(batch, part, 2)
    check_halo_complete(batch, part, 3.0)
    assert [c.axis for c in part.cuts] == [2, 0]
    assert [c.periodic for c in part.cuts] == [True, False]
    for rp in part.ranks:
        assert [row["system"] for row in rp.per_system] == [0, 1]
        assert all(row["owned"] > 0 for row in rp.per_system)


def test_empty_system_is_skipped() -> None:
    batch = Batch(
        positions=torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0], [9.0, 0, 0]], dtype=torch.float64),
        atomic_numbers=[1, 1, 1, 1],
        cell=torch.zeros(3, 3, 3, dtype=torch.float64),
        batch=[0, 0, 2, 2],
    )
    part = partition_batch(batch, 2, 1.0)
    check_partition(batch, part, 2)
    check_halo_complete(batch, part, 1.0)
    assert len(part.cuts) == 3
    for rp in part.ranks:
        assert rp.per_system[1] == {"system": 1, "owned": 0, "halo": 0, "remote": 0}


def test_single_atom_and_empty_batch() -> None:
    one = Batch(positions=torch.zeros(1, 3), atomic_numbers=[1])
    part = partition_batch(one, 3, 2.0)
    check_partition(one, part, 3)
    assert part.owner.tolist() == [0]
    empty = Batch(positions=torch.zeros(0, 3), atomic_numbers=torch.zeros(0, dtype=torch.long))
    part = partition_batch(empty, 2, 2.0)
    check_partition(empty, part, 2)
    assert part.summary() == {0: {"owned": 0, "halo": 0, "remote": 0}, 1: {"owned": 0, "halo": 0, "remote": 0}}


def test_world_size_one_owns_everything() -> None:
    batch = _box_batch(50)
    part = partition_batch(batch, 1, 5.0)
    (rp,) = part.ranks
    assert torch.equal(rp.local_ids, torch.arange(50))
    assert bool(rp.owned_mask.all())
    assert part.summary() == {0: {"owned": 50, "halo": 0, "remote": 0}}


def test_float32_and_grad_positions_accepted() -> None:
    batch = _box_batch(80).to(dtype=torch.float32)
    batch.positions.requires_grad_(True)
    part = partition_batch(batch, 2, 5.0)
    check_partition(batch, part, 2)
    ref = partition_batch(_box_batch(80), 2, 5.0)
    assert torch.equal(part.owner, ref.owner)


@pytest.mark.parametrize("world_size", [0, -1])
def test_invalid_world_size(world_size: int) -> None:
    with pytest.raises(ValueError, match="world_size"):
        partition_batch(_box_batch(10), world_size, 1.0)


@pytest.mark.parametrize("halo_width", [-0.1, -5.0, float("nan")])
def test_invalid_halo_width(halo_width: float) -> None:
    with pytest.raises(ValueError, match="halo_width"):
        partition_batch(_box_batch(10), 2, halo_width)


def test_min_image_reference_matches_ase() -> None:
    """Sanity check of the brute-force reference used above against ASE's neighbour list."""
    from ase import Atoms
    from ase.neighborlist import neighbor_list

    rng = np.random.default_rng(9)
    cell = np.diag([3.0, 4.0, 5.0]) @ (np.eye(3) + rng.uniform(-0.3, 0.3, (3, 3)) * (1 - np.eye(3)))
    pos = rng.uniform(-0.3, 1.3, (20, 3)) @ cell
    for pbc in ([True, True, True], [True, False, True], [False, False, False]):
        atoms = Atoms(numbers=[1] * 20, positions=pos, cell=cell, pbc=pbc)
        dist = min_image_distances(pos, cell, np.array(pbc), 4.0)
        i, j, d = neighbor_list("ijd", atoms, 4.0)
        ref = np.full((20, 20), np.inf)
        np.minimum.at(ref, (i, j), d)
        np.fill_diagonal(ref, np.minimum(np.diag(ref), 0.0))
        close = dist < 4.0
        np.testing.assert_array_equal(close, ref < 4.0)
        np.testing.assert_allclose(dist[close], ref[close], atol=1e-9)
