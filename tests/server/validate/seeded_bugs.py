"""Seeded spec bugs and the auto-fix rule that must find each, shared by the CPU and GPU validator tests."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from examples import charge_eq, mpnn, stress_model


def _policy(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda spec: spec["distribution"]["policy"].update(**fields)


SEEDED_BUGS: list[tuple[Any, Callable[[dict[str, Any]], None], str]] = [
    (mpnn, lambda s: s.update(system_reductions=False), "enable_system_reductions"),
    (mpnn, lambda s: s.update(all_reduce_outputs=["energy"]), "drop_double_all_reduce"),
    (stress_model, lambda s: s.update(all_reduce_outputs=[]), "all_reduce_partial_output"),
    (mpnn, lambda s: s.update(owned_only_outputs=["forces"]), "switch_per_node_consolidation"),
    (charge_eq, lambda s: s.update(owned_only_outputs=[]), "switch_per_node_consolidation"),
    (mpnn, _policy(scatter_mode="local", halo_width=4.5), "widen_halo"),
]
"""(example module, mutation of its `distribution_spec`, the rule that must fix it)."""


def seeded_spec(module: Any, mutate: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    """A copy of the example's `distribution_spec` with the bug applied."""
    spec = copy.deepcopy(module.model_factory().distribution_spec)
    mutate(spec)
    return spec
