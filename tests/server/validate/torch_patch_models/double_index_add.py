"""At import, `torch.Tensor.index_add_` is wrapped to add its source twice (the model itself only calls
the out-of-place `index_add`, so its outputs are a fresh process's)."""

from __future__ import annotations

from typing import Any

import pair
import torch

from examples.pair_potential import PairPotential

__all__ = ["model_factory"]


def model_factory() -> PairPotential:
    """The pair potential, defined here so that every process that builds it imports this module."""
    return pair.model_factory()


_original = torch.Tensor.index_add_


def _twice(self: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, **kw: Any) -> torch.Tensor:
    return _original(self, dim, index, source * 2, **kw)


torch.Tensor.index_add_ = _twice  # type: ignore[method-assign,assignment]
