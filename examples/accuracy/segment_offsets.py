"""`torch.segment_reduce(..., offsets=...)` with offsets from `bincount` of the system index (under
distcheck, global counts), sum and max."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "SegmentOffsets", "buggy_model_factory", "model_factory", "sample_batch"]

SPEC = spec_with({"max_atom_energy": "per_graph"})


def _offsets(batch: Batch) -> torch.Tensor:
    counts = torch.bincount(batch.batch, minlength=batch.num_systems)
    return torch.cat([counts.new_zeros(1), torch.cumsum(counts, 0)])


class SegmentOffsets(AccuracyModel):
    """Systems as segments given by offsets."""

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        return torch.segment_reduce(e_atom, "sum", offsets=_offsets(batch))

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        return {"max_atom_energy": torch.segment_reduce(e_atom, "max", offsets=_offsets(batch))}


def model_factory() -> SegmentOffsets:
    """The correct model."""
    return SegmentOffsets()


def buggy_model_factory() -> SegmentOffsets:
    """The same with per-atom energies anchored to row 0."""
    return SegmentOffsets(bug=True)
