"""What a `distcheck validate` command line names: the target (factory, sample, spec, options from the
config), the devices, the prior spec and the imported factory."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from .cli_args import sample_keys
from .cli_output import Printer
from .cli_sample import import_object, source_of
from .targets import (
    ConfigError,
    Target,
    find_config,
    load_targets,
    read_table,
    sample_reference,
    select_target,
    target_from_reference,
)

if TYPE_CHECKING:
    from .report import TraceReport

__all__ = ["describe_target", "loaded_factory", "prior_spec", "resolve_device", "resolve_target"]


def resolve_target(args: argparse.Namespace) -> Target:
    """The target named by the command line (with the config's options when it comes from a config)."""
    cwd = os.getcwd()
    config = os.path.abspath(args.config) if args.config else None
    if config is not None and not os.path.isfile(config):
        raise ConfigError(f"config file {config} does not exist", "check the path given to --config")
    target: Target | None = None
    if args.target is not None:
        target = target_from_reference(args.target, cwd)
    if target is not None:
        if config is not None:  # a direct reference still takes the config's python_path and defaults
            table = read_table(config)
            target.python_path = list(table.python_path)
            target.options = dict(table.defaults)
            target.config = table.config
        target.python_path.append(cwd)
    else:
        if config is None:
            config = find_config(cwd)
        if config is None:
            raise ConfigError(
                f"{args.target!r} is not a factory reference and no pyproject.toml with [tool.distcheck] was "
                f"found from {cwd} upwards"
                if args.target is not None
                else f"no TARGET given and no pyproject.toml with [tool.distcheck] was found from {cwd} upwards",
                "give a factory reference such as 'path/file.py:model_factory' or 'package.module:model_factory', "
                "or point --config at a pyproject.toml that defines targets",
            )
        target = select_target(load_targets(config), args.target, config)
        target.python_path.append(target.root)
    if args.sample is not None:
        target.sample, target.sample_is_file = sample_reference(args.sample, cwd)
        target.frames = None  # the config's frames were for the config's sample
    for key, value in sample_keys(args).items():
        setattr(target, key, value)
    if args.spec is not None:
        target.spec = os.path.abspath(os.path.expanduser(args.spec))
        target.spec_required = True
    return target


def resolve_device(options: dict[str, Any], printer: Printer) -> str | list[str]:
    """`"cpu"`, a CUDA device string or one device per rank (from `cuda:0,cuda:1`, which also sets
    `world_size` when it is not given); `auto` becomes `cuda:0` when torch sees a GPU, else `"cpu"`
    (with a notice)."""
    import torch

    device = str(options.pop("device", "auto"))
    if device == "auto":
        if torch.cuda.is_available():
            return "cuda:0"
        printer.notice("no GPU: validating on the CPU with gloo")
        return "cpu"
    if "," in device:
        devices = device.split(",")
        world_size = options.setdefault("world_size", len(devices))
        if world_size != len(devices):
            raise ConfigError(
                f"--device lists {len(devices)} devices but world_size is {world_size}",
                "give one device per rank, or leave out --world-size (the list sets it)",
            )
        return "cpu" if set(devices) == {"cpu"} else devices
    return device


def prior_spec(target: Target, printer: Printer) -> Any:
    """The spec to start from: the target's spec file when it exists (or was asked for), else None."""
    from .spec import MLIPSpec

    if target.spec is None:
        return None
    if os.path.exists(target.spec) or target.spec_required:
        return MLIPSpec.load(target.spec)
    printer.notice(
        f"spec file {target.spec} does not exist yet; starting from the wrapper's distribution_spec "
        f"(write it with --save-spec {os.path.relpath(target.spec)})"
    )
    return None


def loaded_factory(target: Target) -> Any:
    """The factory of `target`, imported here; `ConfigError` when it cannot be or is not callable."""
    factory = import_object(target.factory, "factory")
    if not callable(factory):
        raise ConfigError(
            f"factory {target.factory!r} is a {type(factory).__name__}, not a callable",
            "point TARGET at a function that returns the model",
        )
    return factory


def describe_target(report: TraceReport, target: Target, factory: Any, sample_info: dict[str, Any]) -> None:
    """Set `report.target` (what was validated: factory and sample with their source lines, spec, config)."""
    if report.target is None:
        report.target = {
            "name": target.name,
            "factory": source_of(factory, target.factory),
            "sample": sample_info,
            "spec_path": target.spec,
            "config": target.config,
        }
