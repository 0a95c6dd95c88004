"""What the spare pool holds, as `spares.report()` gives it: a plain dict for logs, tests and RESULTS.

Built from a snapshot the pool takes under its lock (`pool_report`); per device, the idle spares, how
many are warm, their memory as they reported it (PSS, GPU bytes and where that figure comes from), their
warm-up times and phases and the packages they failed to import. No torch.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from .process import Spare

__all__ = ["pool_report"]


def pool_report(
    idle: Sequence[Spare],
    *,
    enabled: bool,
    wanted: Mapping[str, int],
    packages: Sequence[str],
    max_spares: int,
    max_gpu_bytes: int | None,
    idle_timeout_s: float,
    keep_s: float | None,
    counts: Mapping[str, int],
) -> dict[str, Any]:
    """The pool's state: `idle` summed per device (each spare's warm-up report as last read), the wants,
    the packages spares import, the bounds and the counters, each copied."""
    return {
        "enabled": enabled,
        "devices": _per_device(idle),
        "wanted": dict(wanted),
        "packages": list(packages),
        "max_spares": max_spares,
        "max_gpu_bytes": max_gpu_bytes,
        "idle_timeout_s": idle_timeout_s,
        "keep_s": keep_s,
        "counts": dict(counts),
    }


def _per_device(idle: Sequence[Spare]) -> dict[str, dict[str, Any]]:
    per_device: dict[str, dict[str, Any]] = {}
    for s in idle:
        d = per_device.setdefault(s.device, {"idle": 0, "warm": 0, "memory_bytes": 0, "gpu_bytes": 0})
        d["idle"] += 1
        if s.info is not None:
            d["warm"] += 1
            d["memory_bytes"] += int(s.info.get("memory_bytes", 0))
            d["gpu_bytes"] += int(s.info.get("gpu_bytes", 0))
            d["gpu_bytes_source"] = s.info.get("gpu_bytes_source")
            d.setdefault("warm_seconds", []).append(round(float(s.info.get("warm_seconds", 0.0)), 3))
            phases = {k: round(float(v), 3) for k, v in dict(s.info.get("phases") or {}).items()}
            d.setdefault("warm_phases", []).append(phases)
            failed = s.info.get("failed_imports") or []
            if failed:
                d["failed_imports"] = sorted(set(d.get("failed_imports", [])) | set(failed))
    return per_device
