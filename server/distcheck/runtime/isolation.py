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
"""

from __future__ import annotations

import contextlib
import random
import sys
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import torch

__all__ = ["GlobalStateGuard", "isolated_global_state"]

_MISSING = object()


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

    def __enter__(self) -> GlobalStateGuard:
        self.unrestored = []
        self._saved = []
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

    def _report(self, message: str) -> None:
        self.unrestored.append(message)
        if self.on_unrestored is not None:
            self.on_unrestored(message)


def isolated_global_state(on_unrestored: Callable[[str], None] | None = _stderr) -> GlobalStateGuard:
    """A `GlobalStateGuard`: `with isolated_global_state(): ...` leaves torch's, numpy's and Python's
    global state as it found it (what cannot be restored is reported through `on_unrestored`)."""
    return GlobalStateGuard(on_unrestored)
