"""Rank 1 spins in a Python loop outside any collective (STUCK_HOW=sleep: sleeps in native code);
rank 0 then waits for it in the per-system all-reduce. STUCK_IN=reference hangs in the
single-process reference run instead, STUCK_IN=0 on rank 0."""

from __future__ import annotations

import os
import time

from faultkit import Energy, marker, sample_batch, where

__all__ = ["model_factory", "sample_batch"]


def spin_forever() -> None:
    marker(f"stuck-{where()}")
    n = 0
    while True:
        n += 1


def sleep_forever() -> None:
    marker(f"stuck-{where()}")
    time.sleep(300)


def _maybe_spin(batch: object) -> None:
    if where() == os.environ.get("STUCK_IN", "1"):
        if os.environ.get("STUCK_HOW") == "sleep":
            sleep_forever()
        spin_forever()


def model_factory() -> Energy:
    return Energy(_maybe_spin)
