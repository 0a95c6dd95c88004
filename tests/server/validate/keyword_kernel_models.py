"""A model whose opaque `torch.ops` kernels receive their per-atom tensors BY KEYWORD, with no
`custom_ops` entry: `distcheck_kwtest::neighbour_sum(h=..., weights=..., edge_index=..., num_atoms=...)`
(each atom's neighbours' features weighted per edge and summed into it: edges → atoms, its per-atom
input `h` needing a halo refresh) and `examples.custom_op_model`'s `segment_sum(x=..., index=...,
num_segments=...)` (atoms → systems). On a rank each gives a partial until declared; distcheck must
name both with a ready entry whose positions reach the keyword arguments.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples import custom_op_model  # registers distcheck_example::segment_sum
from examples.common import GaussianRBF, cosine_cutoff, make_spec, seeded

NEIGHBOUR_SUM = "distcheck_kwtest::neighbour_sum"
SEGMENT_SUM = "distcheck_example::segment_sum"
SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})
CUTOFF = custom_op_model.CUTOFF
FEATURES = 4


@torch.library.custom_op(NEIGHBOUR_SUM, mutates_args=())
def neighbour_sum(h: torch.Tensor, weights: torch.Tensor, edge_index: torch.Tensor, num_atoms: int) -> torch.Tensor:
    """`out[i] = sum over edges (i, j) of weights[e] * h[j]`."""
    out = torch.zeros((num_atoms, *h.shape[1:]), dtype=h.dtype, device=h.device)
    return out.index_add(0, edge_index[0], weights.unsqueeze(-1) * h[edge_index[1]])


@neighbour_sum.register_fake
def _neighbour_sum_fake(
    h: torch.Tensor, weights: torch.Tensor, edge_index: torch.Tensor, num_atoms: int
) -> torch.Tensor:
    return h.new_empty((num_atoms, *h.shape[1:]))


def _setup(ctx: object, inputs: tuple[object, ...], output: object) -> None:
    ctx.saved = inputs[:3]  # type: ignore[attr-defined]


def _backward(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None]:
    h, weights, edge_index = ctx.saved  # type: ignore[attr-defined]
    centre, neighbour = edge_index[0], edge_index[1]
    grad_h = torch.zeros_like(h).index_add(0, neighbour, weights.unsqueeze(-1) * grad[centre])
    grad_w = (grad[centre] * h[neighbour]).sum(dim=-1)
    return grad_h, grad_w, None, None


neighbour_sum.register_autograd(_backward, setup_context=_setup)


class KeywordKernelModel(nn.Module):
    """Embedding, one neighbour sum (edges → atoms) and a per-system energy (atoms → systems), both
    kernels called with keywords; autograd forces."""

    num_interactions = 1

    def __init__(self) -> None:
        super().__init__()
        self.cutoff = CUTOFF
        with seeded(9):
            self.embed = nn.Parameter(torch.randn(20, FEATURES, dtype=torch.float64) * 0.5)
            self.readout = nn.Parameter(torch.randn(FEATURES, dtype=torch.float64) * 0.5)
        self.rbf = GaussianRBF(FEATURES, CUTOFF)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        weights = self.rbf(r).sum(dim=-1).to(pos.dtype) * cosine_cutoff(r, self.cutoff)
        h = self.embed[batch.atomic_numbers % 20]
        agg = torch.ops.distcheck_kwtest.neighbour_sum(  # kernel: neighbours
            h=h, weights=weights, edge_index=nl.edge_index, num_atoms=pos.shape[0]
        )
        e = torch.tanh(h + agg) @ self.readout
        energy = torch.ops.distcheck_example.segment_sum(  # kernel: systems
            x=e, index=batch.batch, num_segments=batch.num_systems
        )
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def model_factory() -> KeywordKernelModel:
    return KeywordKernelModel()


def sample_batch() -> Batch:
    return custom_op_model.sample_batch()
