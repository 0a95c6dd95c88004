"""The receptive-field measurement's graph side: the sample's cutoff graph and which displacements
leave it (and every neighbour list the wrapper asked for) unchanged (`CutoffGraph`), the lists kept
for the displaced samples (`NeighborMemo`), and hop distances in that graph (`adjacency`,
`hop_distances`, `gapless_reach`). `receptive` runs the wrapper and reads the depth off them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..batch import Batch
from ..neighbors import full_neighbor_list

__all__ = ["STEPS", "CutoffGraph", "NeighborMemo", "adjacency", "gapless_reach", "hop_distances"]

STEPS = (1e-3, 2.5e-4, 6e-5)
"""Displacements tried (Å), largest first, until one changes no edge of the cutoff graph."""


class CutoffGraph:
    """The sample's cutoff graph and, from the same neighbour list (built once, `2 * max(STEPS)` wider),
    the pairs a probe's displacement could carry across a cutoff: a displacement by `step` changes a
    pair's distance by at most `step` (twice that when both ends are probes), so a pair farther than
    that from the cutoff keeps its side, and a displaced sample whose probes are in no such pair has
    the same graph without building its neighbour list again (millions of pairs at 100k atoms)."""

    def __init__(self, batch: Batch, cutoff: float) -> None:
        nl = full_neighbor_list(batch, cutoff + 2.0 * max(STEPS))
        pos = batch.positions.detach().cpu().to(torch.float64)
        cell = batch.cell.detach().cpu().to(torch.float64)
        shifts = nl.shifts.detach().cpu().to(torch.float64)
        edge_index = nl.edge_index.detach().cpu()
        i, j = edge_index[0], edge_index[1]
        vec = pos[j] - pos[i] + torch.einsum("ek,ekl->el", shifts, cell[batch.batch.cpu()[i]])
        distance = torch.linalg.vector_norm(vec, dim=-1).numpy()
        pairs = edge_index.numpy()
        self.cutoff = cutoff
        self.edges = pairs[:, distance < cutoff]
        self._pairs, self._distance = pairs, distance

    def unchanged_by(self, atoms: Sequence[int], step: float, cutoffs: Sequence[float] = ()) -> bool:
        """Whether displacing `atoms` by `step` keeps every pair on its side of the graph's cutoff and
        of each of `cutoffs` (none above the graph's: their pairs are all in its list)."""
        near = np.zeros(self._distance.shape, dtype=bool)
        for c in {self.cutoff, *cutoffs}:
            near |= np.abs(self._distance - c) <= 2.0 * step
        return not np.isin(np.asarray(atoms), self._pairs[:, near]).any()


class NeighborMemo:
    """`Batch.neighbor_list` of the sample, built once per cutoff the wrapper asks for (`lists`), for
    the displaced samples too: a displacement that carries no pair across any of those cutoffs leaves
    every list the same (same pairs, shifts and order; positions are not in the list)."""

    def __init__(self, batch: Batch) -> None:
        self._build = batch.neighbor_list
        self.lists: dict[float, Any] = {}

    def __call__(self, cutoff: float) -> Any:
        key = float(cutoff)
        if key not in self.lists:
            self.lists[key] = self._build(cutoff)
        return self.lists[key]


def adjacency(edge_index: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The graph's adjacency as (indptr, neighbours), built once for every probe's hop map."""
    src, dst = edge_index[0], edge_index[1]
    order = np.argsort(src, kind="stable")
    return np.searchsorted(src[order], np.arange(n + 1)), dst[order]


def hop_distances(graph: tuple[np.ndarray, np.ndarray], start: int) -> np.ndarray:
    """Hop distance from `start` to every atom in the graph (-1: unreachable), a level at a time with
    the whole frontier's neighbours gathered at once (a 100k-atom graph has millions of edges)."""
    indptr, dst = graph
    dist = np.full(len(indptr) - 1, -1, dtype=np.int64)
    dist[start] = 0
    frontier = np.array([start])
    level = 0
    while frontier.size:
        level += 1
        first, counts = indptr[frontier], indptr[frontier + 1] - indptr[frontier]
        total = int(counts.sum())
        if total == 0:
            break
        # positions first[i] .. first[i] + counts[i] - 1 for every frontier atom i, without a Python loop
        offsets = np.repeat(first - np.cumsum(counts) + counts, counts) + np.arange(total)
        nbrs = dst[offsets]
        dist[nbrs[dist[nbrs] < 0]] = level  # repeated neighbours are written twice, the same level
        frontier = np.flatnonzero(dist == level)  # each new atom once, without sorting the gathered ones
    return dist


def gapless_reach(hops: np.ndarray) -> int:
    """The farthest hop level reached without a gap (every level from 1 up to it has a moved atom)."""
    counts = np.bincount(hops)
    empty = np.flatnonzero(counts[1:] == 0)
    return int(empty[0]) if empty.size else len(counts) - 1
