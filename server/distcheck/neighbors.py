"""Neighbour lists of a `Batch`: every directed pair within a cutoff, system by system, via vesin, in
an order that does not depend on how vesin emitted them (`full_neighbor_list`; `Batch.neighbor_list`
calls it)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np
import torch

from .batch import NeighborList

if TYPE_CHECKING:
    from .batch import Batch

__all__ = ["full_neighbor_list"]


def full_neighbor_list(batch: Batch, cutoff: float) -> NeighborList:
    """All directed pairs within `cutoff` among the rows of `batch` (system by system), via vesin.

    Non-periodic directions use a bounding box large enough to hold the atoms.
    """
    import vesin

    if cutoff <= 0:
        raise ValueError(f"neighbor_list: cutoff must be positive, got {cutoff}")
    pos_all = batch.positions.detach().cpu().to(torch.float64).numpy()
    edges: list[np.ndarray] = []
    shifts: list[np.ndarray] = []
    for s, sl in enumerate(batch.system_slices()):
        if sl.stop - sl.start < 1:
            continue
        pos = pos_all[sl]
        periodic = batch.pbc[s].cpu().numpy().astype(bool)
        box = batch.cell[s].detach().cpu().to(torch.float64).numpy().copy()
        if not periodic.all():
            # vesin needs a usable box even along open directions: give them a large, orthogonal one.
            extent = float(np.ptp(pos, axis=0).max()) if len(pos) > 1 else 0.0
            filled = [a for a in range(3) if not periodic[a] and np.linalg.norm(box[a]) == 0.0]
            for axis in filled:
                box[axis] = 0.0
                box[axis, axis] = extent + 2.0 * cutoff + 1.0
            if abs(np.linalg.det(box)) < 1e-12 and filled:
                # An axis-aligned filler can be parallel to a given vector: use their orthogonal complement.
                given = np.array([box[a] for a in range(3) if a not in filled]).reshape(-1, 3)
                complement = np.linalg.svd(given)[2][len(given) :] if len(given) else np.eye(3)
                for axis, v in zip(filled, complement, strict=False):
                    box[axis] = v * (extent + 2.0 * cutoff + 1.0)
            if abs(np.linalg.det(box)) < 1e-12:
                box = np.diag([extent + 2.0 * cutoff + 1.0] * 3)
        nl = vesin.NeighborList(cutoff=float(cutoff), full_list=True)
        i, j, sh = nl.compute(points=pos, box=box, periodic=list(periodic), quantities="ijS")
        i, j, sh = np.asarray(i, dtype=np.int64), np.asarray(j, dtype=np.int64), np.asarray(sh).reshape(-1, 3)
        order = _pair_order(i, j, sh, len(pos))
        edges.append(np.stack([i[order], j[order]]) + sl.start)
        shifts.append(sh[order].astype(np.float64))
    if edges:
        ei = torch.from_numpy(np.concatenate(edges, axis=1))
        sh_t = torch.from_numpy(np.concatenate(shifts, axis=0))
    else:
        ei = torch.zeros(2, 0, dtype=torch.long)
        sh_t = torch.zeros(0, 3, dtype=torch.float64)
    return NeighborList(edge_index=ei.to(batch.device), shifts=sh_t.to(device=batch.device, dtype=batch.dtype))


def _pair_order(i: np.ndarray, j: np.ndarray, shifts: np.ndarray, n: int) -> np.ndarray:
    """The permutation that sorts pairs by `i`, then `j`, then the periodic shift: an order that does not
    depend on how vesin's cell list (or its threads) happened to emit them. One sort of the combined
    `(i, j)` key, which is unique unless a pair repeats with another shift (a cell shorter than twice
    the cutoff); only then are the shifts compared."""
    key = i * max(n, 1) + j
    order = np.argsort(key)
    ordered = key[order]
    if ordered.size > 1 and bool((ordered[1:] == ordered[:-1]).any()):
        s = shifts[order]
        order = order[np.lexsort((s[:, 2], s[:, 1], s[:, 0], ordered))]
    return order
