"""The receptive-field probe's cutoff graph: built once from one neighbour list, the same graph a
neighbour list at the cutoff gives, and a displacement it calls harmless never changes the graph
(checked against a neighbour list rebuilt on the displaced sample), nor any list the wrapper asked
for, which the measurement therefore builds once for all its forwards."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distcheck.batch import Batch
from distcheck.neighbors import full_neighbor_list
from distcheck.validate.receptive import _displaced
from distcheck.validate.receptive_graph import STEPS, CutoffGraph
from examples.structures import cluster_system, make_batch, periodic_slab_system

CUTOFF = 5.0


def _samples() -> dict[str, Batch]:
    slab = make_batch([periodic_slab_system((3, 3, 6), seed=3)])
    rod = make_batch([cluster_system((3, 3, 6), seed=4)])
    two = make_batch([periodic_slab_system((3, 3, 5), seed=5), cluster_system((2, 2, 6), seed=6)])
    return {"periodic slab": slab, "open cluster": rod, "two systems": two}


def _edges(batch: Batch, cutoff: float) -> np.ndarray:
    return full_neighbor_list(batch, cutoff).edge_index.numpy()


@pytest.mark.parametrize("name", list(_samples()))
def test_the_graph_is_the_cutoff_neighbour_list(name: str) -> None:
    batch = _samples()[name]
    np.testing.assert_array_equal(CutoffGraph(batch, CUTOFF).edges, _edges(batch, CUTOFF))


def _with_positions(batch: Batch, pos: torch.Tensor) -> Batch:
    moved = batch.clone()
    moved.positions = pos
    return moved


@pytest.mark.parametrize("name", list(_samples()))
def test_a_harmless_displacement_never_changes_the_graph(name: str) -> None:
    batch = _samples()[name]
    rng = np.random.default_rng(7)
    base = _edges(batch, CUTOFF)
    graph = CutoffGraph(batch, CUTOFF)
    checked = refused = 0
    for _ in range(12):
        atoms = sorted({int(a) for a in rng.integers(0, batch.num_atoms, size=2)})
        for step in STEPS:
            if graph.unchanged_by(atoms, step):
                checked += 1
                np.testing.assert_array_equal(_edges(_displaced(batch, atoms, step), CUTOFF), base)
            else:
                refused += 1
    assert checked > 0


def test_an_atom_at_the_cutoff_is_not_called_harmless() -> None:
    batch = make_batch([cluster_system((3, 3, 4), seed=8)])
    pos = batch.positions.clone()
    direction = torch.tensor([0.6, -0.48, 0.64], dtype=pos.dtype)
    pos[1] = pos[0] + (CUTOFF - 0.4 * STEPS[0]) * direction  # a 1e-3 step along the same line crosses it
    near = _with_positions(batch, pos)
    graph = CutoffGraph(near, CUTOFF)
    assert not graph.unchanged_by([1], STEPS[0])
    crossed = _edges(_displaced(near, [1], STEPS[0]), CUTOFF)
    assert not np.array_equal(crossed, _edges(near, CUTOFF))  # the exact rebuild agrees it changes


@pytest.mark.parametrize("name", list(_samples()))
def test_a_displacement_harmless_at_every_asked_cutoff_leaves_each_list_as_rebuilt(name: str) -> None:
    """The measurement hands the sample's neighbour lists to its displaced samples; where
    `unchanged_by` allows that for every cutoff the wrapper asked for, each list is exactly (pairs,
    shifts, order) what a rebuild on the displaced sample gives."""
    batch = _samples()[name]
    asked = [3.0, 4.2, CUTOFF]
    graph = CutoffGraph(batch, CUTOFF)
    rng = np.random.default_rng(11)
    checked = 0
    for _ in range(8):
        atoms = sorted({int(a) for a in rng.integers(0, batch.num_atoms, size=2)})
        step = next((s for s in STEPS if graph.unchanged_by(atoms, s, asked)), None)
        if step is None:
            continue
        moved = _displaced(batch, atoms, step)
        for c in asked:
            before, after = full_neighbor_list(batch, c), full_neighbor_list(moved, c)
            assert torch.equal(before.edge_index, after.edge_index) and torch.equal(before.shifts, after.shifts)
        checked += 1
    assert checked > 0


def test_an_atom_at_a_smaller_asked_cutoff_is_not_called_harmless() -> None:
    batch = make_batch([cluster_system((3, 3, 4), seed=8)])
    pos = batch.positions.clone()
    direction = torch.tensor([0.6, -0.48, 0.64], dtype=pos.dtype)
    pos[1] = pos[0] + (3.0 - 0.4 * STEPS[0]) * direction  # at the 3 Å cutoff, far inside the graph's 5 Å
    near = _with_positions(batch, pos)
    graph = CutoffGraph(near, CUTOFF)
    assert not graph.unchanged_by([1], STEPS[0], [3.0, CUTOFF])


class _Counted(torch.nn.Module):
    """A pair model asking for two neighbour lists per forward, counting the lists it got built."""

    def __init__(self) -> None:
        super().__init__()
        self.cutoff = CUTOFF
        self.builds = 0

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.requires_grad_(True) if not batch.positions.requires_grad else batch.positions
        energy = pos.new_zeros(batch.num_systems)
        for c in (3.0, CUTOFF):
            nl = batch.neighbor_list(c)
            i, j = nl.edge_index
            vec = pos[j] - pos[i] + torch.einsum("ek,ekl->el", nl.shifts, batch.cell[batch.batch[i]])
            e = torch.exp(-torch.linalg.vector_norm(vec, dim=-1))
            energy = energy.index_add(0, batch.batch[i], 0.5 * e)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def test_the_measurement_builds_each_asked_list_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """Four forwards (the given one, the repeat, two probe rounds), yet each cutoff the wrapper asks for
    is built once, and the depth read is the one rebuilding every list gives."""
    import distcheck.neighbors as neighbors_module
    from distcheck.validate import receptive

    builds: list[float] = []
    real = neighbors_module.full_neighbor_list

    def counting(batch: Batch, cutoff: float) -> object:
        builds.append(float(cutoff))
        return real(batch, cutoff)

    sample = make_batch([periodic_slab_system((3, 3, 6), seed=3)])
    found = receptive.measure_receptive_field(_Counted(), sample, cutoff=CUTOFF, derived={"forces": True})
    monkeypatch.setattr(neighbors_module, "full_neighbor_list", counting)
    counted = receptive.measure_receptive_field(_Counted(), sample, cutoff=CUTOFF, derived={"forces": True})
    assert counted["status"] == found["status"] == "measured" and counted["probes"] == found["probes"] > 0
    assert counted["measured_depth"] == found["measured_depth"] == 1
    assert sorted(builds) == [3.0, 3.0, CUTOFF, CUTOFF], builds  # the first forward's and the repeat's
    monkeypatch.setattr(receptive, "NeighborMemo", _NoMemo)
    builds.clear()
    rebuilt = receptive.measure_receptive_field(_Counted(), sample, cutoff=CUTOFF, derived={"forces": True})
    assert rebuilt["measured_depth"] == found["measured_depth"] and len(builds) == 8


class _NoMemo:
    """Stands in for `NeighborMemo` to rebuild every list (what the measurement did before)."""

    def __init__(self, batch: Batch) -> None:
        self._build = batch.neighbor_list
        self.lists: dict[float, object] = {}

    def __call__(self, cutoff: float) -> object:
        return self._build(cutoff)


@pytest.mark.parametrize("seed", range(4))
def test_hop_maps_are_breadth_first_distances(seed: int) -> None:
    """`hop_distances` on random graphs (repeated edges, unreachable atoms) against a plain breadth-first search."""
    from collections import deque

    from distcheck.validate.receptive_graph import adjacency, hop_distances

    rng = np.random.default_rng(seed)
    n = 60
    edges = rng.integers(0, n - 5, size=(2, 150))  # the last five atoms have no edge
    edges = np.concatenate([edges, edges[::-1], edges[:, :20]], axis=1)  # both ways, some twice
    graph = adjacency(edges, n)
    for start in (0, 7, n - 1):
        expected = np.full(n, -1)
        expected[start] = 0
        queue = deque([start])
        while queue:
            a = queue.popleft()
            for b in edges[1][edges[0] == a]:
                if expected[b] < 0:
                    expected[b] = expected[a] + 1
                    queue.append(int(b))
        np.testing.assert_array_equal(hop_distances(graph, start), expected)
