"""Message passing run under activation checkpointing (`torch.utils.checkpoint`).

A checkpointed region keeps no activations: the backward runs it again (from a saved-tensor hook) and
checks that it saves the same tensors. Every variant is a correct single-process model; `FORMS` names
where the checkpoint sits:

  `layer`        `checkpoint(layer, ..., use_reentrant=False)` around each interaction layer
  `stack`        one `checkpoint` around the whole interaction stack
  `sequential`   `checkpoint_sequential` over the layers, two segments
  `readout`      the last layer, the readout and the atoms → systems energy sum in one checkpointed region
  `energy_only`  `layer`, energy only (no backward ever recomputes)
  `reentrant`    `checkpoint(..., use_reentrant=True)` (a `torch.autograd.Function`) around each layer;
                 forces by `energy.sum().backward()`, as that form requires (no `autograd.grad`)
  `prod`         `readout` with a per-system product (`scatter_reduce(prod)`): no distributed form, named
                 at its line (once per forward, however often the backward recomputes it)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint, checkpoint_sequential

from distcheck.batch import Batch
from examples.accuracy.base import BUG_STRENGTH, CUTOFF
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded
from examples.structures import make_batch, periodic_slab_system

__all__ = ["FORMS", "SPEC", "CheckpointedMPNN", "buggy_model_factory", "model_factory", "sample_batch"]

FORMS = ("layer", "stack", "sequential", "readout", "energy_only", "reentrant", "prod")
SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})
ENERGY_SPEC = make_spec("halo_correction", {"energy": "per_graph"})


class CheckpointedMPNN(nn.Module):
    """Three message-passing layers run under the `form`'s checkpoint; `energy [B]`, `forces [N,3]`.
    With `bug`, every checkpointed layer adds a term anchored to row 0 (an atom that is not the same on
    every rank): a real distribution bug inside the region."""

    num_interactions = 3
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

    def _layer(self, k: int, centre: torch.Tensor, neighbour: torch.Tensor) -> Callable[..., torch.Tensor]:
        """Interaction layer `k`: `h, basis, pos → h'` (edges → atoms by `index_add`)."""
        filt, update = self.filters[k], self.updates[k]

        def layer(h: torch.Tensor, basis: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
            agg = torch.zeros_like(h).index_add(0, centre, filt(basis) * h[neighbour])
            out = h + torch.tanh(update(agg / 4.0))
            if self.bug:
                out = out + BUG_STRENGTH * torch.linalg.vector_norm(pos - pos[:1], dim=-1).unsqueeze(-1)
            return out

        return layer

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        forces = self.form != "energy_only"
        pos = batch.positions.detach().to(torch.float64).requires_grad_(forces)
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        basis = self.rbf(r) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)
        h = self.embedding(batch.atomic_numbers)
        layers = [self._layer(k, centre, neighbour) for k in range(self.num_interactions)]
        system = batch.batch

        def energy_of(h: torch.Tensor) -> torch.Tensor:
            e_atom = self.readout(h).squeeze(-1)
            if self.form == "prod":
                ones = torch.ones(batch.num_systems, dtype=e_atom.dtype, device=e_atom.device)
                return ones.scatter_reduce(0, system, 1.0 + 0.01 * e_atom, "prod")
            return torch.zeros(batch.num_systems, dtype=e_atom.dtype, device=e_atom.device).index_add(0, system, e_atom)

        if self.form in ("layer", "energy_only", "reentrant"):
            reentrant = self.form == "reentrant"
            for layer in layers:
                h = checkpoint(layer, h, basis, pos, use_reentrant=reentrant)
            energy = energy_of(h)
        elif self.form == "stack":

            def stack(h: torch.Tensor, basis: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
                for layer in layers:
                    h = layer(h, basis, pos)
                return h

            energy = energy_of(checkpoint(stack, h, basis, pos, use_reentrant=False))
        elif self.form == "sequential":
            steps = [lambda x, layer=layer: layer(x, basis, pos) for layer in layers]
            energy = energy_of(checkpoint_sequential(steps, 2, h, use_reentrant=False))
        else:  # readout, prod: the last layer, the readout and the per-system sum in one region
            for layer in layers[:-1]:
                h = layer(h, basis, pos)

            def head(h: torch.Tensor, basis: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
                return energy_of(layers[-1](h, basis, pos))

            energy = checkpoint(head, h, basis, pos, use_reentrant=False)
        if not forces:
            return {"energy": energy}
        if self.form == "reentrant":
            energy.sum().backward()
            assert pos.grad is not None
            return {"energy": energy.detach(), "forces": -pos.grad}
        return {"energy": energy, "forces": -torch.autograd.grad(energy.sum(), pos)[0]}


def sample_batch() -> Batch:
    """One periodic H/C/O box, 7.8 x 7.8 x 52 Å (180 atoms): at two and three ranks long enough for a
    halo as deep as the three layers' receptive field (12 Å)."""
    return make_batch([periodic_slab_system((3, 3, 20), seed=31)])


def model_factory(form: str = "layer", bug: bool = False) -> CheckpointedMPNN:
    """A correct `CheckpointedMPNN` of `form` (float64, the same seeded weights on every call); with
    `bug`, its checkpointed layers carry the row-0 term (a real distribution bug)."""
    with seeded(3):
        model = CheckpointedMPNN(form, bug=bug)
    return model.double().eval()


def buggy_model_factory() -> CheckpointedMPNN:
    """The `layer` form with the row-0 bug inside its checkpointed layers: must fail."""
    return model_factory("layer", bug=True)


def buggy_stack_factory() -> CheckpointedMPNN:
    """The `stack` form with the row-0 bug."""
    return model_factory("stack", bug=True)


def layer_factory() -> CheckpointedMPNN:
    """The `layer` form."""
    return model_factory("layer")


def stack_factory() -> CheckpointedMPNN:
    """The `stack` form."""
    return model_factory("stack")


def sequential_factory() -> CheckpointedMPNN:
    """The `sequential` form."""
    return model_factory("sequential")


def readout_factory() -> CheckpointedMPNN:
    """The `readout` form."""
    return model_factory("readout")


def energy_only_factory() -> CheckpointedMPNN:
    """The `energy_only` form."""
    return model_factory("energy_only")


def reentrant_factory() -> CheckpointedMPNN:
    """The `reentrant` form."""
    return model_factory("reentrant")


def prod_factory() -> CheckpointedMPNN:
    """The `prod` form."""
    return model_factory("prod")
