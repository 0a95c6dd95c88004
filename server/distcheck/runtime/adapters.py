"""Third-party helper adapters: swap a helper function while a rank runs, restore it afterwards.

`kind: "python"` swaps in a named replacement (`"module:function"`). `kind: "reduction"` is the
generic adapter for per-system reductions: the halo rows of the atom argument are zeroed, the
original helper is called, and the result is all-reduced differentiably (exact adjoint: its
backward sums the gradients over ranks).

A module-level helper is patched in its home module and in every loaded module that imported it by
name (`from pkg.ops import mol_sum`). A dotted `attr_name` names an attribute further in:
`"sub.func"` (a function of a submodule) is patched the same way; `"Class.method"` (a plain,
static or class method, e.g. a submodule class's `forward`, reached through `__call__`) is patched on
the class, so every instance's calls go through it; `atom_arg` then counts the arguments after
`self`/`cls` (an atom tensor passed by keyword is found by its position in the signature; a
submodule its package does not import is imported). `kind: "method"` is that last form declared as
such: its attr_name must reach a method of a class (anything else is refused, naming what to
write), and it goes through the reduction adapter, or through its `replacement` when one is given.
Everything is restored on exit, even when the forward raises.
"""

from __future__ import annotations

import functools
import importlib
import importlib.util
import sys
import types
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from ..report.handler_counts import handler_count
from ..spec import HelperAdapter
from .call_args import as_positional
from .context import RankContext
from .exchange import all_reduce_sum
from .factory import FactoryError, load_object
from .module_namespace import namespace

__all__ = ["AdapterError", "install_adapters", "reduction_adapter"]


class AdapterError(RuntimeError):
    """A helper named in `third_party_helpers` could not be found or replaced."""


def _mask_atoms(x: Any, dim: int, ctx: RankContext) -> Any:
    if not isinstance(x, torch.Tensor) or x.ndim == 0:
        return x
    d = dim if dim >= 0 else x.ndim + dim
    rows = int(x.shape[d])
    if rows < ctx.num_local:
        raise AdapterError(
            f"rank {ctx.rank}: the atom argument has {rows} rows along dim {dim} but the rank holds "
            f"{ctx.num_local} atoms; fix atom_arg/atom_dim of this helper in third_party_helpers"
        )
    mask = ctx.row_mask(rows, x)
    shape = [1] * x.ndim
    shape[d] = rows
    return torch.where(mask.reshape(shape), x, torch.zeros_like(x))


def _reduce_result(out: Any, ctx: RankContext) -> Any:
    if isinstance(out, torch.Tensor):
        return all_reduce_sum(out, ctx) if out.is_floating_point() or out.is_complex() else _int_sum(out, ctx)
    if isinstance(out, tuple):
        return type(out)(_reduce_result(o, ctx) for o in out)
    if isinstance(out, list):
        return [_reduce_result(o, ctx) for o in out]
    return out


def _int_sum(t: torch.Tensor, ctx: RankContext) -> torch.Tensor:
    return all_reduce_sum(t.to(torch.float64), ctx).round().to(t.dtype)


def reduction_adapter(
    original: Callable[..., Any], entry: HelperAdapter, ctx: RankContext, skip: int = 0
) -> Callable[..., Any]:
    """Wrap `original` as a distributed per-system reduction over the atom argument (`atom_arg`
    counted after the first `skip` positional arguments: 1 for a method's `self` or `cls`)."""
    name = handler_count("adapter", f"{entry.module_path}.{entry.attr_name}")
    position = entry.atom_arg + skip

    @functools.wraps(original)
    def adapted(*args: Any, **kwargs: Any) -> Any:
        ctx.count(name)
        if position >= len(args):
            args, kwargs = as_positional(original, args, kwargs)  # the atom tensor passed by keyword
        if position < len(args):
            args = tuple(_mask_atoms(a, entry.atom_dim, ctx) if i == position else a for i, a in enumerate(args))
        else:
            raise AdapterError(
                f"{entry.module_path}.{entry.attr_name} was called with {len(args) - skip} positional arguments"
                f"{' after self' if skip else ''} (keywords counted at their positions); "
                f"atom_arg={entry.atom_arg} is out of range. Fix atom_arg in third_party_helpers: the position "
                f"of the per-atom tensor among the helper's parameters{' after self/cls' if skip else ''}, from 0"
            )
        return _reduce_result(original(*args, **kwargs), ctx)

    adapted.__distcheck_adapted__ = True  # type: ignore[attr-defined]
    return adapted


def _python_adapter(
    original: Callable[..., Any], entry: HelperAdapter, ctx: RankContext, skip: int = 0
) -> Callable[..., Any]:
    if not entry.replacement:
        raise AdapterError(f"{entry.qualname}: kind {entry.kind!r} needs a replacement 'module:function'")
    try:
        replacement = load_object(entry.replacement)
    except FactoryError as exc:
        raise AdapterError(f"replacement for {entry.qualname}: {exc}") from exc
    name = handler_count("adapter", f"{entry.module_path}.{entry.attr_name}")

    @functools.wraps(original)
    def adapted(*args: Any, **kwargs: Any) -> Any:
        ctx.count(name)
        return replacement(*args, **kwargs)

    adapted.__distcheck_adapted__ = True  # type: ignore[attr-defined]
    return adapted


def _holders(original: Any) -> list[tuple[Any, str]]:
    """Every (module, attribute) pair in sys.modules that refers to `original`."""
    found = []
    for module in list(sys.modules.values()):
        for attr, value in list((namespace(module) or {}).items()):
            if value is original:
                found.append((module, attr))
    return found


def _resolve(entry: HelperAdapter) -> tuple[Any, str]:
    """The object that holds the helper and the helper's last name: `module_path` imported, then every
    dotted part of `attr_name` but the last followed."""
    try:
        owner: Any = importlib.import_module(entry.module_path)
    except ImportError as exc:
        raise AdapterError(
            f"third_party_helpers: cannot import {entry.module_path!r} ({exc}); install it or remove the entry"
        ) from exc
    *path, last = entry.attr_name.split(".")
    walked = entry.module_path
    for part in path:
        if isinstance(owner, types.ModuleType) and not hasattr(owner, part):
            _import_submodule(f"{walked}.{part}")  # a submodule its package does not import itself
        if not hasattr(owner, part):
            raise AdapterError(
                f"third_party_helpers: {walked} has no attribute {part!r}; check attr_name {entry.attr_name!r}"
            )
        owner = getattr(owner, part)
        walked = f"{walked}.{part}"
    if not isinstance(owner, (types.ModuleType, type)):
        raise AdapterError(
            f"third_party_helpers: {walked} is a {type(owner).__name__} instance, not a module or a class; "
            f"name the method on its class ({type(owner).__module__}:{type(owner).__qualname__}) in attr_name"
        )
    if not hasattr(owner, last):
        raise AdapterError(f"third_party_helpers: {walked} has no attribute {last!r}; check attr_name")
    return owner, last


def _import_submodule(name: str) -> None:
    """Import `name` when it is a submodule that exists; leave a missing one to the caller's message
    (an import error raised inside an existing submodule is the user's and is reported as such)."""
    try:
        if importlib.util.find_spec(name) is None:
            return
    except (ImportError, ValueError):
        return
    try:
        importlib.import_module(name)
    except ImportError as exc:
        raise AdapterError(f"third_party_helpers: cannot import {name!r} ({exc}); install what it needs") from exc


def _patch_method(cls: type, attr: str, entry: HelperAdapter, ctx: RankContext) -> tuple[Any, bool] | None:
    """Install the adapter of method `cls.attr`; (the raw class attribute it replaced, whether `cls`
    defined it itself), or None when it is already adapted."""
    own = attr in cls.__dict__
    raw = next((k.__dict__[attr] for k in cls.__mro__ if attr in k.__dict__), None)
    if raw is None:
        raise AdapterError(f"third_party_helpers: {cls.__qualname__}.{attr} is not a class attribute; check attr_name")
    build = _python_adapter if entry.swaps else reduction_adapter
    wrap: Callable[[Any], Any] | None
    if isinstance(raw, staticmethod):
        func, skip, wrap = raw.__func__, 0, staticmethod
    elif isinstance(raw, classmethod):
        func, skip, wrap = raw.__func__, 1, classmethod
    elif callable(raw):
        func, skip, wrap = raw, 1, None
    else:
        raise AdapterError(
            f"third_party_helpers: {cls.__qualname__}.{attr} is a {type(raw).__name__}, not a method; "
            "name a function, a method, a staticmethod or a classmethod in attr_name"
        )
    if getattr(func, "__distcheck_adapted__", False):
        return None
    adapted = build(func, entry, ctx, skip)
    setattr(cls, attr, wrap(adapted) if wrap is not None else adapted)
    return raw, own


@contextmanager
def install_adapters(entries: Sequence[HelperAdapter], ctx: RankContext) -> Iterator[list[str]]:
    """Install every adapter for the block; yield the patched `module.attr` names; always restore
    (a method a class inherited is removed from it again rather than set)."""
    patched: list[tuple[Any, str, Any, bool]] = []
    names: list[str] = []
    try:
        for entry in entries:
            owner, attr = _resolve(entry)
            if entry.kind == "method" and not isinstance(owner, type):
                raise AdapterError(
                    f"third_party_helpers: {entry.qualname} is an attribute of module {owner.__name__}, not a "
                    'method of a class; name the class in attr_name ("Class.method"), or use "kind": '
                    '"reduction" (or "python") for a module-level function'
                )
            if isinstance(owner, type):
                done = _patch_method(owner, attr, entry, ctx)
                if done is not None:
                    patched.append((owner, attr, done[0], done[1]))
                    names.append(entry.qualname)
                continue
            original = getattr(owner, attr)
            if getattr(original, "__distcheck_adapted__", False):
                continue
            build = _python_adapter if entry.swaps else reduction_adapter
            adapted = build(original, entry, ctx)
            holders = _holders(original) if callable(original) else []
            if not any(m is owner and a == attr for m, a in holders):
                holders.append((owner, attr))
            for module, name in holders:
                patched.append((module, name, original, True))
                setattr(module, name, adapted)
            names.append(entry.qualname)
        yield names
    finally:
        for holder, attr, original, own in reversed(patched):
            if own:
                setattr(holder, attr, original)
            else:
                delattr(holder, attr)
