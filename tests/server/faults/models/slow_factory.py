"""Building the model takes long (downloading weights, say): the factory writes a marker and sleeps,
in the reference run and in every rank."""

from __future__ import annotations

import time

from faultkit import Energy, marker, sample_batch, where

__all__ = ["model_factory", "sample_batch"]


def model_factory() -> Energy:
    marker(f"factory-{where() or 'main'}")
    if where():
        time.sleep(300)
    return Energy()
