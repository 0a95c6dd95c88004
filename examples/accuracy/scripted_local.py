"""Both aggregations in `@torch.jit.script` functions of this module (as many MLIP packages write them).

The handlers cannot see inside TorchScript: distcheck names both ops with their lines here, and runs them
eagerly on the ranks after auto-fix (`distribution.torchscript: "eager"`).
"""

from __future__ import annotations

import warnings

import torch

from distcheck.batch import Batch
from examples.accuracy.base import SPEC, AccuracyModel, sample_batch

__all__ = ["SPEC", "ScriptedLocal", "buggy_model_factory", "model_factory", "sample_batch"]

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)

    @torch.jit.script
    def receive(phi: torch.Tensor, receiver: torch.Tensor, num_atoms: int) -> torch.Tensor:
        out = torch.zeros(num_atoms, dtype=phi.dtype, device=phi.device)
        return out.index_add(0, receiver, phi)  # unrouted: per-edge -> per-atom

    @torch.jit.script
    def per_system(e: torch.Tensor, system: torch.Tensor, num_systems: int) -> torch.Tensor:
        out = torch.zeros(num_systems, dtype=e.dtype, device=e.device)
        return out.index_add(0, system, e)  # unrouted: per-atom -> per-system


class ScriptedLocal(AccuracyModel):
    """Edges → atoms and atoms → systems through this module's scripted functions."""

    def to_atoms(self, phi: torch.Tensor, receiver: torch.Tensor, num_atoms: int) -> torch.Tensor:
        return receive(phi, receiver, num_atoms)

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        total = per_system(e_atom, batch.batch, batch.num_systems)
        return total + 0.01 * total * total  # nonlinear: per-rank partials cannot be added up later


def model_factory() -> ScriptedLocal:
    """The correct model."""
    return ScriptedLocal()


def buggy_model_factory() -> ScriptedLocal:
    """The same with per-atom energies anchored to row 0."""
    return ScriptedLocal(bug=True)
