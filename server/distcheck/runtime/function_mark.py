"""How an unrouted record names the user's `torch.autograd.Function`, and the step that routes what it
names (no torch: `validate.unrouted` and the daemon's diagnostics read both)."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["function_label", "function_of", "function_remedy"]

_SUFFIX = " (torch.autograd.Function)"


def function_label(qualname: str) -> str:
    """`UnroutedOp.function` of an aggregation inside the forward of the Function class `qualname`."""
    return f"{qualname}.forward{_SUFFIX}"


def function_of(label: str | None) -> str | None:
    """The Function class a `function_label` names (`EdgeSum`), or None for any other label."""
    if label is None or not label.endswith(_SUFFIX):
        return None
    return label[: -len(_SUFFIX)].removesuffix(".forward")


def function_remedy(aggregations: Iterable[str], scatter_mode: str) -> str:
    """The steps that make the gradients right for aggregations (`UnroutedOp.aggregation` values) named
    inside a Function's forward under `scatter_mode`."""
    kinds = set(aggregations)
    steps = []
    if "per_edge_to_per_atom" in kinds and scatter_mode != "local":
        steps.append(
            'set distribution.policy.scatter_mode to "local" with a halo as deep as the receptive field (each '
            "rank then computes these aggregations whole, nothing crosses ranks inside the Function), or write "
            "the aggregation as a sum (index_add, scatter_add) whose backward gathers the gradient by the same "
            "index (index_select, [index], gather), which distcheck routes exactly"
        )
    if kinds - {"per_edge_to_per_atom"}:
        steps.append(
            "move the reduction over atoms out of the Function (reduce its per-atom output after apply), where "
            "the runtime routes it with its gradient"
        )
    return "; ".join(steps)
