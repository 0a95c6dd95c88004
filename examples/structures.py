"""Deterministic sample structures for the example models, and a check that they partition well.

The distcheck runtime cuts each system into slabs along its longest cell axis (periodic systems) or
its longest extent (open systems). A validation only proves something when every rank owns atoms,
holds halo copies and also misses some atoms entirely ("remote"). The samples here are therefore
elongated along z, and `slab_check` says whether a batch meets that bar for a halo width and a world
size.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import torch

from distcheck.batch import Batch

__all__ = [
    "DEFAULT_SPECIES",
    "System",
    "cluster_system",
    "jittered_lattice",
    "make_batch",
    "min_distance",
    "periodic_slab_system",
    "slab_check",
]

#: H, C, O.
DEFAULT_SPECIES: tuple[int, ...] = (1, 6, 8)


@dataclass(frozen=True)
class System:
    """One structure: positions `[n,3]` (Å), atomic numbers `[n]`, cell `[3,3]` (rows are lattice
    vectors; zeros for an open system), periodicity per axis and the total charge."""

    positions: torch.Tensor
    numbers: torch.Tensor
    cell: torch.Tensor
    pbc: tuple[bool, bool, bool]
    charge: float = 0.0

    @property
    def num_atoms(self) -> int:
        return int(self.positions.shape[0])


def jittered_lattice(
    n_cells: tuple[int, int, int],
    spacing: float,
    jitter: float,
    species: Sequence[int],
    seed: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """A simple cubic lattice of `n_cells` sites with seeded random displacements and species.

    Sites sit at `(index + 0.5) * spacing`; each coordinate is displaced uniformly in
    `[-jitter, jitter]`, so no two atoms are closer than `spacing - 2 * jitter` (also across the
    periodic boundary of the returned cell). Returns `(positions [n,3] float64, numbers [n] long,
    cell [3,3] float64)` with `cell = diag(n_cells) * spacing`.
    """
    if jitter < 0 or 2 * jitter >= spacing:
        raise ValueError(f"jitter must be in [0, spacing/2); got jitter={jitter}, spacing={spacing}")
    if not species:
        raise ValueError("species must name at least one atomic number")
    rng = np.random.default_rng(seed)
    nx, ny, nz = n_cells
    grid = np.stack(np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"), axis=-1)
    sites = (grid.reshape(-1, 3).astype(np.float64) + 0.5) * spacing
    positions = sites + rng.uniform(-jitter, jitter, size=sites.shape)
    numbers = rng.choice(np.asarray(species, dtype=np.int64), size=len(sites))
    cell = np.diag(np.asarray(n_cells, dtype=np.float64) * spacing)
    return (
        torch.as_tensor(positions, dtype=torch.float64),
        torch.as_tensor(numbers, dtype=torch.long),
        torch.as_tensor(cell, dtype=torch.float64),
    )


def periodic_slab_system(
    n_cells: tuple[int, int, int] = (4, 4, 20),
    spacing: float = 2.6,
    jitter: float = 0.2,
    species: Sequence[int] = DEFAULT_SPECIES,
    seed: int = 0,
    charge: float = 0.0,
) -> System:
    """A fully periodic, elongated box (default 10.4 x 10.4 x 52 Å, 320 atoms)."""
    positions, numbers, cell = jittered_lattice(n_cells, spacing, jitter, species, seed)
    return System(positions, numbers, cell, (True, True, True), float(charge))


def cluster_system(
    n_cells: tuple[int, int, int] = (4, 4, 24),
    spacing: float = 2.6,
    jitter: float = 0.2,
    species: Sequence[int] = DEFAULT_SPECIES,
    seed: int = 0,
    charge: float = 0.0,
) -> System:
    """An open (non-periodic) elongated rod of atoms: zero cell, pbc all False."""
    positions, numbers, _ = jittered_lattice(n_cells, spacing, jitter, species, seed)
    cell = torch.zeros(3, 3, dtype=torch.float64)
    return System(positions, numbers, cell, (False, False, False), float(charge))


def make_batch(systems: Sequence[System], dtype: torch.dtype = torch.float64) -> Batch:
    """Stack `systems` (in order) into one `Batch` with a system index and per-system charges."""
    if not systems:
        raise ValueError("make_batch: pass at least one System")
    return Batch(
        positions=torch.cat([s.positions for s in systems]).to(dtype),
        atomic_numbers=torch.cat([s.numbers for s in systems]),
        cell=torch.stack([s.cell for s in systems]).to(dtype),
        pbc=torch.tensor([s.pbc for s in systems], dtype=torch.bool),
        batch=torch.cat([torch.full((s.num_atoms,), k, dtype=torch.long) for k, s in enumerate(systems)]),
        charge=torch.tensor([s.charge for s in systems], dtype=dtype),
    )


# -- partition check ---------------------------------------------------------------------------


def _slab_coordinates(positions: np.ndarray, cell: np.ndarray, pbc: np.ndarray) -> tuple[np.ndarray, float, bool, str]:
    """Coordinate of each atom along the slab axis (Å, from the slab origin), the axis length and
    whether it is periodic, plus a description of the axis."""
    if pbc.any():
        periodic_axes = [a for a in range(3) if pbc[a]]
        axis = max(periodic_axes, key=lambda a: float(np.linalg.norm(cell[a])))
        frac = positions @ np.linalg.inv(cell)
        others = [a for a in range(3) if a != axis]
        # Distance between the lattice planes normal to `axis` = volume / area of the other two vectors.
        area = float(np.linalg.norm(np.cross(cell[others[0]], cell[others[1]])))
        height = abs(float(np.linalg.det(cell))) / area
        if pbc[axis]:
            return np.mod(frac[:, axis], 1.0) * height, height, True, f"cell axis {axis}"
    extent = np.ptp(positions, axis=0)
    axis = int(np.argmax(extent))
    coord = positions[:, axis] - positions[:, axis].min()
    return coord, float(extent[axis]), False, f"cartesian axis {axis}"


def slab_check(batch: Batch, halo_width: float, world_size: int) -> list[str]:
    """Problems that would make a slab partition of `batch` degenerate; empty when there are none.

    Each system is cut into `world_size` slabs of equal thickness along its longest cell axis
    (periodic systems; plane spacing, periodic distance) or its longest extent (open systems). For
    every rank, owned atoms are those inside its slab, halo atoms those outside it but within
    `halo_width` Å of it (through periodic images), remote atoms all others. A rank that lacks any
    of the three is reported, e.g. ``"system 0, rank 1 of 2: no remote atoms (halo 12.5 Å, ...)"``.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    problems: list[str] = []
    positions = batch.positions.detach().cpu().to(torch.float64).numpy()
    for s, sl in enumerate(batch.system_slices()):
        pos = positions[sl]
        if len(pos) == 0:
            problems.append(f"system {s}: has no atoms")
            continue
        cell = batch.cell[s].detach().cpu().to(torch.float64).numpy()
        pbc = batch.pbc[s].cpu().numpy().astype(bool)
        coord, length, periodic, axis_name = _slab_coordinates(pos, cell, pbc)
        thickness = length / world_size
        for rank in range(world_size):
            lo, hi = rank * thickness, (rank + 1) * thickness
            if periodic:
                owned = (coord >= lo) & (coord < hi)
                below, above = np.mod(lo - coord, length), np.mod(coord - hi, length)
                dist = np.where(owned, 0.0, np.minimum(below, above))
            else:
                last = rank == world_size - 1
                owned = (coord >= lo) & ((coord <= hi) if last else (coord < hi))
                dist = np.where(owned, 0.0, np.maximum(lo - coord, coord - hi))
            halo = ~owned & (dist < halo_width)
            remote = ~owned & ~halo
            where = f"halo {halo_width:g} Å, slab {thickness:.2f} Å thick along {axis_name} of length {length:.2f} Å"
            for name, mask in (("owned", owned), ("halo", halo), ("remote", remote)):
                if not mask.any():
                    problems.append(f"system {s}, rank {rank} of {world_size}: no {name} atoms ({where})")
    return problems


def min_distance(system: System) -> float:
    """Smallest interatomic distance in `system` (minimum image for periodic axes); O(n²), for tests."""
    pos = system.positions.numpy()
    d = pos[:, None, :] - pos[None, :, :]
    if any(system.pbc):
        cell = system.cell.numpy()
        frac = d @ np.linalg.inv(cell)
        for a in range(3):
            if system.pbc[a]:
                frac[..., a] -= np.round(frac[..., a])
        d = frac @ cell
    r = np.linalg.norm(d, axis=-1)
    np.fill_diagonal(r, math.inf)
    return float(r.min())
