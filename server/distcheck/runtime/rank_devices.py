"""One device per rank and the process-group backend for them: `resolve_devices` (a `device` option →
a device string per rank), `check_cuda_index`, `resolve_backend` (`auto`, `gloo`, `nccl` checked against
the devices); what cannot work is a `SetupError`, raised before any process starts."""

from __future__ import annotations

from collections.abc import Sequence

import torch

from .errors import SetupError

__all__ = ["check_cuda_index", "resolve_backend", "resolve_devices"]


def resolve_devices(device: str | Sequence[str], world_size: int) -> list[str]:
    """One device string per rank. `"cpu"`, `"cuda:N"` (all ranks share it), `"cuda"` (one rank per
    visible GPU, needs world_size ≤ GPU count) or a list with one entry per rank."""
    if world_size < 1:
        raise SetupError(f"world_size must be >= 1, got {world_size}")
    if isinstance(device, str):
        if device == "cpu":
            return ["cpu"] * world_size
        if device == "cuda":
            count = torch.cuda.device_count()
            if count == 0:
                raise SetupError("device='cuda' but torch sees no GPU; use device='cpu' (validate_on_cpu)")
            if world_size > count:
                raise SetupError(
                    f"device='cuda' means one rank per GPU, but world_size={world_size} > {count} visible GPUs; "
                    "lower world_size or put ranks on one GPU with device='cuda:0'"
                )
            return [f"cuda:{i}" for i in range(world_size)]
        if device.startswith("cuda:"):
            check_cuda_index(device)
            return [device] * world_size
        raise SetupError(f"device {device!r} not understood; use 'cpu', 'cuda', 'cuda:N' or a list of those")
    devices = [str(d) for d in device]
    if len(devices) != world_size:
        raise SetupError(f"got {len(devices)} devices for world_size={world_size}; give one device per rank")
    for d in devices:
        if d.startswith("cuda:"):
            check_cuda_index(d)
        elif d != "cpu":
            raise SetupError(f"device {d!r} not understood; use 'cpu' or 'cuda:N'")
    return devices


def check_cuda_index(device: str) -> None:
    """Raise `SetupError` unless `device` is `cuda:N` with N below the number of GPUs torch sees."""
    try:
        index = int(device.split(":", 1)[1])
    except ValueError:
        raise SetupError(f"device {device!r} not understood; use 'cuda:N'") from None
    count = torch.cuda.device_count()
    if index >= count:
        raise SetupError(
            f"{device} requested but torch sees {count} GPU(s); "
            + ("use device='cpu' (validate_on_cpu)" if count == 0 else f"use cuda:0 … cuda:{count - 1}")
        )


def resolve_backend(backend: str, devices: Sequence[str]) -> str:
    """`gloo` or `nccl` for these devices; `auto` is gloo when ranks share a GPU or run on the CPU,
    NCCL when every rank has its own GPU. Raises `SetupError` for combinations that cannot work."""
    on_cuda = [d for d in devices if d.startswith("cuda")]
    if on_cuda and len(on_cuda) != len(devices):
        raise SetupError("ranks mix CPU and GPU devices; put every rank on the CPU or every rank on a GPU")
    shared = len(set(on_cuda)) < len(on_cuda)
    if backend == "auto":
        return "nccl" if on_cuda and not shared else "gloo"
    if backend == "gloo":
        return "gloo"
    if backend == "nccl":
        if not on_cuda:
            raise SetupError("backend='nccl' needs CUDA devices; use backend='gloo' on the CPU")
        if shared:
            raise SetupError(
                "backend='nccl' cannot run several ranks on one GPU: NCCL refuses it ('Duplicate GPU "
                "detected'). Use backend='gloo' (or 'auto') for ranks sharing a GPU, or give each rank its own "
                "GPU with device=['cuda:0', 'cuda:1', …]"
            )
        return "nccl"
    raise SetupError(f"backend {backend!r} not understood; use 'auto', 'gloo' or 'nccl'")
