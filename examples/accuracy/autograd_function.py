"""Message passing wrapped in the user's own `torch.autograd.Function`s, with hand-written backwards.

A Function's forward runs with autograd off and its backward is the user's code, so the adjoint of an
aggregation inside it is whatever the user wrote (the gather of the aggregated gradient). Every
variant is a correct single-process model; `FORMS` names them:

  `layer`        one Function per layer wraps the edges → atoms `index_add_` (backward: `index_select`)
  `setup_context` the layer Function written with `setup_context` (its forward gets no ctx)
  `block`        one Function wraps the whole message step: gather, filter, aggregate (backward by hand)
  `scatter_add`  the layer Function with `scatter_add` on an expanded index (backward: `torch.gather`)
  `amax`         the layer Function aggregating by `scatter_reduce(amax)` (backward: the argmax mask)
  `energy_only`  the layer Function, energy only (no autograd through it)
  `readout`      the atoms → systems energy sum in a Function (backward: the gather by the system index)
  `generic`      one `ScatterSum` Function for every aggregation: edges → atoms and atoms → systems
  `total`        the energy as `e_atom.sum()` in a Function (backward: `expand`), one system: no index to
                 mirror, so it is named
  `nested`       a Function whose forward applies `EdgeSum` (no graph there) and divides; its own backward
  `recompute`    the whole interaction block (messages, aggregation, update, residual) in a Function whose
                 backward recomputes it with autograd on (the memory-saving pattern)
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from distcheck.batch import Batch
from examples.accuracy.base import BUG_STRENGTH, CUTOFF
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded
from examples.structures import make_batch, periodic_slab_system

__all__ = ["FORMS", "SPEC", "FunctionMPNN", "buggy_model_factory", "model_factory", "sample_batch"]

FORMS = (
    "layer",
    "setup_context",
    "block",
    "scatter_add",
    "amax",
    "energy_only",
    "readout",
    "generic",
    "total",
    "recompute",
    "nested",
)
SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})
ENERGY_SPEC = make_spec("halo_correction", {"energy": "per_graph"})


class EdgeSum(torch.autograd.Function):
    """`out[i] = sum over edges e with centre[e] == i of messages[e]`."""

    @staticmethod
    def forward(ctx: Any, messages: torch.Tensor, centre: torch.Tensor, num_atoms: int) -> torch.Tensor:
        ctx.save_for_backward(centre)
        out = messages.new_zeros((num_atoms, *messages.shape[1:]))
        return out.index_add_(0, centre, messages)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (centre,) = ctx.saved_tensors
        return grad.index_select(0, centre), None, None


class EdgeSumSetup(torch.autograd.Function):
    """`EdgeSum` in the `setup_context` style: the forward gets no ctx."""

    @staticmethod
    def forward(messages: torch.Tensor, centre: torch.Tensor, num_atoms: int) -> torch.Tensor:
        return messages.new_zeros((num_atoms, *messages.shape[1:])).index_add(0, centre, messages)

    @staticmethod
    def setup_context(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
        ctx.save_for_backward(inputs[1])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (centre,) = ctx.saved_tensors
        return grad[centre], None, None


class MeanMessage(torch.autograd.Function):
    """`EdgeSum` over 4 (the average neighbour count), applying `EdgeSum` inside its own forward."""

    @staticmethod
    def forward(ctx: Any, messages: torch.Tensor, centre: torch.Tensor, num_atoms: int) -> torch.Tensor:
        ctx.save_for_backward(centre)
        out: torch.Tensor = EdgeSum.apply(messages, centre, num_atoms)
        return out / 4.0

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (centre,) = ctx.saved_tensors
        return grad.index_select(0, centre) / 4.0, None, None


class EdgeScatterAdd(torch.autograd.Function):
    """`EdgeSum` written with `scatter_add` on an index expanded over the features."""

    @staticmethod
    def forward(ctx: Any, messages: torch.Tensor, centre: torch.Tensor, num_atoms: int) -> torch.Tensor:
        index = centre.unsqueeze(-1).expand_as(messages)
        ctx.save_for_backward(index)
        return messages.new_zeros((num_atoms, *messages.shape[1:])).scatter_add(0, index, messages)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (index,) = ctx.saved_tensors
        return torch.gather(grad, 0, index), None, None


class EdgeMax(torch.autograd.Function):
    """`out[i] = max over edges e with centre[e] == i of messages[e]` (0 for an atom with none)."""

    @staticmethod
    def forward(ctx: Any, messages: torch.Tensor, centre: torch.Tensor, num_atoms: int) -> torch.Tensor:
        index = centre.unsqueeze(-1).expand_as(messages)
        out = messages.new_zeros((num_atoms, *messages.shape[1:]))
        out = out.scatter_reduce(0, index, messages, "amax", include_self=False)
        ctx.save_for_backward(index, messages, out)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        index, messages, out = ctx.saved_tensors
        hit = (messages == torch.gather(out, 0, index)).to(grad.dtype)
        return torch.gather(grad, 0, index) * hit, None, None


class ScatterSum(torch.autograd.Function):
    """`out[index[i]] += src[i]` into `size` rows, whatever the rows are (a package's own scatter)."""

    @staticmethod
    def forward(ctx: Any, src: torch.Tensor, index: torch.Tensor, size: int) -> torch.Tensor:
        ctx.save_for_backward(index)
        return torch.zeros((size, *src.shape[1:]), dtype=src.dtype, device=src.device).index_add_(0, index, src)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (index,) = ctx.saved_tensors
        return grad.index_select(0, index), None, None


class AtomTotal(torch.autograd.Function):
    """The sum of the per-atom energies (a batch of one system)."""

    @staticmethod
    def forward(ctx: Any, e_atom: torch.Tensor) -> torch.Tensor:
        ctx.rows = int(e_atom.shape[0])
        return e_atom.sum().reshape(1)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        return grad.expand(ctx.rows)


class SystemSum(torch.autograd.Function):
    """Per-atom energies summed per system."""

    @staticmethod
    def forward(ctx: Any, e_atom: torch.Tensor, system: torch.Tensor, num_systems: int) -> torch.Tensor:
        ctx.save_for_backward(system)
        return e_atom.new_zeros(num_systems).index_add_(0, system, e_atom)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, None, None]:
        (system,) = ctx.saved_tensors
        return grad[system], None, None


class Interaction(torch.autograd.Function):
    """The whole message step: `out[i] = sum over edges (i, j) of w[e] * h[j]`, backward by hand."""

    @staticmethod
    def forward(
        ctx: Any, h: torch.Tensor, w: torch.Tensor, centre: torch.Tensor, neighbour: torch.Tensor
    ) -> torch.Tensor:
        ctx.save_for_backward(h, w, centre, neighbour)
        return torch.zeros_like(h).index_add_(0, centre, w * h[neighbour])

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, None, None]:
        h, w, centre, neighbour = ctx.saved_tensors
        per_edge = grad[centre]
        grad_h = torch.zeros_like(h).index_add_(0, neighbour, per_edge * w)
        return grad_h, per_edge * h[neighbour], None, None


class Recompute(torch.autograd.Function):
    """`block(*inputs)` run without a graph; the backward runs it again with autograd on."""

    @staticmethod
    def forward(ctx: Any, block: Any, *inputs: torch.Tensor) -> torch.Tensor:
        ctx.block = block
        ctx.save_for_backward(*inputs)
        with torch.no_grad():
            out: torch.Tensor = block(*inputs)
        return out

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> tuple[Any, ...]:
        inputs = [t.detach().requires_grad_(t.is_floating_point()) for t in ctx.saved_tensors]
        with torch.enable_grad():
            out = ctx.block(*inputs)
        wanted = [t for t in inputs if t.requires_grad]
        grads = iter(torch.autograd.grad(out, wanted, grad))
        return (None, *(next(grads) if t.requires_grad else None for t in inputs))


_LAYER = {
    "layer": EdgeSum,
    "setup_context": EdgeSumSetup,
    "scatter_add": EdgeScatterAdd,
    "amax": EdgeMax,
    "energy_only": EdgeSum,
    "readout": EdgeSum,
    "generic": ScatterSum,
    "total": EdgeSum,
    "recompute": EdgeSum,
    "nested": MeanMessage,
}


class FunctionMPNN(nn.Module):
    """Two message-passing layers whose aggregation is the `form`'s Function; `energy [B]`, `forces [N,3]`."""

    num_interactions = 2
    cutoff = CUTOFF

    def __init__(self, form: str = "layer", features: int = 8, bug: bool = False) -> None:
        super().__init__()
        if form not in FORMS:
            raise ValueError(f"form must be one of {FORMS}, got {form!r}")
        self.form = form
        self.bug = bug
        self.distribution_spec = ENERGY_SPEC if form == "energy_only" else SPEC
        self.embedding = nn.Embedding(MAX_Z, features)
        self.rbf = GaussianRBF(8, CUTOFF)
        self.filters = nn.ModuleList(nn.Linear(8, features) for _ in range(self.num_interactions))
        self.updates = nn.ModuleList(nn.Linear(features, features) for _ in range(self.num_interactions))
        self.readout = nn.Linear(features, 1)

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        forces = self.form != "energy_only"
        pos = batch.positions.detach().to(torch.float64).requires_grad_(forces)
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        basis = self.rbf(r) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)
        h = self.embedding(batch.atomic_numbers)
        n = int(pos.shape[0])
        for filt, update in zip(self.filters, self.updates, strict=True):
            if self.form == "recompute":

                def block(h: torch.Tensor, basis: torch.Tensor, centre: torch.Tensor, neighbour: torch.Tensor,
                          filt: nn.Module = filt, update: nn.Module = update) -> torch.Tensor:  # fmt: skip
                    agg = torch.zeros_like(h).index_add(0, centre, filt(basis) * h[neighbour])
                    return h + torch.tanh(update(agg / 4.0))

                h = Recompute.apply(block, h, basis, centre, neighbour)
                continue
            w = filt(basis)
            if self.form == "block":
                agg = Interaction.apply(h, w, centre, neighbour)
            else:
                agg = _LAYER[self.form].apply(w * h[neighbour], centre, n)
            h = h + torch.tanh(update(agg / 4.0))
        e_atom = self.readout(h).squeeze(-1)
        if self.bug:  # anchored to row 0, an atom that is not the same on every rank
            e_atom = e_atom + BUG_STRENGTH * torch.linalg.vector_norm(pos - pos[:1], dim=-1)
        if self.form == "readout":
            energy = SystemSum.apply(e_atom, batch.batch, batch.num_systems)
        elif self.form == "generic":
            energy = ScatterSum.apply(e_atom, batch.batch, batch.num_systems)
        elif self.form == "total":
            energy = AtomTotal.apply(e_atom)
        else:
            zeros = torch.zeros(batch.num_systems, dtype=e_atom.dtype, device=e_atom.device)
            energy = zeros.index_add(0, batch.batch, e_atom)
        if not forces:
            return {"energy": energy}
        return {"energy": energy, "forces": -torch.autograd.grad(energy.sum(), pos)[0]}


def sample_batch() -> Batch:
    """One periodic H/C/O box, 7.8 x 7.8 x 52 Å (180 atoms): at two ranks long enough for a halo as deep
    as the two layers' receptive field (8 Å)."""
    return make_batch([periodic_slab_system((3, 3, 20), seed=31)])


def model_factory(form: str = "layer", bug: bool = False) -> FunctionMPNN:
    """A correct `FunctionMPNN` of `form` (float64, the same seeded weights on every call); with `bug`,
    its per-atom energies get a term anchored to row 0 (a real distribution bug)."""
    with seeded(3):
        model = FunctionMPNN(form, bug=bug)
    return model.double().eval()


def buggy_model_factory() -> FunctionMPNN:
    """The `layer` form with the row-0 bug: must fail however its Function is routed."""
    return model_factory("layer", bug=True)


def buggy_block_factory() -> FunctionMPNN:
    """The `block` form with the row-0 bug."""
    return model_factory("block", bug=True)


def layer_factory() -> FunctionMPNN:
    """The `layer` form."""
    return model_factory("layer")


def setup_context_factory() -> FunctionMPNN:
    """The `setup_context` form."""
    return model_factory("setup_context")


def block_factory() -> FunctionMPNN:
    """The `block` form."""
    return model_factory("block")


def scatter_add_factory() -> FunctionMPNN:
    """The `scatter_add` form."""
    return model_factory("scatter_add")


def amax_factory() -> FunctionMPNN:
    """The `amax` form."""
    return model_factory("amax")


def readout_factory() -> FunctionMPNN:
    """The `readout` form."""
    return model_factory("readout")


def generic_factory() -> FunctionMPNN:
    """The `generic` form."""
    return model_factory("generic")


def total_factory() -> FunctionMPNN:
    """The `total` form."""
    return model_factory("total")


def recompute_factory() -> FunctionMPNN:
    """The `recompute` form."""
    return model_factory("recompute")


def nested_factory() -> FunctionMPNN:
    """The `nested` form."""
    return model_factory("nested")


def energy_only_factory() -> FunctionMPNN:
    """The `energy_only` form."""
    return model_factory("energy_only")
