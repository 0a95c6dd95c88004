"""A three-layer message-passing model declared two deep whose third layer's strength is a setting read
when the model is built, not a weight: from `far_hop.json` beside this file (`config_factory`) or from
the environment variable FAR_HOP_WEIGHT (`env_factory`). At 0 the third layer passes nothing on
(measured depth 2, as declared); at a weak 1e-9 it reaches one hop farther (depth 3, under-declared)
while the outputs move by about 1e-10 of their size, less than a rounding of them to about 1e-6 shows.
The setting is neither a module file nor in the `state_dict`: only the outputs' exact bytes and the
environment reads tell the two models apart."""

from __future__ import annotations

import json
import os

import torch

from distcheck.batch import Batch
from examples import mpnn
from examples.common import cosine_cutoff, make_spec, seeded
from examples.structures import make_batch, periodic_slab_system

CUTOFF = 3.0
SPEC = make_spec("local", {"energy": "per_graph", "forces": "per_node"})
CONFIG = os.path.join(os.path.dirname(os.path.abspath(__file__)), "far_hop.json")
PAIR = 100.0
"""The strength of a one-hop pair term beside the message passing (the outputs' size)."""
WEAK = 1e-7
"""A far-hop weight whose effect on the outputs no rounding to about six digits shows."""


class FarHopMPNN(mpnn.MPNN):
    """`mpnn.MPNN` whose last layer's messages are scaled by `far_hop_weight` (a plain float)."""

    far_hop_weight: float = 0.0

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        n = pos.shape[0]
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(dtype), batch.batch), dim=-1)
        edge_basis = self.rbf(r) * cosine_cutoff(r, self.cutoff).unsqueeze(-1)
        h = self.embedding(batch.atomic_numbers)
        last = len(self.filters) - 1
        for layer, (filt, update) in enumerate(zip(self.filters, self.updates, strict=True)):
            messages = filt(edge_basis) * h[neighbour]
            if layer == last:
                messages = messages * self.far_hop_weight
            agg = torch.zeros(n, self.features, dtype=dtype, device=pos.device).index_add(0, centre, messages)
            h = h + update(agg / self.avg_neighbours)
        e_atom = self.energy_scale * self.readout(h).squeeze(-1)
        pair = cosine_cutoff(r, self.cutoff) ** 2  # a strong one-hop term: it sets the outputs' size
        e_atom = e_atom + PAIR * torch.zeros(n, dtype=dtype, device=pos.device).index_add(0, centre, pair)
        energy = torch.zeros(batch.num_systems, dtype=dtype, device=pos.device).index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def _model(far_hop_weight: float) -> FarHopMPNN:
    with seeded(5):
        model = FarHopMPNN(num_interactions=3, cutoff=CUTOFF)
    with torch.no_grad():
        for filt in model.filters:
            assert isinstance(filt, torch.nn.Linear)
            filt.weight.mul_(0.05)
    model.far_hop_weight = far_hop_weight
    model.num_interactions = 2
    model.distribution_spec = dict(SPEC)
    return model.double().eval()


def config_factory() -> FarHopMPNN:
    """The far-hop weight from `far_hop.json` beside this file (`{"far_hop_weight": w}`, 0 without it)."""
    try:
        with open(CONFIG) as fh:
            weight = float(json.load(fh)["far_hop_weight"])
    except FileNotFoundError:
        weight = 0.0
    return _model(weight)


def env_factory() -> FarHopMPNN:
    """The far-hop weight from FAR_HOP_WEIGHT (0 when unset)."""
    return _model(float(os.environ.get("FAR_HOP_WEIGHT", "0")))


def sample_batch() -> Batch:
    """One periodic 7.8 × 7.8 × 62.4 Å box (216 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 24), seed=3)])
