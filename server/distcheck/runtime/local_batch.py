"""The batch one rank runs on: the rows it owns followed by its halo copies, system by system."""

from __future__ import annotations

from typing import Any

import torch

from ..batch import Batch, NeighborList
from ..neighbors import full_neighbor_list
from .context import RankContext

__all__ = ["LocalBatch", "make_local_batch"]


class LocalBatch(Batch):
    """A `Batch` of one rank's rows, with the global id and ownership of every row.

    Per system the rows are `[owned | halo]`, so `batch` stays sorted. Cells, pbc, charges and
    `num_systems` are those of the whole batch. `neighbor_list` is halo-aware: under scatter mode
    `halo_correction` it returns only edges whose centre (`edge_index[0]`) is owned, so every
    directed edge exists on exactly one rank; under `local` and `owned_complete` it returns every edge
    among local rows (under `owned_complete` the halo rows' aggregates are then overwritten by their
    owners').
    """

    global_ids: torch.Tensor
    owned_mask: torch.Tensor
    rank_context: RankContext

    def neighbor_list(self, cutoff: float) -> NeighborList:
        """Neighbour list of the local rows (see the class docstring for which edges are kept)."""
        ctx = self.rank_context
        ctx.requested_cutoffs.append(float(cutoff))
        with ctx.handlers_suspended():
            nl = full_neighbor_list(self, cutoff)
            if ctx.scatter_mode == "halo_correction" and ctx.distributed:
                keep = self.owned_mask.to(nl.edge_index.device)[nl.edge_index[0]]
                nl = NeighborList(edge_index=nl.edge_index[:, keep], shifts=nl.shifts[keep])
        return nl

    def system_slices(self) -> list[slice]:
        """Row range of each system among this rank's rows."""
        with self.rank_context.handlers_suspended():
            return super().system_slices()

    @property
    def num_owned(self) -> int:
        """Rows this rank owns."""
        with self.rank_context.handlers_suspended():
            return int(self.owned_mask.sum())


def make_local_batch(batch: Batch, ctx: RankContext) -> LocalBatch:
    """Slice `batch` (the whole batch) down to the rows of `ctx`; per-atom extras are sliced too."""
    ids = ctx.local_ids.to(batch.device)
    n = batch.num_atoms
    extras: dict[str, Any] = {}
    for key, value in batch.extras.items():
        if isinstance(value, torch.Tensor) and value.ndim >= 1 and value.shape[0] == n:
            extras[key] = value[ids]
        else:
            extras[key] = value
    local = LocalBatch.__new__(LocalBatch)
    local.positions = batch.positions.detach()[ids].clone()
    local.atomic_numbers = batch.atomic_numbers[ids]
    local.cell = batch.cell.detach().clone()
    local.pbc = batch.pbc.clone()
    local.batch = batch.batch[ids]
    local.charge = None if batch.charge is None else batch.charge.clone()
    local.extras = extras
    local.global_ids = ctx.local_ids
    local.owned_mask = ctx.owned_mask.to(batch.device)
    local.rank_context = ctx
    ctx.system_index = local.batch
    ctx.local_counts = torch.bincount(local.batch, minlength=batch.num_systems)
    ctx.global_counts = torch.bincount(batch.batch, minlength=batch.num_systems)
    return local
