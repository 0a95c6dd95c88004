"""A model whose ranks block in their forward (marker `ahead-<rank>`) while the reference's forward
runs through: with a first spec remembered from an earlier validation, the ranks block while the
first attempt runs ahead, before the reference has been reported finished."""

from __future__ import annotations

import time
from typing import Any

from faultkit import Energy, marker, sample_batch, where

__all__ = ["model_factory", "sample_batch"]


def _block(batch: Any) -> None:
    rank = where()
    if rank.isdigit():
        marker(f"ahead-{rank}")
        time.sleep(300)


def model_factory() -> Energy:
    return Energy(hook=_block)
