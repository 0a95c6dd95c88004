"""Energy readout of `examples.helper_model`: sums per-atom energies per molecule.

It imports the helper by name (`from ... import mol_sum`), so a runtime that swaps
`examples.thirdparty.nbops.mol_sum` for an adapter must also replace this module's binding.
"""

from __future__ import annotations

import torch
from torch import nn

from examples.thirdparty.nbops import mol_sum

__all__ = ["MoleculeEnergyReadout"]


class MoleculeEnergyReadout(nn.Module):
    """`energy[m] = sum of e_atom over the atoms of molecule m` (no parameters)."""

    def forward(self, e_atom: torch.Tensor, mol_idx: torch.Tensor, num_mols: int) -> torch.Tensor:
        return mol_sum(e_atom, mol_idx, num_mols)
