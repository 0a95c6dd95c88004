"""The exceptions that mean "cannot validate as asked", as a message and a hint in the caller's words."""

from __future__ import annotations

from ..option_check import ConfigError
from ..options import Vocabulary

__all__ = ["setup_error"]


def setup_error(exc: BaseException, words: Vocabulary) -> tuple[str, str] | None:
    """`(message, hint)` for a `ConfigError`, a broken spec, a factory that cannot be referenced by name, a
    setup error of the ranks or a CUDA error, the hint naming what `words`' caller can change; None for
    anything else (an internal error)."""
    from ..runtime.errors import SetupError
    from ..runtime.factory import FactoryError
    from ..spec import SpecError

    if isinstance(exc, ConfigError):
        return exc.message, exc.hint
    if isinstance(exc, SpecError):
        if exc.path == "$" and exc.line is None:
            return f"cannot use the spec: {exc.message}", f"fix the path given to {words.name('spec')}"
        where = f"{exc.file}:{exc.line}" if exc.file and exc.line else (exc.file or "the spec")
        return f"invalid spec in {where}: {exc}", "fix the spec file, or remove it to start from the wrapper's spec"
    if isinstance(exc, FactoryError):
        return str(exc), (
            "point the target's factory at one defined with `def` at module scope ('path/file.py:function' or "
            "'package.module:function'), not a lambda, closure or nested function"
        )
    if isinstance(exc, SetupError):
        return str(exc), f"change the options ({words.name('device')}, {words.name('backend')}, ...) it names"
    if isinstance(exc, RuntimeError) and ("CUDA" in str(exc) or "cuda" in str(exc)):
        return str(exc), f"use {words.assign('device', 'cpu')} (or auto) on a machine without a GPU"
    return None
