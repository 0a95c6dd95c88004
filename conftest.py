"""Put the repository root on sys.path so tests (and the ranks they start) import `examples`; fixtures
every test directory shares."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any

import pytest

ROOT = os.path.dirname(os.path.abspath(__file__))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

VOLATILE_REPORT_KEYS = {"timings", "elapsed_sec", "peak_memory_bytes"}
"""Report keys whose values differ between any two runs of one validation."""


def _without_volatile(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _without_volatile(v) for k, v in value.items() if k not in VOLATILE_REPORT_KEYS}
    if isinstance(value, list):
        return [_without_volatile(v) for v in value]
    return value


def _stable_report(report: Any) -> dict[str, Any]:
    stable: dict[str, Any] = json.loads(json.dumps(_without_volatile(report.to_dict()), default=str))
    return stable


@pytest.fixture
def stable_report() -> Callable[[Any], dict[str, Any]]:
    """`stable_report(report)`: the report as plain data without `VOLATILE_REPORT_KEYS` at any depth,
    for comparing the reports of two ways of running one validation."""
    return _stable_report
