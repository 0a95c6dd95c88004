"""SchNet (`torch_geometric.nn.models.SchNet`, torch-geometric 2.8.1) behind a distcheck wrapper.

A small SchNet with random weights: 3 interactions, 16 channels, 16 filters, 16 Gaussians, 5 Å
cutoff, float64. Energy plus autograd forces.

SchNet's default `interaction_graph` calls `radius_graph`, which needs a compiled extension (pyg-lib
is not on PyPI; torch-cluster 1.6.3 on PyPI is a source distribution whose build needs torch at build
time and fails under pip's build isolation), and it ignores periodic boundaries. Here
`VesinInteractionGraph` replaces it: it takes the neighbour list from `batch.neighbor_list(cutoff)`
(vesin, periodic, halo-aware on a rank) and recomputes the edge lengths from the positions SchNet
passes in, so forces flow through autograd. Messages (`CFConv`, `MessagePassing` with `aggr="add"`)
and the `add` readout both end in `scatter_add_` (`torch_geometric.utils.scatter`), which the runtime
intercepts: per-edge sums are halo-corrected, the per-system readout masked and all-reduced.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import torch
from torch import nn

from distcheck.batch import Batch, NeighborList
from examples.common import make_spec, seeded
from examples.real.common import real_sample_batch, real_sample_batch_multi

__all__ = [
    "SPEC",
    "SchNetWrapper",
    "VesinInteractionGraph",
    "build_schnet",
    "model_factory",
    "sample_batch",
    "sample_batch_multi",
]

#: The spec distcheck infers for this wrapper (and validates).
SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})


class VesinInteractionGraph(nn.Module):
    """SchNet's `interaction_graph(pos, batch) -> (edge_index, edge_weight)` from a bound vesin list.

    Call it inside `bound(batch)`, which asks `batch` for its neighbour list once per forward; the
    edge lengths are recomputed from the `pos` SchNet passes (periodic images included through
    the integer shifts and the cell), so they are differentiable in the positions.
    """

    def __init__(self, cutoff: float) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self._bound: tuple[NeighborList, torch.Tensor, torch.Tensor] | None = None

    @contextmanager
    def bound(self, batch: Batch) -> Iterator[NeighborList]:
        """Use `batch`'s neighbour list (cutoff `self.cutoff`) for the calls made in the block."""
        nl = batch.neighbor_list(self.cutoff)
        self._bound = (nl, batch.cell, batch.batch)
        try:
            yield nl
        finally:
            self._bound = None

    def forward(self, pos: torch.Tensor, batch: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        if self._bound is None:
            raise RuntimeError("VesinInteractionGraph: call it inside `with graph.bound(batch):`")
        nl, cell, system = self._bound
        if system.shape[0] != pos.shape[0]:
            raise ValueError(f"VesinInteractionGraph: bound to {system.shape[0]} atoms, called with {pos.shape[0]}")
        vectors = nl.vectors(pos, cell.to(pos.dtype), system)
        return nl.edge_index, torch.linalg.vector_norm(vectors, dim=-1)


def build_schnet(cutoff: float = 5.0, num_interactions: int = 3) -> nn.Module:
    """A small `torch_geometric.nn.models.SchNet` with a `VesinInteractionGraph` (float64, eval mode)."""
    from torch_geometric.nn.models import SchNet

    model = SchNet(
        hidden_channels=16,
        num_filters=16,
        num_interactions=int(num_interactions),
        num_gaussians=16,
        cutoff=float(cutoff),
        interaction_graph=VesinInteractionGraph(cutoff),
        readout="add",
    )
    return model.double().eval()


class SchNetWrapper(nn.Module):
    """`forward(batch) -> {"energy" [B], "forces" [N,3]}` around a PyG SchNet."""

    def __init__(self, model: nn.Module, cutoff: float, num_interactions: int) -> None:
        super().__init__()
        self.model = model
        self.cutoff = float(cutoff)
        self.num_interactions = int(num_interactions)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        graph: VesinInteractionGraph = self.model.interaction_graph  # type: ignore[assignment]
        with graph.bound(batch):
            energy = self.model(batch.atomic_numbers, pos, batch.batch).reshape(-1)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces}


def model_factory() -> SchNetWrapper:
    """A fresh wrapper around the same seeded small SchNet on every call (float64, eval mode)."""
    cutoff, depth = 5.0, 3
    with seeded(17):
        model = build_schnet(cutoff, depth)
    return SchNetWrapper(model, cutoff, depth).eval()


def sample_batch() -> Batch:
    """384 atoms (H, C, N, O) in a periodic 10.4 x 10.4 x 62.4 Å box."""
    return real_sample_batch(seed=41)


def sample_batch_multi() -> Batch:
    """Two periodic boxes (384 + 352 atoms, total charges +1 and -1) in one batch."""
    return real_sample_batch_multi(seed=41)
