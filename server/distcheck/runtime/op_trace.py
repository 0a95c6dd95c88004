"""`OpTracer`: the torch operations a forward issues from the user's code, each with its line and a cheap
fingerprint of its value, so a reference and the ranks can be compared op by op (`validate.op_trace` names
the first op whose value departs).

A `TorchFunctionMode`, entered around the forward (outside `HandlerMode` on a rank). It records an op
when the innermost frame that called it, torch's own frames aside, is not distcheck's: the user's
code (or a third-party package it calls), directly or through another mode that handles this very
call and lets it through (`HandlerMode` on a rank, the reference's observers). The ops distcheck's
handlers issue while they route are not recorded: a routed op has no record on a rank. Each record
is named by the user's frame (`runtime.frames`: the innermost user frame above the op) and keyed by
`file:line:op#k`, the k-th call of that op at that line, so calls align across processes even when
some are missing on one of them; `site` is the op's own `file:line` when the user's line called into
a third-party package that issued it (None when the user's code called it).

Fingerprints (float64, on the CPU), computed with `runtime.pristine` inside `shielded()` and with the
rank's handlers suspended (the user's patches and distcheck's routing never move them):

- `per_atom` (a dimension of this process's atom rows' size, the first such: `e`, `e.unsqueeze(0)`):
  `[Σ w·r, Σ w·|r|, Σ w]` over the atoms this process owns, `r` each row's sum and `w` a fixed weight
  of the atom's global id, so the ranks' values sum to the reference's and a row that moved or
  changed shows;
- `small` (at most `SMALL_NUMEL` elements, not per-atom: a scalar, a per-system value): the values;
- `per_system` (leading dimension = number of systems, larger): each system's row sum.

Anything else (per-edge tensors, integer tensors, tuples) is not recorded, and neither is a gradient
(`torch.autograd.grad`'s results, a `.grad`) or anything computed from one: on a rank, where halo
copies hold part of an atom's gradient (summed over the copies when the outputs are consolidated), a
gradient's owned rows are partial by design. At most `MAX_OPS` records
per forward; `truncated` says when more ops ran.
"""

from __future__ import annotations

import contextlib
import os
import sys
import weakref
from collections.abc import Mapping, Sequence
from functools import lru_cache
from types import FrameType
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from . import pristine as P
from .context import current_context
from .frames import is_user_file

__all__ = ["MAX_OPS", "SMALL_NUMEL", "OpTracer", "op_name"]

MAX_OPS = 4000
"""The most op records one forward keeps (the first ones: the first departure is what is named)."""

SMALL_NUMEL = 64
"""A tensor of at most this many elements that is not per-atom is recorded whole (`small`)."""

_MAX_SYSTEM_ROWS = 4096
_GOLDEN = 0.6180339887498949
_TORCH_DIR = os.path.dirname(os.path.abspath(torch.__file__)) + os.sep
_DISTCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
_arange = torch._C._VariableFunctions.arange
_GRAD: Any = vars(torch._C.TensorBase)["grad"]  # the `.grad` property (a getset descriptor)
_GRADIENTS: tuple[Any, ...] = (torch.autograd.grad, _GRAD.__get__)
_movedim = torch._C.TensorBase.movedim


@lru_cache(maxsize=4096)
def _where(filename: str) -> str:
    """`"torch"`, `"distcheck"`, `"user"` or `"other"` (a third-party package, the standard library)."""
    full = os.path.abspath(filename) if not filename.startswith("<") else filename
    if full.startswith(_TORCH_DIR):
        return "torch"
    if full.startswith(_DISTCHECK_DIR):
        return "distcheck"
    return "user" if is_user_file(full) else "other"


def op_name(func: Any) -> str:
    """`torch.einsum`, `Tensor.__matmul__`, `torch.nn.functional.linear`: a torch callable as the user
    spells it."""
    name = str(getattr(func, "__name__", None) or type(func).__name__)
    owner = getattr(func, "__objclass__", None)
    qualname = str(getattr(func, "__qualname__", "") or "")
    if (isinstance(owner, type) and issubclass(owner, torch._C.TensorBase)) or qualname.startswith("Tensor."):
        return f"Tensor.{name}"
    for module, namespace in (("torch", torch), ("torch.nn.functional", torch.nn.functional)):
        if getattr(namespace, name, None) is func:
            return f"{module}.{name}"
    return f"{getattr(func, '__module__', None) or 'torch'}.{name}"


def _passes_through(frame: FrameType, func: Any) -> bool:
    """Whether `frame` is another torch-function mode's `__torch_function__` handling this very call
    (`HandlerMode` letting an op through, the reference's observers): its caller is what counts."""
    return frame.f_code.co_name == "__torch_function__" and frame.f_locals.get("func") is func


def _caller(frame: FrameType | None, func: Any) -> tuple[FrameType, FrameType] | None:
    """The user frame the call of `func` made at `frame` belongs to and the frame that made the call
    (the same frame, or a third-party package's the user's code called into), or None when the call
    is distcheck's own (a handler's, a recorder's) or no user frame is above it."""
    while frame is not None:
        where = _where(frame.f_code.co_filename)
        if where == "distcheck" and not _passes_through(frame, func):
            return None
        if where not in ("torch", "distcheck"):
            break
        frame = frame.f_back
    site, user = frame, frame
    while user is not None and _where(user.f_code.co_filename) != "user":
        user = user.f_back
    return (user, site) if user is not None and site is not None else None


class OpTracer(TorchFunctionMode):
    """Records the ops of one forward (see the module docstring). `rows` and `num_systems` are this
    process's atom rows and systems; `owned_mask` (a rank's; None in a single process) selects the rows
    it owns, whose atoms' global ids are the rank context's `local_ids`."""

    def __init__(self, rows: int, num_systems: int, owned_mask: torch.Tensor | None = None) -> None:
        super().__init__()
        self.rows, self.num_systems, self.owned_mask = rows, num_systems, owned_mask
        self.records: list[dict[str, Any]] = []
        self.truncated = False
        self._seen: dict[tuple[str, int, str], int] = {}
        self._weights: dict[str, torch.Tensor] = {}
        self._gradients: dict[int, weakref.ref[torch.Tensor]] = {}  # by id: a tensor's `==` is elementwise

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        if func in _GRADIENTS or (self._gradients and self._from_gradient(args, kwargs)):
            self._mark_gradient(out)  # a rank's gradient rows are partial where halo copies hold contributions
            return out
        if isinstance(out, torch.Tensor) and out.is_floating_point():
            level = self._level(out)  # shapes first: most ops (per-edge, large) are never fingerprinted
            if level is None:
                pass
            elif len(self.records) >= MAX_OPS:
                self.truncated = True
            else:
                found = _caller(sys._getframe(1), func)
                if found is not None:
                    self._record(func, out, level, *found)
        return out

    def _from_gradient(self, args: Sequence[Any], kwargs: Mapping[str, Any]) -> bool:
        """Whether an argument (or an element of a list or tuple argument) is a gradient or made from one."""
        for a in (*args, *kwargs.values()):
            for t in a if isinstance(a, (list, tuple)) else (a,):
                if isinstance(t, torch.Tensor):
                    ref = self._gradients.get(id(t))
                    if ref is not None and ref() is t:
                        return True
        return False

    def _mark_gradient(self, out: Any) -> None:
        for t in out if isinstance(out, (list, tuple)) else (out,):
            if isinstance(t, torch.Tensor):
                self._gradients[id(t)] = weakref.ref(t)

    def _level(self, out: torch.Tensor) -> str | None:
        """How `out` is fingerprinted (`per_atom`, `small`, `per_system`), None when it is not."""
        n, b = self.rows, self.num_systems
        if n != b and n in out.shape:
            return "per_atom"
        if out.numel() <= SMALL_NUMEL:
            return "small"
        if out.ndim >= 1 and out.shape[0] == b and b <= _MAX_SYSTEM_ROWS:
            return "per_system"
        return None

    def _record(self, func: Any, out: torch.Tensor, level: str, user: FrameType, site: FrameType) -> None:
        ctx = current_context()  # the handlers must not route the tracer's own sums over rows
        try:
            with P.shielded(), ctx.handlers_suspended() if ctx is not None else contextlib.nullcontext():
                value = self._fingerprint(P.detach(out), level)
        except (RuntimeError, TypeError, ValueError, NotImplementedError):
            return  # a layout no fingerprint reads (sparse, nested, a subclass): not recorded, never raised
        name = op_name(func)
        file, line = os.path.abspath(user.f_code.co_filename), int(user.f_lineno)
        k = self._seen.get((file, line, name), 0)
        self._seen[(file, line, name)] = k + 1
        self.records.append(
            {
                "key": f"{file}:{line}:{name}#{k}",
                "op": name,
                "file": file,
                "line": line,
                "function": user.f_code.co_qualname,
                "site": None if site is user else f"{os.path.abspath(site.f_code.co_filename)}:{site.f_lineno}",
                "level": level,
                "value": value,
            }
        )

    def _fingerprint(self, out: torch.Tensor, level: str) -> torch.Tensor:
        n, b = self.rows, self.num_systems
        if level == "per_atom":  # the first dimension of the atom rows' size holds them (`e.unsqueeze(0)`)
            d = list(out.shape).index(n)
            rows = _movedim(out, d, 0) if d else out
            r = P.sum(P.reshape(P.to(rows, P.float64), (n, -1)), dim=1)
            w = self._weight(out.device)
            if self.owned_mask is not None:
                r = P.getitem(r, P.to(self.owned_mask, out.device))
            s = P.sum(P.mul(r, w))
            a = P.sum(P.mul(P.abs(r), w))
            return P.to(P.stack([s, a, P.sum(w)]), "cpu")
        if level == "small":
            return P.clone(P.to(P.reshape(P.to(out, P.float64), (-1,)), "cpu"))
        return P.to(P.sum(P.reshape(P.to(out, P.float64), (b, -1)), dim=1), "cpu")

    def _weight(self, device: torch.device) -> torch.Tensor:
        """The weight of each owned row's atom: `1 + frac(id · φ)` (in [1, 2), so no cancellation)."""
        key = str(device)
        w = self._weights.get(key)
        if w is None:
            ctx = current_context()
            if ctx is not None:
                ids = P.to(ctx.local_ids, device=device, dtype=P.float64)
                if self.owned_mask is not None:
                    ids = P.getitem(ids, P.to(self.owned_mask, device))
            else:
                ids = _arange(self.rows, dtype=P.float64, device=device)
            x = P.mul(ids, _GOLDEN)
            w = P.add(P.sub(x, P.floor(x)), 1.0)
            self._weights[key] = w
        return w

    def collect(self) -> dict[str, Any]:
        """The records in call order and whether some were left out (`{"ops": [...], "truncated": bool}`)."""
        return {"ops": self.records, "truncated": self.truncated}
