"""A job's devices: `device` (and `backend`) options → what the library entry point takes, with hints in the
caller's words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..option_check import ConfigError
from ..options import Vocabulary

__all__ = ["NO_GPU_NOTICE", "resolve_device"]

NO_GPU_NOTICE = "no GPU: validating on the CPU with gloo"


def resolve_device(options: dict[str, Any], notice: Callable[[str], None], words: Vocabulary) -> str | list[str]:
    """`"cpu"`, a CUDA device string or one device per rank, popped from `options` (from `cuda:0,cuda:1`,
    which also sets `world_size` when it is not given); `auto` becomes `cuda:0` when torch sees a GPU, else
    `"cpu"` (with `NO_GPU_NOTICE`). `ConfigError` for a device list that disagrees with `world_size`, for a
    CUDA device torch cannot see, and for backend nccl on the CPU (hints in `words`)."""
    import torch

    device = str(options.pop("device", "auto"))
    resolved: str | list[str]
    if device == "auto":
        if torch.cuda.is_available():
            resolved = "cuda:0"
        else:
            notice(NO_GPU_NOTICE)
            resolved = "cpu"
    elif "," in device:
        devices = device.split(",")
        world_size = options.setdefault("world_size", len(devices))
        if world_size != len(devices):
            raise ConfigError(
                f"the device list {device} names {len(devices)} devices but world_size is {world_size}",
                f"give one device per rank, or {words.assign('world_size', len(devices))}",
            )
        resolved = "cpu" if set(devices) == {"cpu"} else devices
    else:
        resolved = device
    if resolved != "cpu" and not torch.cuda.is_available():
        raise ConfigError(
            f"device {device!r} needs CUDA, and torch here sees no GPU",
            f"use {words.assign('device', 'cpu')} (or auto) on a machine without a GPU",
        )
    if resolved == "cpu" and options.get("backend") == "nccl":
        raise ConfigError(
            "backend nccl needs CUDA devices, but the device is cpu",
            f"use {words.assign('backend', 'gloo')} or {words.assign('backend', 'auto')}",
        )
    return resolved
