"""At import, `torch.exp` is wrapped to return twice its value (the pair potential calls it: its
energies change, in the reference and the ranks alike, once per process that imports this module)."""

from __future__ import annotations

from typing import Any

import pair
import torch

from examples.pair_potential import PairPotential

__all__ = ["model_factory"]


def model_factory() -> PairPotential:
    """The pair potential, defined here so that every process that builds it imports this module."""
    return pair.model_factory()


_exp = torch.exp


def _twice(x: torch.Tensor, **kw: Any) -> torch.Tensor:
    return _exp(x, **kw) * 2


torch.exp = _twice  # type: ignore[assignment]
