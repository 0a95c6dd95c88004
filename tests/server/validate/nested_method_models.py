"""Models whose per-system energy goes through a helper method of `lazy_pkg.nested`, called with the
per-atom tensor passed BY KEYWORD: a static method of a nested class (`Outer.Inner.static_sum`) and a
class method a subclass inherits (`Child.class_sum`). The pair energies are routed by the runtime; the
sum inside the helper (TorchScript) is not, so each fails until a `method` adapter is declared."""

from __future__ import annotations

from collections.abc import Callable

import torch
from lazy_pkg import nested
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff, make_spec
from examples.structures import make_batch, periodic_slab_system

MODULE = "lazy_pkg.nested"
SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})
"""No adapter for the helper method (the failure to find)."""

CALLS: dict[str, Callable[[torch.Tensor, torch.Tensor, int], torch.Tensor]] = {
    "Outer.Inner.static_sum": lambda e, b, n: nested.Outer.Inner.static_sum(e=e, batch=b, n=n),
    "Child.class_sum": lambda e, b, n: nested.Child().class_sum(e=e, batch=b, n=n),
}
"""attr_name → the call the model makes (keywords only)."""


class KeywordHelperModel(nn.Module):
    """`energy[m]` = the helper's per-system sum of per-atom pair energies; `forces` = -dE/dpos."""

    num_interactions = 1

    def __init__(self, attr: str, cutoff: float = 4.0) -> None:
        super().__init__()
        self.cutoff = cutoff
        self.call = CALLS[attr]
        self.strength = nn.Parameter(torch.tensor(0.7, dtype=torch.float64))

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(torch.float64), batch.batch), dim=-1)
        pair = self.strength * torch.exp(-r) * cosine_cutoff(r, self.cutoff)
        e_atom = torch.zeros(pos.shape[0], dtype=pos.dtype).index_add(0, nl.edge_index[0], pair)
        energy = self.call(e_atom + 0.1 * batch.atomic_numbers, batch.batch, batch.num_systems)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def nested_static_factory() -> KeywordHelperModel:
    return KeywordHelperModel("Outer.Inner.static_sum")


def inherited_class_factory() -> KeywordHelperModel:
    return KeywordHelperModel("Child.class_sum")


FACTORIES = {"Outer.Inner.static_sum": nested_static_factory, "Child.class_sum": inherited_class_factory}


def sample_batch() -> Batch:
    """Two small periodic boxes elongated along z."""
    return make_batch([periodic_slab_system((3, 3, 14), seed=7), periodic_slab_system((2, 3, 16), seed=8)])
