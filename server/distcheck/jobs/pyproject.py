"""Validation targets from `[tool.distcheck]` in a `pyproject.toml`, shared by the CLI and the editor daemon.

No torch here: the LSP daemon imports this module to list targets and to put a `config-invalid`
diagnostic on the offending line, so every `ConfigError` raised while reading a config carries the
file (`config`) and the 1-based `line` (and `column` for TOML syntax errors) it is about, and every
`Target` read from a config carries the `line` of its table.

Configuration (paths relative to the pyproject's directory)::

    [tool.distcheck]
    python_path = ["src"]        # prepended to sys.path (and PYTHONPATH) before importing anything
    world_size = 2               # any validator option here is a default for every target

    [[tool.distcheck.targets]]
    name = "my_model"
    factory = "models/my_model.py:model_factory"    # or "mypkg.models:model_factory"
    sample = "data/water.extxyz"                     # or "models/my_model.py:sample_batch"
    frames = "0:10"                                  # frames of a structure file (default: all), one system each
    dtype = "float32"                                # precision a structure file is read at (default float64)
    spec = "my_model.distspec.json"                  # prior spec (optional; skipped if missing)
    watched_helper_packages = ["aimnet.nbops"]
    atol = { default = 1e-5, forces = 1e-4 }         # a tolerance per output (or output kind), or one number

or one target directly in `[tool.distcheck]` (`factory`, `sample`, optional `name`, `spec`, options).
The option keys (and their aliases `timeout`, `deadline`, `watch`) are those of `distcheck.options`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ..option_check import KIND_WORDS, ConfigError, OptionError, check_option, check_type, normalize
from ..options import OPTION_ALIASES, OPTION_TYPES
from ..sample_options import SAMPLE_KEYS, check_dtype, parse_frames
from .target import Target, absolute_reference, sample_reference
from .toml_index import TomlIndex, distcheck_table, parse_toml, read_text

__all__ = ["Table", "find_config", "load_targets", "read_table", "select_target"]

_TARGET_KEYS = ("name", "factory", "sample", "spec", *SAMPLE_KEYS)
_TABLE_KEYS = ("python_path", "targets")
_TABLE_HEADER = "tool.distcheck"
_TARGETS_HEADER = "tool.distcheck.targets"

_LineOf = Callable[[str], "int | None"]


def find_config(start: str | None = None) -> str | None:
    """The nearest `pyproject.toml` with a `[tool.distcheck]` table, from `start` (default: the current
    directory) upwards, or None."""
    directory = os.path.abspath(start or os.getcwd())
    while True:
        path = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(path) and distcheck_table(parse_toml(path, read_text(path))) is not None:
            return path
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def _no_line(_key: str) -> int | None:
    return None


def _options(
    table: Mapping[str, Any],
    where: str,
    allowed_extra: Sequence[str],
    line_of: _LineOf = _no_line,
    config: str | None = None,
) -> dict[str, Any]:
    """The validator options in `table`, type- and bounds-checked (`OptionError`); any key that is neither
    an option nor in `allowed_extra` is an error (located with `line_of(key)`)."""
    out: dict[str, Any] = {}
    for raw_key, value in table.items():
        key = raw_key.replace("-", "_")
        key = OPTION_ALIASES.get(key, key)
        if key in allowed_extra:
            continue
        kind = OPTION_TYPES.get(key)
        if kind is None:
            allowed = ", ".join(sorted({*allowed_extra, *OPTION_TYPES}))
            raise ConfigError(
                f"{where}: unknown key {raw_key!r}",
                f"allowed keys there: {allowed}",
                config=config,
                line=line_of(raw_key),
            )
        if not check_type(value, kind):
            raise OptionError(
                key,
                value,
                f"{where}: {raw_key!r} must be {KIND_WORDS[kind]}, got {value!r}",
                f"write {raw_key} = <{KIND_WORDS[kind]}>",
                config=config,
                line=line_of(raw_key),
            )
        check_option(key, value, where=where, config=config, line=line_of(raw_key))
        out[key] = normalize(key, value)
    return out


def _string(
    table: Mapping[str, Any], key: str, where: str, line_of: _LineOf = _no_line, config: str | None = None
) -> str | None:
    value = table.get(key)
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(
            f"{where}: {key!r} must be a non-empty string, got {value!r}",
            f'write {key} = "..."',
            config=config,
            line=line_of(key),
        )
    return value


@dataclass
class _Entry:
    """One raw target entry: its table, the label used in messages, its header line and a key locator."""

    table: Mapping[str, Any]
    where: str
    line: int | None
    line_of: _LineOf


@dataclass
class Table:
    """The `[tool.distcheck]` table of one pyproject: where it is, `python_path` resolved, the table-level
    validator options (defaults for every target) and the raw target entries."""

    config: str
    root: str
    python_path: list[str]
    defaults: dict[str, Any]
    entries: list[_Entry]
    single: bool
    line: int | None = None


def read_table(config: str, text: str | None = None) -> Table:
    """Read the `[tool.distcheck]` table of the pyproject `config` (its `text` if given, else the file)."""
    config = os.path.abspath(config)
    root = os.path.dirname(config)
    if text is None:
        text = read_text(config)
    index = TomlIndex(text)
    table = distcheck_table(parse_toml(config, text))
    if table is None:
        raise ConfigError(
            f"{config} has no [tool.distcheck] table",
            "add one (see `distcheck validate --help`)",
            config=config,
            line=1,
        )
    head = index.table(_TABLE_HEADER) or index.table("tool") or 1
    if not isinstance(table, Mapping):
        raise ConfigError(
            f"{config}: tool.distcheck must be a table",
            "write it as a [tool.distcheck] table (see `distcheck validate --help`)",
            config=config,
            line=head,
        )

    def top_line(key: str) -> int | None:
        return index.key(_TABLE_HEADER, 0, key) or head

    where = f"{config}: [tool.distcheck]"
    python_path = table.get("python_path", [])
    if isinstance(python_path, str):
        python_path = [python_path]
    if not check_type(python_path, "list[str]"):
        raise ConfigError(
            f"{where}: 'python_path' must be a list of directories, got {python_path!r}",
            'write python_path = ["src"] (directories relative to the pyproject)',
            config=config,
            line=top_line("python_path"),
        )
    dirs = [os.path.normpath(os.path.join(root, os.path.expanduser(p))) for p in python_path]
    entries = table.get("targets")
    if entries is None:
        defaults = _options(table, where, (*_TABLE_KEYS, *_TARGET_KEYS), top_line, config)
        body = {k: v for k, v in table.items() if k != "python_path"}
        found = [_Entry(body, where, head, top_line)] if "factory" in table else []
        return Table(config, root, dirs, defaults, found, single=True, line=head)
    if "factory" in table:
        raise ConfigError(
            f"{where} has both 'factory' and [[tool.distcheck.targets]]",
            "use one form: move the factory into a [[tool.distcheck.targets]] entry",
            config=config,
            line=top_line("factory"),
        )
    for key in ("name", "sample", "spec", *SAMPLE_KEYS):
        if key in table:
            raise ConfigError(
                f"{where}: {key!r} belongs in each [[tool.distcheck.targets]] entry",
                f"move {key} = ... into a [[tool.distcheck.targets]] entry",
                config=config,
                line=top_line(key),
            )
    if not isinstance(entries, list) or not all(isinstance(e, Mapping) for e in entries):
        raise ConfigError(
            f"{where}: 'targets' must be an array of tables ([[tool.distcheck.targets]])",
            "write each target as a [[tool.distcheck.targets]] table",
            config=config,
            line=index.table(_TARGETS_HEADER) or top_line("targets"),
        )
    defaults = _options(table, where, _TABLE_KEYS, top_line, config)

    def entry(i: int, e: Mapping[str, Any]) -> _Entry:
        line = index.table(_TARGETS_HEADER, i)

        def line_of(key: str) -> int | None:
            return index.key(_TARGETS_HEADER, i, key) or line or head

        return _Entry(e, f"{config}: [[tool.distcheck.targets]] #{i + 1}", line or head, line_of)

    labelled = [entry(i, e) for i, e in enumerate(entries)]
    return Table(config, root, dirs, defaults, labelled, single=False, line=head)


def load_targets(config: str, text: str | None = None) -> list[Target]:
    """Every target in the `[tool.distcheck]` table of `config`, paths resolved against its directory.

    `text` is the pyproject's content when it is at hand (an editor buffer), else the file is read.
    Raises `ConfigError` (with `config` and `line` set) for a missing table or target, unknown keys,
    wrong types, duplicate names or a target without a factory.
    """
    table = read_table(config, text)
    if not table.entries:
        raise ConfigError(
            f"{table.config}: [tool.distcheck] defines no target",
            "add factory = 'path/file.py:model_factory' (and sample = ...) to it, or "
            "[[tool.distcheck.targets]] entries with a name each",
            config=table.config,
            line=table.line,
        )
    targets: list[Target] = []
    for entry in table.entries:
        where, line_of = entry.where, entry.line_of
        name = _string(entry.table, "name", where, line_of, table.config)
        if name is None and not table.single:
            raise ConfigError(
                f"{where} has no 'name'", "give every target a name = '...'", config=table.config, line=entry.line
            )
        if name is not None:
            where = f"{table.config}: target {name!r}"
        options = {**table.defaults, **_options(entry.table, where, _TARGET_KEYS, line_of, table.config)}
        factory = _string(entry.table, "factory", where, line_of, table.config)
        if factory is None:
            raise ConfigError(
                f"{where} has no 'factory'",
                "add factory = 'path/file.py:model_factory'",
                config=table.config,
                line=entry.line,
            )
        try:
            reference = absolute_reference(factory, table.root, f"{where}: factory")
        except ConfigError as err:
            raise ConfigError(err.message, err.hint, config=table.config, line=line_of("factory")) from err
        target = Target(
            name=name or "default",
            factory=reference,
            options=options,
            root=table.root,
            python_path=list(table.python_path),
            config=table.config,
            line=entry.line,
        )
        sample = _string(entry.table, "sample", where, line_of, table.config)
        if sample is not None:
            try:
                target.sample, target.sample_is_file = sample_reference(sample, table.root)
            except ConfigError as err:
                raise ConfigError(
                    f"{where}: {err.message}", err.hint, config=table.config, line=line_of("sample")
                ) from err
        _sample_keys(target, entry.table, where, line_of, table.config)
        spec = _string(entry.table, "spec", where, line_of, table.config)
        if spec is not None:
            target.spec = os.path.normpath(os.path.join(table.root, os.path.expanduser(spec)))
        targets.append(target)
    names = [t.name for t in targets]
    for t in targets:
        if names.count(t.name) > 1:
            duplicate = [u for u in targets if u.name == t.name][-1]
            raise ConfigError(
                f"{table.config}: target name {t.name!r} is used more than once",
                "give every target its own name",
                config=table.config,
                line=duplicate.line,
            )
    return targets


def _sample_keys(target: Target, table: Mapping[str, Any], where: str, line_of: _LineOf, config: str) -> None:
    """Set `target.frames` / `target.dtype` from a target table, checked where the key is written."""
    if "frames" in table:
        try:
            target.frames = parse_frames(table["frames"]).text
        except ValueError as exc:
            raise ConfigError(
                f"{where}: {exc}",
                'write frames = "0:10" (a slice) or frames = 2',
                config=config,
                line=line_of("frames"),
            ) from exc
        if not target.sample_is_file:
            sample = "its module's sample_batch" if target.sample is None else repr(target.sample)
            raise ConfigError(
                f"{where}: frames selects frames of a structure file, but the target's sample is {sample}",
                "set sample = to a structure file (.xyz, .extxyz, .traj, ...), or remove frames",
                config=config,
                line=line_of("frames"),
            )
    if "dtype" in table:
        try:
            target.dtype = check_dtype(table["dtype"])
        except ValueError as exc:
            raise ConfigError(
                f"{where}: {exc}", 'write dtype = "float32" or dtype = "float64"', config=config, line=line_of("dtype")
            ) from exc


def select_target(targets: Sequence[Target], name: str | None, config: str) -> Target:
    """The target called `name` (the only one when `name` is None); `ConfigError` otherwise."""
    names = ", ".join(str(t.name) for t in targets)
    if name is None:
        if len(targets) == 1:
            return targets[0]
        raise ConfigError(f"{config} defines several targets ({names})", "name one: distcheck validate NAME")
    for t in targets:
        if t.name == name:
            return t
    raise ConfigError(
        f"no target named {name!r} in {config} (targets: {names})",
        "use one of those names, or give a factory reference such as 'path/file.py:model_factory'",
    )
