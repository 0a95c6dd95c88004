"""Models whose per-system energy goes through a method of a class of a watched third-party package
(`examples.thirdparty.methods`), one factory per shape of method: a plain instance method, an
`nn.Module`'s `forward` reached through `__call__`, a `forward` a subclass inherits, a staticmethod
and a classmethod. The methods sum inside TorchScript, so on a rank they sum owned and halo rows
unless a `method` adapter is declared; everything else (the pair energies) the runtime routes itself.
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff, make_spec
from examples.structures import make_batch, periodic_slab_system
from examples.thirdparty import methods

MODULE = "examples.thirdparty.methods"
OUTPUT_KINDS = {"energy": "per_graph", "forces": "per_node"}
SPEC = make_spec("halo_correction", OUTPUT_KINDS)
"""The spec each model ships with: no adapter for its helper method (the failure to find)."""

SHAPES: dict[str, tuple[Callable[[], object], Callable[..., torch.Tensor]]] = {
    "Calculator.energy": (lambda: methods.Calculator(1.0), lambda c, *a: c.energy(*a)),
    "MolSum.forward": (methods.MolSum, lambda m, *a: m(*a)),
    "ScaledMolSum.forward": (methods.ScaledMolSum, lambda m, *a: m(*a)),
    "Ops.static_sum": (lambda: methods.Ops, lambda ops, *a: ops.static_sum(*a)),
    "Ops.class_sum": (methods.Ops, lambda ops, *a: ops.class_sum(*a)),
}
"""The helper's `attr_name` → (the object the model holds, how its forward calls the method on it: looked
up at each call, as a model's code does)."""


class PairEnergy(nn.Module):
    """`energy[m]` = the helper's per-system sum of per-atom pair energies; `forces` = -dE/dpos."""

    num_interactions = 1

    def __init__(self, shape: str, cutoff: float = 4.0) -> None:
        super().__init__()
        self.cutoff = cutoff
        self.shape = shape
        make, self.call = SHAPES[shape]
        self.holder = make()
        self.strength = nn.Parameter(torch.tensor(0.7, dtype=torch.float64))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        centre = nl.edge_index[0]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(torch.float64), batch.batch), dim=-1)
        pair = self.strength * torch.exp(-r) * cosine_cutoff(r, self.cutoff)
        e_atom = torch.zeros(pos.shape[0], dtype=pos.dtype).index_add(0, centre, pair) + 0.1 * batch.atomic_numbers
        energy = self.call(self.holder, e_atom, batch.batch, batch.num_systems)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def factory_instance() -> PairEnergy:
    return PairEnergy("Calculator.energy")


def factory_module_forward() -> PairEnergy:
    return PairEnergy("MolSum.forward")


def factory_inherited() -> PairEnergy:
    return PairEnergy("ScaledMolSum.forward")


def factory_static() -> PairEnergy:
    return PairEnergy("Ops.static_sum")


def factory_class() -> PairEnergy:
    return PairEnergy("Ops.class_sum")


FACTORIES: dict[str, Callable[[], PairEnergy]] = {
    "Calculator.energy": factory_instance,
    "MolSum.forward": factory_module_forward,
    "ScaledMolSum.forward": factory_inherited,
    "Ops.static_sum": factory_static,
    "Ops.class_sum": factory_class,
}


def sample_batch() -> Batch:
    """Two small periodic boxes elongated along z (126 and 96 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 14), seed=7), periodic_slab_system((2, 3, 16), seed=8)])
