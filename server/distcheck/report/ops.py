"""The first torch operation whose value departs (`DivergentOp`): the line a layer divergence or a rank
disagreement starts at (no torch).

`LayerDivergence.first_op` is the first op, in the reference's call order, whose value on the ranks
departs from the single-process reference; `RankDisagreement.first_op` the first op where the ranks
leave the reference, else where they disagree among themselves. Both come from the op trace every
process of a validation keeps with its layer records (`runtime.op_trace`, compared by
`validate.op_trace`).
"""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass

from .codec import Record, wire

__all__ = ["OP_AGAINST", "OP_LEVELS", "DivergentOp"]

OP_LEVELS: tuple[str, ...] = ("per_atom", "small", "per_system")
"""`DivergentOp.level`: how the op's value was compared. `per_atom`: the ranks' weighted sums over the
atoms each owns against the reference's (a row that moved or changed shows); `small` (a scalar, a
per-system value of a few elements) and `per_system` (each system's row sum): every rank's value as it
is, against the reference's or rank 0's."""

OP_AGAINST: tuple[str, ...] = ("reference", "ranks")
"""`DivergentOp.against`: what the op departs from: the single-process reference, or the other ranks
(rank 0's value) when the reference has no record of the op."""

_SYMBOLS = {
    "__matmul__": "@",
    "__rmatmul__": "@",
    "__getitem__": "[…]",
    "__add__": "+",
    "__radd__": "+",
    "__sub__": "-",
    "__rsub__": "-",
    "__mul__": "*",
    "__rmul__": "*",
    "__truediv__": "/",
    "__rtruediv__": "/",
    "__neg__": "-",
    "__pow__": "**",
}


@dataclass(eq=False)
class DivergentOp(Record):
    """One torch operation, named where the user's code calls it.

    `op` is the callable as torch names it (`torch.einsum`, `Tensor.__matmul__`, `Tensor.sum`), `file`
    and `line` the user's line that called it (the innermost frame of the user's own code: a helper's
    line, not its caller's), `function` the function holding that line (`Readout.forward`), `call`
    which call of the op at that line it is (0: the first). `level` says how its value was compared
    (`OP_LEVELS`), `against` what it departs from (`OP_AGAINST`), `ranks` the ranks whose value departs
    (every rank for a `per_atom` op, whose ranks are compared as a sum), `rel_diff` the departure
    relative to the value's size, and `compared` how many ops were compared before it and matched.
    `site` is the op's own `file:line` when the user's line calls into a third-party package that
    issues it (None when the user's own code calls it; absent in older reports).
    """

    op: str
    file: str
    line: int
    function: str = ""
    call: int = 0
    level: str = dataclasses.field(default="small", metadata=wire(enum=OP_LEVELS))
    against: str = dataclasses.field(default="reference", metadata=wire(enum=OP_AGAINST))
    ranks: list[int] = dataclasses.field(default_factory=list)
    rel_diff: float | None = None
    compared: int = 0
    site: str | None = dataclasses.field(default=None, metadata=wire(omit_empty=True))

    _derived = ("symbol", "where")

    @property
    def symbol(self) -> str:
        """The op's short name: `einsum` for `torch.einsum`, `sum` for `Tensor.sum`, `matmul` for `a @ b`
        (torch sees `Tensor.matmul`), `@` for `Tensor.__matmul__`."""
        name = self.op.rsplit(".", 1)[-1]
        return _SYMBOLS.get(name, name)

    @property
    def where(self) -> str:
        """`` `matmul` at model.py:42 in Readout.forward ``: the op, its line and its function, in words
        (`, issued at aimnet/nbops.py:742` when a package the line calls into issued it)."""
        text = f"`{self.symbol}` at {os.path.basename(self.file)}:{self.line}"
        text = f"{text} in {self.function}" if self.function else text
        return f"{text}, issued at {self.package_site}" if self.package_site else text

    @property
    def package_site(self) -> str | None:
        """`site` from the installed package down (`aimnet/nbops.py:742`), None without one."""
        return _package_path(self.site) if self.site else None


def _package_path(site: str) -> str:
    """`aimnet/nbops.py:742`: a path inside an installed package from the package down, else the file's name."""
    parts = site.replace("\\", "/").split("/")
    for marker in ("site-packages", "dist-packages"):
        if marker in parts:
            return "/".join(parts[len(parts) - parts[::-1].index(marker) :])
    return os.path.basename(site)
