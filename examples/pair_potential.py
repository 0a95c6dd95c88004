"""`PairPotential`: a smoothly cut Morse pair potential with per-species parameters.

`phi_ab(r) = D_ab [(1 - exp(-a_ab (r - r0_ab)))^2 - 1] * fc(r)` with a cosine cutoff `fc` at 5 Å
(value and slope vanish there) and mixing rules `D_ab = sqrt(D_a D_b)`, `a_ab = (a_a + a_b)/2`,
`r0_ab = (r0_a + r0_b)/2`. Per-atom energy `e_i = 1/2 sum_j phi(r_ij)` over a full neighbour list,
per-system energy the sum of `e_i`; forces by autograd. One interaction (no message passing).
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import MAX_Z, cosine_cutoff, make_spec, seeded, spec_copy
from examples.structures import make_batch, periodic_slab_system

__all__ = ["SPEC", "PairPotential", "model_factory", "sample_batch", "sample_batch_multi"]

SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})


class PairPotential(nn.Module):
    """Morse pair potential, smoothly cut at `cutoff` Å. Outputs `energy [B]`, `forces [N,3]`."""

    num_interactions = 1

    def __init__(self, cutoff: float = 5.0) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.distribution_spec = spec_copy(SPEC)
        # Per-element well depth (eV), stiffness (1/Å) and equilibrium distance (Å).
        self.depth = nn.Parameter(0.05 + 0.15 * torch.rand(MAX_Z))
        self.stiffness = nn.Parameter(1.2 + 0.6 * torch.rand(MAX_Z))
        self.r0 = nn.Parameter(2.4 + 0.6 * torch.rand(MAX_Z))

    def pair_energy(self, r: torch.Tensor, zi: torch.Tensor, zj: torch.Tensor) -> torch.Tensor:
        depth = torch.sqrt(self.depth[zi] * self.depth[zj])
        a = 0.5 * (self.stiffness[zi] + self.stiffness[zj])
        r0 = 0.5 * (self.r0[zi] + self.r0[zj])
        morse = depth * ((1.0 - torch.exp(-a * (r - r0))) ** 2 - 1.0)
        return morse * cosine_cutoff(r, self.cutoff)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.depth.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(dtype), batch.batch), dim=-1)
        z = batch.atomic_numbers
        phi = self.pair_energy(r, z[centre], z[neighbour])
        e_atom = 0.5 * torch.zeros(pos.shape[0], dtype=dtype, device=pos.device).index_add(0, centre, phi)
        energy = torch.zeros(batch.num_systems, dtype=dtype, device=pos.device)
        energy = energy.index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces}


def model_factory() -> PairPotential:
    """A fresh `PairPotential` (float64, eval mode) with the same seeded parameters on every call."""
    with seeded(1):
        model = PairPotential()
    return model.double().eval()


def sample_batch() -> Batch:
    """One periodic 10.4 x 10.4 x 52 Å box of H/C/O (320 atoms)."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=11)])


def sample_batch_multi() -> Batch:
    """Two periodic boxes of different lengths (320 + 352 atoms)."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=11), periodic_slab_system((4, 4, 22), seed=12)])
