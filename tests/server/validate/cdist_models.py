"""A 3-layer message-passing model that builds its own graph with `torch.cdist`: every pair of atoms of
one system closer than the cutoff, the atom itself excluded, read off the dense distance matrix. No
`batch.neighbor_list` call, so on a rank it sees every edge among its owned and halo rows, as models
calling PyG's `radius_graph` or their own neighbour search do. Its per-atom state changes only through
per-edge → per-atom aggregations (`index_add`), so `owned_complete` with a one-cutoff halo is right;
`halo_correction` (it double counts the edges between halo atoms) is wrong.

The distances that enter the energy are the cdist matrix's entries at the edges, so forces flow back
through `torch.cdist` itself (its backward at the zero diagonal included). Open systems only: cdist
knows no periodic images.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded
from examples.structures import cluster_system, make_batch

OUTPUT_KINDS = {"energy": "per_graph", "forces": "per_node"}
SPEC = make_spec("owned_complete", OUTPUT_KINDS)
"""Right: a one-cutoff halo refreshed after each aggregation."""
WRONG_SPEC = make_spec("halo_correction", OUTPUT_KINDS)
"""Wrong: halo partials summed into owners on top of a graph that already has the halo's edges."""
BARE = {"format": "distcheck-spec", "version": 1}
"""A prior that leaves the policy to inference."""
CUTOFF = 3.0


def cdist_graph(positions: torch.Tensor, system: torch.Tensor, cutoff: float) -> tuple[torch.Tensor, torch.Tensor]:
    """`edge_index [2,E]` of every ordered pair `(i, j)`, `i != j`, of one system with
    `cdist(positions)[i, j] < cutoff`, and those distances `[E]` (differentiable through cdist)."""
    dist = torch.cdist(positions, positions)
    same = system.unsqueeze(0) == system.unsqueeze(1)
    eye = torch.eye(positions.shape[0], dtype=torch.bool, device=positions.device)
    centre, neighbour = torch.nonzero(same & ~eye & (dist.detach() < cutoff), as_tuple=True)
    return torch.stack([centre, neighbour]), dist[centre, neighbour]


class CdistMPNN(nn.Module):
    """Message passing on the cdist graph; outputs `energy [B]` and `forces [N,3]`."""

    def __init__(self, num_interactions: int = 3, features: int = 16, num_basis: int = 8) -> None:
        super().__init__()
        self.cutoff = CUTOFF
        self.num_interactions = num_interactions
        self.features = features
        self.embedding = nn.Embedding(MAX_Z, features)
        self.rbf = GaussianRBF(num_basis, CUTOFF)
        self.filters = nn.ModuleList(nn.Linear(num_basis, features) for _ in range(num_interactions))
        self.updates = nn.ModuleList(
            nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, features))
            for _ in range(num_interactions)
        )
        self.readout = nn.Linear(features, 1)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        edge_index, r = cdist_graph(pos, batch.batch, self.cutoff)
        centre, neighbour = edge_index[0], edge_index[1]
        basis = self.rbf(r) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)
        h = self.embedding(batch.atomic_numbers)
        for filt, update in zip(self.filters, self.updates, strict=True):
            messages = filt(basis) * h[neighbour]
            agg = torch.zeros(h.shape[0], self.features, dtype=dtype, device=pos.device).index_add(0, centre, messages)
            h = h + update(agg / 6.0)
        e_atom = self.readout(h).squeeze(-1)
        energy = torch.zeros(batch.num_systems, dtype=dtype, device=pos.device).index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def model_factory() -> CdistMPNN:
    """3 layers, float64, eval, seeded weights."""
    with seeded(11):
        model = CdistMPNN()
    return model.double().eval()


def sample_batch() -> Batch:
    """Two open rods elongated along z (3 x 3 x 20 and 2 x 3 x 22 cells of 2.6 Å)."""
    return make_batch([cluster_system((3, 3, 20), seed=5), cluster_system((2, 3, 22), seed=6)])


def bound_forward_factory() -> object:
    """The same model handed over as its bound `forward` (as a predict unit's method is): the cutoff and
    depth are declared on the module the method is bound to, not on the method."""
    return model_factory().forward
