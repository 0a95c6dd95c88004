"""Helper trace: record calls to public functions and methods of watched third-party packages.

Every public function of a watched module is wrapped (in its home module and in every module that
imported it by name) for the duration of a run, and so is every public method (plain, static, class)
of every public class it defines, on that class: one it inherits from a class of a watched module
too, set on the subclass and removed again, so a call is recorded under the class it was made through
(`module.Class.method`; the record says `method: True`, and its argument positions count after
`self`/`cls`; a class nested in one is `module.Outer.Inner.method`; an argument passed by keyword is
recorded at its position in the signature). The first call and every `sample_every`-th call
after it are recorded with the shapes of their arguments and a summary of their result; on ranks
the result of the same call with halo rows of the atom argument zeroed is recorded too, so the
parent can tell a per-system reduction that needs an adapter from one that is already global.
"""

from __future__ import annotations

import functools
import importlib
import inspect
import sys
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import torch

from ..runtime.call_args import as_positional
from ..runtime.module_namespace import namespace, preloaded_modules
from ..runtime.source import definition_site

__all__ = ["HelperTracer", "import_watched"]


def import_watched(packages: Sequence[str]) -> tuple[list[Any], list[str]]:
    """Import each watched module; return the modules and the names that could not be imported."""
    modules, skipped = [], []
    for name in packages:
        try:
            modules.append(importlib.import_module(name))
        except Exception:  # an unimportable watched package is skipped, not an error
            skipped.append(name)
    return modules, skipped


def _summary(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu").clone()
    if isinstance(value, (tuple, list)):
        return [_summary(v) for v in value]
    return None


def _shape(value: Any) -> list[int] | None:
    return list(value.shape) if isinstance(value, torch.Tensor) else None


class HelperTracer:
    """Wraps watched helpers and records sampled calls.

    `rows` is the number of atom rows of the batch being run (N on the reference, local rows on a
    rank); `owned_mask` (ranks only) lets the tracer re-run a sampled call with halo rows zeroed.
    """

    def __init__(
        self,
        packages: Sequence[str],
        sample_every: int,
        rows: int,
        num_systems: int,
        owned_mask: torch.Tensor | None = None,
    ) -> None:
        self.packages = list(packages)
        self.sample_every = max(1, int(sample_every))
        self.rows = rows
        self.num_systems = num_systems
        self.owned_mask = owned_mask
        self.calls: dict[str, dict[str, Any]] = {}
        self.skipped: list[str] = []
        self._functions: dict[str, Callable[..., Any]] = {}

    def _atom_arg(self, args: Sequence[Any]) -> int | None:
        for i, a in enumerate(args):
            if isinstance(a, torch.Tensor) and a.ndim >= 1 and a.shape[0] in (self.rows, self.rows + 1):
                if a.is_floating_point():
                    return i
        return None

    def _masked(self, args: Sequence[Any], i: int) -> tuple[Any, ...]:
        assert self.owned_mask is not None
        x = args[i]
        mask = self.owned_mask.to(x.device)
        if x.shape[0] > mask.shape[0]:
            mask = torch.cat([mask, torch.zeros(x.shape[0] - mask.shape[0], dtype=torch.bool, device=x.device)])
        shape = (x.shape[0],) + (1,) * (x.ndim - 1)
        masked = torch.where(mask.reshape(shape), x, torch.zeros_like(x))
        return tuple(masked if k == i else a for k, a in enumerate(args))

    def _wrap(self, module: str, attr: str, fn: Callable[..., Any], skip: int = -1) -> Callable[..., Any]:
        """`fn` recorded as `module.attr`; `skip` >= 0 for a method (the leading `self`/`cls` arguments,
        left out of the recorded positions), -1 for a module-level function."""
        method, skip = skip >= 0, max(skip, 0)
        qualname = f"{module}.{attr}"
        record = self.calls.setdefault(
            qualname, {"n_calls": 0, "samples": [], "source": None, "module": module, "attr": attr, "method": method}
        )
        self._functions.setdefault(qualname, fn)  # its source is looked up only if it is called (`collect`)

        @functools.wraps(fn)
        def traced(*args: Any, **kwargs: Any) -> Any:
            k = record["n_calls"]
            record["n_calls"] = k + 1
            out = fn(*args, **kwargs)
            if k == 0 or k % self.sample_every == 0:
                args, kwargs = as_positional(fn, args, kwargs)  # a tensor passed by keyword, at its position
                head, args = args[:skip], args[skip:]
                atom = self._atom_arg(args)
                sample: dict[str, Any] = {
                    "call": k,
                    "arg_shapes": [_shape(a) for a in args],
                    "atom_arg": atom,
                    "out_shape": _shape(out),
                    "out_dtype": str(out.dtype) if isinstance(out, torch.Tensor) else None,
                    "out": _summary(out),
                    "out_owned": None,
                }
                if atom is not None and self.owned_mask is not None:
                    with torch.no_grad():
                        sample["out_owned"] = _summary(fn(*head, *self._masked(args, atom), **kwargs))
                record["samples"].append(sample)
            return out

        traced.__distcheck_traced__ = True  # type: ignore[attr-defined]
        return traced

    @contextmanager
    def installed(self) -> Iterator[HelperTracer]:
        """Wrap every public function and method of the watched modules for the block; always restore."""
        modules, self.skipped = import_watched(self.packages)
        patched: list[tuple[Any, str, Any]] = []
        methods: list[tuple[type, str, Any]] = []  # (class, name, what its own __dict__ held, or _ABSENT)
        try:
            homes = {m.__name__ for m in modules}
            # Every class's methods are found before any is wrapped: a subclass's wrapper of an inherited
            # method must call the original, not its base class's wrapper (one call, one record).
            found = [(m.__name__, *hit) for m in modules for hit in _public_methods(m, homes)]
            for home, cls, name, raw in found:
                traced = self._wrap_method(home, cls, name, raw)
                held = cls.__dict__.get(name, _ABSENT)
                try:
                    setattr(cls, name, traced)
                except (TypeError, AttributeError):
                    continue  # an immutable (extension) type: its calls go untraced
                methods.append((cls, name, held))
            wanted: dict[int, tuple[Any, Callable[..., Any]]] = {}
            for module in modules:
                for attr, fn in list(vars(module).items()):
                    if attr.startswith("_") or not callable(fn) or inspect.isclass(fn):
                        continue
                    if getattr(fn, "__module__", None) != module.__name__:
                        continue  # re-exported from elsewhere (e.g. torch functions)
                    wanted[id(fn)] = (fn, self._wrap(module.__name__, attr, fn))
            if wanted:
                # One pass over every loaded module that may hold a watched helper: the helper is replaced
                # wherever it was imported by name.
                watched_tops = {m.__name__.partition(".")[0] for m in modules}
                for key, holder in list(sys.modules.items()):
                    if not _may_hold_helpers(key, watched_tops):
                        continue
                    for name, value in list((namespace(holder) or {}).items()):
                        hit = wanted.get(id(value))
                        if hit is not None and hit[0] is value:
                            patched.append((holder, name, value))
                            setattr(holder, name, hit[1])
            yield self
        finally:
            for holder, name, fn in reversed(patched):
                setattr(holder, name, fn)
            for cls, name, raw in reversed(methods):
                if raw is _ABSENT:
                    delattr(cls, name)
                else:
                    setattr(cls, name, raw)

    def _wrap_method(self, module: str, cls: type, name: str, raw: Any) -> Any:
        """The class attribute that records calls of method `raw` as `module.Class.name`, of its kind."""
        attr = f"{cls.__qualname__}.{name}"
        if isinstance(raw, staticmethod):
            return staticmethod(self._wrap(module, attr, raw.__func__, skip=0))
        if isinstance(raw, classmethod):
            return classmethod(self._wrap(module, attr, raw.__func__, skip=1))
        return self._wrap(module, attr, raw, skip=1)

    def collect(self) -> dict[str, Any]:
        """Recorded calls per `module.function` (only functions that were called) and skipped packages."""
        called = {q: rec for q, rec in self.calls.items() if rec["n_calls"] > 0}
        for qualname, rec in called.items():
            if rec["source"] is None:
                rec["source"] = _source(self._functions[qualname])
        return {"calls": called, "skipped": list(self.skipped)}


_NEVER_IMPORT_HELPERS = frozenset(sys.stdlib_module_names) | {"torch", "numpy", "distcheck"}
"""Top-level packages that never import a third-party helper by name: their modules (most of those
loaded, with the largest namespaces: a tenth of a second a scan in a rank) are not searched."""


def _may_hold_helpers(module: str, watched_tops: set[str]) -> bool:
    """Whether loaded module `module` may hold a watched helper imported by name: a module of a watched
    package may; otherwise neither the standard library, torch, numpy and distcheck, nor what the
    forkserver imported for every process before any target's code ran (`preloaded_modules`: torch's
    own dependencies, such as sympy's hundreds of modules) do."""
    top = module.partition(".")[0]
    if top in watched_tops:
        return True
    if top in _NEVER_IMPORT_HELPERS:
        return False
    return module not in preloaded_modules()


_ABSENT = object()
"""Marks a traced method that the class inherited (removed again rather than restored)."""


def _public_methods(module: Any, homes: set[str]) -> Iterator[tuple[type, str, Any]]:
    """(class, method name, raw class attribute) of every public method of every public class `module`
    defines, looked up along the class's MRO through the classes of modules in `homes` only (a torch
    `nn.Module`'s own methods are not a package's helpers)."""
    for cls in _public_classes(module):
        if issubclass(cls, torch.jit.ScriptModule):
            continue  # compiled: its Python methods are not what runs
        seen: set[str] = set()
        for klass in cls.__mro__:
            home = klass.__module__ in homes
            for name, raw in list(vars(klass).items()):
                if name in seen:
                    continue  # overridden nearer the class: the attribute a call finds is that one
                seen.add(name)
                if home and not name.startswith("_"):
                    if isinstance(raw, (staticmethod, classmethod)) or inspect.isfunction(raw):
                        yield cls, name, raw


def _public_classes(module: Any) -> Iterator[type]:
    """Every public class `module` defines, and the public classes defined in their bodies (nested:
    `Outer.Inner`, recorded under that qualified name, as a `method` entry's attr_name names them),
    each once."""
    home = module.__name__
    pending = [
        c
        for n, c in list(vars(module).items())
        if not n.startswith("_") and inspect.isclass(c) and c.__module__ == home
    ]
    seen: set[int] = set()
    while pending:
        cls = pending.pop(0)
        if id(cls) in seen:
            continue
        seen.add(id(cls))
        yield cls
        pending.extend(
            value
            for name, value in list(vars(cls).items())
            if not name.startswith("_")
            and inspect.isclass(value)
            and value.__module__ == home
            and value.__qualname__ == f"{cls.__qualname__}.{name}"  # defined there, not an alias
        )


def _source(fn: Callable[..., Any]) -> dict[str, Any] | None:
    site = definition_site(fn)
    return {"file": site[0], "line": site[1]} if site is not None else None
