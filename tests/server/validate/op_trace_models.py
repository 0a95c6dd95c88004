"""One model, its per-system energy reduced from per-atom energies in a form no handler routes: each
rank's energy then counts the rows it holds (owned and halo), the ranks disagree on the energy and its
forces depart from the reference (`routed`, a plain sum, passes). Each form's line carries an
`# op: <form>` marker; the `helper` form's reduction is in `op_trace_helper.py`. One periodic box
(144 atoms), world size 2.
"""

from __future__ import annotations

import torch
from op_trace_helper import total
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff
from examples.structures import make_batch, periodic_slab_system

CUTOFF = 4.0
FORMS = ("matmul", "einsum", "mm", "cumsum", "view_sum", "helper")
"""The unrouted forms; `routed` (a plain sum over the atoms, which the handlers route) is the control."""


def reduce(form: str, e: torch.Tensor) -> torch.Tensor:
    """The one-element total of the per-atom energies `e`, written as `form`."""
    if form == "matmul":
        return (e @ torch.ones_like(e)).reshape(1)  # op: matmul
    if form == "einsum":
        return torch.einsum("i->", e).reshape(1)  # op: einsum
    if form == "mm":
        return torch.mm(e.unsqueeze(0), torch.ones_like(e).unsqueeze(1)).reshape(1)  # op: mm
    if form == "cumsum":
        return torch.cumsum(e, 0)[-1].reshape(1)  # op: cumsum
    if form == "routed":
        return e.sum().reshape(1)
    if form == "view_sum":
        halves = torch.stack([0.5 * e, 0.5 * e], dim=1)
        return halves.view(-1).sum().reshape(1)  # op: view_sum
    return total(e)


class Pair(nn.Module):
    """Per-atom pair energies (routed: an `index_add` over the edges)."""

    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def forward(self, batch: Batch, pos: torch.Tensor) -> torch.Tensor:
        nl = batch.neighbor_list(CUTOFF)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        phi = self.scale * torch.exp(-r) * cosine_cutoff(r, CUTOFF)
        return 0.5 * torch.zeros(pos.shape[0], dtype=pos.dtype, device=pos.device).index_add(0, nl.edge_index[0], phi)


class Readout(nn.Module):
    """Per-atom → per-system in the form `form`."""

    def __init__(self, form: str) -> None:
        super().__init__()
        self.form = form

    def forward(self, e_atom: torch.Tensor) -> torch.Tensor:
        return reduce(self.form, e_atom)


class ReductionModel(nn.Module):
    """Outputs `energy [1]`, `forces [N,3]` (autograd)."""

    num_interactions = 1
    cutoff = CUTOFF

    def __init__(self, form: str) -> None:
        super().__init__()
        self.pair = Pair()
        self.readout = Readout(form)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().to(torch.float64).requires_grad_(True)
        energy = self.readout(self.pair(batch, pos))
        return {"energy": energy.detach(), "forces": -torch.autograd.grad(energy.sum(), pos)[0]}


def factory_matmul() -> ReductionModel:
    return ReductionModel("matmul")


def factory_einsum() -> ReductionModel:
    return ReductionModel("einsum")


def factory_mm() -> ReductionModel:
    return ReductionModel("mm")


def factory_cumsum() -> ReductionModel:
    return ReductionModel("cumsum")


def factory_view_sum() -> ReductionModel:
    return ReductionModel("view_sum")


def factory_helper() -> ReductionModel:
    return ReductionModel("helper")


def factory_routed() -> ReductionModel:
    return ReductionModel("routed")


model_factory = factory_matmul


def sample_batch() -> Batch:
    """One periodic H/C/O box, 7.8 x 7.8 x 41.6 Å (144 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 16), seed=41)])
