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


def pair_potential_checks_nccl_env() -> Any:
    """The pair potential, refusing to build in a rank whose environment lets NCCL use NVLink multicast."""
    import os

    if os.environ.get("DISTCHECK_RANK", "").isdigit():
        wanted = {"NCCL_NVLS_ENABLE": "0", "TORCH_SYMM_MEM_DISABLE_MULTICAST": "1", "NVSHMEM_DISABLE_NVLS": "1"}
        wrong = {k: os.environ.get(k) for k, v in wanted.items() if os.environ.get(k) != v}
        if wrong:
            raise RuntimeError(f"NVLink multicast is not off in this rank: {wrong}")
    return pair_potential.model_factory()
