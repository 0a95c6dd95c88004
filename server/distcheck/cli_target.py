"""What a `distcheck validate` command line names: the target (factory, sample, spec, options from the
config) and the prior spec it starts from (by the one rule of `distcheck.jobs.spec_source`)."""

from __future__ import annotations

import argparse
import os
from typing import Any

from .cli_args import sample_keys
from .cli_output import Printer
from .jobs.pyproject import find_config, load_targets, read_table, select_target
from .jobs.spec_source import SpecSource, spec_source
from .jobs.target import Target, sample_reference, target_from_reference
from .option_check import ConfigError

__all__ = ["prior_spec", "resolve_target"]


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


def prior_spec(target: Target, printer: Printer) -> tuple[Any, SpecSource]:
    """The spec to start from and where it came from, by the one rule (`jobs.spec_source`): the file it
    names when it reads one (a missing --spec file is an error), else None (the wrapper's own spec)."""
    from .spec import MLIPSpec

    source = spec_source(target)
    if source.reads_file and source.path is not None:
        return MLIPSpec.load(source.path), source
    if target.spec is not None and source.path is not None:  # configured, not there yet
        printer.notice(
            f"spec file {source.path} does not exist yet; starting from the wrapper's distribution_spec "
            f"(write it with --save-spec {os.path.relpath(source.path)})"
        )
    return None, source
