"""`StrainStressModel`: an embedded-atom model whose stress comes from the strain trick.

Energy `E = sum_i [F(rho_i) + 1/2 sum_j phi(r_ij)]` with density `rho_i = sum_j f(r_ij)` (one
interaction: `rho_i` only needs the neighbours of `i`), embedding `F(rho) = -A (sqrt(1 + rho) - 1)`,
density `f(r) = exp(-beta (r - 2.5)) fc(r)` and repulsion `phi(r) = B exp(-r / 0.7) fc(r)`.

A zero strain `[B,3,3]` that requires grad deforms positions and cells by `(I + sym(strain))`;
`stress = dE/dstrain / volume`. On a rank that holds part of a system, `dE/dstrain` is that rank's
partial, so the spec lists `stress` in `all_reduce_outputs`. Periodic systems only.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import MAX_Z, cosine_cutoff, make_spec, seeded, spec_copy
from examples.structures import make_batch, periodic_slab_system

__all__ = ["SPEC", "StrainStressModel", "model_factory", "sample_batch", "sample_batch_multi"]

SPEC = make_spec(
    "halo_correction",
    {"energy": "per_graph", "forces": "per_node", "stress": "per_graph"},
    all_reduce_outputs=["stress"],
)


class StrainStressModel(nn.Module):
    """Embedded-atom potential. Outputs `energy [B]`, `forces [N,3]`, `stress [B,3,3]` (eV/Å³)."""

    num_interactions = 1

    def __init__(self, cutoff: float = 5.0) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.distribution_spec = spec_copy(SPEC)
        self.embedding_strength = nn.Parameter(0.5 + 0.5 * torch.rand(MAX_Z))
        self.density_scale = nn.Parameter(0.5 + 0.5 * torch.rand(MAX_Z))
        self.density_decay = nn.Parameter(1.0 + 0.5 * torch.rand(MAX_Z))
        self.repulsion = nn.Parameter(20.0 + 20.0 * torch.rand(MAX_Z))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.repulsion.dtype
        if not bool(batch.pbc.all()):
            raise ValueError("StrainStressModel divides by the cell volume: every system must be periodic")
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        n, num_systems, sys_idx = pos.shape[0], batch.num_systems, batch.batch
        strain = torch.zeros(num_systems, 3, 3, dtype=dtype, device=pos.device, requires_grad=True)
        sym = 0.5 * (strain + strain.transpose(1, 2))
        cell = batch.cell.to(dtype)
        strained_pos = pos + torch.einsum("ni,nij->nj", pos, sym[sys_idx])
        strained_cell = cell + torch.einsum("bij,bjk->bik", cell, sym)

        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(strained_pos, strained_cell, sys_idx), dim=-1)
        fc = cosine_cutoff(r, self.cutoff)
        z = batch.atomic_numbers
        zi, zj = z[centre], z[neighbour]

        density = self.density_scale[zj] * torch.exp(-self.density_decay[zj] * (r - 2.5)) * fc
        rho = torch.zeros(n, dtype=dtype, device=pos.device).index_add(0, centre, density)
        embed = -self.embedding_strength[z] * (torch.sqrt(1.0 + rho) - 1.0)
        pair = torch.sqrt(self.repulsion[zi] * self.repulsion[zj]) * torch.exp(-r / 0.7) * fc
        e_pair = 0.5 * torch.zeros(n, dtype=dtype, device=pos.device).index_add(0, centre, pair)
        e_atom = embed + e_pair
        energy = torch.zeros(num_systems, dtype=dtype, device=pos.device).index_add(0, sys_idx, e_atom)

        grad_pos, grad_strain = torch.autograd.grad(energy.sum(), (pos, strain), create_graph=self.training)
        volume = torch.linalg.det(cell).abs()
        return {"energy": energy, "forces": -grad_pos, "stress": grad_strain / volume[:, None, None]}


def model_factory() -> StrainStressModel:
    """A fresh `StrainStressModel` (float64, eval mode) with the same seeded parameters on every call."""
    with seeded(4):
        model = StrainStressModel()
    return model.double().eval()


def sample_batch() -> Batch:
    """One periodic 10.4 x 10.4 x 52 Å box (320 atoms)."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=41)])


def sample_batch_multi() -> Batch:
    """Two periodic boxes (320 + 352 atoms)."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=41), periodic_slab_system((4, 4, 22), seed=42)])
