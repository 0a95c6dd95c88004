"""Model factories referenced by name, so every rank process can import a fresh copy."""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["FactoryError", "FactoryRef", "load_object", "resolve_factory"]


class FactoryError(ValueError):
    """A factory (or sample) reference that cannot be imported by other processes."""


@dataclass(frozen=True)
class FactoryRef:
    """Where to find a module-level callable: a dotted module or a `.py` file, and a qualified name."""

    module: str | None
    path: str | None
    qualname: str

    def describe(self) -> str:
        """`module:qualname` or `path:qualname`, as a user would write it."""
        return f"{self.module or self.path}:{self.qualname}"

    def load(self) -> Any:
        """Import the module (or file) and return the named object; `FactoryError` when it is a lambda."""
        obj = load_object(self.describe())
        _refuse_lambda(obj, self.describe())
        return obj


def _closure_hint(name: str) -> str:
    return (
        f"{name} is not importable by reference, but every rank imports the factory afresh. "
        "Define it with `def` at module scope (not a lambda, closure or nested function) and pass it, "
        'or pass a string "package.module:function" / "path/file.py:function".'
    )


def _refuse_lambda(obj: Any, reference: str) -> None:
    qual = getattr(obj, "__qualname__", None)
    if isinstance(qual, str) and "<lambda>" in qual:
        name = reference.rpartition(":")[2]
        raise FactoryError(
            f"model_factory {reference!r} is a lambda; distcheck takes factories defined with `def` at module "
            f"scope: write def {name}(): return MyModel()"
        )


def _loaded(ref: FactoryRef) -> Any:
    """The object `ref` names when its module is imported in this process already, else None (nothing
    is imported here: a reference string may name a module the caller never imports)."""
    name = ref.module if ref.module is not None else _module_name(ref.path or "")
    obj: Any = sys.modules.get(name)
    for part in ref.qualname.split("."):
        if obj is None:
            return None
        obj = getattr(obj, part, None)
    return obj


def resolve_factory(factory: Callable[..., Any] | str | FactoryRef) -> FactoryRef:
    """Turn a module-level callable (or a reference string) into a `FactoryRef`.

    Refuses lambdas, closures, nested functions, bound methods of local objects and callables
    whose module cannot be found again, with a `FactoryError` that says how to fix it. A reference
    string naming a lambda (`model_factory = lambda: Model()`) is refused here when its module is
    imported already (the CLI and the editor import it first), else by `FactoryRef.load` in the first
    process that imports it.
    """
    if isinstance(factory, FactoryRef):
        return factory
    if isinstance(factory, str):
        ref = _parse_reference(factory)
        _refuse_lambda(_loaded(ref), factory)
        return ref
    if not callable(factory):
        raise FactoryError(f"model_factory must be callable, got {type(factory).__name__}")
    qual: str | None = getattr(factory, "__qualname__", None)
    modname: str | None = getattr(factory, "__module__", None)
    name: str = getattr(factory, "__name__", repr(factory))
    if qual is None or modname is None:
        raise FactoryError(_closure_hint(repr(factory)))
    if "<lambda>" in qual or "<locals>" in qual:
        raise FactoryError(_closure_hint(f"model_factory {name!r} ({qual})"))
    if getattr(factory, "__closure__", None):
        raise FactoryError(_closure_hint(f"model_factory {name!r} (a closure)"))
    module: Any = sys.modules.get(modname)
    if module is None:
        raise FactoryError(_closure_hint(f"model_factory {name!r}: module {modname!r} is not imported"))
    obj: Any = module
    for part in qual.split("."):
        obj = getattr(obj, part, None)
    if obj is not factory:
        raise FactoryError(_closure_hint(f"model_factory {name!r}: {modname}.{qual} is a different object"))
    if modname in ("__main__", "__mp_main__"):
        path = getattr(module, "__file__", None)
        if not path:
            raise FactoryError(
                f"model_factory {name!r} lives in an interactive __main__ that other processes cannot import; "
                "move it into a .py file and pass 'path/file.py:function'"
            )
        return FactoryRef(module=None, path=os.path.abspath(path), qualname=qual)
    return FactoryRef(module=modname, path=None, qualname=qual)


def _parse_reference(text: str) -> FactoryRef:
    where, sep, attr = text.rpartition(":")
    if not sep or not where or not attr:
        raise FactoryError(
            f"factory reference {text!r} must look like 'package.module:function' or 'path/file.py:function'"
        )
    if where.endswith(".py") or os.sep in where or "/" in where:
        path = os.path.abspath(where)
        if not os.path.exists(path):
            raise FactoryError(f"factory file {path} does not exist; check the path in {text!r}")
        return FactoryRef(module=None, path=path, qualname=attr)
    return FactoryRef(module=where, path=None, qualname=attr)


def _module_name(path: str) -> str:
    """The `sys.modules` name a `.py` file is imported under (the same for one absolute path everywhere)."""
    digest = hashlib.sha1(path.encode()).hexdigest()[:10]
    stem = os.path.splitext(os.path.basename(path))[0]
    return f"distcheck_user_{stem}_{digest}"


def _import_path(path: str) -> Any:
    name = _module_name(path)
    if name in sys.modules:
        return sys.modules[name]
    directory = os.path.dirname(path)
    if directory not in sys.path:
        sys.path.insert(0, directory)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise FactoryError(f"cannot import {path}: not a Python source file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        sys.modules.pop(name, None)
        raise
    return module


def load_object(reference: str) -> Any:
    """Import `'package.module:attr.path'` or `'path/file.py:attr'` and return the object.

    Raises `FactoryError` when the module or attribute does not exist; errors raised while
    importing the user's module propagate unchanged (they are the user's to see).
    """
    module_part, sep, qual = reference.rpartition(":")
    if not sep:
        raise FactoryError(f"reference {reference!r} must look like 'package.module:name' or 'file.py:name'")
    if module_part.endswith(".py") or "/" in module_part or os.sep in module_part:
        path = os.path.abspath(module_part)
        if not os.path.exists(path):
            raise FactoryError(f"{path} does not exist; check the reference {reference!r}")
        obj: Any = _import_path(path)
    else:
        try:
            obj = importlib.import_module(module_part)
        except ModuleNotFoundError as exc:
            if exc.name and module_part.startswith(exc.name):
                raise FactoryError(
                    f"cannot import module {module_part!r} ({exc}); is it installed or on PYTHONPATH?"
                ) from exc
            raise
    for part in qual.split("."):
        if not hasattr(obj, part):
            raise FactoryError(f"{module_part} has no attribute {qual!r}; check the reference {reference!r}")
        obj = getattr(obj, part)
    return obj
