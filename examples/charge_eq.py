"""`ChargeEquilibration`: charges from a constrained minimisation, per-system sums by `index_add`.

One message-passing layer gives each atom an electronegativity `chi_i` and a hardness `J_i > 0`.
The charges minimise `sum_i (chi_i q_i + 1/2 J_i q_i^2)` subject to `sum_{i in s} q_i = Q_s` (the
system's total charge, `batch.charge`, zero when absent):

    q_i = (lambda_s - chi_i) / J_i,   lambda_s = (Q_s + sum_{i in s} chi_i / J_i) / sum_{i in s} 1 / J_i

The energy is that minimum plus a short-range repulsion; forces are autograd through the charges.
The charges are a per-node output that is NOT autograd-derived: each rank's owned rows hold the
right value, so the spec lists them in `owned_only_outputs` (summing halo copies would be wrong).
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from distcheck.batch import Batch
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded, spec_copy
from examples.structures import make_batch, periodic_slab_system

__all__ = ["SPEC", "ChargeEquilibration", "model_factory", "sample_batch", "sample_batch_multi"]

SPEC = make_spec(
    "halo_correction",
    {"energy": "per_graph", "forces": "per_node", "charges": "per_node"},
    owned_only_outputs=["charges"],
)


class ChargeEquilibration(nn.Module):
    """Charge-equilibration potential. Outputs `energy [B]`, `forces [N,3]`, `charges [N]`."""

    num_interactions = 1

    def __init__(self, features: int = 16, num_basis: int = 8, cutoff: float = 4.5) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.features = int(features)
        self.distribution_spec = spec_copy(SPEC)
        self.embedding = nn.Embedding(MAX_Z, features)
        self.rbf = GaussianRBF(num_basis, cutoff)
        self.filter = nn.Linear(num_basis, features)
        nn.init.normal_(self.filter.weight, std=1.0)
        self.update = nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, features))
        self.electronegativity = nn.Linear(features, 1)
        self.hardness = nn.Linear(features, 1)
        # Short-range repulsion A_ab exp(-r / rho), A_ab = sqrt(A_a A_b).
        self.repulsion = nn.Parameter(0.5 + torch.rand(MAX_Z))
        self.repulsion_range = 0.8

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        n, num_systems, sys_idx = pos.shape[0], batch.num_systems, batch.batch
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(dtype), sys_idx), dim=-1)
        fc = cosine_cutoff(r, self.cutoff)
        z = batch.atomic_numbers

        h = self.embedding(z)
        messages = self.filter(self.rbf(r) * fc.unsqueeze(-1)) * h[neighbour]
        agg = torch.zeros(n, self.features, dtype=dtype, device=pos.device).index_add(0, centre, messages)
        h = h + self.update(agg / 4.0)
        chi = self.electronegativity(h).squeeze(-1)
        hardness = functional.softplus(self.hardness(h).squeeze(-1)) + 0.5

        zeros_per_system = torch.zeros(num_systems, dtype=dtype, device=pos.device)
        total_charge = zeros_per_system if batch.charge is None else batch.charge.to(dtype)
        inv_hardness = zeros_per_system.index_add(0, sys_idx, 1.0 / hardness)
        chi_over_j = zeros_per_system.index_add(0, sys_idx, chi / hardness)
        lagrange = (total_charge + chi_over_j) / inv_hardness
        charges = (lagrange[sys_idx] - chi) / hardness

        pair = torch.sqrt(self.repulsion[z[centre]] * self.repulsion[z[neighbour]])
        pair = pair * torch.exp(-r / self.repulsion_range) * fc
        e_pair = 0.5 * torch.zeros(n, dtype=dtype, device=pos.device).index_add(0, centre, pair)
        e_atom = chi * charges + 0.5 * hardness * charges**2 + e_pair
        energy = zeros_per_system.index_add(0, sys_idx, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces, "charges": charges}


def model_factory() -> ChargeEquilibration:
    """A fresh `ChargeEquilibration` (float64, eval mode) with the same seeded weights on every call."""
    with seeded(3):
        model = ChargeEquilibration()
    return model.double().eval()


def sample_batch() -> Batch:
    """One periodic 10.4 x 10.4 x 52 Å box (320 atoms) with total charge +1."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=31, charge=1.0)])


def sample_batch_multi() -> Batch:
    """Two periodic boxes (320 + 352 atoms) with total charges +1 and -2."""
    return make_batch(
        [
            periodic_slab_system((4, 4, 20), seed=31, charge=1.0),
            periodic_slab_system((4, 4, 22), seed=32, charge=-2.0),
        ]
    )
