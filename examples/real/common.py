"""Shared pieces of the real-model wrappers: sample systems, neighbour formats, seeding.

Nothing here is rank-aware. Every wrapper asks its `Batch` for the neighbour list
(`batch.neighbor_list(cutoff)`, vesin underneath), so on a rank it gets the halo-aware list of the
`LocalBatch` and in one process the full one, and converts it to the format its backbone expects:

- `flat_neighbor_matrix`: AIMNet2's flat ("mode 1") padded neighbour matrix, with the padding atom
  as the last row;
- `edge_vectors`: edge vectors recomputed from the live positions (so forces flow through autograd).
"""

from __future__ import annotations

import torch

from distcheck.batch import Batch, NeighborList
from examples.structures import make_batch, periodic_slab_system, slab_check

__all__ = [
    "REAL_SPECIES",
    "edge_vectors",
    "flat_neighbor_matrix",
    "real_sample_batch",
    "real_sample_batch_multi",
    "sample_problems",
]

#: H, C, N, O: elements every real model here has parameters for.
REAL_SPECIES: tuple[int, ...] = (1, 6, 7, 8)


def real_sample_batch(n_cells: tuple[int, int, int] = (4, 4, 24), seed: int = 7, charge: float = 0.0) -> Batch:
    """One fully periodic box, 4 x 4 x 24 jittered lattice sites 2.6 Å apart (10.4 x 10.4 x 62.4 Å,
    384 atoms of H, C, N, O), float64.

    Long enough along z that a slab partition gives every rank owned, halo and remote atoms at world
    sizes 2 and 4 for halos up to 12.5 Å (AIMNet2 in `local` mode: 3 passes x 4 Å + 0.5 Å skin); see
    `sample_problems`.
    """
    system = periodic_slab_system(n_cells, spacing=2.6, jitter=0.2, species=REAL_SPECIES, seed=seed, charge=charge)
    return make_batch([system])


def real_sample_batch_multi(seed: int = 7) -> Batch:
    """Two periodic boxes like `real_sample_batch` (4 x 4 x 24 and 4 x 4 x 22 sites: 384 + 352 atoms)
    with total charges +1 and -1, as one batch of two systems."""
    first = periodic_slab_system((4, 4, 24), spacing=2.6, jitter=0.2, species=REAL_SPECIES, seed=seed, charge=1.0)
    second = periodic_slab_system((4, 4, 22), spacing=2.6, jitter=0.2, species=REAL_SPECIES, seed=seed + 1, charge=-1.0)
    return make_batch([first, second])


def sample_problems(batch: Batch, halo_width: float, world_sizes: tuple[int, ...] = (2, 4)) -> list[str]:
    """`slab_check` at every world size in `world_sizes` (empty when the sample partitions well)."""
    problems: list[str] = []
    for world_size in world_sizes:
        problems += slab_check(batch, halo_width, world_size)
    return problems


def edge_vectors(nl: NeighborList, positions: torch.Tensor, batch: Batch) -> torch.Tensor:
    """Vectors from `edge_index[0]` to `edge_index[1]` (periodic images included) from live `positions`."""
    return nl.vectors(positions, batch.cell.to(positions.dtype), batch.batch)


def flat_neighbor_matrix(nl: NeighborList, num_atoms: int) -> tuple[torch.Tensor, torch.Tensor]:
    """AIMNet2's flat neighbour matrix for `num_atoms` real atoms plus one padding atom (row `num_atoms`).

    Returns `nbmat [num_atoms + 1, M]` (long; row `i` lists the neighbours `j` of centre `i`, padded
    with `num_atoms`) and `shifts [num_atoms + 1, M, 3]` (integer cell translations in the list's
    dtype, zero on padding slots), where `M` is the largest neighbour count (at least 1). Edges are
    taken from `edge_index[0]` (centre) to `edge_index[1]` (neighbour), as `NeighborList` defines them.
    """
    centre, neighbour = nl.edge_index[0], nl.edge_index[1]
    device = nl.edge_index.device
    counts = torch.bincount(centre, minlength=num_atoms) if centre.numel() else torch.zeros(num_atoms, dtype=torch.long)
    width = max(int(counts.max()) if counts.numel() else 0, 1)
    nbmat = torch.full((num_atoms + 1, width), num_atoms, dtype=torch.long, device=device)
    shifts = torch.zeros(num_atoms + 1, width, 3, dtype=nl.shifts.dtype, device=device)
    if centre.numel():
        # The list is sorted by centre: the slot of an edge is its rank among the centre's edges.
        order = torch.argsort(centre, stable=True)
        centre, neighbour, edge_shifts = centre[order], neighbour[order], nl.shifts[order]
        start = torch.cumsum(counts, 0) - counts
        slot = torch.arange(centre.numel(), device=device) - start[centre]
        nbmat[centre, slot] = neighbour
        shifts[centre, slot] = edge_shifts
    return nbmat, shifts
