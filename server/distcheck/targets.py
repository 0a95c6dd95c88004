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

or one target directly in `[tool.distcheck]` (`factory`, `sample`, optional `name`, `spec`, options).
"""

from __future__ import annotations

import importlib
import math
import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .sample_options import SAMPLE_KEYS, check_dtype, parse_frames

__all__ = [
    "KIND_WORDS",
    "MIN_WORLD_SIZE",
    "OPTION_ALIASES",
    "OPTION_TYPES",
    "RANKS_PER_CORE",
    "ConfigError",
    "OptionError",
    "Target",
    "TomlIndex",
    "absolute_reference",
    "check_option",
    "check_options",
    "check_rank_count",
    "check_type",
    "check_world_size",
    "cpu_rank_limit",
    "find_config",
    "is_path_reference",
    "load_targets",
    "read_table",
    "sample_reference",
    "select_target",
    "split_reference",
    "target_from_reference",
    "usable_cores",
]

OPTION_TYPES: dict[str, str] = {
    "world_size": "int",
    "device": "str",
    "atol": "float",
    "rtol": "float",
    "auto_fix": "bool",
    "max_fix_attempts": "int",
    "backend": "str",
    "timeout_sec": "float",
    "deadline_sec": "float",
    "watched_helper_packages": "list[str]",
    "helper_sample_every": "int",
    "layer_diagnostic": "bool",
    "allow_oversubscribe": "bool",
}
"""Validator options a config may set, with the Python type each must have: the one list every entry
point (library keywords, CLI flags, `[tool.distcheck]` keys, editor settings `distcheck.<camelCase>`)
takes its options from. Their bounds are checked by `check_options`."""
OPTION_ALIASES = {"timeout": "timeout_sec", "deadline": "deadline_sec", "watch": "watched_helper_packages"}
"""Other spellings accepted for some options."""
RANKS_PER_CORE = 4
"""On the CPU, at most this many ranks per core this process may run on, unless `allow_oversubscribe`."""
MIN_WORLD_SIZE = 2
"""A validation runs at least this many ranks (`check_rank_count`)."""

_TARGET_KEYS = ("name", "factory", "sample", "spec", *SAMPLE_KEYS)
_TABLE_KEYS = ("python_path", "targets")
_ATTR_PATH = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_DEVICE = re.compile(r"auto|cpu|cuda|(cpu|cuda:\d+)(,(cpu|cuda:\d+))+|cuda:\d+")
_TABLE_HEADER = "tool.distcheck"
_TARGETS_HEADER = "tool.distcheck.targets"


class ConfigError(Exception):
    """A problem with the command line, the configuration or the target; `hint` says what to do.

    When the problem is in a config file, `config` is its path and `line` (1-based) the line it is
    about (`column`, 1-based, for TOML syntax errors); otherwise they are None.
    """

    def __init__(
        self,
        message: str,
        hint: str = "",
        *,
        config: str | None = None,
        line: int | None = None,
        column: int | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint
        self.config = config
        self.line = line
        self.column = column


class OptionError(ConfigError, ValueError):
    """A validator option with a wrong type or a value out of its bounds.

    `option` is the option's name (snake_case, as `OPTION_TYPES` spells it) and `value` what was given;
    the message names both and says which values are valid. A `ValueError` too, so library callers
    can catch it as one; the CLI and the daemon show it as any `ConfigError` (exit code 2 / a message).
    """

    def __init__(
        self,
        option: str,
        value: object,
        message: str,
        hint: str = "",
        *,
        config: str | None = None,
        line: int | None = None,
    ) -> None:
        super().__init__(message, hint, config=config, line=line)
        self.option = option
        self.value = value


@dataclass
class Target:
    """One thing to validate, with references already made absolute where they are paths.

    `factory` and `sample` are as the engine and `load_object` take them (`"/abs/file.py:attr"` or
    `"pkg.mod:attr"`); `sample` may instead be an absolute structure-file path (`sample_is_file`), or
    None to use the factory module's `sample_batch`. `frames` selects frames of a structure file (an index
    or slice as text, see `sample_options`; None: every frame) and `dtype` the precision the sample is read
    at or cast to (`float64` / `float32`; None: float64 for a file, a Python sample as it is). `spec` is
    a prior spec file; `spec_required`
    says whether a missing file is an error (given with --spec) or skipped (from the config).
    `options` are validator options from the config. `root` is the project directory
    (the pyproject's directory, else the current directory) and `python_path` the directories to put
    on `sys.path`. `config` is the pyproject it came from and `line` the 1-based line of its table there.
    """

    name: str | None
    factory: str
    sample: str | None = None
    sample_is_file: bool = False
    frames: str | None = None
    dtype: str | None = None
    spec: str | None = None
    spec_required: bool = False
    options: dict[str, Any] = field(default_factory=dict)
    root: str = "."
    python_path: list[str] = field(default_factory=list)
    config: str | None = None
    line: int | None = None

    @property
    def label(self) -> str:
        """The name, or the factory reference."""
        return self.name or self.factory


# --------------------------------------------------------------------------------------------------
# references


def split_reference(text: str) -> tuple[str, str] | None:
    """`(where, attr)` when `text` looks like `where:attr.path`, else None."""
    where, sep, attr = text.rpartition(":")
    if not sep or not where or not _ATTR_PATH.fullmatch(attr):
        return None
    return where, attr


def is_path_reference(where: str) -> bool:
    """Whether the `where` part of a reference is a file path (rather than a dotted module)."""
    return where.endswith(".py") or "/" in where or os.sep in where


def absolute_reference(text: str, base: str, what: str) -> str:
    """`text` (`file.py:attr` or `pkg.mod:attr`) with a file path made absolute against `base`."""
    parts = split_reference(text)
    if parts is None:
        raise ConfigError(
            f"{what} {text!r} is not a reference",
            "write it as 'path/file.py:function' or 'package.module:function'",
        )
    where, attr = parts
    if is_path_reference(where):
        where = os.path.normpath(os.path.join(base, os.path.expanduser(where)))
    return f"{where}:{attr}"


def target_from_reference(text: str, base: str) -> Target | None:
    """A target for a factory reference or a `.py` file given on the command line, else None."""
    if split_reference(text) is not None:
        return Target(name=None, factory=absolute_reference(text, base, "factory"), root=base)
    if text.endswith(".py"):
        path = os.path.normpath(os.path.join(base, os.path.expanduser(text)))
        if not os.path.isfile(path):
            raise ConfigError(f"factory file {path} does not exist", "check the path of TARGET")
        return Target(name=None, factory=f"{path}:model_factory", root=base)
    return None


def sample_reference(text: str, base: str) -> tuple[str, bool]:
    """`(reference, is_structure_file)` for a `--sample` / `sample =` value."""
    candidate = os.path.normpath(os.path.join(base, os.path.expanduser(text)))
    if os.path.isfile(candidate) and not candidate.endswith(".py"):
        return candidate, True
    if split_reference(text) is not None:
        return absolute_reference(text, base, "sample"), False
    if text.endswith(".py"):
        if not os.path.isfile(candidate):
            raise ConfigError(f"sample file {candidate} does not exist", "check the path of the sample")
        return f"{candidate}:sample_batch", False
    raise ConfigError(
        f"sample {text!r} is neither an existing structure file ({candidate} not found) nor a reference",
        "give a structure file ASE can read (.xyz, .extxyz, .cif, ...), 'path/file.py:sample_batch' or "
        "'package.module:attr'",
    )


# --------------------------------------------------------------------------------------------------
# TOML text: where tables and keys are


_HEADER = re.compile(r"^\s*(\[\[?)\s*([^\[\]]+?)\s*(\]\]?)\s*(#.*)?$")
_KEY = re.compile(r"""^\s*([A-Za-z0-9_\-]+|"[^"]*"|'[^']*')\s*[.=]""")
_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _header_name(raw: str) -> str:
    return ".".join(part.strip().strip("\"'") for part in raw.split("."))


class TomlIndex:
    """Line numbers of table headers and keys in TOML text, found by a line scan (tomllib gives none).

    `table(name, occurrence)` is the 1-based line of the `occurrence`-th `[name]` / `[[name]]` header
    (None if absent); `key(name, occurrence, key)` the line of `key = ...` directly in that table.
    Multi-line strings and arrays are skipped, so their content is never mistaken for a key.
    """

    def __init__(self, text: str) -> None:
        self.headers: dict[str, list[int]] = {}
        self.keys: dict[tuple[str, int, str], int] = {}
        self.lines = text.splitlines()
        current: tuple[str, int] = ("", 0)
        depth = 0
        in_string: str | None = None
        for number, line in enumerate(self.lines, start=1):
            if in_string is not None:
                if in_string in line:
                    in_string = None
                continue
            if depth > 0:
                depth = max(0, depth + _bracket_balance(line))
                continue
            header = _HEADER.match(line)
            if header is not None and (header.group(1) == "[[") == (header.group(3) == "]]"):
                name = _header_name(header.group(2))
                seen = self.headers.setdefault(name, [])
                seen.append(number)
                current = (name, len(seen) - 1)
                continue
            key = _KEY.match(line)
            if key is not None:
                self.keys.setdefault((current[0], current[1], key.group(1).strip("\"'")), number)
                value = line.split("=", 1)[1] if "=" in line else ""
                for quote in ('"""', "'''"):
                    if value.count(quote) % 2 == 1:
                        in_string = quote
                depth = max(0, _bracket_balance(value))

    def table(self, name: str, occurrence: int = 0) -> int | None:
        """The line of the `occurrence`-th header `[name]` or `[[name]]`, or None."""
        found = self.headers.get(name, [])
        return found[occurrence] if occurrence < len(found) else None

    def key(self, name: str, occurrence: int, key: str) -> int | None:
        """The line of `key` directly in the `occurrence`-th table `name`, else that table's header line."""
        line = self.keys.get((name, occurrence, key))
        if line is None:
            for raw, alias in OPTION_ALIASES.items():
                if alias == key and (name, occurrence, raw) in self.keys:
                    return self.keys[(name, occurrence, raw)]
            return self.table(name, occurrence)
        return line


def _bracket_balance(text: str) -> int:
    """Opening minus closing brackets outside strings and comments (for multi-line arrays)."""
    balance = 0
    quote: str | None = None
    i = 0
    while i < len(text):
        c = text[i]
        if quote is not None:
            if c == "\\" and quote == '"':
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'":
            quote = c
        elif c == "#":
            break
        elif c in "[{":
            balance += 1
        elif c in "]}":
            balance -= 1
        i += 1
    return balance


# --------------------------------------------------------------------------------------------------
# configuration


def _toml_loads(text: str) -> dict[str, Any]:
    for name in ("tomllib", "tomli"):
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        try:
            data: dict[str, Any] = module.loads(text)
        except module.TOMLDecodeError as exc:
            where = _TOML_POSITION.search(str(exc))
            line = int(where.group(1)) if where else None
            column = int(where.group(2)) if where else None
            if where is None and "end of document" in str(exc):
                line = max(1, len(text.splitlines()))
            raise ConfigError(f"invalid TOML: {exc}", "fix the syntax of the file", line=line, column=column) from exc
        return data
    raise ConfigError(
        "reading pyproject.toml needs Python 3.11+ (tomllib) or the tomli package",
        "pip install tomli, or name the factory directly: distcheck validate path/file.py:model_factory",
    )


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as fh:
            return fh.read()
    except OSError as exc:
        raise ConfigError(f"cannot read {path}: {exc.strerror or exc}", "check the path given to --config") from exc


def _parse(path: str, text: str) -> dict[str, Any]:
    try:
        return _toml_loads(text)
    except ConfigError as err:
        raise ConfigError(f"{path}: {err.message}", err.hint, config=path, line=err.line, column=err.column) from err


def _distcheck_table(data: Mapping[str, Any]) -> Any:
    tool = data.get("tool")
    return tool.get("distcheck") if isinstance(tool, Mapping) else None


def find_config(start: str | None = None) -> str | None:
    """The nearest `pyproject.toml` with a `[tool.distcheck]` table, from `start` (default: the current
    directory) upwards, or None."""
    directory = os.path.abspath(start or os.getcwd())
    while True:
        path = os.path.join(directory, "pyproject.toml")
        if os.path.isfile(path) and _distcheck_table(_parse(path, _read_text(path))) is not None:
            return path
        parent = os.path.dirname(directory)
        if parent == directory:
            return None
        directory = parent


def check_type(value: Any, kind: str) -> bool:
    """Whether `value` has the option type `kind` (a value of `OPTION_TYPES`)."""
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


KIND_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "list[str]": "a list of strings",
}
"""How an error message names each option kind of `check_type`."""

_LineOf = Callable[[str], "int | None"]


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
        value = float(value) if kind == "float" else value
        check_option(key, value, where=where, config=config, line=line_of(raw_key))
        out[key] = value
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
        text = _read_text(config)
    index = TomlIndex(text)
    table = _distcheck_table(_parse(config, text))
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


# --------------------------------------------------------------------------------------------------
# bounds of the validator options


def _finite_at_least(low: float, strict: bool) -> Callable[[Any], bool]:
    return lambda v: math.isfinite(v) and (v > low if strict else v >= low)


_BOUNDS: dict[str, tuple[Callable[[Any], bool], str, str]] = {
    # option: (valid?, the valid values in words, a valid example)
    "world_size": (lambda v: v >= 1, "at least 1", "2"),
    "atol": (_finite_at_least(0.0, strict=False), "a finite number >= 0", "1e-5"),
    "rtol": (_finite_at_least(0.0, strict=False), "a finite number >= 0", "1e-4"),
    "max_fix_attempts": (lambda v: v >= 0, ">= 0", "8"),
    "timeout_sec": (_finite_at_least(0.0, strict=True), "a finite number of seconds > 0", "120"),
    "deadline_sec": (_finite_at_least(0.0, strict=True), "a finite number of seconds > 0", "600"),
    "helper_sample_every": (lambda v: v >= 1, "at least 1", "8"),
    "backend": (lambda v: v in ("auto", "gloo", "nccl"), "one of auto, gloo, nccl", "auto"),
}
_NULLABLE = ("deadline_sec", "watched_helper_packages")
"""Options whose None means "not set" (no deadline; the default watched packages)."""


def check_option(
    option: str, value: Any, *, where: str = "", config: str | None = None, line: int | None = None
) -> None:
    """Raise `OptionError` unless `value` has the type of `option` (see `OPTION_TYPES`) and lies in its
    bounds: integers that are not bools, finite tolerances >= 0, a finite timeout and deadline > 0,
    `world_size` and `helper_sample_every` >= 1, `max_fix_attempts` >= 0, a known backend and device.
    The message starts with `where` (e.g. the config table) when given; `config` / `line` locate it."""
    prefix = f"{where}: " if where else ""
    if value is None and option in _NULLABLE:
        return
    kind = OPTION_TYPES.get(option)
    if kind is None:
        raise OptionError(
            option,
            value,
            f"{prefix}{option} is not a distcheck option",
            f"known options: {', '.join(OPTION_TYPES)}",
            config=config,
            line=line,
        )
    if not check_type(value, kind):
        raise OptionError(
            option,
            value,
            f"{prefix}{option} must be {KIND_WORDS[kind]}, got {value!r}",
            f"give {option} {KIND_WORDS[kind]}",
            config=config,
            line=line,
        )
    if option == "device" and _DEVICE.fullmatch(value) is None:
        raise OptionError(
            option,
            value,
            f"{prefix}device {value!r} not understood",
            "use auto, cpu, cuda (one rank per GPU), cuda:N (every rank on GPU N) or one device per rank "
            "separated by commas (cuda:0,cuda:1)",
            config=config,
            line=line,
        )
    bound = _BOUNDS.get(option)
    if bound is not None and not bound[0](value):
        _, words, example = bound
        raise OptionError(
            option,
            value,
            f"{prefix}{option} must be {words}, got {value!r}",
            f"give {option} a value that is {words} (e.g. {example})",
            config=config,
            line=line,
        )


def check_options(options: Mapping[str, Any]) -> None:
    """`check_option` for every entry of `options` (validator option name → value); `OptionError` (a
    `ConfigError` and a `ValueError`) naming the first bad one."""
    for option, value in options.items():
        check_option(option, value)


def usable_cores() -> int:
    """The number of CPU cores this process may run on (its affinity mask, else `os.cpu_count()`)."""
    try:
        return len(os.sched_getaffinity(0)) or 1
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def cpu_rank_limit() -> int:
    """The most ranks a CPU validation starts without `allow_oversubscribe`: `RANKS_PER_CORE` per usable core."""
    return RANKS_PER_CORE * usable_cores()


def _atoms(n: int) -> str:
    return f"{n} atom" if n == 1 else f"{n} atoms"


def check_rank_count(world_size: int) -> None:
    """Refuse a validation over fewer than `MIN_WORLD_SIZE` (2) ranks with an `OptionError` for
    `world_size` (after `check_option`'s type and bounds): one rank owns every atom, nothing is
    distributed and nothing could be found. Every validation entry point runs it before anything starts;
    `run_distributed` itself still runs one rank."""
    check_option("world_size", world_size)
    if world_size < MIN_WORLD_SIZE:
        raise OptionError(
            "world_size",
            world_size,
            f"world_size {world_size}: a distributed check needs at least {MIN_WORLD_SIZE} ranks (one rank owns "
            "every atom, so there is no halo and no exchange, and nothing to compare)",
            f"use world_size {MIN_WORLD_SIZE} or more (--world-size 2 on the command line, world_size = 2 in the "
            "pyproject, distcheck.worldSize in the editor); 2 or 4 finds most distribution bugs",
        )


def check_world_size(
    world_size: int, system_atoms: Sequence[int], *, on_cpu: bool, allow_oversubscribe: bool = False
) -> None:
    """Refuse, before any process starts, a `world_size` no sample system can give every rank atoms of
    (more ranks than atoms of the smallest system in `system_atoms`), and on the CPU (`on_cpu`) more
    than `cpu_rank_limit()` ranks unless `allow_oversubscribe`; fewer than 2 ranks is refused first
    (`check_rank_count`). Raises `OptionError` for `world_size`."""
    check_rank_count(world_size)
    if system_atoms:
        smallest = min(range(len(system_atoms)), key=lambda i: system_atoms[i])
        n = int(system_atoms[smallest])
        if world_size > n:
            which = (
                f"the {_atoms(n)} of the sample"
                if len(system_atoms) == 1
                else f"the {_atoms(n)} of system {smallest}, the smallest of the sample's {len(system_atoms)} systems"
            )
            raise OptionError(
                "world_size",
                world_size,
                f"world_size {world_size} is more than {which}: every rank must own atoms of every system",
                f"use a world_size of at most {n} (2 or 4 finds most distribution bugs), or a sample whose "
                f"smallest system has at least {world_size} atoms",
            )
    if on_cpu and not allow_oversubscribe:
        limit = cpu_rank_limit()
        if world_size > limit:
            cores = usable_cores()
            raise OptionError(
                "world_size",
                world_size,
                f"world_size {world_size} would start {world_size} rank processes on the CPU, more than "
                f"{RANKS_PER_CORE} per core on the {cores} core{'s' if cores != 1 else ''} this process may use "
                f"(at most {limit})",
                f"use a world_size of at most {limit}, or start them anyway with --allow-oversubscribe (CLI), "
                "allow_oversubscribe = true (pyproject target), allow_oversubscribe=True (library) or "
                "distcheck.allowOversubscribe (editor)",
            )
