"""The factory (not the import) wraps `torch.exp` to return twice its value, each time it is called:
once per process, as in a fresh one, unless a process calls it for a second run."""

from __future__ import annotations

from typing import Any

import torch
from pair import model_factory as _pair_factory

from examples.pair_potential import PairPotential

__all__ = ["model_factory"]


def model_factory() -> PairPotential:
    """The pair potential, after wrapping `torch.exp` once more."""
    exp = torch.exp

    def twice(x: torch.Tensor, **kw: Any) -> torch.Tensor:
        return exp(x, **kw) * 2

    torch.exp = twice  # type: ignore[assignment]
    return _pair_factory()
