"""Where a Python object is defined: the one rule for the report's `file`/`line` of factories,
samples and helpers (`jobs/sample.py`, `validate/helpers.py`)."""

from __future__ import annotations

import inspect
import os
from typing import Any

__all__ = ["definition_site"]


def definition_site(obj: Any) -> tuple[str, int] | None:
    """The absolute source file and 1-based line where `obj` (unwrapped from decorators) is defined,
    or None when its source cannot be found (a builtin, a C extension, code without a file)."""
    try:
        target = inspect.unwrap(obj)
        file = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (TypeError, OSError):
        return None
    if not file:
        return None
    return os.path.abspath(file), int(line) if line else 1
