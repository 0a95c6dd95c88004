"""What a rank saw of one undeclared `torch.ops` kernel: the rows of each tensor it was given and
returned, and the `custom_ops` entry those shapes call for.

`UnroutedOp.kernel` holds a `KernelCall` for an undeclared kernel that aggregates atoms or edges
(origin `"custom_op"`); a quick fix inserts `KernelCall.entry` into `distribution.custom_ops` as is.
This module never imports torch.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from typing import Any

from .codec import Record, wire

__all__ = ["KERNEL_ROLES", "KernelCall", "KernelTensor"]

KERNEL_ROLES: tuple[str, ...] = ("per_atom", "per_edge", "per_system", "replicated")
"""`KernelTensor.role` values: one row per atom the rank holds, one row (or column of a `[2, E]`
index) per edge, one row per system, or anything else (weights, scalars: the same on every rank)."""


@dataclass(eq=False)
class KernelTensor(Record):
    """One tensor argument or output of a kernel call on a rank: `position` is the argument's position
    (`"0"`, `"1"`, ... as `custom_ops` transforms name it; a keyword argument by its name) or the
    output's, `role` one of `KERNEL_ROLES`, `shape` and `dtype` as that rank saw them."""

    position: str
    role: str = dataclasses.field(metadata=wire(enum=KERNEL_ROLES))
    shape: list[int]
    dtype: str


@dataclass(eq=False)
class KernelCall(Record):
    """The tensors one undeclared kernel received (`args`) and returned (`outputs`) on a rank, and the
    `distribution.custom_ops` entry inferred from them: `entry` is a ready `CustomOp.to_dict()` object
    (None when no transform fits, `no_entry` then says why and what to do instead)."""

    args: list[KernelTensor]
    outputs: list[KernelTensor]
    entry: dict[str, Any] | None = None
    no_entry: str | None = None

    def roles(self, which: str = "args") -> dict[str, str]:
        """Position → role of the arguments (`which="args"`) or of the outputs (`"outputs"`)."""
        return {t.position: t.role for t in (self.args if which == "args" else self.outputs)}

    @property
    def shapes(self) -> str:
        """`args 0 per-atom [108], 1 per-atom [108] → outputs 0 per-system [1]` (this rank's shapes)."""

        def side(tensors: list[KernelTensor]) -> str:
            return ", ".join(f"{t.position} {t.role.replace('_', '-')} {t.shape}" for t in tensors) or "none"

        return f"args {side(self.args)} → outputs {side(self.outputs)}"

    @property
    def summary(self) -> str:
        """The shapes, then the entry to add (or why there is none)."""
        if self.entry is not None:
            return f"{self.shapes}; add {json.dumps(self.entry)} to distribution.custom_ops"
        return f"{self.shapes}; no custom_ops entry fits: {self.no_entry or 'see the kernel'}"
