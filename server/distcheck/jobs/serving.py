"""Which target a runner process may serve (`serving_key`); no torch, read by the runner and the daemon.

A runner imports the user's code of the target it validates into its own process (the factory's and
the sample's modules). It forgets those modules after each validation, but what they did to the
process cannot all be undone, so it serves that target only: a validation of another target runs in
another runner (`lsp.runner_slot` switches to its standby), and the runner itself refuses one
(`jobs.runner`). Two targets are the same target when they import the same code from the same place:
the same factory and sample references, project directory and import path. Options (world size,
tolerances, dtype, frames) and the spec may differ.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

__all__ = ["RETIRED_ERROR", "serving_key"]

RETIRED_ERROR = "RunnerRetired"
"""The error type a runner answers a validation it must not serve with (another target's), before it exits."""

_FIELDS = ("factory", "sample", "sample_is_file", "root", "python_path")


def serving_key(target: Mapping[str, Any] | None) -> str:
    """The key of the code a target (`Target.to_wire()`) imports: equal keys, same target."""
    found = target if isinstance(target, Mapping) else {}
    return json.dumps({name: found.get(name) for name in _FIELDS}, sort_keys=True, default=str)
