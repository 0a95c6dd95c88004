"""At import, passthrough wrappers that only count their calls replace the torch functions and
methods a comparison uses (`CALLS[name]`): the model's outputs are a fresh process's, and distcheck's
own consolidation and comparison must never call any of them."""

from __future__ import annotations

import collections
from collections.abc import Callable
from typing import Any

import pair
import torch

from examples.pair_potential import PairPotential

__all__ = ["CALLS", "model_factory"]


def model_factory() -> PairPotential:
    """The pair potential, defined here so that every process that builds it imports this module."""
    return pair.model_factory()


CALLS: collections.Counter[str] = collections.Counter()

_METHODS = ("index_add_", "abs", "sub", "__sub__", "max", "sum", "any", "__and__", "__or__", "__invert__", "__le__")
_FUNCTIONS = ("abs", "sub", "max", "amax", "sum", "isclose", "allclose", "isfinite", "isnan", "where", "exp", "stack")


def _counting(name: str, original: Callable[..., Any]) -> Callable[..., Any]:
    def counted(*args: Any, **kw: Any) -> Any:
        CALLS[name] += 1
        return original(*args, **kw)

    return counted


for _name in _METHODS:
    setattr(torch.Tensor, _name, _counting(f"Tensor.{_name}", getattr(torch.Tensor, _name)))
for _name in _FUNCTIONS:
    setattr(torch, _name, _counting(f"torch.{_name}", getattr(torch, _name)))
