"""Per-system sums written as methods (a module's forward, a plain class's method, a static and a
class method, an inherited forward): the targets of `third_party_helpers` entries whose
`attr_name` is `"Class.method"` (kind `"method"`). Each sums inside TorchScript, as `nbops` does, so
the runtime cannot see the sum: on a rank it covers owned and halo rows."""

from __future__ import annotations

import warnings

import torch

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)  # TorchScript is deprecated; packages still use it

    @torch.jit.script
    def _scripted_sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return torch.zeros(n, dtype=e.dtype, device=e.device).index_add(0, batch, e)


def _mol_sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
    out: torch.Tensor = _scripted_sum(e, batch, int(n))
    return out


class MolSum(torch.nn.Module):
    """Reached through `__call__`, so patching `MolSum.forward` covers `MolSum()(e, batch, n)`."""

    def forward(self, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return _mol_sum(e, batch, n)


class ScaledMolSum(MolSum):
    """Inherits `forward`: patching `ScaledMolSum.forward` must leave `MolSum` alone."""


class Calculator:
    """A calculator-like plain class."""

    def __init__(self, scale: float = 1.0) -> None:
        self.scale = scale

    def energy(self, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return self.scale * _mol_sum(e, batch, n)


class Ops:
    """Static and class methods."""

    offset = 0.0

    @staticmethod
    def static_sum(e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return _mol_sum(e, batch, n)

    @classmethod
    def class_sum(cls, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
        return _mol_sum(e, batch, n) + cls.offset


def owned_sum(self: object, e: torch.Tensor, batch: torch.Tensor, n: int) -> torch.Tensor:
    """A `kind: "python"` replacement for `Calculator.energy`: called with the method's arguments."""
    return -_mol_sum(e, batch, n)


calculator = Calculator(2.0)
