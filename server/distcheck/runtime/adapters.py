"""Third-party helper adapters: swap a helper function while a rank runs, restore it afterwards.

`kind: "python"` swaps in a named replacement (`"module:function"`). `kind: "reduction"` is the
generic adapter for per-system reductions: the halo rows of the atom argument are zeroed, the
original helper is called, and the result is all-reduced differentiably (exact adjoint: its
backward sums the gradients over ranks).

The helper is patched in its home module and in every loaded module that imported it by name
(`from pkg.ops import mol_sum`), and restored on exit even when the forward raises.
"""

from __future__ import annotations

import functools
import importlib
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from ..spec import HelperAdapter
from .context import RankContext
from .exchange import all_reduce_sum
from .factory import FactoryError, load_object

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


def reduction_adapter(original: Callable[..., Any], entry: HelperAdapter, ctx: RankContext) -> Callable[..., Any]:
    """Wrap `original` as a distributed per-system reduction over the atom argument."""
    name = f"adapter[{entry.module_path}.{entry.attr_name}]"

    @functools.wraps(original)
    def adapted(*args: Any, **kwargs: Any) -> Any:
        ctx.count(name)
        if entry.atom_arg < len(args):
            args = tuple(_mask_atoms(a, entry.atom_dim, ctx) if i == entry.atom_arg else a for i, a in enumerate(args))
        else:
            raise AdapterError(
                f"{entry.module_path}.{entry.attr_name} was called with {len(args)} positional arguments; "
                f"atom_arg={entry.atom_arg} is out of range. Fix atom_arg in third_party_helpers"
            )
        return _reduce_result(original(*args, **kwargs), ctx)

    adapted.__distcheck_adapted__ = True  # type: ignore[attr-defined]
    return adapted


def _python_adapter(original: Callable[..., Any], entry: HelperAdapter, ctx: RankContext) -> Callable[..., Any]:
    if not entry.replacement:
        raise AdapterError(f"{entry.qualname}: kind 'python' needs a replacement 'module:function'")
    try:
        replacement = load_object(entry.replacement)
    except FactoryError as exc:
        raise AdapterError(f"replacement for {entry.qualname}: {exc}") from exc
    name = f"adapter[{entry.module_path}.{entry.attr_name}]"

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
        namespace = getattr(module, "__dict__", None)
        if not isinstance(namespace, dict):
            continue
        for attr, value in list(namespace.items()):
            if value is original:
                found.append((module, attr))
    return found


@contextmanager
def install_adapters(entries: Sequence[HelperAdapter], ctx: RankContext) -> Iterator[list[str]]:
    """Install every adapter for the block; yield the patched `module.attr` names; always restore."""
    patched: list[tuple[Any, str, Any]] = []
    names: list[str] = []
    try:
        for entry in entries:
            try:
                home = importlib.import_module(entry.module_path)
            except ImportError as exc:
                raise AdapterError(
                    f"third_party_helpers: cannot import {entry.module_path!r} ({exc}); install it or remove the entry"
                ) from exc
            if not hasattr(home, entry.attr_name):
                raise AdapterError(
                    f"third_party_helpers: {entry.module_path} has no attribute {entry.attr_name!r}; check attr_name"
                )
            original = getattr(home, entry.attr_name)
            if getattr(original, "__distcheck_adapted__", False):
                continue
            build = reduction_adapter if entry.kind == "reduction" else _python_adapter
            adapted = build(original, entry, ctx)
            for module, attr in _holders(original):
                patched.append((module, attr, original))
                setattr(module, attr, adapted)
            names.append(entry.qualname)
        yield names
    finally:
        for module, attr, original in reversed(patched):
            setattr(module, attr, original)
