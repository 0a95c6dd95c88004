"""Rank 1 starts `sleep 300` in a new session and then ends itself with `os._exit(0)`: the sleep is
orphaned (the forkserver adopts it) while the process that runs the validation lives on."""

from __future__ import annotations

import os
import subprocess

from faultkit import Energy, marker, sample_batch, where

__all__ = ["model_factory", "sample_batch"]


def _orphan_and_vanish(batch: object) -> None:
    if where() == "1":
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        marker("orphan", str(child.pid))
        os._exit(0)


def model_factory() -> Energy:
    return Energy(_orphan_and_vanish)
