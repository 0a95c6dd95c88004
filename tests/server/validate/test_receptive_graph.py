"""The receptive-field probe's cutoff graph: built once from one neighbour list, the same graph a
neighbour list at the cutoff gives, and a displacement it calls harmless never changes the graph
(checked against a neighbour list rebuilt on the displaced sample)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from distcheck.batch import Batch, full_neighbor_list
from distcheck.validate.receptive import _STEPS, _CutoffGraph, _displaced
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
    np.testing.assert_array_equal(_CutoffGraph(batch, CUTOFF).edges, _edges(batch, CUTOFF))


def _with_positions(batch: Batch, pos: torch.Tensor) -> Batch:
    moved = batch.clone()
    moved.positions = pos
    return moved


@pytest.mark.parametrize("name", list(_samples()))
def test_a_harmless_displacement_never_changes_the_graph(name: str) -> None:
    batch = _samples()[name]
    rng = np.random.default_rng(7)
    base = _edges(batch, CUTOFF)
    graph = _CutoffGraph(batch, CUTOFF)
    checked = refused = 0
    for _ in range(12):
        atoms = sorted({int(a) for a in rng.integers(0, batch.num_atoms, size=2)})
        for step in _STEPS:
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
    pos[1] = pos[0] + (CUTOFF - 0.4 * _STEPS[0]) * direction  # a 1e-3 step along the same line crosses it
    near = _with_positions(batch, pos)
    graph = _CutoffGraph(near, CUTOFF)
    assert not graph.unchanged_by([1], _STEPS[0])
    crossed = _edges(_displaced(near, [1], _STEPS[0]), CUTOFF)
    assert not np.array_equal(crossed, _edges(near, CUTOFF))  # the exact rebuild agrees it changes
