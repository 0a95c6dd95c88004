"""The one check of a validator option's type and bounds, read off the record in `distcheck.options`.

`check_option` is what every entry point runs (the CLI on its merged options, the pyproject reader on
each key with its line, the editor per setting, the library entry points and `run_distributed` on
their arguments); it raises `OptionError` and nothing else, whatever it is given. `normalize` turns a
checked value into the form the engine takes (a float for a `float` option, a float or a dict of
floats for a tolerance); `tolerance_of` is the one reading of a per-output tolerance the engine
applies (output name, then output kind, then `"default"`). No torch here.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any

from .options import OPTION_ALIASES, OPTION_TYPES, OPTIONS, OUTPUT_KINDS, Option

__all__ = [
    "KIND_WORDS",
    "ConfigError",
    "OptionError",
    "Tolerance",
    "check_option",
    "check_options",
    "check_type",
    "normalize",
    "strictest",
    "tolerance_of",
    "unknown_tolerance_keys",
    "with_default",
]

KIND_WORDS = {
    "int": "an integer",
    "float": "a number",
    "bool": "true or false",
    "str": "a string",
    "list[str]": "a list of strings",
    "tolerance": "a number or a table of numbers per output",
}
"""How an error message names each option kind."""


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

    `option` is the option's name (snake_case, as `OPTIONS` spells it) and `value` what was given;
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


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_type(value: Any, kind: str) -> bool:
    """Whether `value` has the option kind `kind` (a value of `OPTION_TYPES`)."""
    if kind == "int":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return _number(value)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "str":
        return isinstance(value, str)
    if kind == "tolerance":
        if isinstance(value, Mapping):
            return bool(value) and all(isinstance(k, str) and k and _number(v) for k, v in value.items())
        return _number(value)
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def _in_bounds(o: Option, value: Any) -> bool:
    """Whether a value of the right type lies in `o`'s bound (for a tolerance: each of its numbers)."""
    if o.kind == "tolerance" and isinstance(value, Mapping):
        return all(_in_bounds(o, v) for v in value.values())
    if o.pattern is not None and re.fullmatch(o.pattern, value) is None:
        return False
    if o.choices and value not in o.choices:
        return False
    if o.minimum is None:
        return True
    try:
        number = float(value)
    except OverflowError:  # an int too large for a float: infinite, for the finite check
        number = math.inf if value > 0 else -math.inf
    if o.finite and not math.isfinite(number):
        return False
    return number > o.minimum if o.exclusive else number >= o.minimum


def _bad_entry(o: Option, value: Mapping[str, Any]) -> str:
    """The first entry of a per-output tolerance that is out of bounds, as `name=value`."""
    for key, v in value.items():
        if not _in_bounds(o, v):
            return f"{key}={v!r}"
    return ""


def check_option(
    option: str, value: Any, *, where: str = "", config: str | None = None, line: int | None = None
) -> None:
    """Raise `OptionError` (and nothing else, whatever `option` and `value` are) unless `option` is a validator
    option and `value` has its kind and lies in its bound as `distcheck.options.OPTIONS` states them.
    The message starts with `where` (e.g. the config table) when given; `config` / `line` locate it."""
    prefix = f"{where}: " if where else ""
    name = OPTION_ALIASES.get(option, option) if isinstance(option, str) else option
    kind = OPTION_TYPES.get(name) if isinstance(name, str) else None
    if kind is None:
        raise OptionError(
            str(option),
            value,
            f"{prefix}{option!s} is not a distcheck option",
            f"use one of the known options: {', '.join(OPTION_TYPES)}",
            config=config,
            line=line,
        )
    o = next(x for x in OPTIONS if x.name == name)
    if value is None and o.nullable:
        return
    if not check_type(value, kind):
        raise OptionError(
            name,
            value,
            f"{prefix}{name} must be {KIND_WORDS[kind]}, got {value!r}",
            f"give {name} {KIND_WORDS[kind]}"
            + (" (e.g. 1e-5, or {'forces': 1e-4, 'default': 1e-5})" if kind == "tolerance" else ""),
            config=config,
            line=line,
        )
    try:
        value = normalize(name, value)  # the value as the engine will take it (and the message shows it)
    except OverflowError:  # an int too large for a float: its bound check says so
        pass
    if not _in_bounds(o, value):
        if o.pattern is not None:
            message = f"{prefix}{name} {value!r} not understood"
            hint = f"use {o.words}"
        else:
            shown = _bad_entry(o, value) if isinstance(value, Mapping) else repr(value)
            message = f"{prefix}{name} must be {o.words}, got {shown}"
            hint = f"give {name} a value that is {o.words} (e.g. {o.example})"
        raise OptionError(name, value, message, hint, config=config, line=line)


def check_options(options: Any) -> None:
    """`check_option` for every entry of `options` (validator option name → value); `OptionError` (a
    `ConfigError` and a `ValueError`) naming the first bad one, also when `options` is not a mapping."""
    if not isinstance(options, Mapping):
        raise OptionError(
            "options",
            options,
            f"options must be a mapping of option names to values, got {type(options).__name__}",
            "pass a dict such as {'world_size': 2, 'atol': 1e-5}",
        )
    for name, value in options.items():
        check_option(name, value)


def normalize(option: str, value: Any) -> Any:
    """A checked `value` of `option` in the engine's form: a float for a `float` option, a float or a dict of
    floats (a fresh one) for a tolerance, a fresh list for a list; anything else as it is."""
    kind = OPTION_TYPES.get(OPTION_ALIASES.get(option, option))
    if value is None:
        return None
    if kind == "float":
        return float(value)
    if kind == "tolerance":
        return {str(k): float(v) for k, v in value.items()} if isinstance(value, Mapping) else float(value)
    if kind == "list[str]":
        return list(value)
    return value


Tolerance = float | Mapping[str, float]
"""An `atol` / `rtol` as the engine takes it: one number, or numbers per output name, output kind and `"default"`."""


def with_default(tol: Tolerance, default: float) -> Tolerance:
    """`tol` with a `"default"` entry (`default`) when it is a table without one, so every output has a tolerance."""
    if isinstance(tol, Mapping):
        return {"default": float(default), **{str(k): float(v) for k, v in tol.items()}}
    return float(tol)


def tolerance_of(tol: Tolerance, name: str, kind: str) -> float:
    """The tolerance of output `name` of `kind`: `tol` itself, or its entry by name, then kind, then `"default"`
    (`KeyError` when a table has none of them: `with_default` first)."""
    if isinstance(tol, Mapping):
        for key in (name, kind, "default"):
            if key in tol:
                return float(tol[key])
        raise KeyError(f"no tolerance for output {name!r} ({kind}) and no default")
    return float(tol)


def strictest(tol: Tolerance) -> float:
    """The smallest tolerance `tol` gives any output (for comparisons that belong to no one output: module records)."""
    return min(float(v) for v in tol.values()) if isinstance(tol, Mapping) else float(tol)


def unknown_tolerance_keys(tol: Tolerance, outputs: Mapping[str, str]) -> list[str]:
    """The keys of a per-output `tol` that name neither an output of `outputs` (name → kind), an output kind nor
    `"default"`: a misspelt output, whose tolerance would silently not apply."""
    if not isinstance(tol, Mapping):
        return []
    known = {*outputs, *OUTPUT_KINDS, "default"}
    return [k for k in tol if k not in known]
