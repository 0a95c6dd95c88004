"""How an unrouted record names the user's `torch.autograd.Function` (no torch: `validate.unrouted`
reads it back to choose its advice)."""

from __future__ import annotations

__all__ = ["function_label", "function_of"]

_SUFFIX = " (torch.autograd.Function)"


def function_label(qualname: str) -> str:
    """`UnroutedOp.function` of an aggregation inside the forward of the Function class `qualname`."""
    return f"{qualname}.forward{_SUFFIX}"


def function_of(label: str | None) -> str | None:
    """The Function class a `function_label` names (`EdgeSum`), or None for any other label."""
    if label is None or not label.endswith(_SUFFIX):
        return None
    return label[: -len(_SUFFIX)].removesuffix(".forward")
