"""Targets and settings for the daemon: `[tool.distcheck]` (via `distcheck.jobs.pyproject`), open files, and
the client's `distcheck.*` settings.

A workspace's targets come from the `pyproject.toml` at its root (or the nearest one above it with a
`[tool.distcheck]` table); without one, a Python file that defines `model_factory` and `sample_batch`
at module scope is a target of its own, named by its workspace-relative path. A broken config gives
one `ConfigProblem` (file, line, message, hint) instead of targets. Option precedence: validator
defaults < client settings < target table < command overrides.

Every target has a spec path, by the one rule of `distcheck.jobs.spec_source` (the CLI's and the
runner's too): the configured `spec = ...`, else `<model>.distspec.json` beside the model file. Quick
fixes and fix-all write there, and a validation starts from the file when it exists (else from the
wrapper's own spec), so what the editor fixes is what `distcheck validate` reads.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from typing import Any

from ..jobs.pyproject import load_targets, read_table
from ..jobs.spec_source import SpecSource, spec_file_path, spec_source
from ..jobs.target import Target, is_path_reference, split_reference
from ..option_check import KIND_WORDS, ConfigError, OptionError, check_option, check_type, normalize
from ..options import EDITOR_SETTINGS, OPTION_ALIASES, OPTION_TYPES, OPTIONS
from . import locate

__all__ = [
    "SETTING_KEYS",
    "ConfigProblem",
    "Settings",
    "TargetInfo",
    "WorkspaceTargets",
    "convert_options",
    "default_spec_path",
    "file_target",
    "file_target_at",
    "find_workspace_config",
    "load_workspace_targets",
    "read_settings",
]


SETTING_KEYS: dict[str, str] = {o.setting: o.name for o in OPTIONS}
"""Client setting (camelCase, under `distcheck.`: `worldSize`, `timeoutSec`, `deadlineSec`, ...) → validator
option; one per option of `distcheck.options.OPTIONS` (package.json declares the same, a test keeps them equal)."""

TRACE_LEVELS = ("off", "messages", "verbose")

TextOf = Callable[[str], "str | None"]
"""The text of a file: an open editor buffer when there is one, else the disk; None when missing."""


def read_disk(path: str) -> str | None:
    """The file's text, or None when it cannot be read."""
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except (OSError, UnicodeDecodeError):
        return None


@dataclass
class Settings:
    """The client's `distcheck` settings: validator `options`, the log level (`trace`: off, messages,
    verbose) and the settings that were ignored, each with why."""

    options: dict[str, Any] = field(default_factory=dict)
    trace: str = "messages"
    problems: list[str] = field(default_factory=list)


def convert_options(raw: Mapping[str, Any], prefix: str) -> tuple[dict[str, Any], list[str]]:
    """Validator options from camelCase (or snake_case) keys; unknown keys, wrong types and values out of
    bounds (`distcheck.option_check.check_option`: NaN / inf / negative tolerances, a timeout that is not a
    finite number > 0, ...) are left out and described in the second list (each naming the key as
    `prefix + key`, the value and what is valid)."""
    options: dict[str, Any] = {}
    problems: list[str] = []
    for key, value in raw.items():
        if key in EDITOR_SETTINGS or key in ("server", "pythonPath") or value is None:
            continue
        name = SETTING_KEYS.get(key) or OPTION_ALIASES.get(key, key)
        kind = OPTION_TYPES.get(name)
        if kind is None:
            problems.append(f"{prefix}{key} is not a distcheck option (known: {', '.join(SETTING_KEYS)})")
            continue
        if not check_type(value, kind):
            problems.append(f"{prefix}{key} must be {KIND_WORDS[kind]}, got {value!r}; fix it or remove it")
            continue
        try:
            check_option(name, value)
        except OptionError as err:
            problems.append(f"{prefix}{key}: {err.message}" + (f"; {err.hint}" if err.hint else ""))
            continue
        options[name] = normalize(name, value)
    return options, problems


def read_settings(raw: Any) -> Settings:
    """`Settings` from the `distcheck` section returned by `workspace/configuration` (any shape)."""
    settings = Settings()
    if not isinstance(raw, Mapping):
        return settings
    trace = raw.get("trace")
    level = trace.get("server") if isinstance(trace, Mapping) else raw.get("trace.server")
    if isinstance(level, str) and level in TRACE_LEVELS:
        settings.trace = level
    elif level is not None:
        settings.problems.append(f"setting distcheck.trace.server must be one of {', '.join(TRACE_LEVELS)}")
    flat = {k: v for k, v in raw.items() if k not in ("trace", "trace.server")}
    settings.options, problems = convert_options(flat, "setting distcheck.")
    settings.problems.extend(problems)
    return settings


@dataclass
class ConfigProblem:
    """A broken `[tool.distcheck]`: the pyproject, the 1-based line (and column), message and hint."""

    path: str
    line: int
    column: int | None
    message: str
    hint: str


@dataclass(kw_only=True)
class TargetInfo(Target):
    """A target as the daemon lists it: a `distcheck.jobs.target.Target` (the one target type, also what
    the runner is sent) with what only the editor shows.

    `source` is `"pyproject"` or `"file"`; `factory_file` the factory's source file when it can be found
    without importing anything; `spec` is the configured spec (None: none is configured;
    `spec_configured` says the same) and `spec_path` the file the spec rule names; `python_path` holds
    the configured directories only (`search_dirs` adds the project
    directory). `line` is the 1-based line of its table in the pyproject (`source == "pyproject"`) or of
    the factory's `def` (`source == "file"`), in `defined_in`.
    """

    name: str
    source: str = "pyproject"
    factory_file: str | None = None
    spec_configured: bool = False
    defined_in: str = ""

    @property
    def spec_path(self) -> str:
        """The spec file the one rule names (`jobs.spec_source`): quick fixes and fix-all write there, a
        validation starts from it when it exists; "" when neither a spec is configured nor the model's file
        found."""
        return self.spec_source(exists=lambda _path: False).path or ""

    def spec_source(self, exists: Callable[[str], bool] = os.path.isfile) -> SpecSource:
        """`jobs.spec_source.spec_source` of this target (files on disk, by default)."""
        return spec_source(self, exists=exists, factory_file=self.factory_file)

    @property
    def search_dirs(self) -> list[str]:
        """Where its modules are imported from: `python_path`, then the project directory."""
        return list(dict.fromkeys([*self.python_path, self.root]))

    def job(self, options: Mapping[str, Any]) -> Target:
        """The `Target` the runner validates: this one with `options` (merged and checked) and every
        directory its modules come from on `python_path`."""
        plain = {f.name: getattr(self, f.name) for f in fields(Target)}
        return Target(**{**plain, "options": dict(options), "python_path": self.search_dirs})

    def runner_params(self, options: Mapping[str, Any], spec: Any) -> dict[str, Any]:
        """The `params` of the runner's `validate` request (see docs/protocol.md): the target and the prior spec."""
        return {"target": self.job(options).to_wire(), "spec": spec}


@dataclass
class WorkspaceTargets:
    """The targets of one workspace folder: from its config, or a problem with the config."""

    root: str
    config: str | None
    targets: list[TargetInfo]
    problem: ConfigProblem | None
    python_path: list[str]


def default_spec_path(directory: str, stem: str) -> str:
    """`<directory>/<stem>.distspec.json` with characters unsafe in a file name replaced by `_`
    (`jobs.spec_source.spec_file_path`)."""
    return spec_file_path(directory, stem)


def _has_distcheck(text: str) -> bool:
    return re.search(r"^\s*\[\[?\s*tool\s*\.\s*distcheck\b", text, re.MULTILINE) is not None


def find_workspace_config(root: str, text_of: TextOf) -> str | None:
    """The pyproject that configures `root`: its own when it mentions `[tool.distcheck]` (valid or
    not, so a broken one is reported), else the nearest one above it that does."""
    directory = os.path.abspath(root)
    while True:
        path = os.path.join(directory, "pyproject.toml")
        text = text_of(path)
        if text is not None and _has_distcheck(text):
            return path
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def reference_file(reference: str, search_dirs: Sequence[str]) -> str | None:
    """The source file of a `module:name` or `path/file.py:name` reference, found without importing
    anything (None when `search_dirs` do not hold the module: it would come from installed packages)."""
    parts = split_reference(reference)
    if parts is None:
        return None
    where = parts[0]
    if is_path_reference(where):
        return where
    return locate.resolve_module(where, search_dirs)


def load_workspace_targets(root: str, text_of: TextOf) -> WorkspaceTargets:
    """Targets of the workspace folder `root` from its config (None config: no targets, no problem)."""
    root = os.path.abspath(root)
    config = find_workspace_config(root, text_of)
    if config is None:
        return WorkspaceTargets(root, None, [], None, [root])
    text = text_of(config) or ""
    try:
        raw = load_targets(config, text)
        table = read_table(config, text)
    except ConfigError as err:
        message = err.message
        for prefix in (f"{config}: ", f"{config} "):
            if message.startswith(prefix):
                message = message[len(prefix) :]
        return WorkspaceTargets(
            root, config, [], ConfigProblem(config, err.line or 1, err.column, message, err.hint), [root]
        )
    infos: list[TargetInfo] = []
    for t in raw:  # load_targets has checked every option's type and bounds, on its line
        name = t.name or "default"
        search = list(dict.fromkeys([*t.python_path, t.root]))
        infos.append(
            TargetInfo(
                name=name,
                source="pyproject",
                factory=t.factory,
                factory_file=reference_file(t.factory, search),
                sample=t.sample,
                sample_is_file=t.sample_is_file,
                spec=t.spec,
                spec_configured=t.spec is not None,
                options=dict(t.options),
                python_path=list(t.python_path),
                root=t.root,
                config=config,
                defined_in=config,
                line=t.line,
                frames=t.frames,
                dtype=t.dtype,
            )
        )
    return WorkspaceTargets(root, config, infos, None, list(table.python_path))


def file_target(path: str, source: str, workspace: WorkspaceTargets) -> TargetInfo | None:
    """A target for the Python file `path` when it defines `model_factory` and `sample_batch` at
    module scope (found by an AST scan of `source`), named by its workspace-relative path."""
    found = locate.file_target(source, path)
    if found is None:
        return None
    return file_target_at(path, found[0].line, workspace)


def file_target_at(path: str, line: int, workspace: WorkspaceTargets) -> TargetInfo:
    """The file target of `path` whose factory's `def` is on 1-based `line` (`file_target` once the
    module is known to define both functions; `discovery.broken_module` for one that does not parse)."""
    path = os.path.abspath(path)
    root = workspace.root
    try:
        name = os.path.relpath(path, root)
    except ValueError:
        name = path
    if name.startswith(".."):
        name = path
    return TargetInfo(
        name=name.replace(os.sep, "/"),
        source="file",
        factory=f"{path}:model_factory",
        factory_file=path,
        sample=f"{path}:sample_batch",
        sample_is_file=False,
        spec=None,
        spec_configured=False,
        options={},
        python_path=[p for p in workspace.python_path if p != root],
        root=root,
        config=None,
        defined_in=path,
        line=line,
    )
