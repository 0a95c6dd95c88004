"""`AccuracyModel`: the pair potential every accuracy-corpus model shares; subclasses choose the forms.

Per-edge energies `phi_ij = s exp(-r_ij) fc(r_ij) (1 + 0.1 z_j)` over a full neighbour list are
aggregated into the *receiving* atom of each edge (`edge_index[1]`, as message-passing codes do), so on
a rank an owned atom's edges may live on another rank: the per-edge → per-atom aggregation must be
completed across ranks. Per-atom energies are summed per system; forces by autograd.
"""

from __future__ import annotations

import copy
from typing import Any

import torch
from torch import nn

from distcheck.batch import Batch
from examples.common import cosine_cutoff, make_spec
from examples.structures import make_batch, periodic_slab_system

__all__ = ["BUG_STRENGTH", "CUTOFF", "SPEC", "AccuracyModel", "sample_batch", "spec_with"]

CUTOFF = 4.0
BUG_STRENGTH = 1e-3
SPEC = make_spec("halo_correction", {"energy": "per_graph", "forces": "per_node"})


def spec_with(output_kinds: dict[str, str]) -> dict[str, Any]:
    """`SPEC` with more output kinds."""
    spec = copy.deepcopy(SPEC)
    spec["output_kinds"].update(output_kinds)
    return spec


class AccuracyModel(nn.Module):
    """Pair potential; `to_atoms` and `to_systems` are the aggregation forms under test. With `bug`, the
    per-atom energies get a term anchored to the first row's position (a rank sees another atom there)."""

    num_interactions = 1
    cutoff = CUTOFF

    def __init__(self, bug: bool = False) -> None:
        super().__init__()
        self.bug = bug
        self.scale = nn.Parameter(torch.tensor(0.3, dtype=torch.float64))

    def to_atoms(self, phi: torch.Tensor, receiver: torch.Tensor, num_atoms: int) -> torch.Tensor:
        """Per-edge → per-atom: the sum of each atom's incoming edge energies."""
        return torch.zeros(num_atoms, dtype=phi.dtype, device=phi.device).index_add(0, receiver, phi)

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        """Per-atom → per-system energy."""
        zeros = torch.zeros(batch.num_systems, dtype=e_atom.dtype, device=e_atom.device)
        return zeros.index_add(0, batch.batch, e_atom)

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        """Further outputs of a form under test (none by default)."""
        return {}

    def atom_energies(self, batch: Batch, pos: torch.Tensor) -> torch.Tensor:
        """Per-atom energies (with the bug's term when `bug`)."""
        nl = batch.neighbor_list(self.cutoff)
        r = torch.linalg.vector_norm(nl.vectors(pos, batch.cell, batch.batch), dim=-1)
        phi = self.scale * torch.exp(-r) * cosine_cutoff(r, self.cutoff)
        phi = phi * (1.0 + 0.1 * batch.atomic_numbers[nl.edge_index[1]])
        e_atom = self.to_atoms(phi, nl.edge_index[1], int(pos.shape[0]))
        if self.bug:
            e_atom = e_atom + BUG_STRENGTH * torch.linalg.vector_norm(pos - pos[:1], dim=-1)
        return e_atom

    def forces(self, energy: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        """`-dE/dpos` of the summed per-system energies."""
        return -torch.autograd.grad(energy.sum(), pos)[0]

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        e_atom = self.atom_energies(batch, pos)
        energy = self.to_systems(e_atom, batch)
        out = {"energy": energy, "forces": self.forces(energy, pos)}
        out.update(self.extra_outputs(e_atom.detach(), batch))
        return out


def sample_batch() -> Batch:
    """Two periodic H/C/O boxes, 7.8 x 7.8 x 31.2 Å (108 atoms) and 7.8 x 7.8 x 26 Å (90 atoms)."""
    return make_batch([periodic_slab_system((3, 3, 12), seed=21), periodic_slab_system((3, 3, 10), seed=22)])
