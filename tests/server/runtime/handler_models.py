"""Small models that each route their per-system reduction through a different torch op.

Imported by path in rank processes (`tests/server/runtime/handler_models.py:factory_<variant>`).
Every model is a smooth pair potential: per-atom energies `e_i`, a per-system reduction of them by
the variant's op, autograd forces, and the per-atom energies as an owned-only output so a test can
check exactly which atoms a rank counted.
"""

from __future__ import annotations

import torch
from torch import nn

from distcheck.batch import Batch
from examples.structures import make_batch, periodic_slab_system

CUTOFF = 4.0


@torch.library.custom_op("distcheck_test::system_sum", mutates_args=())
def system_sum(x: torch.Tensor, index: torch.Tensor, num_systems: int) -> torch.Tensor:
    """An opaque kernel: per-system sum of `x` by `index`."""
    return torch.zeros(num_systems, dtype=x.dtype, device=x.device).index_add(0, index, x)


@system_sum.register_fake
def _system_sum_fake(x: torch.Tensor, index: torch.Tensor, num_systems: int) -> torch.Tensor:
    return x.new_empty(num_systems)


def _system_sum_setup(ctx: object, inputs: tuple[object, ...], output: object) -> None:
    ctx.index = inputs[1]  # type: ignore[attr-defined]


def _system_sum_backward(ctx: object, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
    return grad[ctx.index], None, None  # type: ignore[attr-defined]


system_sum.register_autograd(_system_sum_backward, setup_context=_system_sum_setup)


class ReductionVariant(nn.Module):
    """Pair potential whose per-atom → per-system energy sum uses op `variant`."""

    num_interactions = 1

    def __init__(self, variant: str) -> None:
        super().__init__()
        self.variant = variant
        self.cutoff = CUTOFF
        self.scale = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def per_atom(self, batch: Batch, pos: torch.Tensor) -> torch.Tensor:
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        fc = 0.5 * (torch.cos(torch.pi * r / self.cutoff) + 1.0)
        phi = self.scale * torch.exp(-r) * fc * (1.0 + 0.1 * batch.atomic_numbers[nl.edge_index[1]])
        out = torch.zeros(pos.shape[0], dtype=pos.dtype, device=pos.device)
        return out.index_add(0, nl.edge_index[0], phi)

    def reduce(self, batch: Batch, e: torch.Tensor) -> torch.Tensor:
        b, n = batch.batch, batch.num_systems
        zeros = torch.zeros(n, dtype=e.dtype, device=e.device)
        v = self.variant
        if v == "index_add":
            return zeros.index_add(0, b, e)
        if v == "index_add_dropped":
            zeros.index_add_(0, b, e)  # in-place, return value dropped: the tensor must hold the result
            return zeros
        if v == "torch_index_add":
            return torch.index_add(zeros, 0, b, e)
        if v == "scatter_add":
            return zeros.scatter_add(0, b, e)
        if v == "scatter_add_2d":
            e2 = torch.stack([e, 2 * e], dim=1)
            out = torch.zeros(n, 2, dtype=e.dtype, device=e.device).scatter_add_(0, b[:, None].expand(-1, 2), e2)
            return out[:, 0]
        if v == "scatter_reduce_sum":
            return zeros.scatter_reduce(0, b, e, reduce="sum", include_self=False)
        if v == "scatter_reduce_mean":
            counts = torch.bincount(b, minlength=n).to(e.dtype)
            return zeros.scatter_reduce(0, b, e, reduce="mean", include_self=False) * counts
        if v == "segment_sum":
            return torch.segment_reduce(e, "sum", lengths=torch.bincount(b, minlength=n))
        if v == "segment_mean":
            lengths = torch.bincount(b, minlength=n)
            return torch.segment_reduce(e, "mean", lengths=lengths) * lengths.to(e.dtype)
        if v == "bincount_mean":
            return zeros.index_add(0, b, e) / torch.bincount(b, minlength=n).to(e.dtype)
        if v == "tensor_sum":
            return e.sum().reshape(1)
        if v == "custom_op":
            return torch.ops.distcheck_test.system_sum(e, b, n)
        raise ValueError(v)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        e = self.per_atom(batch, pos)
        energy = self.reduce(batch, e)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces, "atomic_energies": e.detach()}


class MaxModel(nn.Module):
    """Largest per-atom energy of each system (scatter_reduce amax), no forces."""

    num_interactions = 1
    cutoff = CUTOFF

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        e = ReductionVariant("index_add").per_atom(batch, batch.positions)
        out = torch.full((batch.num_systems,), -1e30, dtype=e.dtype)
        return {"emax": out.scatter_reduce(0, batch.batch, e, reduce="amax", include_self=False)}


def _factory(variant: str) -> ReductionVariant:
    return ReductionVariant(variant).double()


def factory_index_add() -> ReductionVariant:
    return _factory("index_add")


def factory_index_add_dropped() -> ReductionVariant:
    return _factory("index_add_dropped")


def factory_torch_index_add() -> ReductionVariant:
    return _factory("torch_index_add")


def factory_scatter_add() -> ReductionVariant:
    return _factory("scatter_add")


def factory_scatter_add_2d() -> ReductionVariant:
    return _factory("scatter_add_2d")


def factory_scatter_reduce_sum() -> ReductionVariant:
    return _factory("scatter_reduce_sum")


def factory_scatter_reduce_mean() -> ReductionVariant:
    return _factory("scatter_reduce_mean")


def factory_segment_sum() -> ReductionVariant:
    return _factory("segment_sum")


def factory_segment_mean() -> ReductionVariant:
    return _factory("segment_mean")


def factory_bincount_mean() -> ReductionVariant:
    return _factory("bincount_mean")


def factory_tensor_sum() -> ReductionVariant:
    return _factory("tensor_sum")


def factory_custom_op() -> ReductionVariant:
    return _factory("custom_op")


def factory_max() -> MaxModel:
    return MaxModel()


def sample_single() -> Batch:
    return make_batch([periodic_slab_system((4, 4, 16), seed=5)])


def sample_multi() -> Batch:
    return make_batch([periodic_slab_system((4, 4, 16), seed=5), periodic_slab_system((4, 4, 18), seed=6)])
