"""A three-layer model declared two deep whose per-atom energies all depend on a per-system mean.

Each atom's energy is scaled by `1 + 0.1 tanh(g)`, `g` the per-system mean of a one-hop density, so
displacing any atom moves every atom's energy and force: the receptive field cannot be read off past
that one hop (a lower bound). Under `local` with the declared halo the third hop is lost at the domain
boundaries, far above round-off but within the tolerances: only the round-off floor finds it.
"""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples import mpnn
from examples.common import cosine_cutoff, make_spec, seeded
from examples.structures import make_batch, periodic_slab_system

CUTOFF = 3.0
SPEC = make_spec("local", {"energy": "per_graph", "forces": "per_node"})


class CoupledMPNN(mpnn.MPNN):
    """`MPNN` whose per-atom energies are scaled by a per-system mean of a one-hop density."""

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        n = pos.shape[0]
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(dtype), batch.batch), dim=-1)
        fc = cosine_cutoff(r, self.cutoff)
        edge_basis = self.rbf(r) * fc.unsqueeze(-1)
        density = torch.zeros(n, dtype=dtype).index_add(0, centre, fc)
        counts = torch.bincount(batch.batch, minlength=batch.num_systems).to(dtype)
        g = torch.zeros(batch.num_systems, dtype=dtype).index_add(0, batch.batch, density) / counts
        h = self.embedding(batch.atomic_numbers)
        for filt, update in zip(self.filters, self.updates, strict=True):
            messages = filt(edge_basis) * h[neighbour]
            agg = torch.zeros(n, self.features, dtype=dtype).index_add(0, centre, messages)
            h = h + update(agg / self.avg_neighbours)
        e_atom = self.energy_scale * self.readout(h).squeeze(-1) * (1.0 + 0.1 * torch.tanh(g[batch.batch]))
        energy = torch.zeros(batch.num_systems, dtype=dtype).index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


def model_factory() -> CoupledMPNN:
    """Three layers, declared two, spec `local`."""
    with seeded(5):
        model = CoupledMPNN(num_interactions=3, cutoff=CUTOFF)
    with torch.no_grad():
        for filt in model.filters:
            assert isinstance(filt, torch.nn.Linear)
            filt.weight.mul_(0.05)
    model.num_interactions = 2
    model.distribution_spec = dict(SPEC)
    return model.double().eval()


def sample_batch() -> Batch:
    """One periodic 7.8 × 7.8 × 62.4 Å box (216 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 24), seed=3)])
