"""Method, in-place and `out=` spellings of the routed ops: `Tensor.index_put_(accumulate=True)` for edges →
atoms, `Tensor.index_add_` for atoms → systems, `Tensor.scatter_reduce_`, `index_put_` per system,
`t.bincount()` and `torch.index_add(..., out=)` for further outputs."""

from __future__ import annotations

import torch

from distcheck.batch import Batch
from examples.accuracy.base import AccuracyModel, sample_batch, spec_with

__all__ = ["SPEC", "MethodForms", "buggy_model_factory", "model_factory", "sample_batch"]

SPEC = spec_with(
    {
        "energy_scatter": "per_graph",
        "energy_per_atom": "per_graph",
        "energy_out": "per_graph",
        "energy_put": "per_graph",
    }
)


class MethodForms(AccuracyModel):
    """The method forms."""

    def to_atoms(self, phi: torch.Tensor, receiver: torch.Tensor, num_atoms: int) -> torch.Tensor:
        out = phi.new_zeros(num_atoms)
        return out.index_put_((receiver,), phi, accumulate=True)

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        out = e_atom.new_zeros(batch.num_systems)
        out.index_add_(0, batch.batch, e_atom)
        return out

    def extra_outputs(self, e_atom: torch.Tensor, batch: Batch) -> dict[str, torch.Tensor]:
        b, n = batch.batch, batch.num_systems
        scattered = e_atom.new_zeros(n).scatter_reduce_(0, b, e_atom, "sum")
        written = e_atom.new_empty(n)
        torch.index_add(e_atom.new_zeros(n), 0, b, e_atom, out=written)
        put = e_atom.new_zeros(n).index_put_((b,), e_atom, accumulate=True)
        return {
            "energy_scatter": scattered,
            "energy_per_atom": scattered / b.bincount(),
            "energy_out": written,
            "energy_put": put,
        }


def model_factory() -> MethodForms:
    """The correct model."""
    return MethodForms()


def buggy_model_factory() -> MethodForms:
    """The same with per-atom energies anchored to row 0."""
    return MethodForms(bug=True)
