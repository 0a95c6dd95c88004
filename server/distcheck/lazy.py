"""A package's public names loaded on first use (`lazy_attribute`, behind a module `__getattr__`), so
that importing the package imports none of the modules that define them. Imports only `importlib`."""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

__all__ = ["lazy_attribute"]


def lazy_attribute(package: str, exports: Mapping[str, str], namespace: dict[str, Any], name: str) -> Any:
    """`name` read from `package`'s submodule `exports[name]` (imported now) and stored in `namespace`
    (the package's `globals()`), so that later reads find it there; `AttributeError` for a name that
    `exports` does not list."""
    module = exports.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{package}.{module}"), name)
    namespace[name] = value
    return value
