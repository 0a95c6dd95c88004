"""Strain-trick stress whose shape differs from the strain's by a leading 1 (one system).

`model_factory`: a `[3, 3]` strain and a `[1, 3, 3]` stress; `factory_flat_stress`: a `[1, 3, 3]`
strain and a `[3, 3]` stress. Either way the stress is each rank's partial of `dE/dstrain` and must be
summed over ranks; inference used to compare the shapes exactly and missed it.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff
from examples.structures import make_batch, periodic_slab_system


class StrainPair(nn.Module):
    """Pair potential with strain stress. Outputs `energy [1]`, `forces [N,3]`, `stress`."""

    cutoff = 3.2
    num_interactions = 1

    def __init__(self, batched_strain: bool) -> None:
        super().__init__()
        self.batched_strain = batched_strain

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        shape = (1, 3, 3) if self.batched_strain else (3, 3)
        strain = torch.zeros(shape, dtype=pos.dtype, requires_grad=True)
        sym = (0.5 * (strain + strain.transpose(-1, -2))).reshape(3, 3)
        cell = batch.cell + batch.cell @ sym
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos + pos @ sym, cell, batch.batch), dim=-1)
        phi = (torch.exp(-(r - 2.6)) - 0.5) ** 2 * cosine_cutoff(r, self.cutoff)
        e_atom = torch.zeros(batch.num_atoms, dtype=pos.dtype).index_add(0, nl.edge_index[0], 0.5 * phi)
        energy = torch.zeros(batch.num_systems, dtype=pos.dtype).index_add(0, batch.batch, e_atom)
        grad_pos, grad_strain = torch.autograd.grad(energy.sum(), (pos, strain))
        volume = torch.linalg.det(batch.cell[0]).abs()
        stress = grad_strain / volume
        stress = stress.reshape(3, 3) if self.batched_strain else stress.reshape(1, 3, 3)
        return {"energy": energy, "forces": -grad_pos, "stress": stress}


def model_factory() -> StrainPair:
    """`[3, 3]` strain, `[1, 3, 3]` stress."""
    return StrainPair(batched_strain=False).double()


def factory_flat_stress() -> StrainPair:
    """`[1, 3, 3]` strain, `[3, 3]` stress."""
    return StrainPair(batched_strain=True).double()


def sample_batch() -> Batch:
    """One periodic 7.8 × 7.8 × 41.6 Å box (144 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 16), seed=8)])
