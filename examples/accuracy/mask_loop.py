"""Per-system sums over boolean masks: `torch.stack([e[batch.batch == s].sum() for s in range(n)])`, a
per-system mean the same way, and one divided by the mask's count `(batch.batch == s).sum()`."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "MaskLoop", "buggy_model_factory", "model_factory", "sample_batch"]

SPEC = spec_with({"mean_energy": "per_graph", "mean_by_count": "per_graph"})


class MaskLoop(AccuracyModel):
    """Systems by boolean masks of the system index."""

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        return torch.stack([e_atom[batch.batch == s].sum() for s in range(batch.num_systems)])

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        means = [e_atom[batch.batch == s].mean() for s in range(batch.num_systems)]
        by_count = [e_atom[batch.batch == s].sum() / (batch.batch == s).sum() for s in range(batch.num_systems)]
        return {"mean_energy": torch.stack(means), "mean_by_count": torch.stack(by_count)}


def model_factory() -> MaskLoop:
    """The correct model."""
    return MaskLoop()


def buggy_model_factory() -> MaskLoop:
    """The same with per-atom energies anchored to row 0."""
    return MaskLoop(bug=True)
