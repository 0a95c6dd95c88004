"""`HaloUnawareMPNN`: a 2-layer message-passing model with its own neighbour list (halo-unaware).

Many backbones build their graph themselves instead of asking the batch. This one calls
`vesin.NeighborList(...).compute` directly on whatever rows it is given, so on a rank it sees every
edge among the owned and halo atoms, including edges between halo atoms, and knows nothing about
which rows are copies. That is right when the halo is as deep as the receptive field and nothing is
exchanged between layers (`scatter_mode: "local"`, the correct `SPEC`), and wrong under
`halo_correction` (`WRONG_SPEC`), which double counts the cross-rank edges.
"""

from __future__ import annotations

import numpy as np
import torch
import vesin
from torch import nn

from distcheck.batch import Batch
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded, spec_copy
from examples.structures import make_batch, periodic_slab_system

__all__ = [
    "SPEC",
    "WRONG_SPEC",
    "HaloUnawareMPNN",
    "model_factory",
    "radius_graph",
    "sample_batch",
    "sample_batch_multi",
]

_OUTPUT_KINDS = {"energy": "per_graph", "forces": "per_node"}
#: Correct: no per-layer exchange, halo as deep as the receptive field.
SPEC = make_spec("local", _OUTPUT_KINDS)
#: Wrong for this model: per-layer halo correction on top of a graph that already has the halo edges.
WRONG_SPEC = make_spec("halo_correction", _OUTPUT_KINDS)


def radius_graph(
    positions: torch.Tensor, cell: torch.Tensor, pbc: torch.Tensor, system: torch.Tensor, cutoff: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """All directed pairs `(i, j)` closer than `cutoff`, system by system, with integer cell shifts.

    Returns `edge_index [2,E]` (row indices) and `shifts [E,3]` (positions' dtype) such that the
    vector from `i` to `j` is `positions[j] - positions[i] + shifts @ cell[system[i]]`.
    """
    pos_np = positions.detach().cpu().to(torch.float64).numpy()
    sys_np = system.cpu().numpy()
    calculator = vesin.NeighborList(cutoff=float(cutoff), full_list=True)
    edges, shifts = [], []
    for s in range(cell.shape[0]):
        rows = np.flatnonzero(sys_np == s)
        if len(rows) == 0:
            continue
        periodic = bool(pbc[s].all())
        box = cell[s].detach().cpu().to(torch.float64).numpy() if periodic else np.zeros((3, 3))
        if bool(pbc[s].any()) and not periodic:
            raise ValueError("radius_graph handles fully periodic or fully open systems only")
        i, j, shift = calculator.compute(points=pos_np[rows], box=box, periodic=periodic, quantities="ijS")
        edges.append(np.stack([rows[i.astype(np.int64)], rows[j.astype(np.int64)]]))
        shifts.append(np.asarray(shift, dtype=np.float64).reshape(-1, 3))
    if not edges:
        return (
            torch.zeros(2, 0, dtype=torch.long, device=positions.device),
            torch.zeros(0, 3, dtype=positions.dtype, device=positions.device),
        )
    edge_index = torch.as_tensor(np.concatenate(edges, axis=1), dtype=torch.long, device=positions.device)
    shift_t = torch.as_tensor(np.concatenate(shifts), dtype=positions.dtype, device=positions.device)
    return edge_index, shift_t


def _mlp(features: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, out))


class HaloUnawareMPNN(nn.Module):
    """Two-layer message passing on a self-built graph. Outputs `energy [B]`, `forces [N,3]`."""

    def __init__(
        self,
        num_interactions: int = 2,
        features: int = 16,
        num_basis: int = 8,
        cutoff: float = 4.0,
        avg_neighbours: float = 4.0,
        energy_scale: float = 5.0,
    ) -> None:
        super().__init__()
        self.avg_neighbours = float(avg_neighbours)
        self.energy_scale = float(energy_scale)
        self.cutoff = float(cutoff)
        self.num_interactions = int(num_interactions)
        self.features = int(features)
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
        cell, sys_idx, n = batch.cell.to(dtype), batch.batch, pos.shape[0]
        edge_index, shifts = radius_graph(pos, cell, batch.pbc, sys_idx, self.cutoff)
        centre, neighbour = edge_index[0], edge_index[1]
        vectors = pos[neighbour] - pos[centre] + torch.einsum("ek,ekl->el", shifts, cell[sys_idx[centre]])
        r = torch.linalg.vector_norm(vectors, dim=-1)
        edge_basis = self.rbf(r) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)

        h = self.embedding(batch.atomic_numbers)
        for filt, update in zip(self.filters, self.updates, strict=True):
            messages = filt(edge_basis) * h[neighbour]
            agg = torch.zeros(n, self.features, dtype=dtype, device=pos.device).index_add(0, centre, messages)
            h = h + update(agg / self.avg_neighbours)

        e_atom = self.energy_scale * self.readout(h).squeeze(-1)
        energy = torch.zeros(batch.num_systems, dtype=dtype, device=pos.device).index_add(0, sys_idx, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces}


def model_factory() -> HaloUnawareMPNN:
    """A fresh `HaloUnawareMPNN` (float64, eval mode) with the same seeded weights on every call."""
    with seeded(6):
        model = HaloUnawareMPNN()
    return model.double().eval()


def sample_batch() -> Batch:
    """One periodic 10.4 x 10.4 x 52 Å box (320 atoms)."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=61)])


def sample_batch_multi() -> Batch:
    """Two periodic boxes (320 + 352 atoms)."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=61), periodic_slab_system((4, 4, 22), seed=62)])
