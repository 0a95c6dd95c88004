"""A report as plain data without what differs between any two runs of one validation (wall times,
peak memory), for tests that compare the reports of two ways of running it."""

from __future__ import annotations

import json
from typing import Any

VOLATILE = {"timings", "elapsed_sec", "peak_memory_bytes"}


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def stable_report(report: Any) -> dict[str, Any]:
    """`report.to_dict()` through JSON, without the `VOLATILE` keys at any depth."""
    stable: dict[str, Any] = json.loads(json.dumps(_stable(report.to_dict()), default=str))
    return stable
