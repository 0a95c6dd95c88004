"""Per-system sums over boolean masks: `torch.stack([e[batch.batch == s].sum() for s in range(n)])`, and a
per-system mean the same way."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "MaskLoop", "buggy_model_factory", "model_factory", "sample_batch"]

SPEC = spec_with({"mean_energy": "per_graph"})


class MaskLoop(AccuracyModel):
    """Systems by boolean masks of the system index."""

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        return torch.stack([e_atom[batch.batch == s].sum() for s in range(batch.num_systems)])

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        means = [e_atom[batch.batch == s].mean() for s in range(batch.num_systems)]
        return {"mean_energy": torch.stack(means)}


def model_factory() -> MaskLoop:
    """The correct model."""
    return MaskLoop()


def buggy_model_factory() -> MaskLoop:
    """The same with per-atom energies anchored to row 0."""
    return MaskLoop(bug=True)
