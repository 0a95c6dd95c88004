"""A message-passing model whose aggregations are opaque `torch.ops` kernels (registered here with
`torch.library`), and nothing in its spec declares them.

Kernels: `distcheck_example::edge_to_atom` (per-edge messages summed into their receiving atoms,
edges → atoms), `distcheck_example::segment_sum` (per-atom energies summed per system, atoms →
systems), `distcheck_example::edge_sum` (per-edge pair energies summed per system, edges → systems)
and `distcheck_example::shifted_softplus` (elementwise on per-atom rows: it aggregates nothing and
needs no `custom_ops` entry). The runtime cannot see inside a kernel, so on a rank each aggregation
gives a partial until the kernel is declared in `distribution.custom_ops` with the transforms its
shapes call for; distcheck names each one with that entry.

Variants (`model_factory`, `pair_factory`): message passing + readout, and a pair potential.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import GaussianRBF, cosine_cutoff, make_spec, seeded
from examples.structures import make_batch, periodic_slab_system

__all__ = ["SPEC", "CustomOpModel", "PairModel", "model_factory", "pair_factory", "sample_batch"]

CUTOFF = 4.0
FEATURES = 4

SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})
"""The model's spec with no `custom_ops` entry: what a user writes before distcheck names the kernels."""


# -- the kernels --------------------------------------------------------------------------------------
@torch.library.custom_op("distcheck_example::segment_sum", mutates_args=())
def segment_sum(x: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    """Rows of `x` summed by `index` into `num_segments` rows."""
    out = torch.zeros((num_segments, *x.shape[1:]), dtype=x.dtype, device=x.device)
    return out.index_add(0, index, x)


@torch.library.custom_op("distcheck_example::edge_sum", mutates_args=())
def edge_sum(x: torch.Tensor, edge_system: torch.Tensor, num_systems: int) -> torch.Tensor:
    """Per-edge values `x` summed into the system of each edge."""
    return torch.zeros(num_systems, dtype=x.dtype, device=x.device).index_add(0, edge_system, x)


@torch.library.custom_op("distcheck_example::edge_to_atom", mutates_args=())
def edge_to_atom(messages: torch.Tensor, edge_index: torch.Tensor, num_atoms: int) -> torch.Tensor:
    """Per-edge `messages` summed into their receiving atoms (`edge_index[1]`)."""
    out = torch.zeros((num_atoms, *messages.shape[1:]), dtype=messages.dtype, device=messages.device)
    return out.index_add(0, edge_index[1], messages)


@torch.library.custom_op("distcheck_example::shifted_softplus", mutates_args=())
def shifted_softplus(x: torch.Tensor) -> torch.Tensor:
    """`softplus(x) - log 2`, row by row."""
    return torch.nn.functional.softplus(x) - math.log(2.0)


@segment_sum.register_fake
def _segment_sum_fake(x: torch.Tensor, index: torch.Tensor, num_segments: int) -> torch.Tensor:
    return x.new_empty((num_segments, *x.shape[1:]))


@edge_sum.register_fake
def _edge_sum_fake(x: torch.Tensor, edge_system: torch.Tensor, num_systems: int) -> torch.Tensor:
    return x.new_empty(num_systems)


@edge_to_atom.register_fake
def _edge_to_atom_fake(messages: torch.Tensor, edge_index: torch.Tensor, num_atoms: int) -> torch.Tensor:
    return messages.new_empty((num_atoms, *messages.shape[1:]))


@shifted_softplus.register_fake
def _softplus_fake(x: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _keep_index(position: int) -> Callable[[object, tuple[object, ...], object], None]:
    def setup(ctx: object, inputs: tuple[object, ...], output: object) -> None:
        ctx.index = inputs[position]  # type: ignore[attr-defined]

    return setup


def _gather_back(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
    return grad[ctx.index], None, None  # type: ignore[attr-defined]


def _edge_to_atom_back(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
    return grad[ctx.index[1]], None, None  # type: ignore[attr-defined]


def _softplus_setup(ctx: object, inputs: tuple[object, ...], output: object) -> None:
    ctx.x = inputs[0]  # type: ignore[attr-defined]


def _softplus_back(ctx: object, grad: torch.Tensor) -> torch.Tensor:
    return grad * torch.sigmoid(ctx.x)  # type: ignore[attr-defined]


segment_sum.register_autograd(_gather_back, setup_context=_keep_index(1))
edge_sum.register_autograd(_gather_back, setup_context=_keep_index(1))
edge_to_atom.register_autograd(_edge_to_atom_back, setup_context=_keep_index(1))
shifted_softplus.register_autograd(_softplus_back, setup_context=_softplus_setup)


# -- the models ---------------------------------------------------------------------------------------
class CustomOpModel(nn.Module):
    """One message-passing step (edges → atoms), an elementwise activation and a per-system energy
    (atoms → systems), each an opaque kernel; autograd forces."""

    num_interactions = 1

    def __init__(self) -> None:
        super().__init__()
        self.cutoff = CUTOFF
        with seeded(7):
            self.embed = nn.Parameter(torch.randn(20, FEATURES, dtype=torch.float64) * 0.5)
            self.readout = nn.Parameter(torch.randn(FEATURES, dtype=torch.float64) * 0.5)
        self.rbf = GaussianRBF(FEATURES, CUTOFF)
        self.distribution_spec = SPEC

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        h = self.embed[batch.atomic_numbers % 20]
        messages = h[nl.edge_index[0]] * self.rbf(r).to(h.dtype) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)
        agg = torch.ops.distcheck_example.edge_to_atom(messages, nl.edge_index, pos.shape[0])  # kernel: edges
        x = torch.ops.distcheck_example.shifted_softplus(h + agg)  # kernel: elementwise
        e = x @ self.readout
        energy = torch.ops.distcheck_example.segment_sum(e, batch.batch, batch.num_systems)  # kernel: atoms
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


class PairModel(nn.Module):
    """A pair potential whose per-system energy sums per-edge terms in an opaque kernel (edges → systems)."""

    num_interactions = 1

    def __init__(self) -> None:
        super().__init__()
        self.cutoff = CUTOFF
        self.scale = nn.Parameter(torch.tensor(0.4, dtype=torch.float64))
        self.distribution_spec = SPEC

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        pair = 0.5 * self.scale * torch.exp(-r) * cosine_cutoff(r, self.cutoff)
        edge_system = batch.batch[nl.edge_index[0]]
        energy = torch.ops.distcheck_example.edge_sum(pair, edge_system, batch.num_systems)  # kernel: pairs
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def model_factory() -> CustomOpModel:
    """The message-passing model."""
    return CustomOpModel()


def pair_factory() -> PairModel:
    """The pair potential."""
    return PairModel()


def sample_batch() -> Batch:
    """A small periodic slab (108 atoms, 31 Å along z): two ranks each have remote atoms."""
    return make_batch([periodic_slab_system((3, 3, 12), seed=3)])
