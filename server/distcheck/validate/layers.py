"""Layer records: forward hooks on every sub-module, reduced to what can be compared across ranks.

Per-atom outputs (leading dimension = atom rows) are recorded as their column sums — over all rows
on the reference, over owned rows on a rank — so the sum over ranks must equal the reference.
Per-system outputs (leading dimension = number of systems) are recorded as they are. Anything
else (edge-level tensors, scalars, tuples) is not recorded: it cannot be compared and is never
reported as divergent.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import math
import types
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from ..report import MAX_MODULE_DIFFS, DivergentLayer, LayerDivergence, ModuleDiff
from ..runtime import pristine as P
from ..runtime.context import current_context
from ..runtime.op_trace import OpTracer

__all__ = ["LayerRecorder", "compare_layers", "held_modules"]


class LayerRecorder:
    """Hooks every sub-module `model` holds (see `held_modules`); records in call order. `returned` names every module
    whose forward returned, in call order, whatever its output (what a crash report shows). With
    `trace_ops`, `ops` traces the torch operations of the same forward (`runtime.op_trace`), read with
    `op_records`: always in the reference (one forward), on the ranks only in a diagnostic run."""

    def __init__(
        self,
        model: Any,
        rows: int,
        num_systems: int,
        owned_mask: torch.Tensor | None = None,
        trace_ops: bool = True,
    ) -> None:
        self.model = model
        self.rows = rows
        self.num_systems = num_systems
        self.owned_mask = owned_mask
        self.records: list[dict[str, Any]] = []
        self.returned: list[str] = []
        self._seen: dict[str, int] = {}
        self.ops = OpTracer(rows, num_systems, owned_mask) if trace_ops else None

    def _hook(self, name: str, module: Any) -> Any:
        def hook(mod: Any, inputs: Any, output: Any) -> None:
            self.returned.append(name)
            if not isinstance(output, torch.Tensor) or output.ndim == 0 or not output.is_floating_point():
                return
            k = self._seen.get(name, 0)
            self._seen[name] = k + 1
            key = f"{name}#{k}"
            ctx = current_context()  # the handlers must not route the recorder's own sums over rows
            with torch.no_grad(), ctx.handlers_suspended() if ctx is not None else contextlib.nullcontext():
                out = output.detach()
                if out.shape[0] == self.rows and self.rows != self.num_systems:
                    rows = out if self.owned_mask is None else out[self.owned_mask.to(out.device)]
                    value = rows.to(torch.float64).sum(dim=0).cpu()
                    level = "per_atom"
                elif out.shape[0] == self.num_systems:
                    value = out.to(torch.float64).cpu().clone()
                    level = "per_system"
                else:
                    return
            cls = type(mod)
            self.records.append(
                {
                    "key": key,
                    "module": name,
                    "class": f"{cls.__module__}.{cls.__qualname__}",
                    "level": level,
                    "value": value,
                }
            )

        return hook

    @contextmanager
    def attached(self) -> Iterator[LayerRecorder]:
        """Hooks installed and the op trace on for the block, both removed afterwards."""
        handles = []
        for name, module in held_modules(self.model):
            try:
                handles.append(module.register_forward_hook(self._hook(name, module)))
            except (RuntimeError, AttributeError):  # some scripted modules refuse Python hooks
                continue
        try:
            with self.ops if self.ops is not None else contextlib.nullcontext():
                yield self
        finally:
            for h in handles:
                h.remove()

    def collect(self) -> list[dict[str, Any]]:
        """The records, in call order."""
        return self.records

    def op_records(self) -> dict[str, Any]:
        """The op trace: `{"ops": [...], "truncated": bool}` (`runtime.op_trace.OpTracer.collect`); `{}`
        when the ops were not traced."""
        return self.ops.collect() if self.ops is not None else {}


_MAX_DEPTH = 4
_MODULE_STATE = frozenset(vars(torch.nn.Module()))
"""The attributes torch keeps on every module (its parameters, buffers, sub-modules, hooks): not the
user's, never searched for held modules."""


def _slots(value: Any) -> list[tuple[str, Any]]:
    """The `__slots__` attributes an object has set (a `@dataclass(slots=True)`'s fields)."""
    items: list[tuple[str, Any]] = []
    for klass in type(value).__mro__:
        names = klass.__dict__.get("__slots__", ())
        for name in (names,) if isinstance(names, str) else names:
            if name not in ("__dict__", "__weakref__") and hasattr(value, name):
                items.append((name, getattr(value, name)))
    return items


def _members(value: Any) -> list[tuple[str, Any]]:
    """What a non-module value holds, each under the name a path to it uses (`""`: the same path, for a
    bound method's object): a mapping's items, a sequence's elements, a `functools.partial`'s function
    and arguments, a function's closure cells and attributes, an object's attributes and slots."""
    if isinstance(value, Mapping):
        return [(str(k), v) for k, v in value.items()]
    if isinstance(value, (list, tuple, collections.deque)):
        return [(str(i), v) for i, v in enumerate(value)]
    if isinstance(value, functools.partial):
        return [("func", value.func), ("args", value.args), ("keywords", value.keywords)]
    if isinstance(value, types.MethodType):
        return [("", value.__self__)]
    if isinstance(value, (type, types.ModuleType, types.BuiltinFunctionType)):
        return []
    items: list[tuple[str, Any]] = []
    if isinstance(value, types.FunctionType):
        for name, cell in zip(value.__code__.co_freevars, value.__closure__ or (), strict=False):
            try:
                items.append((name, cell.cell_contents))
            except ValueError:  # a cell not yet filled
                continue
    if hasattr(value, "__dict__"):
        items.extend(vars(value).items())
    return items + _slots(value)


def held_modules(obj: Any) -> list[tuple[str, torch.nn.Module]]:
    """Every nn.Module `obj` reaches, named by the path to it, each module once, the root itself left
    out. A module's own sub-modules come from `named_modules()`, and the containers its attributes hold
    (a plain list of modules torch never registered) are searched too; a wrapper that is not a module
    (a predict unit, a calculator, a closure, a `functools.partial`, a bound `forward`) is searched
    through its attributes, slots, closure cells and the lists, tuples and dicts they hold, a few
    levels deep, so its modules are hooked too."""
    found: list[tuple[str, torch.nn.Module]] = []
    seen: set[int] = set()

    def join(prefix: str, key: str) -> str:
        return ".".join(p for p in (prefix, key) if p)

    def add_module(prefix: str, module: torch.nn.Module, depth: int, visited: set[int]) -> None:
        added: list[tuple[str, torch.nn.Module]] = []
        for sub_name, sub in module.named_modules():
            if id(sub) in seen:
                continue
            seen.add(id(sub))
            name = join(prefix, sub_name)
            added.append((name, sub))
            if name:
                found.append((name, sub))
        for name, sub in added:  # registered modules keep their own names; then what attributes hold
            for key, item in list(vars(sub).items()):
                if key not in _MODULE_STATE and not isinstance(item, torch.nn.Module):
                    walk(join(name, key), item, depth + 1, visited)

    def walk(prefix: str, value: Any, depth: int, visited: set[int]) -> None:
        if isinstance(value, torch.nn.Module):
            add_module(prefix, value, depth, visited)
            return
        if depth > _MAX_DEPTH or id(value) in visited or isinstance(value, (str, bytes, torch.Tensor)):
            return
        visited.add(id(value))
        for key, item in _members(value):
            walk(join(prefix, key), item, depth + 1, visited)

    walk("", obj, 0, set())
    return found


def compare_layers(
    reference: Sequence[Mapping[str, Any]], ranks: Sequence[Sequence[Mapping[str, Any]]], rtol: float
) -> LayerDivergence:
    """First module (in reference call order) whose rank-summed record differs from the reference
    (`first_divergent`, None when none does), how many records were compared, the largest relative
    difference and each compared record's (`modules`, the first `MAX_MODULE_DIFFS`). Records missing
    on some rank are skipped.
    """
    by_rank = [{r["key"]: r for r in recs} for recs in ranks]
    checked, worst = 0, 0.0
    first: DivergentLayer | None = None
    modules: list[ModuleDiff] = []
    for ref in reference:
        key = ref["key"]
        found = [m.get(key) for m in by_rank]
        got = [g for g in found if g is not None]
        if len(got) != len(found) or any(g["level"] != ref["level"] for g in got):
            continue
        ref_value = ref["value"]
        values = [g["value"] for g in got]
        if ref["level"] == "per_atom":  # the copies' sums, in pristine's add (not Tensor.__add__)
            total = values[0]
            if all(isinstance(v, torch.Tensor) and v.shape == total.shape for v in values):
                with P.shielded():
                    total = P.sum(P.stack(values), dim=0) if len(values) > 1 else total
            else:
                total = None
        else:
            total = values[0]
        if not isinstance(total, torch.Tensor) or total.shape != ref_value.shape:
            continue
        checked += 1
        with P.shielded():  # the user's replaced torch functions never judge
            scale = P.float_of(P.amax(P.abs(ref_value))) if P.numel(ref_value) else 0.0
            diff = P.float_of(P.amax(P.abs(P.sub(total, ref_value)))) if P.numel(ref_value) else 0.0
        rel = diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)
        worst = max(worst, rel)
        if len(modules) < MAX_MODULE_DIFFS:
            modules.append(ModuleDiff(module=ref["module"], key=key, rel_diff=rel))
        if first is None and rel > rtol:
            first = DivergentLayer(ref["module"], ref["class"], key, rel, _short(total), _short(ref_value))
    return LayerDivergence(first_divergent=first, checked=checked, max_rel_diff=worst, modules=modules)


def _short(t: torch.Tensor) -> list[float]:
    return [float(x) for x in t.flatten()[:8]]
