"""`HelperChargeModel`: charge equilibration whose per-molecule sums go through a third-party helper.

The physics is `examples.charge_eq` (same parameters, same numbers), written the AIMNet2 way: every
per-molecule sum calls `examples.thirdparty.nbops.mol_sum` (here for the charge constraint) or the
same function imported by name in `examples.helper_readout` (for the energy). That helper runs its
`index_add` inside TorchScript, where Python-level interception cannot see it, so on each rank it
sums the owned AND halo rows of only that rank's atoms.

`distribution_spec` deliberately omits the helper (the failure distcheck must find and explain);
`CORRECT_SPEC` declares it as a `reduction` adapter in `third_party_helpers`.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional

from distcheck.batch import Batch
from examples.common import MAX_Z, GaussianRBF, cosine_cutoff, make_spec, seeded, spec_copy
from examples.helper_readout import MoleculeEnergyReadout
from examples.structures import make_batch, periodic_slab_system
from examples.thirdparty import nbops

__all__ = ["CORRECT_SPEC", "SPEC", "HelperChargeModel", "model_factory", "sample_batch", "sample_batch_multi"]

_OUTPUT_KINDS = {"energy": "per_graph", "forces": "per_node", "charges": "per_node"}

#: The spec the model ships with: it lacks the adapter for `nbops.mol_sum` (deliberately wrong).
SPEC = make_spec("halo_correction", _OUTPUT_KINDS, owned_only_outputs=["charges"])

#: The right spec: `nbops.mol_sum` declared as a per-system reduction over its argument 0, dimension 0.
CORRECT_SPEC = make_spec(
    "halo_correction",
    _OUTPUT_KINDS,
    owned_only_outputs=["charges"],
    third_party_helpers=[
        {
            "kind": "reduction",
            "module_path": "examples.thirdparty.nbops",
            "attr_name": "mol_sum",
            "atom_arg": 0,
            "atom_dim": 0,
        }
    ],
)


class HelperChargeModel(nn.Module):
    """Charge equilibration with `nbops.mol_sum` reductions. Outputs `energy`, `forces`, `charges`."""

    num_interactions = 1

    def __init__(self, features: int = 16, num_basis: int = 8, cutoff: float = 4.5) -> None:
        super().__init__()
        self.cutoff = float(cutoff)
        self.features = int(features)
        self.distribution_spec = spec_copy(SPEC)
        self.embedding = nn.Embedding(MAX_Z, features)
        self.rbf = GaussianRBF(num_basis, cutoff)
        self.filter = nn.Linear(num_basis, features)
        nn.init.normal_(self.filter.weight, std=1.0)
        self.update = nn.Sequential(nn.Linear(features, features), nn.SiLU(), nn.Linear(features, features))
        self.electronegativity = nn.Linear(features, 1)
        self.hardness = nn.Linear(features, 1)
        self.repulsion = nn.Parameter(0.5 + torch.rand(MAX_Z))
        self.repulsion_range = 0.8
        self.readout = MoleculeEnergyReadout()

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        dtype = self.embedding.weight.dtype
        pos = batch.positions.detach().to(dtype).requires_grad_(True)
        n, num_mols, mol_idx = pos.shape[0], batch.num_systems, batch.batch
        nl = batch.neighbor_list(self.cutoff)
        centre, neighbour = nl.edge_index[0], nl.edge_index[1]
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell.to(dtype), mol_idx), dim=-1)
        fc = cosine_cutoff(r, self.cutoff)
        z = batch.atomic_numbers

        h = self.embedding(z)
        messages = self.filter(self.rbf(r) * fc.unsqueeze(-1)) * h[neighbour]
        agg = torch.zeros(n, self.features, dtype=dtype, device=pos.device).index_add(0, centre, messages)
        h = h + self.update(agg / 4.0)
        chi = self.electronegativity(h).squeeze(-1)
        hardness = functional.softplus(self.hardness(h).squeeze(-1)) + 0.5

        if batch.charge is None:
            total_charge = torch.zeros(num_mols, dtype=dtype, device=pos.device)
        else:
            total_charge = batch.charge.to(dtype)
        inv_hardness = nbops.mol_sum(1.0 / hardness, mol_idx, num_mols)
        chi_over_j = nbops.mol_sum(chi / hardness, mol_idx, num_mols)
        lagrange = (total_charge + chi_over_j) / inv_hardness
        charges = (lagrange[mol_idx] - chi) / hardness

        pair = torch.sqrt(self.repulsion[z[centre]] * self.repulsion[z[neighbour]])
        pair = pair * torch.exp(-r / self.repulsion_range) * fc
        e_pair = 0.5 * torch.zeros(n, dtype=dtype, device=pos.device).index_add(0, centre, pair)
        e_atom = chi * charges + 0.5 * hardness * charges**2 + e_pair
        energy = self.readout(e_atom, mol_idx, num_mols)
        forces = -torch.autograd.grad(energy.sum(), pos, create_graph=self.training)[0]
        return {"energy": energy, "forces": forces, "charges": charges}


def model_factory() -> HelperChargeModel:
    """A fresh `HelperChargeModel` (float64, eval mode) with the same seeded weights on every call."""
    with seeded(5):
        model = HelperChargeModel()
    return model.double().eval()


def sample_batch() -> Batch:
    """One periodic 10.4 x 10.4 x 52 Å box (320 atoms) with total charge +1."""
    return make_batch([periodic_slab_system((4, 4, 20), seed=51, charge=1.0)])


def sample_batch_multi() -> Batch:
    """Two periodic boxes (320 + 352 atoms) with total charges +1 and -2."""
    return make_batch(
        [
            periodic_slab_system((4, 4, 20), seed=51, charge=1.0),
            periodic_slab_system((4, 4, 22), seed=52, charge=-2.0),
        ]
    )
