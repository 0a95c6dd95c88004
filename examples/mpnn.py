"""`MPNN`: a small k-layer message-passing potential with autograd forces.

Species embedding `h_i` (F features), Gaussian radial basis times a cosine cutoff on every edge,
then per layer `h_i <- h_i + MLP(sum_j W(rbf_ij) * h_j / avg_neighbours)` with the sum aggregated
into the centres by `index_add`, a per-atom energy readout and a per-system sum. The receptive field
is `num_interactions * cutoff`.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded, spec_copy
from examples.structures import cluster_system, make_batch, periodic_slab_system

__all__ = ["MPNN", "SPEC", "model_factory", "sample_batch", "sample_batch_cluster", "sample_batch_multi"]

SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})


def _mlp(features: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, out))


class MPNN(nn.Module):
    """Message-passing potential. Outputs `energy [B]` and `forces [N,3]`."""

    def __init__(
        self,
        num_interactions: int = 3,
        features: int = 16,
        num_basis: int = 8,
        cutoff: float = 4.0,
        avg_neighbours: float = 4.0,
        energy_scale: float = 5.0,
    ) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.num_interactions = int(num_interactions)
        self.features = int(features)
        self.avg_neighbours = float(avg_neighbours)
        self.energy_scale = float(energy_scale)
        self.distribution_spec = spec_copy(SPEC)
        self.embedding = nn.Embedding(MAX_Z, features)
        self.rbf = GaussianRBF(num_basis, cutoff)
        filters = [nn.Linear(num_basis, features) for _ in range(num_interactions)]
        for filt in filters:
            nn.init.normal_(filt.weight, std=1.0)
        self.filters = nn.ModuleList(filters)
        self.updates = nn.ModuleList(_mlp(features, features) for _ in range(num_interactions))
        self.readout = _mlp(features, 1)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        n = pos.shape[0]
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(dtype), batch.batch), dim=-1)
        edge_basis = self.rbf(r) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)

        h = self.embedding(batch.atomic_numbers)
        for filt, update in zip(self.filters, self.updates, strict=True):
            messages = filt(edge_basis) * h[neighbour]
            agg = torch.zeros(n, self.features, dtype=dtype, device=pos.device).index_add(0, centre, messages)
            h = h + update(agg / self.avg_neighbours)

        e_atom = self.energy_scale * self.readout(h).squeeze(-1)
        energy = torch.zeros(batch.num_systems, dtype=dtype, device=pos.device)
        energy = energy.index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces}


def model_factory(num_interactions: int = 3) -> MPNN:
    """A fresh `MPNN` (float64, eval mode) with the same seeded weights on every call."""
    with seeded(2):
        model = MPNN(num_interactions=num_interactions)
    return model.double().eval()


def sample_batch() -> Batch:
    """One periodic 10.4 x 10.4 x 62.4 Å box (384 atoms): long enough for a 12.5 Å local-mode halo."""
    return make_batch([periodic_slab_system((4, 4, 24), seed=21)])


def sample_batch_multi() -> Batch:
    """Two periodic boxes, 57.2 Å and 67.6 Å long (352 + 416 atoms)."""
    return make_batch([periodic_slab_system((4, 4, 22), seed=22), periodic_slab_system((4, 4, 26), seed=23)])


def sample_batch_cluster() -> Batch:
    """One open rod of 384 atoms, about 60 Å long (pbc all False, zero cell)."""
    return make_batch([cluster_system((4, 4, 24), seed=24)])
