"""Rank 1 starts `sleep 300` in a new session (out of every process group), says so with a marker,
and then blocks in Python outside any collective: the moment the tests kill the validator."""

from __future__ import annotations

import subprocess
import time

from faultkit import Energy, marker, sample_batch, where

__all__ = ["model_factory", "sample_batch"]


def _start_grandchild_and_block(batch: object) -> None:
    if where() != "1":
        return
    child = subprocess.Popen(["sleep", "300"], start_new_session=True)
    marker("grandchild", str(child.pid))
    time.sleep(300)


def model_factory() -> Energy:
    return Energy(_start_grandchild_and_block)
