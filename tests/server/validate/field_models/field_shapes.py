"""Message-passing models whose receptive field is read wrong by a measurement without a noise floor.

`FieldMPNN(layers, declared_depth, cutoff, true_cutoff, dtype, centred, reorder)`: `layers` rounds of
`h_i <- h_i + MLP(sum_j W(rbf_ij) h_j)` over the pairs within `true_cutoff` (taken from
`batch.neighbor_list(true_cutoff)`), a per-atom energy summed per system by `index_add`, autograd
forces. It declares `cutoff` and `num_interactions = declared_depth`. In float32 the round-off that a
displaced atom leaves in every atom's value is what an exact-zero threshold reads as reach:

- `centred`: positions are centred on each system's mean first (a per-system quantity fed back into
  every coordinate: one displaced atom moves every coordinate by round-off);
- `reorder`: the messages are summed in the order of their distances (`argsort`), so the probe's own
  move reorders sums far away when float32 ties break differently.

`strong` passes messages as `h_i <- h_i + tanh(sum_j W(rbf_ij) h_j)`: each hop passes on a change
large enough for float32 to show three hops away (the MLP update damps it a hundredfold per hop).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import GaussianRBF, cosine_cutoff, make_spec, seeded
from examples.structures import cluster_system, make_batch, periodic_slab_system

SPEC = make_spec("local", {"energy": "per_graph", "forces": "per_node"})


class FieldMPNN(nn.Module):
    """See the module docstring. Outputs `energy [B]` and `forces [N,3]`."""

    def __init__(
        self,
        layers: int,
        declared_depth: int,
        cutoff: float,
        true_cutoff: float | None = None,
        dtype: torch.dtype = torch.float64,
        centred: bool = False,
        reorder: bool = False,
        weight_scale: float = 1.0,
        features: int = 16,
        strong: bool = False,
    ) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.true_cutoff = float(true_cutoff if true_cutoff is not None else cutoff)
        self.num_interactions = int(declared_depth)
        self.distribution_spec = dict(SPEC)
        self.centred, self.reorder, self.strong = centred, reorder, strong
        with seeded(7):
            self.embedding = nn.Embedding(100, features)
            self.rbf = GaussianRBF(8, self.true_cutoff)
            self.filters = nn.ModuleList(nn.Linear(8, features) for _ in range(layers))
            self.updates = nn.ModuleList(
                nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, features))
                for _ in range(layers)
            )
            self.readout = nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, 1))
        with torch.no_grad():
            for filt in self.filters:
                assert isinstance(filt, nn.Linear)
                filt.weight.mul_(weight_scale)
        self.to(dtype).eval()

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        n = pos.shape[0]
        x = pos
        if self.centred:
            counts = torch.bincount(batch.batch, minlength=batch.num_systems).to(dtype).unsqueeze(-1)
            mean = torch.zeros(batch.num_systems, 3, dtype=dtype).index_add(0, batch.batch, pos) / counts
            x = pos - mean[batch.batch]
        nl = batch.neighbor_list(self.true_cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        cell = batch.cell.to(dtype)
        shift = torch.einsum("ek,ekl->el", nl.shifts.to(dtype), cell[batch.batch[centre]])
        r = torch.linalg.vector_norm(x[neighbour] - x[centre] + shift, dim=-1)
        if self.reorder:
            order = torch.argsort(r.detach())
            centre, neighbour, r = centre[order], neighbour[order], r[order]
        edge_basis = self.rbf(r) * cosine_cutoff(r, self.true_cutoff).unsqueeze(-1)
        h = self.embedding(batch.atomic_numbers)
        for filt, update in zip(self.filters, self.updates, strict=True):
            messages = filt(edge_basis) * h[neighbour]
            agg = torch.zeros(n, h.shape[1], dtype=dtype).index_add(0, centre, messages)
            h = h + (torch.tanh(agg) if self.strong else update(agg / 4.0))
        e_atom = 5.0 * self.readout(h).squeeze(-1)
        energy = torch.zeros(batch.num_systems, dtype=dtype).index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def model(**kwargs: Any) -> FieldMPNN:
    """A `FieldMPNN` with the given settings (see the class)."""
    return FieldMPNN(**kwargs)


def periodic_sample(dtype: torch.dtype = torch.float64) -> Batch:
    """One periodic 7.8 × 7.8 × 62.4 Å box (216 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 24), seed=3)], dtype=dtype)


def open_sample(dtype: torch.dtype = torch.float64) -> Batch:
    """Two open rods (72 and 96 atoms)."""
    return make_batch([cluster_system((3, 3, 8), seed=1), cluster_system((2, 4, 12), seed=2)], dtype=dtype)


__all__ = [
    "SPEC",
    "FieldMPNN",
    "factory_cutoff_short",
    "factory_float32_centred",
    "model",
    "open_sample",
    "periodic_sample",
    "sample_batch",
]


def factory_cutoff_short() -> FieldMPNN:
    """One layer over the pairs within 4 Å, declaring a 3 Å cutoff (float64)."""
    return FieldMPNN(layers=1, declared_depth=1, cutoff=3.0, true_cutoff=4.0)


def factory_float32_centred() -> FieldMPNN:
    """Two float32 layers over centred positions, declared right."""
    return FieldMPNN(layers=2, declared_depth=2, cutoff=3.0, dtype=torch.float32, centred=True, weight_scale=3.0)


def sample_batch() -> Batch:
    """The periodic slab (`periodic_sample`)."""
    return periodic_sample()
