"""At import, a global forward hook doubles every output of the pair potential (registered once per
process that imports this module, as a fresh process does). It knows the model by its class name, so
a hook registered by an earlier import of this module still applies to the model a later import built."""

from __future__ import annotations

from typing import Any

import pair
import torch

from examples.pair_potential import PairPotential

__all__ = ["model_factory"]


def model_factory() -> PairPotential:
    """The pair potential, defined here so that every process that builds it imports this module."""
    return pair.model_factory()


def _double(module: torch.nn.Module, args: Any, output: Any) -> Any:
    if type(module).__name__ == "PairPotential" and isinstance(output, dict):
        return {k: v * 2 for k, v in output.items()}
    return output


torch.nn.modules.module.register_module_forward_hook(_double)
