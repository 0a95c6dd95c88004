"""A job's devices: `device` (and `backend`) options → what the library entry point takes, with hints in the
caller's words."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..option_check import ConfigError
from ..options import Vocabulary, option

__all__ = ["NO_GPU_NOTICE", "named_devices", "resolve_device"]

NO_GPU_NOTICE = "no GPU: validating on the CPU with gloo"


def named_devices(options: dict[str, Any], words: Vocabulary) -> str | list[str] | None:
    """The devices `options["device"]` (popped) names outright, read without torch: `"cpu"`, `"cuda"`,
    `"cuda:N"`, or one device per rank from `cuda:0,cuda:1` (which also sets `world_size` when it is not
    given; a list of only `cpu` is `"cpu"`); None for `auto`, which only torch can resolve. `ConfigError`
    for a device list that disagrees with `world_size` (hint in `words`)."""
    device = str(options.pop("device", option("device").default))
    if device == "auto":
        return None
    if "," not in device:
        return device
    devices = device.split(",")
    world_size = options.setdefault("world_size", len(devices))
    if world_size != len(devices):
        raise ConfigError(
            f"the device list {device} names {len(devices)} devices but world_size is {world_size}",
            f"give one device per rank, or {words.assign('world_size', len(devices))}",
        )
    return "cpu" if set(devices) == {"cpu"} else devices


def resolve_device(options: dict[str, Any], notice: Callable[[str], None], words: Vocabulary) -> str | list[str]:
    """`named_devices(options, words)`, with `auto` become `cuda:0` when torch sees a GPU, else `"cpu"`
    (with `NO_GPU_NOTICE`). `ConfigError` also for a CUDA device torch cannot see and for backend nccl on
    the CPU (hints in `words`)."""
    import torch

    text = str(options.get("device", option("device").default))
    resolved = named_devices(options, words)
    if resolved is None:
        if torch.cuda.is_available():
            resolved = "cuda:0"
        else:
            notice(NO_GPU_NOTICE)
            resolved = "cpu"
    if resolved != "cpu" and not torch.cuda.is_available():
        raise ConfigError(
            f"device {text!r} needs CUDA, and torch here sees no GPU",
            f"use {words.assign('device', 'cpu')} (or auto) on a machine without a GPU",
        )
    if resolved == "cpu" and options.get("backend") == "nccl":
        raise ConfigError(
            "backend nccl needs CUDA devices, but the device is cpu",
            f"use {words.assign('backend', 'gloo')} or {words.assign('backend', 'auto')}",
        )
    return resolved
