"""A bug no halo can fix until a rank holds every atom: forces scaled by the rows the wrapper is given.

`forces = -dE/dx × num_atoms / 144` is right in one process (the sample has 144 atoms) and wrong on a
rank, which sees only its owned and halo rows, until the halo is so wide that every rank holds every
atom. The energy is right (the ranks agree on it), so nothing but the forces points at the bug.
The spec gives an explicit `halo_width` under `local`, the case where the old `widen_halo` doubled
the halo until the partition was degenerate and then called the result inconclusive.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff, make_spec
from examples.structures import make_batch, periodic_slab_system

SPEC = make_spec("local", {"energy": "per_graph", "forces": "per_node"})
SPEC["distribution"]["policy"]["halo_width"] = 4.0


class RowScaledPair(nn.Module):
    """Pair potential whose forces are scaled by `batch.num_atoms` (the bug)."""

    cutoff = 3.2
    num_interactions = 1

    def __init__(self) -> None:
        super().__init__()
        self.distribution_spec = {**SPEC, "distribution": {"policy": dict(SPEC["distribution"]["policy"])}}

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        phi = (torch.exp(-(r - 2.6)) - 0.5) ** 2 * cosine_cutoff(r, self.cutoff)
        e_atom = torch.zeros(batch.num_atoms, dtype=pos.dtype).index_add(0, nl.edge_index[0], 0.5 * phi)
        energy = torch.zeros(batch.num_systems, dtype=pos.dtype).index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos)[0] * (batch.num_atoms / 144.0)
        return {"energy": energy, "forces": forces}


def model_factory() -> RowScaledPair:
    """The buggy model (float64)."""
    return RowScaledPair().double()


def sample_batch() -> Batch:
    """One periodic 7.8 × 7.8 × 41.6 Å box (144 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 16), seed=9)])
