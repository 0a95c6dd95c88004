"""Spatial partition of a batch into ranks: owned, halo and remote atoms, with periodic images.

Each system is cut into `world_size` slabs of equal thickness along its longest direction (the
largest interplanar spacing of a periodic cell, or the largest extent of open directions). A rank
owns the atoms of its slab; its halo is every other atom whose distance to the slab, measured
along the slab normal and through periodic images, is at most `halo_width`. Atoms keep their
original positions; an atom appears at most once per rank (periodic images are edges with shifts).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from ..batch import Batch

__all__ = ["HeldRows", "Partition", "RankPartition", "SystemCut", "partition_batch"]


@dataclass(frozen=True)
class SystemCut:
    """How one system was cut: the normal coordinate used and whether it wraps around."""

    system: int
    axis: int
    periodic: bool
    length: float
    origin: float


class HeldRows:
    """The row counts of anything holding a rank's rows: `local_ids` (the global atom id of each
    local row) and `owned_mask` (True for the rows it owns)."""

    local_ids: torch.Tensor
    owned_mask: torch.Tensor

    @property
    def num_local(self) -> int:
        """Rows held by this rank (owned + halo)."""
        return int(self.local_ids.shape[0])

    @property
    def num_owned(self) -> int:
        """Atoms this rank owns."""
        return int(self.owned_mask.sum())

    @property
    def num_halo(self) -> int:
        """Atoms held as halo copies."""
        return self.num_local - self.num_owned


@dataclass
class RankPartition(HeldRows):
    """One rank's share. Local rows are, system by system, `[owned | halo]` (so `batch` stays sorted)."""

    rank: int
    local_ids: torch.Tensor
    owned_mask: torch.Tensor
    per_system: list[dict[str, int]] = field(default_factory=list)

    def counts(self, num_atoms: int) -> dict[str, int]:
        """`{"owned", "halo", "remote"}` atom counts over the whole batch."""
        return {"owned": self.num_owned, "halo": self.num_halo, "remote": num_atoms - self.num_local}


@dataclass
class Partition:
    """The whole decomposition: who owns each atom and what every rank holds."""

    world_size: int
    halo_width: float
    num_atoms: int
    owner: torch.Tensor
    ranks: list[RankPartition]
    cuts: list[SystemCut]

    def summary(self) -> dict[int, dict[str, int]]:
        """Owned/halo/remote counts per rank."""
        return {r.rank: r.counts(self.num_atoms) for r in self.ranks}


def _completed_cell(cell: torch.Tensor) -> torch.Tensor:
    """A non-singular basis: zero cell vectors (open directions) are replaced by an orthonormal complement."""
    zero = [a for a in range(3) if float(torch.linalg.vector_norm(cell[a])) == 0.0]
    out = cell.clone()
    if zero:
        orthonormal: list[torch.Tensor] = []
        given = [cell[a] for a in range(3) if a not in zero]
        for v in given + list(torch.eye(3, dtype=cell.dtype)):
            w = v.clone()
            for b in orthonormal:
                w = w - (w @ b) * b
            norm = float(torch.linalg.vector_norm(w))
            if norm > 1e-8:
                orthonormal.append(w / norm)
        complement = orthonormal[len(given) :]
        for a, v in zip(zero, complement):
            out[a] = v
    if abs(float(torch.linalg.det(out))) < 1e-12:
        return torch.eye(3, dtype=cell.dtype)
    return out


def _normal_coordinates(
    positions: torch.Tensor, cell: torch.Tensor, pbc: torch.Tensor
) -> tuple[torch.Tensor, list[float], list[bool]]:
    """Coordinates along the three plane normals (Å), the period or extent along each, periodicity."""
    basis = _completed_cell(cell)
    frac = positions @ torch.linalg.inv(basis)
    vol = abs(float(torch.linalg.det(basis)))
    spacing = []
    for a in range(3):
        b, c = basis[(a + 1) % 3], basis[(a + 2) % 3]
        spacing.append(vol / float(torch.linalg.vector_norm(torch.linalg.cross(b, c))))
    u = frac * torch.tensor(spacing, dtype=positions.dtype)
    lengths, periodic = [], []
    for a in range(3):
        if bool(pbc[a]):
            lengths.append(spacing[a])
            periodic.append(True)
        else:
            extent = float(u[:, a].max() - u[:, a].min()) if u.shape[0] else 0.0
            lengths.append(extent)
            periodic.append(False)
    return u, lengths, periodic


def _slab_distance(u: torch.Tensor, lo: float, hi: float, periodic: bool, length: float) -> torch.Tensor:
    """Distance along the normal from each coordinate to the slab [lo, hi), through images if periodic."""
    if periodic:
        x = torch.remainder(u - lo, length)
        width = hi - lo
        outside = x >= width
        d = torch.minimum(x - width, length - x)
        return torch.where(outside, d, torch.zeros_like(d))
    below = torch.clamp(lo - u, min=0.0)
    above = torch.clamp(u - hi, min=0.0)
    return torch.maximum(below, above)


def partition_batch(batch: Batch, world_size: int, halo_width: float, replicated: bool = False) -> Partition:
    """Partition `batch` over `world_size` ranks with a halo `halo_width` Å deep.

    `replicated=True` gives every rank every atom (owned by its slab, the rest as halo): the control
    policy. `halo_width=math.inf` has the same effect on the halo. Deterministic: every rank computes
    the same partition from the same batch.
    """
    if world_size < 1:
        raise ValueError(f"world_size must be >= 1, got {world_size}")
    if not (halo_width >= 0.0):
        raise ValueError(f"halo_width must be >= 0 Å, got {halo_width}")
    pos = batch.positions.detach().cpu().to(torch.float64)
    cells = batch.cell.detach().cpu().to(torch.float64)
    pbcs = batch.pbc.cpu()
    n = pos.shape[0]
    owner = torch.zeros(n, dtype=torch.long)
    member = torch.zeros(world_size, n, dtype=torch.bool)
    cuts: list[SystemCut] = []
    for s, sl in enumerate(batch.system_slices()):
        if sl.stop == sl.start:
            cuts.append(SystemCut(system=s, axis=0, periodic=False, length=0.0, origin=0.0))
            continue
        u_all, lengths, periodic = _normal_coordinates(pos[sl], cells[s], pbcs[s])
        axis = max(range(3), key=lambda a: (lengths[a], periodic[a]))
        u = u_all[:, axis]
        length, is_periodic = lengths[axis], periodic[axis]
        if is_periodic:
            origin = 0.0
            coord = torch.remainder(u, length)
        else:
            origin = float(u.min())
            coord = u - origin
        width = length / world_size if length > 0 else 0.0
        if width > 0:
            sys_owner = torch.clamp(torch.floor(coord / width).to(torch.long), 0, world_size - 1)
        else:
            sys_owner = torch.zeros(coord.shape[0], dtype=torch.long)
        owner[sl] = sys_owner
        cuts.append(SystemCut(system=s, axis=axis, periodic=is_periodic, length=length, origin=origin))
        for r in range(world_size):
            if replicated or math.isinf(halo_width):
                member[r, sl] = True
                continue
            lo, hi = r * width, (r + 1) * width
            if r == world_size - 1 and not is_periodic:
                hi = max(hi, float(coord.max()) + 1e-9)
            d = _slab_distance(coord, lo, hi, is_periodic, length)
            member[r, sl] = (d <= halo_width) | (sys_owner == r)
    ranks: list[RankPartition] = []
    slices = batch.system_slices()
    for r in range(world_size):
        ids: list[torch.Tensor] = []
        mask: list[torch.Tensor] = []
        per_system: list[dict[str, int]] = []
        for s, sl in enumerate(slices):
            gid = torch.arange(sl.start, sl.stop)
            own = gid[(owner[sl] == r)]
            halo = gid[member[r, sl] & (owner[sl] != r)]
            ids += [own, halo]
            mask += [torch.ones(len(own), dtype=torch.bool), torch.zeros(len(halo), dtype=torch.bool)]
            total = sl.stop - sl.start
            remote = total - len(own) - len(halo)
            per_system.append({"system": s, "owned": len(own), "halo": len(halo), "remote": remote})
        ranks.append(
            RankPartition(
                rank=r,
                local_ids=torch.cat(ids) if ids else torch.zeros(0, dtype=torch.long),
                owned_mask=torch.cat(mask) if mask else torch.zeros(0, dtype=torch.bool),
                per_system=per_system,
            )
        )
    return Partition(world_size=world_size, halo_width=halo_width, num_atoms=n, owner=owner, ranks=ranks, cuts=cuts)
