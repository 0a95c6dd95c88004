"""Checks that span the fields of one spec object, run by the reader after the object's fields are read.

Each check takes the object as written (`raw`), its fields as read (`values`, the ones that were
valid), its path and the sink, and adds an error for a contradiction: a `python` helper without a
replacement or with atom fields, a `reduction` helper with a replacement, a `method` helper whose
attr_name is not `"Class.method"` or that has both a replacement and atom fields, an owned-only output
that is not `per_node` or is also all-reduced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from .errors import Sink, format_path, show
from .jsontext import PathPart
from .model import MLIPSpec
from .parts import METHOD_ATTR_PATTERN, HelperAdapter

__all__ = ["CHECKS", "Check", "check_helper", "check_spec"]


def check_helper(raw: Mapping[str, Any], values: dict[str, Any], parts: tuple[PathPart, ...], sink: Sink) -> None:
    """A helper's kind against its replacement, atom fields and attr_name (`raw`: as written, `values`: as
    read)."""
    kind = values.get("kind")
    if kind == "method":
        _check_method(raw, values, parts, sink)
    elif kind == "python":
        if raw.get("replacement") is None:
            sink.add(
                (*parts, "replacement"),
                'a "python" helper needs a replacement; add "replacement": "package.module:function", '
                'or use "kind": "reduction" for the generic per-system reduction adapter',
            )
        for key in ("atom_arg", "atom_dim"):
            if key in raw:
                sink.add(
                    (*parts, key),
                    f'{key} applies only to "reduction" helpers; remove it or set "kind": "reduction"',
                )
    elif kind == "reduction":
        rparts = (*parts, "replacement")
        if raw.get("replacement") is not None and not sink.has(rparts):
            sink.add(
                rparts,
                'a "reduction" helper uses the generic adapter and takes no replacement; remove '
                '"replacement" or set "kind": "python"',
            )


def _check_method(raw: Mapping[str, Any], values: dict[str, Any], parts: tuple[PathPart, ...], sink: Sink) -> None:
    attr = values.get("attr_name")
    if isinstance(attr, str) and not re.fullmatch(METHOD_ATTR_PATTERN, attr):
        sink.add(
            (*parts, "attr_name"),
            f'a "method" helper names a class and one of its methods; write "attr_name": "<Class>.{attr}" '
            f"with the class of {values.get('module_path') or 'module_path'} that defines {attr}, or use "
            '"kind": "reduction" (or "python") for a module-level function',
        )
    if raw.get("replacement") is not None:
        for key in ("atom_arg", "atom_dim"):
            if key in raw:
                sink.add(
                    (*parts, key),
                    f'{key} applies only to a "method" helper without a replacement (the reduction adapter); '
                    'remove it, or remove "replacement"',
                )


def check_spec(raw: Mapping[str, Any], values: dict[str, Any], parts: tuple[PathPart, ...], sink: Sink) -> None:
    """Owned-only outputs against their output kinds and against `all_reduce_outputs`."""
    kinds: dict[str, str] = values.get("output_kinds", {})
    owned = raw.get("owned_only_outputs")
    reduced = raw.get("all_reduce_outputs")
    reduced_names = {r for r in reduced if isinstance(r, str)} if isinstance(reduced, (list, tuple)) else set()
    if not isinstance(owned, (list, tuple)):
        return
    for i, name in enumerate(owned):
        if not isinstance(name, str):
            continue
        iparts = (*parts, "owned_only_outputs", i)
        if sink.has(iparts):
            continue  # already reported (a duplicate)
        kind = kinds.get(name)
        kind_path = format_path((*parts, "output_kinds", name))
        if kind is not None and kind != "per_node":
            sink.add(
                iparts,
                f"{show(name)} has output kind {show(kind)} ({kind_path}) but owned_only_outputs holds "
                f'per_node outputs only; remove it from owned_only_outputs or set {kind_path} to "per_node"',
            )
        elif name in reduced_names:
            sink.add(
                iparts,
                f"{show(name)} is in both all_reduce_outputs and owned_only_outputs, which contradict "
                "each other; keep it in one of them",
            )


Check = Callable[[Mapping[str, Any], dict[str, Any], tuple[PathPart, ...], Sink], None]
CHECKS: dict[type, Check] = {HelperAdapter: check_helper, MLIPSpec: check_spec}
"""Checks that span the fields of one object, run after its fields are read."""
