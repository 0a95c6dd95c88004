"""Shared helpers for runtime tests: references, comparisons, and a leftover-process check."""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping

import psutil
import pytest
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
HANDLER_MODELS = os.path.join(HERE, "handler_models.py")


def handler_ref(name: str) -> str:
    """Path reference to a factory or sample in handler_models.py (importable from any rank)."""
    return f"{HANDLER_MODELS}:{name}"


def reference(factory: object, batch: object) -> dict[str, torch.Tensor]:
    """Single-process outputs, detached."""
    model = factory()  # type: ignore[operator]
    return {k: v.detach() for k, v in model(batch).items()}


def max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    """Largest element-wise |a-b| relative to max|b| (atom by atom, never order-free)."""
    assert a.shape == b.shape, (a.shape, b.shape)
    scale = float(b.abs().max()) if b.numel() else 1.0
    return float((a - b).abs().max()) / max(scale, 1e-300) if b.numel() else 0.0


def assert_matches(outputs: Mapping[str, torch.Tensor], ref: Mapping[str, torch.Tensor], tol: float) -> None:
    assert set(outputs) == set(ref)
    for key in ref:
        err = max_rel(outputs[key], ref[key])
        assert err <= tol, f"{key}: relative error {err:.3e} > {tol:.1e}"


def leftover_processes() -> list[tuple[int, str]]:
    """Descendants of this process other than multiprocessing's own forkserver and resource tracker
    (the warm pool is meant to stay; anything else — ranks, their children — must be gone)."""
    me = psutil.Process()
    found = []
    for child in me.children(recursive=True):
        try:
            cmd = " ".join(child.cmdline())
            if child.status() == psutil.STATUS_ZOMBIE:
                continue
        except psutil.Error:
            continue
        infrastructure = "forkserver import main" in cmd or "resource_tracker import main" in cmd
        if infrastructure and child.ppid() == me.pid:
            continue
        found.append((child.pid, cmd))
    return found


@pytest.fixture(autouse=True)
def no_leftover_ranks() -> Iterator[None]:
    """Every test in this folder must leave no rank process behind."""
    yield
    leftovers = leftover_processes()
    assert not leftovers, f"rank processes left behind: {leftovers}"
