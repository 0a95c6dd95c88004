"""Tests for `distcheck.batch`: `Batch` validation and conversions, neighbour lists against ASE, `as_batch`."""

from __future__ import annotations

import pickle
from dataclasses import dataclass
from typing import Any

import ase
import ase.io
import numpy as np
import pytest
import torch
from ase.neighborlist import neighbor_list as ase_neighbor_list
from hypothesis import given, settings
from hypothesis import strategies as st

from distcheck.batch import Batch, NeighborList, as_batch
from distcheck.neighbors import full_neighbor_list

# -- helpers ---------------------------------------------------------------------------------------


def _simple(n: int = 4, **kw: Any) -> dict[str, Any]:
    """Keyword arguments for a valid one-system batch of `n` atoms (overridable)."""
    args: dict[str, Any] = {
        "positions": torch.arange(3 * n, dtype=torch.float64).reshape(n, 3) * 0.5,
        "atomic_numbers": torch.arange(1, n + 1),
        "cell": torch.eye(3, dtype=torch.float64) * 10.0,
        "pbc": torch.tensor([True, True, True]),
    }
    args.update(kw)
    return args


def _random_cell(rng: np.random.Generator, lengths: np.ndarray, triclinic: bool) -> np.ndarray:
    """A well-conditioned cell: diag(lengths) @ (I + small off-diagonal strain)."""
    strain = rng.uniform(-0.3, 0.3, (3, 3)) * (1.0 - np.eye(3)) if triclinic else np.zeros((3, 3))
    return np.diag(lengths) @ (np.eye(3) + strain)


def _random_atoms(
    rng: np.random.Generator,
    n: int,
    pbc: tuple[bool, bool, bool] | bool,
    triclinic: bool = True,
    lengths: tuple[float, float, float] = (6.0, 7.0, 8.0),
    zero_open: bool = False,
) -> ase.Atoms:
    """Random atoms spread over (and a little outside) a random cell; open axes' vectors optionally zero."""
    pbc3 = np.broadcast_to(np.asarray(pbc, dtype=bool), (3,)).copy()
    full = _random_cell(rng, np.asarray(lengths, dtype=float), triclinic)
    positions = rng.uniform(-0.2, 1.2, (n, 3)) @ full
    cell = full.copy()
    if zero_open:
        cell[~pbc3] = 0.0
    numbers = rng.integers(1, 10, n)
    return ase.Atoms(numbers=numbers, positions=positions, cell=cell, pbc=pbc3)


def _edge_set(nl: NeighborList, offset: int = 0) -> set[tuple[int, int, int, int, int]]:
    shifts = nl.shifts.round().to(torch.long).tolist()
    return {(i - offset, j - offset, *s) for (i, j), s in zip(nl.edge_index.T.tolist(), shifts, strict=True)}


def _ase_edges(atoms: ase.Atoms, cutoff: float) -> dict[tuple[int, int, int, int, int], float]:
    i, j, shifts, d = ase_neighbor_list("ijSd", atoms, cutoff)
    return {(int(a), int(b), *(int(x) for x in s)): float(dist) for a, b, s, dist in zip(i, j, shifts, d, strict=True)}


def _assert_matches_ase(atoms: ase.Atoms, cutoff: float) -> NeighborList:
    batch = Batch.from_ase(atoms)
    nl = batch.neighbor_list(cutoff)
    ref = _ase_edges(atoms, cutoff)
    mine = _edge_set(nl)
    assert mine == set(ref), f"missing {sorted(set(ref) - mine)[:5]}, extra {sorted(mine - set(ref))[:5]}"
    dists = nl.vectors(batch.positions, batch.cell, batch.batch).norm(dim=1).tolist()
    shifts = nl.shifts.round().to(torch.long).tolist()
    for (i, j), s, d in zip(nl.edge_index.T.tolist(), shifts, dists, strict=True):
        assert d == pytest.approx(ref[(i, j, *s)], abs=1e-9)
        assert d < cutoff
    return nl


# -- construction validation ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("field", "overrides"),
    [
        ("positions", {"positions": torch.zeros(4, 2)}),
        ("positions", {"positions": torch.zeros(4, 3, 1)}),
        ("atomic_numbers", {"atomic_numbers": torch.tensor([1.0, 2.0, 3.0, 4.0])}),
        ("atomic_numbers", {"atomic_numbers": torch.tensor([True, False, True, True])}),
        ("atomic_numbers", {"atomic_numbers": torch.tensor([1, 2, 3])}),
        ("atomic_numbers", {"atomic_numbers": torch.tensor([1, -2, 3, 4])}),
        ("batch", {"batch": torch.tensor([0, 1, 0, 1]), "cell": torch.eye(3).repeat(2, 1, 1)}),
        ("batch", {"batch": torch.tensor([-1, 0, 0, 0])}),
        ("batch", {"batch": torch.tensor([0.0, 0.0, 0.0, 0.0])}),
        ("batch", {"batch": torch.tensor([0, 0, 0])}),
        ("cell", {"cell": torch.eye(4)}),
        ("cell", {"cell": torch.zeros(3)}),
        ("cell", {"cell": torch.eye(3).repeat(2, 1, 1), "batch": torch.tensor([0, 1, 2, 2])}),
        ("cell", {"cell": torch.tensor([[10.0, 0, 0], [0, 10.0, 0], [0, 0, float("nan")]])}),
        ("pbc", {"pbc": torch.tensor([True, True])}),
        ("pbc", {"pbc": torch.ones(1, 2, 3, dtype=torch.bool)}),
        ("pbc", {"pbc": torch.ones(3, 3, dtype=torch.bool)}),
        ("cell", {"cell": torch.diag(torch.tensor([10.0, 10.0, 0.0])), "pbc": torch.tensor([True, True, True])}),
        ("cell", {"cell": torch.zeros(3, 3), "pbc": torch.tensor([False, True, False])}),
        ("charge", {"charge": torch.tensor([0.0, 1.0])}),
        ("charge", {"charge": torch.zeros(1, 1)}),
    ],
)
def test_invalid_field_raises_named_value_error(field: str, overrides: dict[str, Any]) -> None:
    with pytest.raises(ValueError, match=rf"^Batch\.{field}:"):
        Batch(**_simple(**overrides))


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_positions_name_the_atom(bad: float) -> None:
    pos = torch.zeros(5, 3, dtype=torch.float64)
    pos[3, 1] = bad
    with pytest.raises(ValueError, match=r"^Batch\.positions:.*atom 3\b"):
        Batch(**_simple(5, positions=pos))


def test_singular_fully_periodic_cell_rejected() -> None:
    cell = torch.tensor([[5.0, 0, 0], [10.0, 0, 0], [0, 0, 5.0]])
    with pytest.raises(ValueError, match=r"^Batch\.cell:.*linearly dependent"):
        Batch(**_simple(cell=cell))


def test_valid_construction_keeps_values() -> None:
    args = _simple()
    b = Batch(**args)
    assert torch.equal(b.positions, args["positions"])
    assert b.atomic_numbers.dtype == torch.long
    assert b.cell.shape == (1, 3, 3)
    assert b.pbc.shape == (1, 3) and b.pbc.dtype == torch.bool
    assert b.charge is None
    assert b.extras == {}


# -- defaults and basic properties ------------------------------------------------------------------


def test_defaults_broadcast_cell_and_pbc_to_all_systems() -> None:
    cell = torch.diag(torch.tensor([4.0, 5.0, 6.0], dtype=torch.float64))
    b = Batch(
        positions=torch.zeros(5, 3, dtype=torch.float64),
        atomic_numbers=[1, 1, 8, 8, 8],
        cell=cell,
        pbc=[True, False, True],
        batch=[0, 0, 1, 1, 2],
    )
    assert b.num_systems == 3
    assert b.num_atoms == len(b) == 5
    assert b.cell.shape == (3, 3, 3)
    for s in range(3):
        assert torch.equal(b.cell[s], cell)
        assert b.pbc[s].tolist() == [True, False, True]
    # broadcast copies are independent storage (no expand() aliasing)
    b.cell[0, 0, 0] = 99.0
    assert float(b.cell[1, 0, 0]) == 4.0


def test_defaults_when_optional_fields_omitted() -> None:
    b = Batch(positions=[[0.0, 0.0, 0.0], [1.0, 0.0, 0.0]], atomic_numbers=[1, 1])
    assert b.batch.tolist() == [0, 0]
    assert b.batch.dtype == torch.long
    assert b.num_systems == 1
    assert torch.equal(b.cell, torch.zeros(1, 3, 3, dtype=b.dtype))
    assert b.pbc.tolist() == [[False, False, False]]
    assert b.dtype == torch.get_default_dtype()


def test_integer_positions_become_float_and_scalar_pbc_broadcasts() -> None:
    b = Batch(positions=[[0, 0, 0], [1, 2, 3]], atomic_numbers=[1, 2], cell=torch.eye(3) * 5, pbc=True)
    assert b.positions.is_floating_point()
    assert b.pbc.tolist() == [[True, True, True]]


def test_scalar_charge_for_one_system() -> None:
    b = Batch(**_simple(charge=-1))
    assert b.charge is not None
    assert b.charge.shape == (1,) and b.charge.dtype == b.dtype
    assert float(b.charge[0]) == -1.0


def test_num_systems_counts_cells_including_empty_systems() -> None:
    b = Batch(
        positions=torch.zeros(5, 3),
        atomic_numbers=[1] * 5,
        cell=torch.eye(3).repeat(4, 1, 1),
        batch=[0, 0, 2, 2, 2],
    )
    assert b.num_systems == 4
    assert b.system_slices() == [slice(0, 2), slice(2, 2), slice(2, 5), slice(5, 5)]


def test_system_slices_cover_rows_in_order() -> None:
    batch = torch.tensor([0, 0, 0, 1, 2, 2])
    b = Batch(positions=torch.zeros(6, 3), atomic_numbers=[1] * 6, cell=torch.eye(3).repeat(3, 1, 1), batch=batch)
    slices = b.system_slices()
    assert slices == [slice(0, 3), slice(3, 4), slice(4, 6)]
    for s, sl in enumerate(slices):
        assert bool((b.batch[sl] == s).all())


def test_repr_mentions_sizes() -> None:
    text = repr(Batch(**_simple()))
    assert "num_atoms=4" in text and "num_systems=1" in text


def test_empty_batch_is_allowed() -> None:
    b = Batch(positions=torch.zeros(0, 3), atomic_numbers=torch.zeros(0, dtype=torch.long))
    assert b.num_atoms == 0 and b.num_systems == 1
    nl = b.neighbor_list(3.0)
    assert nl.num_edges == 0
    assert nl.edge_index.shape == (2, 0) and nl.shifts.shape == (0, 3)


# -- conversion -------------------------------------------------------------------------------------


def _two_system_batch() -> Batch:
    return Batch(
        positions=torch.rand(5, 3, dtype=torch.float64) * 3,
        atomic_numbers=[1, 6, 8, 1, 1],
        cell=torch.stack([torch.eye(3, dtype=torch.float64) * 5, torch.eye(3, dtype=torch.float64) * 6]),
        pbc=[[True, True, True], [True, False, True]],
        batch=[0, 0, 0, 1, 1],
        charge=[0.0, -1.0],
        extras={"weights": torch.ones(5, dtype=torch.float64), "ids": torch.arange(5), "tag": "x"},
    )


def test_to_float32_casts_floating_fields_only() -> None:
    b = _two_system_batch()
    c = b.to(dtype=torch.float32)
    assert c is not b
    assert c.positions.dtype == c.cell.dtype == torch.float32
    assert c.charge is not None and c.charge.dtype == torch.float32
    assert c.dtype == torch.float32
    assert c.atomic_numbers.dtype == torch.long and c.batch.dtype == torch.long
    assert c.pbc.dtype == torch.bool
    assert c.extras["weights"].dtype == torch.float32
    assert c.extras["ids"].dtype == torch.long
    assert c.extras["tag"] == "x"
    torch.testing.assert_close(c.positions, b.positions.float())
    # the original is untouched
    assert b.positions.dtype == torch.float64
    assert b.extras["weights"].dtype == torch.float64


def test_to_device_cpu_keeps_values() -> None:
    b = _two_system_batch()
    c = b.to("cpu")
    assert c.device == torch.device("cpu")
    assert torch.equal(c.positions, b.positions)


def test_clone_is_independent() -> None:
    b = _two_system_batch()
    c = b.clone()
    for name in ("positions", "atomic_numbers", "cell", "pbc", "batch", "charge"):
        assert torch.equal(getattr(c, name), getattr(b, name))
        assert getattr(c, name).data_ptr() != getattr(b, name).data_ptr()
    c.positions[0, 0] += 100.0
    c.cell[0, 0, 0] = 1.0
    c.atomic_numbers[0] = 99
    c.pbc[0, 0] = False
    assert c.charge is not None
    c.charge[0] = 5.0
    c.extras["weights"][0] = -1.0
    c.extras["new"] = 1
    assert float(b.positions[0, 0]) < 100.0
    assert float(b.cell[0, 0, 0]) == 5.0
    assert int(b.atomic_numbers[0]) == 1
    assert bool(b.pbc[0, 0])
    assert b.charge is not None and float(b.charge[0]) == 0.0
    assert float(b.extras["weights"][0]) == 1.0
    assert "new" not in b.extras


def test_clone_detaches_positions() -> None:
    b = Batch(**_simple())
    b.positions.requires_grad_(True)
    c = b.clone()
    assert not c.positions.requires_grad


def test_state_round_trip_through_pickle() -> None:
    b = _two_system_batch()
    b.positions.requires_grad_(True)
    state = b.to_state()
    assert not state["positions"].requires_grad
    restored = Batch.from_state(pickle.loads(pickle.dumps(state)))
    for name in ("positions", "atomic_numbers", "cell", "pbc", "batch", "charge"):
        assert torch.equal(getattr(restored, name), getattr(b, name).detach()), name
    assert restored.num_systems == b.num_systems
    assert restored.extras["tag"] == "x"
    assert torch.equal(restored.extras["weights"], b.extras["weights"])


def test_state_round_trip_without_charge() -> None:
    b = Batch(**_simple())
    restored = Batch.from_state(b.to_state())
    assert restored.charge is None
    assert torch.equal(restored.positions, b.positions)


# -- ASE construction -------------------------------------------------------------------------------


def test_from_ase_single_atoms() -> None:
    atoms = ase.Atoms("H2O", positions=[[0, 0, 0], [0.9, 0, 0], [0, 0.9, 0.3]], cell=[5, 6, 7], pbc=[1, 1, 0])
    b = Batch.from_ase(atoms)
    assert b.num_systems == 1 and b.num_atoms == 3
    assert b.dtype == torch.float64
    assert b.atomic_numbers.tolist() == [1, 1, 8]
    np.testing.assert_allclose(b.positions.numpy(), atoms.get_positions())
    np.testing.assert_allclose(b.cell[0].numpy(), atoms.get_cell()[:])
    assert b.pbc.tolist() == [[True, True, False]]
    assert b.batch.tolist() == [0, 0, 0]
    assert b.charge is not None and b.charge.tolist() == [0.0]


def test_from_ase_list_gives_one_system_each_with_charges() -> None:
    a = ase.Atoms("NaCl", positions=[[0, 0, 0], [2.8, 0, 0]], cell=[5.6, 5.6, 5.6], pbc=True)
    a.set_initial_charges([1.0, -1.0])
    b_ = ase.Atoms("OH", positions=[[0, 0, 0], [0.97, 0, 0]])
    b_.set_initial_charges([-0.6, -0.4])
    c = ase.Atoms("H3", positions=np.eye(3), cell=[4, 4, 4], pbc=[True, False, False])
    c.set_initial_charges([0.5, 0.25, 0.25])
    batch = Batch.from_ase([a, b_, c], dtype=torch.float32)
    assert batch.num_systems == 3
    assert batch.num_atoms == 7
    assert batch.dtype == torch.float32
    assert batch.batch.tolist() == [0, 0, 1, 1, 2, 2, 2]
    assert batch.charge is not None
    torch.testing.assert_close(batch.charge, torch.tensor([0.0, -1.0, 1.0]))
    assert batch.pbc.tolist() == [[True] * 3, [False] * 3, [True, False, False]]
    assert torch.equal(batch.cell[1], torch.zeros(3, 3))
    assert batch.atomic_numbers.tolist() == [11, 17, 8, 1, 1, 1, 1]


def test_from_ase_rejects_empty_list_and_non_atoms() -> None:
    with pytest.raises(ValueError, match="empty"):
        Batch.from_ase([])
    with pytest.raises(TypeError, match="item 1"):
        Batch.from_ase([ase.Atoms("H"), "not atoms"])


def test_read_extxyz_two_frames(tmp_path: Any) -> None:
    rng = np.random.default_rng(3)
    frames = [_random_atoms(rng, 4, True), _random_atoms(rng, 6, [True, True, False])]
    path = tmp_path / "frames.extxyz"
    ase.io.write(path, frames, format="extxyz")
    b = Batch.read(path)
    assert b.num_systems == 2
    assert b.num_atoms == 10
    assert b.batch.tolist() == [0] * 4 + [1] * 6
    np.testing.assert_allclose(b.positions[:4].numpy(), frames[0].get_positions(), atol=1e-6)
    np.testing.assert_allclose(b.positions[4:].numpy(), frames[1].get_positions(), atol=1e-6)
    np.testing.assert_allclose(b.cell[1].numpy(), frames[1].get_cell()[:], atol=1e-6)
    assert b.pbc.tolist() == [[True] * 3, [True, True, False]]
    one = Batch.read(str(path), index=0)
    assert one.num_systems == 1 and one.num_atoms == 4


def test_read_missing_file(tmp_path: Any) -> None:
    path = tmp_path / "nope.extxyz"
    with pytest.raises(FileNotFoundError, match=r"nope\.extxyz"):
        Batch.read(path)


def test_read_garbage_file_names_the_path(tmp_path: Any) -> None:
    path = tmp_path / "garbage.extxyz"
    path.write_text("this is not\na structure file {{{\n")
    with pytest.raises(ValueError) as info:
        Batch.read(path)
    assert str(path) in str(info.value)
    assert str(info.value).startswith("Batch.read:")


def test_to_ase_round_trip() -> None:
    rng = np.random.default_rng(5)
    frames = [_random_atoms(rng, 5, True), _random_atoms(rng, 3, False, zero_open=True)]
    b = Batch.from_ase(frames)
    back = b.to_ase()
    assert len(back) == 2
    for orig, new in zip(frames, back, strict=True):
        np.testing.assert_allclose(new.get_positions(), orig.get_positions())
        assert new.get_atomic_numbers().tolist() == orig.get_atomic_numbers().tolist()
        np.testing.assert_allclose(new.get_cell()[:], orig.get_cell()[:])
        assert new.get_pbc().tolist() == orig.get_pbc().tolist()
    again = Batch.from_ase(back)
    assert torch.equal(again.positions, b.positions)
    assert torch.equal(again.batch, b.batch)


def test_to_ase_works_with_grad_positions() -> None:
    b = Batch.from_ase(ase.Atoms("H2", positions=[[0, 0, 0], [1, 0, 0]]))
    b.positions.requires_grad_(True)
    (atoms,) = b.to_ase()
    assert len(atoms) == 2


# -- neighbour lists --------------------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(6))
def test_neighbor_list_matches_ase_triclinic_periodic(seed: int) -> None:
    rng = np.random.default_rng(seed)
    atoms = _random_atoms(rng, 25, True, triclinic=True, lengths=tuple(rng.uniform(4.0, 9.0, 3)))
    _assert_matches_ase(atoms, float(rng.uniform(2.0, 4.5)))


@pytest.mark.parametrize("seed", range(3))
def test_neighbor_list_matches_ase_orthorhombic(seed: int) -> None:
    rng = np.random.default_rng(100 + seed)
    atoms = _random_atoms(rng, 30, True, triclinic=False, lengths=(5.0, 7.0, 9.0))
    _assert_matches_ase(atoms, 3.5)


@pytest.mark.parametrize("zero_open", [False, True])
@pytest.mark.parametrize("seed", range(3))
def test_neighbor_list_matches_ase_mixed_pbc(seed: int, zero_open: bool) -> None:
    rng = np.random.default_rng(200 + seed)
    atoms = _random_atoms(rng, 25, [True, True, False], triclinic=True, zero_open=zero_open)
    _assert_matches_ase(atoms, 3.0)


@pytest.mark.parametrize(
    ("cell", "pbc"),
    [
        # the filler for the zero open vector (z) is parallel to a periodic vector: must not lose periodicity
        ([[4.0, 0, 0], [0, 0, 5.0], [0, 0, 0]], [True, True, False]),
        ([[4.0, 1.0, 0], [0, 0, 0], [0, 0, 0]], [True, False, False]),
        ([[0, 0, 0], [0, 0, 0], [0, 0, 4.5]], [False, False, True]),
        ([[0, 0, 0], [0, 4.0, 0], [0, 0, 3.5]], [False, True, True]),
    ],
)
def test_neighbor_list_matches_ase_partly_periodic_zero_vectors(cell: list[list[float]], pbc: list[bool]) -> None:
    rng = np.random.default_rng(7)
    atoms = ase.Atoms(numbers=[1] * 20, positions=rng.uniform(-1.0, 8.0, (20, 3)), cell=cell, pbc=pbc)
    nl = _assert_matches_ase(atoms, 3.0)
    periodic_axes = [a for a in range(3) if pbc[a]]
    assert bool((nl.shifts[:, periodic_axes] != 0).any()), "expected edges through periodic images"


@pytest.mark.parametrize("seed", range(3))
def test_neighbor_list_matches_ase_open_cluster(seed: int) -> None:
    rng = np.random.default_rng(300 + seed)
    atoms = ase.Atoms(numbers=[6] * 30, positions=rng.uniform(-3.0, 6.0, (30, 3)))
    nl = _assert_matches_ase(atoms, 2.5)
    assert bool((nl.shifts == 0).all())
    assert bool((nl.edge_index[0] != nl.edge_index[1]).all())


def test_neighbor_list_open_cluster_with_nonzero_cell() -> None:
    rng = np.random.default_rng(11)
    atoms = ase.Atoms(numbers=[6] * 20, positions=rng.uniform(-3.0, 9.0, (20, 3)), cell=[3.0, 3.0, 3.0], pbc=False)
    nl = _assert_matches_ase(atoms, 3.0)
    assert bool((nl.shifts == 0).all())


def test_neighbor_list_small_cell_sees_own_image() -> None:
    atoms = ase.Atoms("H2", positions=[[0.1, 0.2, 0.3], [1.0, 1.1, 0.9]], cell=[2.0, 2.2, 2.4], pbc=True)
    nl = _assert_matches_ase(atoms, 2.5)
    i, j = nl.edge_index
    self_edges = i == j
    assert bool(self_edges.any())
    assert bool((nl.shifts[self_edges].abs().sum(dim=1) > 0).all()), "self edges must carry a non-zero shift"
    # full list: every edge i->j with shift S has its reverse j->i with -S
    edges = _edge_set(nl)
    assert all((j_, i_, -a, -b, -c) in edges for i_, j_, a, b, c in edges)


def test_neighbor_list_small_triclinic_cell_many_images() -> None:
    cell = np.array([[2.0, 0.0, 0.0], [0.7, 2.1, 0.0], [0.4, -0.5, 2.3]])
    atoms = ase.Atoms("HHe", positions=[[0.0, 0.0, 0.0], [0.9, 1.2, 1.0]], cell=cell, pbc=True)
    nl = _assert_matches_ase(atoms, 4.5)
    assert int(nl.shifts.abs().max()) >= 2


@st.composite
def _nl_atoms(draw: st.DrawFn) -> tuple[ase.Atoms, float]:
    seed = draw(st.integers(0, 2**32 - 1))
    n = draw(st.integers(1, 25))
    pbc = draw(st.tuples(st.booleans(), st.booleans(), st.booleans()))
    triclinic = draw(st.booleans())
    zero_open = draw(st.booleans())
    lengths = tuple(draw(st.floats(2.0, 9.0)) for _ in range(3))
    cutoff = draw(st.floats(0.5, 5.0))
    rng = np.random.default_rng(seed)
    return _random_atoms(rng, n, pbc, triclinic=triclinic, lengths=lengths, zero_open=zero_open), cutoff


@settings(max_examples=80, deadline=None)
@given(_nl_atoms())
def test_neighbor_list_matches_ase_random(case: tuple[ase.Atoms, float]) -> None:
    atoms, cutoff = case
    _assert_matches_ase(atoms, cutoff)


def test_neighbor_list_vectors_formula() -> None:
    rng = np.random.default_rng(17)
    atoms = _random_atoms(rng, 15, True, triclinic=True, lengths=(4.0, 5.0, 4.5))
    b = Batch.from_ase(atoms)
    nl = b.neighbor_list(3.5)
    assert nl.num_edges > 0
    assert nl.edge_index.dtype == torch.long
    assert nl.shifts.dtype == b.dtype
    assert torch.equal(nl.shifts, nl.shifts.round())
    pos = atoms.get_positions()
    cell = atoms.get_cell()[:]
    i, j = nl.edge_index.numpy()
    expected = pos[j] - pos[i] + nl.shifts.numpy() @ cell
    np.testing.assert_allclose(nl.vectors(b.positions, b.cell, b.batch).numpy(), expected, atol=1e-12)


def test_neighbor_list_edges_sorted_and_deterministic() -> None:
    rng = np.random.default_rng(19)
    b = Batch.from_ase(_random_atoms(rng, 20, True))
    nl1, nl2 = b.neighbor_list(3.0), full_neighbor_list(b, 3.0)
    assert torch.equal(nl1.edge_index, nl2.edge_index) and torch.equal(nl1.shifts, nl2.shifts)
    keys = (nl1.edge_index[0] * b.num_atoms + nl1.edge_index[1]).tolist()
    assert keys == sorted(keys)


def test_neighbor_list_multi_system_edges_stay_within_systems() -> None:
    rng = np.random.default_rng(23)
    frames = [
        _random_atoms(rng, 12, True, lengths=(5.0, 5.0, 5.0)),
        ase.Atoms(numbers=[1] * 8, positions=rng.uniform(0, 4, (8, 3))),
        _random_atoms(rng, 10, [True, False, True], lengths=(4.0, 6.0, 5.0), zero_open=True),
    ]
    b = Batch.from_ase(frames)
    nl = b.neighbor_list(3.0)
    i, j = nl.edge_index
    assert bool((b.batch[i] == b.batch[j]).all())
    # each system's block equals that system's own neighbour list (and ASE's)
    for s, (sl, atoms) in enumerate(zip(b.system_slices(), frames, strict=True)):
        in_sys = b.batch[i] == s
        sub = NeighborList(edge_index=nl.edge_index[:, in_sys], shifts=nl.shifts[in_sys])
        assert _edge_set(sub, offset=sl.start) == set(_ase_edges(atoms, 3.0))
    # vectors use each edge's own system cell
    vec = nl.vectors(b.positions, b.cell, b.batch)
    cells = b.cell[b.batch[i]]
    expected = b.positions[j] - b.positions[i] + torch.einsum("ek,ekl->el", nl.shifts, cells)
    torch.testing.assert_close(vec, expected)


def test_neighbor_list_skips_empty_systems() -> None:
    b = Batch(
        positions=torch.tensor([[0.0, 0, 0], [1.0, 0, 0], [0.0, 0, 0], [0.0, 1.5, 0]], dtype=torch.float64),
        atomic_numbers=[1, 1, 1, 1],
        cell=torch.zeros(3, 3, 3, dtype=torch.float64),
        batch=[0, 0, 2, 2],
    )
    nl = b.neighbor_list(2.0)
    assert _edge_set(nl) == {(0, 1, 0, 0, 0), (1, 0, 0, 0, 0), (2, 3, 0, 0, 0), (3, 2, 0, 0, 0)}


@pytest.mark.parametrize("cutoff", [0.0, -1.0])
def test_neighbor_list_rejects_non_positive_cutoff(cutoff: float) -> None:
    with pytest.raises(ValueError, match="cutoff"):
        Batch(**_simple()).neighbor_list(cutoff)


def test_neighbor_list_float32_batch() -> None:
    rng = np.random.default_rng(29)
    atoms = _random_atoms(rng, 15, True)
    b = Batch.from_ase(atoms, dtype=torch.float32)
    nl = b.neighbor_list(3.0)
    assert nl.shifts.dtype == torch.float32
    assert _edge_set(nl) == set(_ase_edges(atoms, 3.0))


def test_neighbor_list_vectors_are_differentiable() -> None:
    rng = np.random.default_rng(31)
    b = Batch.from_ase(_random_atoms(rng, 10, True, lengths=(4.0, 4.5, 5.0)))
    nl = b.neighbor_list(3.0)
    pos = b.positions.clone().requires_grad_(True)
    cell = b.cell.clone().requires_grad_(True)
    total = nl.vectors(pos, cell, b.batch).norm(dim=1).sum()
    total.backward()
    assert pos.grad is not None and cell.grad is not None
    assert bool(torch.isfinite(pos.grad).all()) and float(pos.grad.abs().sum()) > 0
    assert float(cell.grad.abs().sum()) > 0
    # full (symmetric) list of a pair-distance sum: forces from a translation-invariant sum sum to zero
    torch.testing.assert_close(pos.grad.sum(dim=0), torch.zeros(3, dtype=pos.dtype), atol=1e-9, rtol=0)

    def fn(p: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        return nl.vectors(p, c, b.batch).norm(dim=1).sum()

    assert torch.autograd.gradcheck(fn, (b.positions.clone().requires_grad_(True), b.cell.clone().requires_grad_(True)))


# -- as_batch ---------------------------------------------------------------------------------------


@dataclass
class _Duck:
    positions: Any
    cell: Any
    pbc: Any
    atomic_numbers: Any


@dataclass
class _DuckNumbers:
    positions: Any
    cell: Any
    pbc: Any
    numbers: Any


@dataclass
class _DuckMulti:
    positions: Any
    cell: Any
    pbc: Any
    atomic_numbers: Any
    batch: Any
    charge: Any = None


@dataclass
class _NoPbc:
    positions: Any
    cell: Any


@dataclass
class _NoNumbers:
    positions: Any
    cell: Any
    pbc: Any


def test_as_batch_returns_same_batch() -> None:
    b = Batch(**_simple())
    assert as_batch(b) is b


def test_as_batch_from_ase() -> None:
    atoms = ase.Atoms("H2O", positions=np.eye(3), cell=[5, 5, 5], pbc=True)
    b = as_batch(atoms)
    assert isinstance(b, Batch)
    assert b.num_atoms == 3 and b.num_systems == 1
    multi = as_batch([atoms, ase.Atoms("He")])
    assert multi.num_systems == 2 and multi.batch.tolist() == [0, 0, 0, 1]
    multi_t = as_batch((atoms, atoms))
    assert multi_t.num_systems == 2


def test_as_batch_duck_typed() -> None:
    pos = np.random.default_rng(1).uniform(0, 3, (4, 3))
    b = as_batch(_Duck(positions=pos, cell=np.eye(3) * 4, pbc=[True, True, True], atomic_numbers=[1, 1, 8, 8]))
    assert isinstance(b, Batch)
    np.testing.assert_allclose(b.positions.numpy(), pos)
    assert b.atomic_numbers.tolist() == [1, 1, 8, 8]
    assert b.pbc.tolist() == [[True, True, True]]
    b2 = as_batch(_DuckNumbers(positions=pos, cell=np.zeros((3, 3)), pbc=[False] * 3, numbers=np.array([6, 6, 1, 1])))
    assert b2.atomic_numbers.tolist() == [6, 6, 1, 1]
    b3 = as_batch(
        _DuckMulti(
            positions=torch.zeros(3, 3),
            cell=torch.eye(3).repeat(2, 1, 1),
            pbc=torch.zeros(2, 3, dtype=torch.bool),
            atomic_numbers=torch.tensor([1, 1, 2]),
            batch=torch.tensor([0, 0, 1]),
            charge=torch.tensor([0.0, 1.0]),
        )
    )
    assert b3.num_systems == 2 and b3.batch.tolist() == [0, 0, 1]
    assert b3.charge is not None and b3.charge.tolist() == [0.0, 1.0]


def test_as_batch_duck_validation_errors_propagate() -> None:
    with pytest.raises(ValueError, match=r"^Batch\.positions:"):
        as_batch(_Duck(positions=np.zeros((3, 2)), cell=np.eye(3), pbc=[False] * 3, atomic_numbers=[1, 1, 1]))


@pytest.mark.parametrize(
    ("obj", "needle"),
    [
        (_NoPbc(positions=np.zeros((2, 3)), cell=np.eye(3)), "pbc"),
        (object(), "positions, cell, pbc"),
        ({"positions": np.zeros((2, 3))}, "positions"),
        ([1, 2, 3], "positions"),
        (_NoNumbers(positions=np.zeros((2, 3)), cell=np.eye(3), pbc=[False] * 3), "atomic_numbers"),
        (
            _Duck(positions=np.zeros((2, 3)), cell=np.stack([np.eye(3)] * 2), pbc=[False] * 3, atomic_numbers=[1, 1]),
            "batch",
        ),
    ],
)
def test_as_batch_type_errors_name_what_is_missing(obj: Any, needle: str) -> None:
    with pytest.raises(TypeError) as info:
        as_batch(obj)
    assert needle in str(info.value)
    assert type(obj).__name__ in str(info.value)


def test_pair_order_does_not_depend_on_the_order_vesin_emits_pairs() -> None:
    """In a cell shorter than twice the cutoff a pair repeats with other shifts; however the pairs come
    in (vesin's cell list and threads decide), they leave sorted by i, j and shift."""
    from distcheck.neighbors import _pair_order

    atoms = ase.Atoms("Cu2", positions=[[0.0, 0.0, 0.0], [1.2, 1.1, 0.9]], cell=np.eye(3) * 2.6, pbc=True)
    nl = full_neighbor_list(Batch.from_ase(atoms), 4.0)
    i, j = nl.edge_index.numpy()
    shifts = nl.shifts.numpy()
    rows = np.column_stack([i, j, shifts])
    assert len({(a, b) for a, b in zip(i, j, strict=True)}) < len(i), "the cell makes pairs repeat"
    assert [tuple(r) for r in rows] == sorted(tuple(r) for r in rows), "sorted by i, j, then shift"
    rng = np.random.default_rng(0)
    for _ in range(5):
        perm = rng.permutation(len(i))
        order = _pair_order(i[perm], j[perm], shifts[perm], 2)
        np.testing.assert_array_equal(rows[perm][order], rows)


# -- singular and near-singular cells are refused whatever the periodicity ----------------------------

_SINGULAR_CELLS = {
    "collinear_partly_periodic": ([[5.0, 0, 0], [10.0, 0, 0], [0, 0, 5.0]], [True, False, True]),
    "collinear_open_axes": ([[5.0, 0, 0], [0, 5.0, 0], [0, 10.0, 0]], [True, False, False]),
    "coplanar_all_periodic": ([[5.0, 0, 0], [0, 5.0, 0], [5.0, 5.0, 0]], [True, True, True]),
    "nearly_collinear": ([[5.0, 0, 0], [5.0, 1e-7, 0], [0, 0, 5.0]], [True, True, False]),
    "coplanar_none_periodic": ([[5.0, 0, 0], [0, 5.0, 0], [5.0, 5.0, 0]], [False, False, False]),
}


@pytest.mark.parametrize("name", sorted(_SINGULAR_CELLS))
def test_a_singular_or_near_singular_cell_is_refused_whatever_the_periodicity(name: str) -> None:
    from distcheck.batch import CELL_CONDITION_LIMIT

    cell, pbc = _SINGULAR_CELLS[name]
    with pytest.raises(ValueError, match="linearly dependent") as refused:
        Batch(
            positions=torch.rand(4, 3, dtype=torch.float64),
            atomic_numbers=torch.ones(4, dtype=torch.long),
            cell=torch.tensor(cell, dtype=torch.float64),
            pbc=torch.tensor(pbc),
        )
    assert f"{CELL_CONDITION_LIMIT:g}" in str(refused.value) and "Batch.cell" in str(refused.value)


@pytest.mark.parametrize(
    ("cell", "pbc"),
    [
        ([[5.0, 0, 0], [0, 5.0, 0], [0, 0, 0]], [True, True, False]),  # a slab: zero-length open axis
        ([[0.0, 0, 0], [0, 0, 0], [0, 0, 0]], [False, False, False]),  # a molecule
        ([[5.0, 0, 0], [0, 0, 0], [0, 0, 0]], [True, False, False]),  # a wire
        ([[5.0, 0, 0], [2.5, 4.33, 0], [0, 0, 7.0]], [True, True, True]),  # triclinic
    ],
)
def test_a_zero_length_open_axis_and_a_skewed_cell_are_fine(cell: list[list[float]], pbc: list[bool]) -> None:
    Batch(
        positions=torch.rand(4, 3, dtype=torch.float64),
        atomic_numbers=torch.ones(4, dtype=torch.long),
        cell=torch.tensor(cell, dtype=torch.float64),
        pbc=torch.tensor(pbc),
    )
