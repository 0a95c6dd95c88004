"""Totals over every atom of a two-system batch: `forces = -grad(e_atom.sum(), pos)`, and the batch's total
and mean atomic energy as outputs (`e_atom.sum()`, `torch.mean(e_atom)`)."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "MultiTotal", "buggy_model_factory", "model_factory", "sample_batch"]

SPEC = spec_with({"total": "global", "mean_atom_energy": "global"})


class MultiTotal(AccuracyModel):
    """Forces from the total over all atoms of all systems."""

    def forward(self, batch: Batch) -> dict[str, torch.Tensor]:
        pos = batch.positions.detach().requires_grad_(True)
        e_atom = self.atom_energies(batch, pos)
        forces = -torch.autograd.grad(e_atom.sum(), pos, retain_graph=True)[0]
        energy = self.to_systems(e_atom, batch)
        return {
            "energy": energy.detach(),
            "forces": forces,
            "total": e_atom.sum().detach(),
            "mean_atom_energy": torch.mean(e_atom).detach(),
        }


def model_factory() -> MultiTotal:
    """The correct model."""
    return MultiTotal()


def buggy_model_factory() -> MultiTotal:
    """The same with per-atom energies anchored to row 0."""
    return MultiTotal(bug=True)
