"""Both aggregations in scripted functions of another module, imported here by name."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import SPEC, AccuracyModel, sample_batch
from examples.accuracy.scripted_ops import scatter_receivers, system_energy

__all__ = ["SPEC", "ScriptedImported", "buggy_model_factory", "model_factory", "sample_batch"]


class ScriptedImported(AccuracyModel):
    """Edges → atoms and atoms → systems through `scripted_ops`."""

    def to_atoms(self, phi: torch.Tensor, receiver: torch.Tensor, num_atoms: int) -> torch.Tensor:
        return scatter_receivers(phi, receiver, num_atoms)

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        total = system_energy(e_atom, batch.batch, batch.num_systems)
        return total + 0.01 * total * total  # nonlinear: per-rank partials cannot be added up later


def model_factory() -> ScriptedImported:
    """The correct model."""
    return ScriptedImported()


def buggy_model_factory() -> ScriptedImported:
    """The same with per-atom energies anchored to row 0."""
    return ScriptedImported(bug=True)
