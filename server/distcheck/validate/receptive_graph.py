"""The receptive-field measurement's graph side: the sample's cutoff graph and which displacements
leave it (and every neighbour list the wrapper asked for) unchanged (`CutoffGraph`), the lists kept
for the displaced samples (`NeighborMemo`), hop distances in that graph (`adjacency`,
`hop_distances`, `gapless_reach`), distances in Å from a probe (`distances_from`, nearest periodic
image) and the probes themselves (`probe_candidates`, `choose_probes`: the largest step that changes
no edge). `receptive` runs the wrapper and reads the depth off them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import torch

from ..batch import Batch
from ..neighbors import full_neighbor_list

__all__ = [
    "LOW_PRECISION_STEPS",
    "STEPS",
    "CutoffGraph",
    "NeighborMemo",
    "adjacency",
    "choose_probes",
    "distances_from",
    "gapless_reach",
    "hop_distances",
    "probe_candidates",
]

STEPS = (1e-3, 2.5e-4, 6e-5)
"""Displacements tried (Å), largest first, until one changes no edge of the cutoff graph."""

LOW_PRECISION_STEPS = (0.1, 0.03, 0.01, *STEPS)
"""The displacements tried when an observed quantity is single precision or less: a change a far hop
passes on must stand above that dtype's round-off, and it grows with the step."""


class CutoffGraph:
    """The sample's cutoff graph and, from the same neighbour list (built once, `2 * max(STEPS)` wider),
    the pairs a probe's displacement could carry across a cutoff: a displacement by `step` changes a
    pair's distance by at most `step` (twice that when both ends are probes), so a pair farther than
    that from the cutoff keeps its side, and a displaced sample whose probes are in no such pair has
    the same graph without building its neighbour list again (millions of pairs at 100k atoms). `steps`
    are the displacements it will be asked about."""

    def __init__(self, batch: Batch, cutoff: float, steps: Sequence[float] = STEPS) -> None:
        nl = full_neighbor_list(batch, cutoff + 2.0 * max(steps))
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
        self._num_atoms = batch.num_atoms
        self._risky: dict[tuple[float, tuple[float, ...]], np.ndarray] = {}

    def unchanged_by(self, atoms: Sequence[int], step: float, cutoffs: Sequence[float] = ()) -> bool:
        """Whether displacing `atoms` by `step` keeps every pair on its side of the graph's cutoff and
        of each of `cutoffs` (none above the graph's: their pairs are all in its list)."""
        return not self.risky(step, cutoffs)[np.asarray(atoms, dtype=np.int64)].any()

    def risky(self, step: float, cutoffs: Sequence[float] = ()) -> np.ndarray:
        """Per atom, whether it is in a pair that a displacement by `step` could carry across the
        graph's cutoff or one of `cutoffs` (remembered per step and cutoffs)."""
        key = (float(step), tuple(sorted({self.cutoff, *map(float, cutoffs)})))
        if key not in self._risky:
            near = np.zeros(self._distance.shape, dtype=bool)
            for c in key[1]:
                near |= np.abs(self._distance - c) <= 2.0 * step
            mask = np.zeros(self._num_atoms, dtype=bool)
            mask[self._pairs[:, near].ravel()] = True
            self._risky[key] = mask
        return self._risky[key]


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


def distances_from(batch: Batch, atom: int) -> np.ndarray:
    """The distance (Å) from `atom` to every atom of its system, to the nearest periodic image along
    its periodic axes (the displacement wrapped to the cell, then the neighbouring images tried);
    other systems' atoms are `inf`."""
    pos = batch.positions.detach().cpu().to(torch.float64)
    system = int(batch.batch[atom])
    sl = batch.system_slices()[system]
    out = np.full(batch.num_atoms, np.inf)
    d = pos[sl] - pos[atom]
    cell = batch.cell.detach().cpu().to(torch.float64)[system]
    axes = [a for a in range(3) if bool(batch.pbc[system, a]) and float(torch.linalg.vector_norm(cell[a])) > 0]
    if axes:
        lattice = cell[axes]  # (k, 3)
        frac = torch.linalg.lstsq(lattice.T, d.T).solution.T  # (n, k): d = frac @ lattice + the open part
        d = d - torch.round(frac) @ lattice
        grid = torch.cartesian_prod(*[torch.tensor([-1.0, 0.0, 1.0], dtype=torch.float64)] * len(axes))
        images = grid.reshape(-1, len(axes)) @ lattice  # (3^k, 3)
        dist = torch.linalg.vector_norm(d.unsqueeze(1) + images.unsqueeze(0), dim=-1).min(dim=1).values
    else:
        dist = torch.linalg.vector_norm(d, dim=-1)
    out[sl] = dist.numpy()
    return out


def probe_candidates(batch: Batch, rounds: int, candidates: int) -> list[list[list[int]]]:
    """Per round (`rounds`, at most 2), per system, the candidate probe atoms: those nearest (in rank
    along the system's longest extent) to the median in the first round, the lower quartile in the
    second, nearest first (`candidates` of them: a larger step leaves fewer atoms whose pairs it
    cannot carry across)."""
    pos = batch.positions.detach().cpu().to(torch.float64)
    out: list[list[list[int]]] = [[] for _ in range(rounds)]
    for sl in batch.system_slices():
        size = sl.stop - sl.start
        p = pos[sl]
        order = torch.argsort(p[:, int(torch.argmax(p.max(0).values - p.min(0).values))]).tolist() if size >= 2 else []
        for r, q in enumerate((0.5, 0.25)[:rounds]):
            target = int(q * (size - 1))
            window = range(max(0, target - candidates), min(size, target + candidates + 1)) if size >= 2 else range(0)
            ranks = sorted(window, key=lambda i: abs(i - target))[:candidates]
            out[r].append([order[i] + sl.start for i in ranks])
    return out


def choose_probes(
    graph: CutoffGraph, candidates: Sequence[Sequence[int]], steps: Sequence[float], asked: Sequence[float]
) -> tuple[list[int], float] | None:
    """The probes of one round and their step: the largest step at which every system with candidates
    has one whose displacement changes no edge (its first such candidate), else the smallest step with
    the systems that have one; None when none has."""
    for step in steps:
        risky = graph.risky(step, asked)
        picks = [next((c for c in cands if not risky[c]), None) for cands in candidates if cands]
        if picks and all(c is not None for c in picks):
            return [c for c in picks if c is not None], step
    found = [c for c in picks if c is not None] if candidates else []
    return (found, steps[-1]) if found else None
