"""A reciprocal-space (Ewald-like) energy whose structure factor is an opaque `torch.ops` kernel mapping
atoms to k-vectors, a per-system reduction in disguise: `S(k) = sum_i q_i exp(i k . r_i)` into a
`[num_k, 2]` tensor (cosine and sine parts), neither per-atom, per-edge nor per-system.

`distcheck_example::structure_factor` is registered here with `torch.library` (with its autograd, so
forces come from it). On a rank it sums only the atoms that rank holds, so until it is declared in
`distribution.custom_ops` (`STRUCTURE_FACTOR_ENTRY`: slice the per-atom arguments to the owned atoms,
sum the output over ranks) every rank's energy is a partial. The energy adds the accuracy corpus's
pair potential, so the model also has neighbours.
"""

from __future__ import annotations

import math
from typing import Any

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, spec_with
from examples.structures import make_batch, periodic_slab_system

__all__ = [
    "SPEC",
    "STRUCTURE_FACTOR_ENTRY",
    "EwaldModel",
    "buggy_model_factory",
    "model_factory",
    "sample_batch",
    "structure_factor",
]

SPEC = spec_with({})
STRUCTURE_FACTOR_ENTRY: dict[str, Any] = {
    "op": "distcheck_example::structure_factor",
    "arg_transforms": {"0": "slice_owned", "1": "slice_owned"},
    "output_transforms": {"0": "all_reduce_sum"},
}
"""The `custom_ops` entry that routes the kernel."""


@torch.library.custom_op("distcheck_example::structure_factor", mutates_args=())
def structure_factor(positions: torch.Tensor, charges: torch.Tensor, kvectors: torch.Tensor) -> torch.Tensor:
    """`[num_k, 2]`: per k-vector, `sum_i q_i cos(k . r_i)` and `sum_i q_i sin(k . r_i)`."""
    phase = positions @ kvectors.T
    return torch.stack([(charges[:, None] * torch.cos(phase)).sum(0), (charges[:, None] * torch.sin(phase)).sum(0)], -1)


@structure_factor.register_fake
def _structure_factor_fake(positions: torch.Tensor, charges: torch.Tensor, kvectors: torch.Tensor) -> torch.Tensor:
    return positions.new_empty((kvectors.shape[0], 2))


def _setup(ctx: Any, inputs: tuple[torch.Tensor, ...], output: torch.Tensor) -> None:
    ctx.save_for_backward(*inputs)


def _backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None]:
    positions, charges, kvectors = ctx.saved_tensors
    phase = positions @ kvectors.T
    cos, sin = torch.cos(phase), torch.sin(phase)
    # d/dr_i of q_i cos(k.r_i) = -q_i sin(k.r_i) k ; of q_i sin(k.r_i) = q_i cos(k.r_i) k
    dphase = charges[:, None] * (-sin * grad[:, 0] + cos * grad[:, 1])
    dcharges = (cos * grad[:, 0] + sin * grad[:, 1]).sum(-1)
    return dphase @ kvectors, dcharges, None


torch.library.register_autograd("distcheck_example::structure_factor", _backward, setup_context=_setup)


class EwaldModel(AccuracyModel):
    """The pair potential plus `sum_k w_k |S(k)|^2` over a few k-vectors of the (single) box."""

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        e_atom = self.atom_energies(batch, pos)
        energy = self.to_systems(e_atom, batch)
        charges = 0.1 * (batch.atomic_numbers.to(pos.dtype) - 4.0)
        lengths = torch.linalg.vector_norm(batch.cell[0], dim=-1)
        n = torch.tensor([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0, 0, 2], [1, 1, 0], [0, 1, 1], [1, 0, 1]])
        kvectors = 2.0 * math.pi * n.to(pos.dtype) / lengths
        weights = torch.exp(-0.25 * (kvectors**2).sum(-1)) / (kvectors**2).sum(-1)
        s = torch.ops.distcheck_example.structure_factor(pos, charges, kvectors)
        energy = energy + 0.01 * (weights * (s**2).sum(-1)).sum()
        return {"energy": energy, "forces": self.forces(energy, pos)}


def model_factory() -> EwaldModel:
    """A correct model whose structure-factor kernel is undeclared."""
    return EwaldModel()


def buggy_model_factory() -> EwaldModel:
    """The same model with the corpus's row-0 bug: must fail even with the kernel declared."""
    return EwaldModel(bug=True)


def sample_batch() -> Batch:
    """One periodic H/C/O box, 7.8 x 7.8 x 31.2 Å (108 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 12), seed=21)])
