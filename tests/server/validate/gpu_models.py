"""float32 factories of the examples, for the GPU tests (imported by path in every rank)."""

from __future__ import annotations

from typing import Any

from examples import charge_eq, mpnn, pair_potential, stress_model


def pair_potential_fp32() -> Any:
    return pair_potential.model_factory().float()


def mpnn_fp32() -> Any:
    return mpnn.model_factory().float()


def charge_eq_fp32() -> Any:
    return charge_eq.model_factory().float()


def stress_model_fp32() -> Any:
    return stress_model.model_factory().float()
