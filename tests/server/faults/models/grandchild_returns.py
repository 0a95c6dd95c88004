"""Every rank starts `sleep 300` in a new session and then returns normally: the validation passes
and nothing the model started may outlive it."""

from __future__ import annotations

import subprocess

from faultkit import Energy, marker, sample_batch, where

__all__ = ["model_factory", "sample_batch"]


def _start_grandchild(batch: object) -> None:
    if where() in ("0", "1"):
        child = subprocess.Popen(["sleep", "300"], start_new_session=True)
        marker(f"grandchild-{where()}", str(child.pid))


def model_factory() -> Energy:
    return Energy(_start_grandchild)
