"""What a validation settles before any process starts: the options checked, the factory and sample
read, devices and backend resolved, the rank count checked against the sample, the prior spec
parsed, the watched helper packages that exist, and the report's `meta` as far as it is known.

Every error here is raised before a reference run or a rank is started (`OptionError`, `SpecError`,
the rank-count errors), so a bad call costs nothing.
"""

from __future__ import annotations

import importlib.util
import os
import platform
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .. import __version__
from ..batch import Batch, as_batch
from ..environment import Settings, read_settings
from ..option_check import OptionError, Tolerance, check_options, unknown_tolerance_keys, with_default
from ..options import OPTIONS, option
from ..rank_limits import check_world_size
from ..report.parts import ReportMeta
from ..runtime.factory import FactoryRef, resolve_factory
from ..runtime.group import GroupSession
from ..runtime.rank_devices import resolve_backend, resolve_devices
from ..spec import MLIPSpec

__all__ = ["DEFAULT_WATCHED_HELPERS", "RunSetup", "ValidationRequest", "check_tolerance_names", "settle_run"]

DEFAULT_WATCHED_HELPERS: tuple[str, ...] = tuple(option("watched_helper_packages").default)


@dataclass(frozen=True)
class ValidationRequest:
    """What a caller of an entry point asked for, as given (unchecked: `settle_run` checks it): the
    factory, the sample, the prior spec and a field for each validator option of `distcheck.options.OPTIONS`,
    by its name (the entry points collect theirs with `options.option_values`)."""

    model_factory: Callable[..., Any] | str
    sample_batch: Any
    world_size: int
    device: str | Sequence[str]
    atol: Tolerance
    rtol: Tolerance
    auto_fix: bool
    max_fix_attempts: int
    backend: str
    timeout_sec: float
    deadline_sec: float | None
    watched_helper_packages: Sequence[str] | None
    helper_sample_every: int
    layer_diagnostic: bool
    allow_oversubscribe: bool
    spec: MLIPSpec | Mapping[str, Any] | str | os.PathLike[str] | None


@dataclass
class RunSetup:
    """A validation's settled inputs: `requested` the watched packages asked for, `watched` those that
    exist (only they travel to the ranks), `opts` what the comparison reads, `meta` the report's
    `meta` so far, `t_start` when the validation began (`time.perf_counter`), `settings` the
    environment's switches as they were then (`distcheck.environment`: read once, passed down)."""

    ref: FactoryRef
    batch: Batch
    world_size: int
    devices: list[str]
    backend: str
    atol: Tolerance
    rtol: Tolerance
    requested: list[str]
    watched: list[str]
    opts: dict[str, Any]
    meta: ReportMeta
    t_start: float
    settings: Settings


def settle_run(request: ValidationRequest, session: GroupSession | None) -> RunSetup:
    """Check every option (one `OptionError` naming the first bad one), read the factory and the sample,
    resolve devices and backend (a launched job's `session` gives its own), check the rank count and
    parse the prior `spec`, and read the environment's switches (`RunSetup.settings`, once for the whole
    validation; an unreadable one warns and takes its default); nothing is started."""
    t_start = time.perf_counter()
    settings = read_settings()
    r = request
    world_size, device, atol, rtol, backend, spec = r.world_size, r.device, r.atol, r.rtol, r.backend, r.spec
    watched_helper_packages, allow_oversubscribe = r.watched_helper_packages, r.allow_oversubscribe
    # Not the device: the library also takes a list of devices, which `resolve_devices` checks.
    given = {o.name: getattr(r, o.name) for o in OPTIONS if o.name != "device"}
    check_options({**given, "watched_helper_packages": _as_list(watched_helper_packages)})
    atol, rtol = with_default(atol, option("atol").default), with_default(rtol, option("rtol").default)
    ref: FactoryRef = resolve_factory(r.model_factory)
    batch: Batch = as_batch(r.sample_batch)
    if session is not None:
        world_size, devices, resolved_backend = session.world_size, list(session.devices), session.backend
    else:
        devices = list(resolve_devices(device, world_size))
        resolved_backend = resolve_backend(backend, devices)
    system_atoms = [int(n) for n in torch.bincount(batch.batch, minlength=batch.num_systems).tolist()]
    check_world_size(
        world_size,
        system_atoms,
        on_cpu=session is None and all(d == "cpu" for d in devices),  # a launcher's ranks exist already
        allow_oversubscribe=allow_oversubscribe,
    )
    if spec is not None:
        MLIPSpec.coerce(spec)  # a broken prior is a setup error, raised before anything starts
    requested = list(DEFAULT_WATCHED_HELPERS if watched_helper_packages is None else watched_helper_packages)
    # Only packages that exist travel to the ranks: a failed import in every rank costs more than the trace.
    watched = [p for p in requested if _findable(p)]
    meta = ReportMeta(
        world_size=world_size,
        device=devices[0] if len(set(devices)) == 1 else devices,
        devices=devices,
        backend=resolved_backend,
        atol=atol,
        rtol=rtol,
        auto_fix=r.auto_fix,
        max_fix_attempts=r.max_fix_attempts,
        timeout_sec=r.timeout_sec,
        deadline_sec=r.deadline_sec,
        watched_helper_packages=watched,
        helper_sample_every=r.helper_sample_every,
        layer_diagnostic=r.layer_diagnostic,
        factory=ref.describe(),
        num_atoms=batch.num_atoms,
        num_systems=batch.num_systems,
        versions={"distcheck": __version__, "torch": torch.__version__, "python": platform.python_version()},
        harness="cpu" if devices[0] == "cpu" else "gpu",
        launcher="local" if session is None else "torchrun",
        hosts=list(session.hosts) if session is not None else None,
        placement=list(session.placement) if session is not None else None,
    )
    return RunSetup(
        ref=ref,
        batch=batch,
        world_size=world_size,
        devices=devices,
        backend=resolved_backend,
        atol=atol,
        rtol=rtol,
        requested=requested,
        watched=watched,
        opts={"atol": atol, "rtol": rtol, "layer_diagnostic": r.layer_diagnostic},
        meta=meta,
        t_start=t_start,
        settings=settings,
    )


def _as_list(packages: Sequence[str] | None) -> Any:
    """The watched packages as `check_option` takes them: a list, or a bare string / other value as given
    (so that it is refused, not iterated)."""
    if packages is None or isinstance(packages, str) or not isinstance(packages, (list, tuple)):
        return packages
    return list(packages)


def check_tolerance_names(atol: Tolerance, rtol: Tolerance, kinds: Mapping[str, str]) -> None:
    """Refuse a per-output tolerance that names no output of the model (nor an output kind): a misspelt
    output would otherwise be compared under the default without a word."""
    for name, tol in (("atol", atol), ("rtol", rtol)):
        unknown = unknown_tolerance_keys(tol, kinds)
        if unknown:
            outputs = ", ".join(kinds) or "none"
            raise OptionError(
                name,
                tol,
                f"{name} names {', '.join(map(repr, unknown))}, which is neither an output of the model (its outputs: "
                f"{outputs}) nor an output kind (per_node, per_graph, global)",
                f"spell the output as the model returns it (or use an output kind, or default) in {name}",
            )


def _findable(package: str) -> bool:
    try:
        return importlib.util.find_spec(package) is not None
    except (ImportError, ValueError):
        return False
