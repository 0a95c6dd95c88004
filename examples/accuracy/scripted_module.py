"""The per-system sum in a scripted `nn.Module` (`torch.jit.script(SystemSum())`, built by the factory)."""

from __future__ import annotations

import warnings

import torch
from torch import nn

from distcheck.batch import Batch
from examples.accuracy.base import SPEC, AccuracyModel, sample_batch

__all__ = ["SPEC", "ScriptedModule", "SystemSum", "buggy_model_factory", "model_factory", "sample_batch"]


class SystemSum(nn.Module):
    """`out[s] = sum of x[i] over the atoms i of system s`, as a module to be scripted."""

    def forward(self, x: torch.Tensor, system: torch.Tensor, num_systems: int) -> torch.Tensor:
        out = torch.zeros(num_systems, dtype=x.dtype, device=x.device)
        return out.index_add(0, system, x)  # unrouted: per-atom -> per-system


class ScriptedModule(AccuracyModel):
    """Atoms → systems through a scripted submodule, read nonlinearly."""

    def __init__(self, bug: bool = False) -> None:
        super().__init__(bug)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            self.system_sum = torch.jit.script(SystemSum())

    def to_systems(self, e_atom: torch.Tensor, batch: Batch) -> torch.Tensor:
        total = self.system_sum(e_atom, batch.batch, batch.num_systems)
        return total + 0.01 * total * total


def model_factory() -> ScriptedModule:
    """The correct model."""
    return ScriptedModule()


def buggy_model_factory() -> ScriptedModule:
    """The same with per-atom energies anchored to row 0."""
    return ScriptedModule(bug=True)
