"""Counts from `torch.unique_consecutive(batch, return_counts=True)` and `batch.unique(return_inverse=True,
return_counts=True)`: energy per atom of each system, and each system's energy broadcast back to its atoms
with `repeat_interleave` by those counts."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "UniqueCounts", "buggy_model_factory", "model_factory", "sample_batch"]

SPEC = spec_with(
    {"energy_per_atom": "per_graph", "energy_per_atom_unique": "per_graph", "system_energy_of_atom": "per_node"}
)
SPEC["owned_only_outputs"] = ["system_energy_of_atom"]


class UniqueCounts(AccuracyModel):
    """Per-system atom counts by `unique_consecutive`."""

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        _, counts = torch.unique_consecutive(batch.batch, return_counts=True)
        _, inverse, unique_counts = batch.batch.unique(return_inverse=True, return_counts=True)
        energy = self.to_systems(e_atom, batch)
        return {
            "energy_per_atom": energy / counts,
            "energy_per_atom_unique": e_atom.new_zeros(batch.num_systems).index_add(0, inverse, e_atom) / unique_counts,
            "system_energy_of_atom": torch.repeat_interleave(energy, counts),
        }


def model_factory() -> UniqueCounts:
    """The correct model."""
    return UniqueCounts()


def buggy_model_factory() -> UniqueCounts:
    """The same with per-atom energies anchored to row 0."""
    return UniqueCounts(bug=True)
