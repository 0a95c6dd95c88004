"""A process ends itself with `os._exit(VANISH_CODE)` (default 0) in the middle of its forward:
rank VANISH_IN (default 1; `reference` for the reference run), before the per-system all-reduce, or
after it when VANISH_AFTER=1 (its peer then finishes normally)."""

from __future__ import annotations

import os
from typing import Any

import torch
from faultkit import Energy, sample_batch, where

__all__ = ["model_factory", "sample_batch"]


def _vanish() -> None:
    os._exit(int(os.environ.get("VANISH_CODE", "0")))


class Vanishing(Energy):
    def forward(self, batch: Any) -> dict[str, torch.Tensor]:
        mine = where() == os.environ.get("VANISH_IN", "1")
        after = os.environ.get("VANISH_AFTER") == "1"
        if mine and not after:
            _vanish()
        out = super().forward(batch)
        if mine and after:
            _vanish()
        return out


def model_factory() -> Vanishing:
    return Vanishing()
