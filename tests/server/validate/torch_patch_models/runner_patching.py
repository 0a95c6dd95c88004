"""A runner target whose import wraps `torch.Tensor.index_add_` to add its source twice and registers a
global forward hook (a passthrough): correct in a fresh process, and what a runner must not carry over
into another target's validation."""

from __future__ import annotations

import json
import os
from typing import Any

import pair
import torch

from distcheck.batch import Batch
from examples.pair_potential import PairPotential

__all__ = ["model_factory", "sample_batch"]

_original = torch.Tensor.index_add_


def _twice(self: torch.Tensor, dim: int, index: torch.Tensor, source: torch.Tensor, **kw: Any) -> torch.Tensor:
    return _original(self, dim, index, source * 2, **kw)


def _passthrough(module: torch.nn.Module, args: Any, output: Any) -> Any:
    return output


torch.Tensor.index_add_ = _twice  # type: ignore[method-assign,assignment]
torch.nn.modules.module.register_module_forward_hook(_passthrough)


def model_factory() -> PairPotential:
    """The pair potential."""
    return pair.model_factory()


def sample_batch() -> Batch:
    """The pair's box; records which process loaded it (a JSON line in $DISTCHECK_STATE_PROBE)."""
    with open(os.environ["DISTCHECK_STATE_PROBE"], "a", encoding="utf-8") as fh:
        fh.write(json.dumps({"tag": "patching", "pid": os.getpid()}) + "\n")
    return pair.sample_batch()
