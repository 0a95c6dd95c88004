"""A per-system product (`scatter_reduce(..., "prod")`): no handler has a distributed form for it, so
distcheck names it (op and line) and fails; no auto-fix can help."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "NamedOnly", "model_factory", "sample_batch"]

SPEC = spec_with({"energy_product": "per_graph"})


class NamedOnly(AccuracyModel):
    """Adds the product over each system's atoms of `1 + e_i / 10`."""

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        ones = e_atom.new_ones(batch.num_systems)
        product = ones.scatter_reduce(0, batch.batch, 1.0 + 0.1 * e_atom, "prod")  # named: no distributed form
        return {"energy_product": product}


def model_factory() -> NamedOnly:
    """A correct model in a form distcheck cannot distribute."""
    return NamedOnly()
