"""`SelfGraphMPNN`: a 3-layer message-passing model that builds its own radius graph from positions.

Like PyG models calling `radius_graph`, it finds its edges with torch ops on whatever rows it is
given (every pair closer than the cutoff, minimum image in a periodic cell) and never asks the batch
for a neighbour list. On a rank it therefore sees every edge among its owned and halo rows. Its
per-atom state changes only through per-edge → per-atom aggregations (and per-atom updates of that
state), so the owned-complete policy holds: with a halo one cutoff deep each owned atom sees its whole
neighbourhood, and refreshing the halo rows from their owners after each aggregation keeps every row
exact for the next layer (`SPEC`, scatter mode `owned_complete`). `local` also works, but needs a halo
three cutoffs deep (`LOCAL_SPEC`).

`aggregation` picks how messages reach atoms, in the spellings models use: `index_add`, `scatter_add`,
`helper` (a `torch_scatter`-like Python helper: mean and max, `examples.self_graph_ops`). Two shapes
break the policy's assumption and are wrong under `owned_complete` with its one-cutoff halo, as they
would be in production: `dense` (messages summed by a matrix product over a dense adjacency: no
scatter, so halo rows are never refreshed) and `degree` (scatter aggregation, but each message is
normalised by the sender's degree counted from the dense distance matrix: a per-atom quantity
computed outside any aggregation, wrong on halo atoms whose neighbours lie beyond the halo).
`scripted` aggregates inside TorchScript, which the handlers cannot refresh until the spec sets
`distribution.torchscript: "eager"` (the dispatch observer names the aggregation meanwhile).
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded, spec_copy
from examples.self_graph_ops import scatter
from examples.structures import make_batch, periodic_slab_system

__all__ = [
    "AGGREGATIONS",
    "LOCAL_SPEC",
    "SPEC",
    "SelfGraphMPNN",
    "degree_factory",
    "dense_factory",
    "helper_factory",
    "model_factory",
    "pair_distances",
    "radius_graph",
    "sample_batch",
    "scatter_add_factory",
    "scripted_factory",
    "scripted_index_add",
    "updated_factory",
]

AGGREGATIONS = ("index_add", "scatter_add", "helper", "dense", "degree", "scripted")
_OUTPUT_KINDS = {"energy": "per_graph", "forces": "per_node"}
#: Right for the scatter-aggregating shapes: a one-cutoff halo refreshed after each aggregation.
SPEC = make_spec("owned_complete", _OUTPUT_KINDS)
#: Right for every shape, with a halo as deep as the receptive field (3 cutoffs).
LOCAL_SPEC = make_spec("local", _OUTPUT_KINDS)


def pair_distances(
    positions: torch.Tensor, cell: torch.Tensor, pbc: torch.Tensor, system: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """Minimum-image displacement `d[i, j]` (from `i` to `j`, `[N,N,3]`) and integer cell shifts
    `[N,N,3]` such that `d[i, j] = positions[j] - positions[i] + shifts[i, j] @ cell[system[i]]`.
    Pairs in different systems get shift 0; they are told apart by the caller. A periodic system must
    be fully periodic and at least twice the cutoff wide (minimum image)."""
    d = positions.unsqueeze(0) - positions.unsqueeze(1)
    shifts = torch.zeros_like(d)
    for s in range(cell.shape[0]):
        if not bool(pbc[s].any()):
            continue
        if not bool(pbc[s].all()):
            raise ValueError("radius_graph handles fully periodic or fully open systems only")
        rows = torch.nonzero(system == s).flatten()
        block = d[rows][:, rows]
        frac = block @ torch.linalg.inv(cell[s])
        shift = -torch.round(frac)
        shifts[rows.unsqueeze(1), rows.unsqueeze(0)] = shift
        d[rows.unsqueeze(1), rows.unsqueeze(0)] = block + shift @ cell[s]
    return d, shifts


def radius_graph(
    positions: torch.Tensor, cell: torch.Tensor, pbc: torch.Tensor, system: torch.Tensor, cutoff: float
) -> tuple[torch.Tensor, torch.Tensor]:
    """All directed pairs `(i, j)` of one system closer than `cutoff` (torch ops only, no gradient):
    `edge_index [2,E]` and integer `shifts [E,3]` (see `pair_distances`)."""
    with torch.no_grad():
        d, shifts = pair_distances(positions.detach(), cell, pbc, system)
        r2 = (d * d).sum(dim=-1)
        same = system.unsqueeze(0) == system.unsqueeze(1)
        eye = torch.eye(positions.shape[0], dtype=torch.bool, device=positions.device)
        centre, neighbour = torch.nonzero(same & ~eye & (r2 < cutoff * cutoff), as_tuple=True)
    return torch.stack([centre, neighbour]), shifts[centre, neighbour]


@torch.jit.script
def scripted_index_add(messages: torch.Tensor, centre: torch.Tensor, n: int) -> torch.Tensor:
    """`index_add` of per-edge messages into `n` atom rows, compiled: the Python-level handlers never
    see it (only the dispatch observer does), unless the spec runs TorchScript eagerly."""
    return torch.zeros(n, messages.shape[1], dtype=messages.dtype, device=messages.device).index_add(
        0, centre, messages
    )


def _mlp(features: int, out: int) -> nn.Sequential:
    return nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, out))


class SelfGraphMPNN(nn.Module):
    """Message passing on a self-built radius graph. Outputs `energy [B]`, `forces [N,3]`.

    `aggregation` is one of `AGGREGATIONS` (module docstring); `atom_update` adds a per-atom update of
    the embedding between layers (a gated self-interaction scaled by species), as many models do.
    """

    def __init__(
        self,
        aggregation: str = "index_add",
        atom_update: bool = False,
        num_interactions: int = 3,
        features: int = 16,
        num_basis: int = 8,
        cutoff: float = 3.0,
        avg_neighbours: float = 6.0,
        energy_scale: float = 5.0,
    ) -> None:
        super().__init__()
        if aggregation not in AGGREGATIONS:
            raise ValueError(f"aggregation must be one of {AGGREGATIONS}, got {aggregation!r}")
        self.aggregation = aggregation
        self.atom_update = bool(atom_update)
        self.cutoff = float(cutoff)
        self.num_interactions = int(num_interactions)
        self.features = int(features)
        self.avg_neighbours = float(avg_neighbours)
        self.energy_scale = float(energy_scale)
        self.distribution_spec = spec_copy(SPEC)
        self.embedding = nn.Embedding(MAX_Z, features)
        self.species_scale = nn.Embedding(MAX_Z, features)
        self.rbf = GaussianRBF(num_basis, cutoff)
        filters = [nn.Linear(num_basis, features) for _ in range(num_interactions)]
        for filt in filters:
            nn.init.normal_(filt.weight, std=1.0)
        self.filters = nn.ModuleList(filters)
        self.updates = nn.ModuleList(_mlp(features, features) for _ in range(num_interactions))
        self.self_interactions = nn.ModuleList(nn.Linear(features, features) for _ in range(num_interactions))
        self.readout = _mlp(features, 1)

    def _aggregate(self, messages: torch.Tensor, centre: torch.Tensor, n: int) -> torch.Tensor:
        if self.aggregation == "scatter_add":
            index = centre.unsqueeze(-1).expand_as(messages)
            return torch.zeros(n, self.features, dtype=messages.dtype, device=messages.device).scatter_add(
                0, index, messages
            )
        if self.aggregation == "scripted":
            return scripted_index_add(messages, centre, n)
        if self.aggregation == "helper":
            return scatter(messages, centre, n, "mean") * self.avg_neighbours + scatter(messages, centre, n, "max")
        zeros = torch.zeros(n, self.features, dtype=messages.dtype, device=messages.device)
        return zeros.index_add(0, centre, messages)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        cell, sys_idx, z, n = batch.cell.to(dtype), batch.batch, batch.atomic_numbers, pos.shape[0]
        edge_index, shifts = radius_graph(pos, cell, batch.pbc, sys_idx, self.cutoff)
        centre, neighbour = edge_index[0], edge_index[1]
        vectors = pos[neighbour] - pos[centre] + torch.einsum("ek,ekl->el", shifts, cell[sys_idx[centre]])
        r = torch.linalg.vector_norm(vectors, dim=-1)
        edge_basis = self.rbf(r) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)
        dense_w = torch.zeros(0)
        sender_norm = torch.ones_like(r)
        if self.aggregation in ("dense", "degree"):
            d, _ = pair_distances(pos, cell, batch.pbc, sys_idx)
            same = sys_idx.unsqueeze(0) == sys_idx.unsqueeze(1)
            eye = torch.eye(n, dtype=torch.bool, device=pos.device)
            dist = torch.linalg.vector_norm(d + eye.unsqueeze(-1).to(dtype), dim=-1)
            dense_w = torch.where(same & ~eye & (dist < self.cutoff), cosine_cutoff(dist, self.cutoff), 0.0)
            if self.aggregation == "degree":
                degree = (dense_w > 0).to(dtype).sum(dim=1)  # per atom, counted outside any scatter
                sender_norm = (self.avg_neighbours / degree.clamp(min=1.0))[neighbour]

        h = self.embedding(z)
        for layer, (filt, update) in enumerate(zip(self.filters, self.updates, strict=True)):
            if self.aggregation == "dense":
                agg = dense_w @ h  # every neighbour's state at once: no scatter
            else:
                messages = filt(edge_basis) * h[neighbour] * sender_norm.unsqueeze(-1)
                agg = self._aggregate(messages, centre, n)
            h = h + update(agg / self.avg_neighbours)
            if self.atom_update:
                h = h + torch.tanh(self.self_interactions[layer](h)) * self.species_scale(z)

        e_atom = self.energy_scale * self.readout(h).squeeze(-1)
        energy = torch.zeros(batch.num_systems, dtype=dtype, device=pos.device).index_add(0, sys_idx, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces}


def _factory(aggregation: str, atom_update: bool = False) -> SelfGraphMPNN:
    with seeded(7):
        model = SelfGraphMPNN(aggregation=aggregation, atom_update=atom_update)
    return model.double().eval()


def model_factory() -> SelfGraphMPNN:
    """3 layers, `index_add` aggregation (float64, eval, seeded weights)."""
    return _factory("index_add")


def scatter_add_factory() -> SelfGraphMPNN:
    """3 layers, `torch.scatter_add` aggregation."""
    return _factory("scatter_add")


def helper_factory() -> SelfGraphMPNN:
    """3 layers, aggregation through the `torch_scatter`-like helper (mean and max)."""
    return _factory("helper")


def updated_factory() -> SelfGraphMPNN:
    """3 layers, `index_add`, with a per-atom embedding update between layers."""
    return _factory("index_add", atom_update=True)


def dense_factory() -> SelfGraphMPNN:
    """3 layers summing messages by a dense matrix product (breaks the owned-complete assumption)."""
    return _factory("dense")


def degree_factory() -> SelfGraphMPNN:
    """3 layers, scatter aggregation normalised by a degree counted outside any scatter (breaks it too)."""
    return _factory("degree")


def scripted_factory() -> SelfGraphMPNN:
    """3 layers aggregating inside a TorchScript function (unseen by the handlers while scripted)."""
    return _factory("scripted")


def sample_batch() -> Batch:
    """One periodic 7.8 x 7.8 x 52 Å box (180 atoms): at world size 2 every rank keeps remote atoms
    even with the 9.5 Å halo `local` needs."""
    return make_batch([periodic_slab_system((3, 3, 20), seed=71)])
