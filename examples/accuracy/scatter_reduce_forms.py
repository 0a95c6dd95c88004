"""`scatter_reduce` with `mean` and `amax`: per edge (the largest and the mean incoming edge energy of each
atom enter its energy) and per system (the mean and largest atomic energy of each system)."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "ScatterReduceForms", "buggy_model_factory", "model_factory", "sample_batch"]

SPEC = spec_with({"system_mean": "per_graph", "system_max": "per_graph"})


class ScatterReduceForms(AccuracyModel):
    """Edge sums plus edge maxima and means; per-system mean and max."""

    def to_atoms(self, phi: torch.Tensor, receiver: torch.Tensor, num_atoms: int) -> torch.Tensor:
        zeros = phi.new_zeros(num_atoms)
        total = zeros.scatter_reduce(0, receiver, phi, "sum", include_self=False)
        largest = zeros.scatter_reduce(0, receiver, phi, "amax", include_self=False)
        mean = zeros.scatter_reduce(0, receiver, phi, "mean", include_self=False)
        return total + 0.5 * largest + 0.25 * mean

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        zeros = e_atom.new_zeros(batch.num_systems)
        return {
            "system_mean": zeros.scatter_reduce(0, batch.batch, e_atom, "mean", include_self=False),
            "system_max": zeros.scatter_reduce(0, batch.batch, e_atom, "amax", include_self=False),
        }


def model_factory() -> ScatterReduceForms:
    """The correct model."""
    return ScatterReduceForms()


def buggy_model_factory() -> ScatterReduceForms:
    """The same with per-atom energies anchored to row 0."""
    return ScatterReduceForms(bug=True)
