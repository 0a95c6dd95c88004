"""Process-global state a validation may change, put back when it ends.

A long-lived process that runs many validations (the editor's runner, `distcheck.lsp.runner`) imports
each target's module, calls its factory and loads its sample itself; whatever torch, numpy or Python
state that code sets would otherwise carry over into the next target's validation (a module that calls
`torch.set_default_dtype(torch.float64)` turns the next sample's positions into float64). A rank kept
alive for a validation's next attempt (`resident`) is such a process too: each of its attempts runs
inside this guard. The reference process, and a rank's first attempt, are fresh forks.

`isolated_global_state()` snapshots, and on exit restores (also on error, also on Ctrl-C):

- autograd: grad mode (thread-local: restore it in the thread that entered), anomaly detection;
- defaults: `torch.get_default_dtype()`, the default device (`torch.set_default_device`);
- determinism: `torch.are_deterministic_algorithms_enabled()` and its `warn_only` flag, the cuDNN
  flags (`enabled`, `benchmark`, `deterministic`) and the float32 matmul/convolution precision (the
  `fp32_precision` settings where torch has them, else `allow_tf32` / `float32_matmul_precision`), and
  cuBLAS' reduced-precision reductions;
- random number generators: torch's CPU generator, every CUDA generator when CUDA is initialised,
  numpy's global `RandomState` when numpy is imported, Python's `random`;
- threads: `torch.get_num_threads()`; `torch.get_num_interop_threads()` can be set only once per process
  and only before inter-op work starts, so when a target has set it, it cannot be put back: that is
  reported, never raised;
- the `warnings` filters.

A setting that cannot be restored is named in `GlobalStateGuard.unrestored` (and reported through
`on_unrestored`, stderr by default); leaving the block never raises because of it. Environment variables,
`sys.path` and imported modules are not covered (the runner purges the user's modules itself).

What is never put back but only detected (`torch_surface`, compared on exit, each change named in
`unrestored` too): torch's own surface, which a model module may change when it is imported or when
its factory runs, and which importing it again (the next run re-imports the user's modules) would
change a second time:

- the attributes of `torch`, `torch.Tensor`, `torch.nn.functional`, `torch.nn.Module`, `torch.linalg`,
  `torch.autograd` and `torch.distributed` (a function wrapped or replaced: identity of the objects;
  an attribute removed, or added unless it is a submodule);
- the global module hooks (`torch.nn.modules.module._global_*`: forward, pre-forward, backward and
  registration hooks, by their handles' keys);
- the ops registered from Python (`torch.library` definitions and implementations, `custom_op`s)
  and the torch-function / dispatch mode stacks left pushed.

Only what the user's code did counts (`surface_changes`): a new function or hook defined in a user
file (`frames.is_user_file`), or in code without a file (`python -c`, a notebook cell); an op the
dispatcher says was registered from one. What torch or an installed package does as it imports itself
lazily (torch wraps `torch.manual_seed` when `torch._dynamo` loads, registers its collectives' ops)
happens once per process, in a fresh process too, and stays: those modules are never imported again.

A process that saw such a change serves no further run (a resident rank retires, the editor's runner
exits after its reply): the next run starts in a fresh process, where the import applies once, as in
the fresh process the report must equal. Where user code is imported before the guard is entered (a
spare that builds the wrapper ahead), `mark_before_user_code()` takes that baseline first.
"""

from __future__ import annotations

import contextlib
import random
import re
import sys
import types
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

__all__ = [
    "GlobalStateGuard",
    "TorchSurface",
    "isolated_global_state",
    "mark_before_user_code",
    "surface_changes",
    "torch_surface",
]

_MISSING = object()

_NAMESPACES = (
    "torch",
    "torch.Tensor",
    "torch.nn.functional",
    "torch.nn.Module",
    "torch.linalg",
    "torch.autograd",
    "torch.distributed",
)
"""Where a model module replaces torch functions (`torch.Tensor` and `torch.nn.Module` are classes)."""

_IGNORED = frozenset({"__warningregistry__", "__slotnames__"})
"""Names Python adds to a namespace as it runs (the `warnings` registry, `copyreg`'s cache of a class's
slots when one of its objects is pickled or copied)."""

MAX_NAMED = 6
"""At most this many changed names per kind of change are listed one by one."""

_REGISTERED_AT = re.compile(r"registered at (.+?):\d+")


@dataclass(frozen=True)
class TorchSurface:
    """What of torch's global state user code can change and a re-import would change again: each
    namespace's attributes (the objects), the global module hooks (by key), the ops registered from
    Python and the mode stacks' depths. Cheap to take (well under a millisecond)."""

    attributes: dict[str, dict[str, Any]]
    hooks: dict[str, Any]
    ops: dict[str, frozenset[str]]
    modes: tuple[int, int]


def _namespace(name: str) -> Any:
    """The module or class `name` names, if imported (never imports anything)."""
    if name in sys.modules:
        return sys.modules[name]
    module, _, attr = name.rpartition(".")
    owner = sys.modules.get(module) if module else None
    return getattr(owner, attr, None) if owner is not None else None


def _ops() -> dict[str, frozenset[str]]:
    library = sys.modules.get("torch.library")
    custom = sys.modules.get("torch._library.custom_ops")
    return {
        "definitions": frozenset(getattr(library, "_defs", ()) or ()),
        "implementations": frozenset(getattr(library, "_impls", ()) or ()),
        "custom ops": frozenset(getattr(custom, "OPDEFS", {}) or {}),
    }


def torch_surface() -> TorchSurface:
    """torch's surface now (see the module docstring)."""
    attributes = {}
    for name in _NAMESPACES:
        found = _namespace(name)
        if found is not None:
            attributes[name] = dict(vars(found))
    hooks: dict[str, Any] = {}
    module = sys.modules.get("torch.nn.modules.module")
    for name, value in vars(module).items() if module is not None else ():
        if name.startswith("_global_"):
            hooks[name] = dict(value) if isinstance(value, dict) else value
    modes = (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())
    return TorchSurface(attributes, hooks, _ops(), modes)


def _users(path: str | None) -> bool:
    """Whether code from `path` is the user's (a module a later run imports again): a user file, code
    without a file of its own (`python -c`, a notebook cell) or of no known origin; never torch's,
    another installed package's or the standard library's, which stay imported."""
    from .frames import is_user_file

    return path is None or path.startswith("<") or is_user_file(path)


def _code_file(value: Any) -> str | None:
    """The file the function `value` is (a wrapper, a partial, a bound method, a callable object)."""
    for _ in range(4):
        code = getattr(value, "__code__", None)
        if code is not None:
            return str(code.co_filename)
        inner = getattr(value, "__func__", None) or getattr(value, "func", None)
        if inner is None and callable(value) and not isinstance(value, type):
            inner = vars(type(value)).get("__call__")  # a callable object: its class's method
        if inner is None:
            break
        value = inner
    return None


def _from_user(value: Any) -> bool:
    """Whether a new attribute value or hook came from the user's code: a function defined in a user
    file; a builtin of torch (torch's own lazy rebinding) is not, any other object may be."""
    path = _code_file(value)
    if path is None and callable(value) and str(getattr(value, "__module__", "") or "").startswith("torch"):
        return False
    return _users(path)


def _op_from_user(kind: str, name: str) -> bool:
    """Whether the op registration `name` (an op for definitions and custom ops, `ns/op/key` for an
    implementation) came from the user's code: where the dispatcher says it was registered (the
    kernel's line for an implementation, else the op's own); unknown to the dispatcher: yes."""
    if kind == "custom ops":
        found = getattr(sys.modules.get("torch._library.custom_ops"), "OPDEFS", {}).get(name)
        return _users(_code_file(getattr(found, "_init_fn", None)))
    name = "".join(name.split())  # torch's own schemas may hold line breaks
    op, key = (name, None) if kind == "definitions" else ("::".join(name.split("/")[:2]), name.split("/")[-1])
    try:
        dump = torch._C._dispatch_dump(op)
    except Exception:
        return True
    lines = dump.splitlines()
    chosen = [ln for ln in lines if key is not None and (ln.startswith(f"{key}:") or ln.startswith(f"{key}["))]
    chosen = chosen or [ln for ln in lines if ln.startswith("debug:")]
    places = [m.group(1) for m in (_REGISTERED_AT.search(ln) for ln in chosen) if m is not None]
    return not places or any(_users(p) for p in places)


def _inherited(space: str) -> set[str]:
    """The attribute names the class `space` names inherits from its bases ({} for a module)."""
    found = _namespace(space)
    if not isinstance(found, type):
        return set()
    return {name for base in found.__mro__[1:] for name in vars(base)}


def _listed(names: list[str]) -> str:
    shown = ", ".join(names[:MAX_NAMED])
    return shown + (f" and {len(names) - MAX_NAMED} more" if len(names) > MAX_NAMED else "")


def _attribute_changes(space: str, was: dict[str, Any], now: dict[str, Any]) -> list[str]:
    replaced = [k for k, v in was.items() if k in now and now[k] is not v and _from_user(now[k])]
    removed = [k for k in was if k not in now]
    fresh = [k for k, v in now.items() if k not in was and not isinstance(v, types.ModuleType) and _from_user(v)]
    inherited = _inherited(space) if fresh else set()  # a class's new attribute shadowing a base's replaces it
    replaced += [k for k in fresh if k in inherited]
    added = [k for k in fresh if k not in inherited]
    found = []
    for keys, what in ((replaced, "replaced"), (removed, "removed"), (added, "added")):
        names = [f"{space}.{k}" for k in keys if k not in _IGNORED]
        if names:
            found.append(f"{_listed(names)} {'was' if len(names) == 1 else 'were'} {what}")
    return found


def surface_changes(before: TorchSurface, after: TorchSurface) -> list[str]:
    """What the user's code changed between two `torch_surface()`s, one line per kind of change ([]
    when nothing did). What torch or an installed package changed as it imported itself lazily (a
    torch function wrapped by torch, an op torch registers on first use) is theirs: it happens once
    per process, in a fresh one too."""
    found: list[str] = []
    for space, was in before.attributes.items():
        found += _attribute_changes(space, was, after.attributes.get(space, {}))
    hooks = []
    for name in sorted(set(before.hooks) | set(after.hooks)):
        had, has = before.hooks.get(name), after.hooks.get(name)
        if isinstance(had, dict) and isinstance(has, dict):
            added = [h for k, h in has.items() if k not in had]
            if any(_from_user(h) for h in added) or any(k not in has for k in had):
                hooks.append(name)
        elif had is not has and had != has:
            hooks.append(name)
    if hooks:
        found.append(f"global module hooks changed ({', '.join(f'torch.nn.modules.module.{h}' for h in hooks)})")
    for kind, had_ops in before.ops.items():
        new = sorted(n for n in after.ops.get(kind, frozenset()) - had_ops if _op_from_user(kind, n))
        if new:
            found.append(f"op {kind} registered ({_listed(new)})")
    if after.modes != before.modes:
        found.append(f"torch-function / dispatch modes left pushed (stack depths {before.modes} -> {after.modes})")
    return found


_mark: TorchSurface | None = None


def mark_before_user_code() -> None:
    """Take torch's surface now, before this process imports user code outside a guard (a spare that
    builds a rank's wrapper ahead of its run): the next guard entered compares with it, not with its
    own entry."""
    global _mark
    _mark = torch_surface()


def _take_mark() -> TorchSurface | None:
    global _mark
    found, _mark = _mark, None
    return found


@dataclass(frozen=True)
class _Setting:
    """One piece of global state: how to read it and how to put a value back."""

    name: str
    get: Callable[[], Any]
    set: Callable[[Any], None]


def _attr(path: str) -> _Setting:
    """A `torch.backends…` attribute such as `cudnn.benchmark` (read and assigned)."""
    *parents, leaf = path.split(".")

    def owner() -> Any:
        obj: Any = torch.backends
        for part in parents:
            obj = getattr(obj, part)
        return obj

    return _Setting(f"torch.backends.{path}", lambda: getattr(owner(), leaf), lambda v: setattr(owner(), leaf, v))


def _default_device() -> Any:
    ctx = getattr(torch._GLOBAL_DEVICE_CONTEXT, "device_context", None)  # type: ignore[attr-defined]
    return None if ctx is None else ctx.device


def _set_grad(value: bool) -> None:
    torch.set_grad_enabled(value)


def _deterministic() -> tuple[bool, bool]:
    return torch.are_deterministic_algorithms_enabled(), torch.is_deterministic_algorithms_warn_only_enabled()


def _set_deterministic(value: tuple[bool, bool]) -> None:
    torch.use_deterministic_algorithms(value[0], warn_only=value[1])


def _anomaly() -> tuple[bool, bool]:
    return torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()


def _set_anomaly(value: tuple[bool, bool]) -> None:
    torch.set_anomaly_enabled(value[0], value[1])


def _cuda_rng() -> Any:
    if not torch.cuda.is_initialized():  # type: ignore[no-untyped-call]
        return _MISSING  # reading it would initialise CUDA
    return torch.cuda.get_rng_state_all()


def _set_cuda_rng(states: Any) -> None:
    torch.cuda.set_rng_state_all(states)


def _numpy_rng() -> Any:
    numpy = sys.modules.get("numpy")
    return _MISSING if numpy is None else numpy.random.get_state()


def _set_numpy_rng(state: Any) -> None:
    sys.modules["numpy"].random.set_state(state)


def _precision_settings() -> list[_Setting]:
    """The float32 precision switches of this torch: the `fp32_precision` ones where they exist (the
    legacy getters raise once both APIs were used), else the legacy ones."""
    if hasattr(torch.backends, "fp32_precision"):
        paths = ["fp32_precision"]
        for backend, ops in (("cuda", ("matmul",)), ("cudnn", ("conv", "rnn")), ("mkldnn", ("matmul", "conv", "rnn"))):
            paths += [f"{backend}.fp32_precision"] if backend != "cuda" else []
            paths += [f"{backend}.{op}.fp32_precision" for op in ops]
        return [_attr(p) for p in paths]
    return [
        _Setting(
            "torch.float32_matmul_precision", torch.get_float32_matmul_precision, torch.set_float32_matmul_precision
        ),
        _attr("cuda.matmul.allow_tf32"),
        _attr("cudnn.allow_tf32"),
    ]


def _settings() -> list[_Setting]:
    """Everything the guard restores, in restoring order (defaults before what depends on them)."""
    return [
        _Setting("torch.set_grad_enabled", torch.is_grad_enabled, _set_grad),
        _Setting("torch.set_anomaly_enabled", _anomaly, _set_anomaly),
        _Setting("torch.set_default_dtype", torch.get_default_dtype, torch.set_default_dtype),
        _Setting("torch.set_default_device", _default_device, torch.set_default_device),
        _Setting("torch.use_deterministic_algorithms", _deterministic, _set_deterministic),
        _attr("cudnn.enabled"),
        _attr("cudnn.benchmark"),
        _attr("cudnn.deterministic"),
        *_precision_settings(),
        _attr("cuda.matmul.allow_fp16_reduced_precision_reduction"),
        _attr("cuda.matmul.allow_bf16_reduced_precision_reduction"),
        _Setting("torch.set_num_threads", torch.get_num_threads, torch.set_num_threads),
        _Setting("torch.set_num_interop_threads", torch.get_num_interop_threads, torch.set_num_interop_threads),
        _Setting("torch random state", torch.get_rng_state, torch.set_rng_state),
        _Setting("torch.cuda random state", _cuda_rng, _set_cuda_rng),
        _Setting("numpy.random state", _numpy_rng, _set_numpy_rng),
        _Setting("random state", random.getstate, random.setstate),
    ]


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b))
    try:
        return bool(a == b)
    except Exception:  # numpy arrays inside numpy's RNG state compare element-wise
        return False


def _stderr(message: str) -> None:
    print(f"distcheck: {message}", file=sys.stderr, flush=True)


class GlobalStateGuard:
    """Context manager: snapshot the global state on entry, restore it on exit (see the module
    docstring for what is covered). `unrestored` names what could not be put back, with why."""

    def __init__(self, on_unrestored: Callable[[str], None] | None = _stderr) -> None:
        self.on_unrestored = on_unrestored
        self.unrestored: list[str] = []
        self._saved: list[tuple[_Setting, Any]] = []
        self._warnings: contextlib.ExitStack | None = None
        self._surface: TorchSurface | None = None

    def __enter__(self) -> GlobalStateGuard:
        self.unrestored = []
        self._saved = []
        self._surface = _take_mark() or torch_surface()
        for setting in _settings():
            try:
                value = setting.get()
            except Exception:  # this torch build lacks it, or cannot tell: nothing to restore
                continue
            if value is not _MISSING:
                self._saved.append((setting, value))
        self._warnings = contextlib.ExitStack()
        self._warnings.enter_context(warnings.catch_warnings())
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._warnings is not None:
            self._warnings.close()
            self._warnings = None
        for setting, value in self._saved:
            try:
                if _same(setting.get(), value):
                    continue
            except Exception:
                pass  # unreadable now (e.g. torch's mixed-precision-API check): set it anyway
            try:
                setting.set(value)
            except Exception as err:
                self._report(
                    f"{setting.name} was changed by the validated code and cannot be put back ({err}); later "
                    "validations in this process see the changed value: restart the process (in the editor, "
                    "restart the distcheck server) to reset it"
                )
        self._saved = []
        before, self._surface = self._surface, None
        if before is not None:
            for change in surface_changes(before, torch_surface()):
                self._report(
                    f"{change} by the validated code (at import or in its factory): importing it again would "
                    "apply that twice, so this process serves no further run"
                )

    def _report(self, message: str) -> None:
        self.unrestored.append(message)
        if self.on_unrestored is not None:
            self.on_unrestored(message)


def isolated_global_state(on_unrestored: Callable[[str], None] | None = _stderr) -> GlobalStateGuard:
    """A `GlobalStateGuard`: `with isolated_global_state(): ...` leaves torch's, numpy's and Python's
    global state as it found it (what cannot be restored is reported through `on_unrestored`)."""
    return GlobalStateGuard(on_unrestored)
