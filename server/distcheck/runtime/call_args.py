"""Arguments passed by keyword, read by position: the one rule the adapters, the helper trace and the
`custom_ops` handlers share, so an entry's `atom_arg` or transform position reaches an argument
however the call spelled it.

A Python function's positions come from its signature (`self` / `cls` included for a method's
function): a keyword argument that could have been passed positionally is moved into its place.
An opaque `torch.ops` kernel's positions come from its schema: `op_positions` maps each keyword the
schema names to the argument's index there, the index a `custom_ops` entry uses.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import torch

__all__ = ["as_positional", "op_positions", "signature_of"]

_NO_SIGNATURE = object()
_SIGNATURES: dict[int, tuple[Callable[..., Any], Any]] = {}


def signature_of(fn: Callable[..., Any]) -> inspect.Signature | None:
    """`fn`'s signature, or None when Python cannot read one (some builtins, scripted functions);
    cached per function."""
    hit = _SIGNATURES.get(id(fn))
    if hit is not None and hit[0] is fn:
        cached: inspect.Signature | None = None if hit[1] is _NO_SIGNATURE else hit[1]
        return cached
    try:
        sig: Any = inspect.signature(fn)
    except (TypeError, ValueError):
        sig = _NO_SIGNATURE
    _SIGNATURES[id(fn)] = (fn, sig)
    found: inspect.Signature | None = None if sig is _NO_SIGNATURE else sig
    return found


def as_positional(
    fn: Callable[..., Any], args: Sequence[Any], kwargs: Mapping[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`(args, kwargs)` of the same call of `fn` with every keyword argument that has a position moved
    into it (keyword-only ones stay keywords). Unchanged when there are no keywords, when `fn` has no
    readable signature or when the call does not bind to it (the call itself then raises as it would)."""
    if not kwargs:
        return tuple(args), {}
    sig = signature_of(fn)
    if sig is None:
        return tuple(args), dict(kwargs)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return tuple(args), dict(kwargs)
    return tuple(bound.args), dict(bound.kwargs)


def _schemas(func: Any) -> list[Any]:
    if isinstance(func, torch._ops.OpOverload):
        return [func._schema]
    if isinstance(func, torch._ops.OpOverloadPacket):
        schemas = []
        names: list[str] = func.overloads()  # type: ignore[no-untyped-call]
        for name in names:
            overload = getattr(func, name, None)
            if overload is not None and hasattr(overload, "_schema"):
                schemas.append(overload._schema)
        return schemas
    return []


def op_positions(func: Any, n_args: int, kwargs: Mapping[str, Any]) -> dict[str, int]:
    """For a `torch.ops` kernel called with `n_args` positional arguments and `kwargs`: each keyword
    the kernel's schema names → that argument's index in the schema (what a `custom_ops` transform
    key means). An overload packet's overloads must agree (else nothing is mapped); a keyword the
    schema does not name, or a call that fits no schema, is left out."""
    if not kwargs:
        return {}
    found: dict[str, int] | None = None
    for schema in _schemas(func):
        names = [a.name for a in schema.arguments]
        if n_args > len(names) or any(k not in names[n_args:] for k in kwargs):
            continue
        positions = {k: names.index(k) for k in kwargs}
        if found is not None and found != positions:
            return {}
        found = positions
    return found or {}
