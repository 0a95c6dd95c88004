"""At import, `abs` and the full `max` (the tensor methods and the functions) are wrapped to return
twice their value (the model calls neither: its outputs are a fresh process's)."""

from __future__ import annotations

from typing import Any

import pair
import torch

from examples.pair_potential import PairPotential

__all__ = ["model_factory"]


def model_factory() -> PairPotential:
    """The pair potential, defined here so that every process that builds it imports this module."""
    return pair.model_factory()


_abs, _fabs, _max, _fmax = torch.Tensor.abs, torch.abs, torch.Tensor.max, torch.max


def _abs2(self: torch.Tensor) -> torch.Tensor:
    return _abs(self) * 2


def _fabs2(x: torch.Tensor, **kw: Any) -> torch.Tensor:
    return _fabs(x, **kw) * 2


def _max2(self: torch.Tensor, *args: Any, **kw: Any) -> Any:
    return _max(self, *args, **kw) * 2 if not args and not kw else _max(self, *args, **kw)


def _fmax2(x: torch.Tensor, *args: Any, **kw: Any) -> Any:
    return _fmax(x, *args, **kw) * 2 if not args and not kw else _fmax(x, *args, **kw)


torch.Tensor.abs = _abs2  # type: ignore[method-assign,assignment]
torch.abs = _fabs2  # type: ignore[assignment]
torch.Tensor.max = _max2  # type: ignore[method-assign,assignment]
torch.max = _fmax2  # type: ignore[assignment]
