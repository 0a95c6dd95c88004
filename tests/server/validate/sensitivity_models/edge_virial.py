"""Forces from per-edge derivatives and stress from a per-atom virial split over both atoms of an edge.

`E = sum_i sum_j phi(r_ij) / 2` per system; `dE/dr_ij` comes from autograd with respect to the
`[E, 3]` edge vectors, forces are its sums into the two atoms of each edge, the per-atom virial
`W_i = -1/2 sum_j (r_ij ⊗ dE/dr_ij)` goes half to each atom, and `stress = sum_i W_i / volume`.
Under `local` (the wrapper's spec) stress misses the halves that land on halo rows; under
`halo_correction` it is right. `factory_halo_correction` declares the right mode from the start.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff, make_spec
from examples.structures import make_batch, periodic_slab_system

_KINDS = {"energy": "per_graph", "forces": "per_node", "stress": "per_graph"}


class EdgeVirialPair(nn.Module):
    """Pair potential with per-edge derivatives. Outputs `energy [B]`, `forces [N,3]`, `stress [B,3,3]`."""

    cutoff = 3.2
    num_interactions = 1

    def __init__(self, scatter_mode: str) -> None:
        super().__init__()
        self.distribution_spec = make_spec(scatter_mode, _KINDS)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        n, b = batch.num_atoms, batch.num_systems
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        vec = nl.vectors(batch.positions, batch.cell, batch.batch).detach().requires_grad_(True)
        r = torch.linalg.vector_norm(vec, dim=-1)
        phi = (torch.exp(-(r - 2.6)) - 0.5) ** 2 * cosine_cutoff(r, self.cutoff)
        e_atom = torch.zeros(n, dtype=vec.dtype).index_add(0, centre, 0.5 * phi)
        energy = torch.zeros(b, dtype=vec.dtype).index_add(0, batch.batch, e_atom)
        dedr = torch.autograd.grad(energy.sum(), vec)[0]
        forces = torch.zeros(n, 3, dtype=vec.dtype).index_add(0, centre, dedr).index_add(0, neighbour, -dedr)
        w_edge = -0.5 * vec[:, :, None] * dedr[:, None, :]
        virial = torch.zeros(n, 3, 3, dtype=vec.dtype).index_add(0, centre, w_edge).index_add(0, neighbour, w_edge)
        volume = torch.linalg.det(batch.cell).abs()
        stress = torch.zeros(b, 3, 3, dtype=vec.dtype).index_add(0, batch.batch, virial) / volume[:, None, None]
        return {"energy": energy, "forces": forces, "stress": stress}


def model_factory() -> EdgeVirialPair:
    """Declares `local`: stress fails there."""
    return EdgeVirialPair("local").double()


def factory_halo_correction() -> EdgeVirialPair:
    """Declares `halo_correction`: passes."""
    return EdgeVirialPair("halo_correction").double()


def sample_batch() -> Batch:
    """One periodic 7.8 × 7.8 × 41.6 Å box (144 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 16), seed=7)])
