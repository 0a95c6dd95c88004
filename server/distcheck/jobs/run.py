"""One job, start to end: import the target's factory, load its sample, resolve its devices, check its
rank count, run the library entry point and describe what was validated in the report.

The CLI (`cli._validate`) and the editor's runner (`jobs.runner`) both run `run_job`; they differ in
their `Vocabulary` (the words of every hint), where notices go and the prior spec they pass (both read
the file the one spec rule, `jobs.spec_source`, names; the report records which file and rule).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from ..option_check import ConfigError
from ..options import Vocabulary, option
from ..rank_limits import check_world_size
from ..report.parts import FactoryInfo, TargetInfo, view
from .devices import resolve_device
from .sample import add_dtype_hint, import_object, load_sample, source_of
from .spec_source import SpecSource, spec_source
from .target import Target

if TYPE_CHECKING:
    from ..batch import Batch
    from ..report import TraceReport

__all__ = ["describe_target", "loaded_factory", "run_job", "system_atoms"]

Progress = Callable[[str, Mapping[str, Any]], None]


def loaded_factory(target: Target) -> Any:
    """The factory of `target`, imported here; `ConfigError` when it cannot be or is not callable."""
    factory = import_object(target.factory, "factory")
    if not callable(factory):
        raise ConfigError(
            f"factory {target.factory!r} is a {type(factory).__name__}, not a callable",
            "point the target's factory at a function that returns the model",
        )
    return factory


def describe_target(
    report: TraceReport, target: Target, factory: Any, sample_info: dict[str, Any], source: SpecSource | None = None
) -> None:
    """Set `report.target` (what was validated: factory and sample with their source lines, the spec file
    and the rule that chose it (`source`, else `spec_source(target)`), config)."""
    if report.target is None:
        source = source or spec_source(target)
        report.target = TargetInfo(
            name=target.name,
            factory=view(FactoryInfo, source_of(factory, target.factory)),
            sample=sample_info,
            spec_path=source.path,
            spec_rule=source.rule,
            config=target.config,
        )


def system_atoms(batch: Batch) -> list[int]:
    """The number of atoms of each system of `batch`."""
    import torch

    return [int(n) for n in torch.bincount(batch.batch, minlength=batch.num_systems).tolist()]


def run_job(
    target: Target,
    *,
    spec: Any,
    words: Vocabulary,
    notice: Callable[[str], None],
    progress: Progress | None = None,
    source: SpecSource | None = None,
) -> TraceReport:
    """Validate `target` with its (checked) `options`, starting from the prior `spec` (None: the wrapper's),
    in this process's current directory and `sys.path` (see `jobs.paths`); `source` is where `spec` came
    from (None: `spec_source(target)`), recorded in the report. Every refusal before a process
    starts (factory, sample, devices, rank count) is a `ConfigError` / `OptionError` whose hint is in
    `words`; `notice` receives what the caller should be told on the way (the CPU fallback of `auto`)."""
    from ..validate import trace_and_validate, validate_on_cpu

    options = dict(target.options)
    factory = loaded_factory(target)
    batch, sample_info = load_sample(target, factory, words)
    device = resolve_device(options, notice, words)
    check_world_size(  # here too, for the hint in the caller's words; the library checks it again
        options.get("world_size", option("world_size").default),
        system_atoms(batch),
        on_cpu=device == "cpu",
        allow_oversubscribe=bool(options.get("allow_oversubscribe", False)),
        vocabulary=words,
    )
    kwargs: dict[str, Any] = dict(options, progress=progress, spec=spec)
    if device == "cpu":
        kwargs.pop("backend", None)
        report = validate_on_cpu(target.factory, batch, **kwargs)
    else:
        report = trace_and_validate(target.factory, batch, device=device, **kwargs)
    describe_target(report, target, factory, sample_info, source)
    add_dtype_hint(report, batch, sample_info, words)
    return report
