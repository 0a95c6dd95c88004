"""Validation engine: compare distributed runs with the single-process reference, auto-fix the spec,
and explain what differs (`trace_and_validate`, `validate_on_cpu`, `validate_launched` under torchrun)."""

from .api import DEFAULT_WATCHED_HELPERS, trace_and_validate, validate_on_cpu
from .launched import validate_launched

__all__ = ["DEFAULT_WATCHED_HELPERS", "trace_and_validate", "validate_launched", "validate_on_cpu"]
