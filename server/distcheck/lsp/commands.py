"""Typed arguments of the daemon's `workspace/executeCommand` commands, through pygls' converter.

pygls structures each argument of a command with the converter, by the handler's parameter
annotations (`@server.command`), and answers `-32602` with the converter's message when one does
not fit. The hooks here make those messages say what was expected and what to pass instead, and
are strict where cattrs is lenient (it would turn the number 5 into the target name "5").

LSP clients leave optional trailing arguments out, while pygls wants one argument per parameter;
so the converter pads a registered command's `arguments` with nulls up to its parameter count
(`arity`), and each optional parameter is typed `X | None`. Arguments beyond the parameters land
in the handler's `*extra`, which it refuses with the command's usage (`too_many`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import attrs
import cattrs
from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams
from pygls.protocol import default_converter

from .config import convert_options

T = TypeVar("T")

__all__ = [
    "USAGE",
    "HelperFixParams",
    "LastReportParams",
    "LocateModuleParams",
    "TargetArg",
    "TrustParams",
    "ValidateExtra",
    "arity",
    "converter_factory",
    "structure_params",
    "too_many",
]

USAGE = {
    "distcheck.validate": "[target?: string, overrides?: object, {confirmOutsideWorkspace: [paths]}?]",
    "distcheck.cancel": "[target?: string]",
    "distcheck.saveSpec": "[target?: string]",
}
"""What each command takes (docs/protocol.md), for the errors that refuse other arguments."""

REQUEST_USAGE = {
    "distcheck/lastReport": "{target: string}",
    "distcheck/trust": "{trusted: boolean}",
    "distcheck/locateModule": "{cls: string (a dotted class name), module?: string, target?: string}",
    "distcheck/helperFix": "{qualname: string (module.function), target?: string}",
}
"""What each distcheck request's params are (docs/protocol.md), for the errors that refuse others."""


@attrs.frozen
class TargetArg:
    """A target named by a command: its name, a file URI or a path (in JSON, a plain string)."""

    value: str


@attrs.frozen
class ValidateExtra:
    """An object argument of `distcheck.validate`: option overrides (camelCase settings keys, checked
    and converted to validator options) and/or `confirmOutsideWorkspace` (paths the user trusts)."""

    overrides: dict[str, Any] = attrs.field(factory=dict)
    confirmed: tuple[str, ...] = ()


@attrs.frozen
class LastReportParams:
    """`distcheck/lastReport`: the target whose last report to return."""

    target: str


@attrs.frozen
class TrustParams:
    """`distcheck/trust`: whether the user trusts the workspace."""

    trusted: bool


@attrs.frozen
class LocateModuleParams:
    """`distcheck/locateModule`: a module class by its dotted name (`cls`, as the report names it);
    `module` is its path in the model (only for messages), `target` narrows the search paths."""

    cls: str
    module: str | None = None
    target: str | None = None


@attrs.frozen
class HelperFixParams:
    """`distcheck/helperFix`: the adapter fix of the helper `qualname` in `target`'s last report."""

    qualname: str
    target: str | None = None


_PARAM_TYPES: dict[type, str] = {
    LastReportParams: "distcheck/lastReport",
    TrustParams: "distcheck/trust",
    LocateModuleParams: "distcheck/locateModule",
    HelperFixParams: "distcheck/helperFix",
}


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list | tuple):
        return "a list"
    return "an object" if isinstance(value, Mapping) else type(value).__name__


def _target(value: Any, _: type) -> TargetArg:
    if not isinstance(value, str):
        raise ValueError(
            f"the target must be a string (a target name, or a Python file's URI or path), got {_kind(value)} "
            f"{value!r}; pass the target's name, or leave it out to validate the only target"
        )
    return TargetArg(value)


def _validate_extra(value: Any, _: type) -> ValidateExtra:
    if not isinstance(value, Mapping):
        raise ValueError(
            f"distcheck.validate takes {USAGE['distcheck.validate']}: after the target comes an object of "
            f"option overrides or {{confirmOutsideWorkspace: [paths]}}, got {_kind(value)} {value!r}"
        )
    raw = dict(value)
    confirmed: tuple[str, ...] = ()
    if "confirmOutsideWorkspace" in raw:
        paths = raw.pop("confirmOutsideWorkspace")
        if not isinstance(paths, list | tuple) or not all(isinstance(p, str) for p in paths):
            raise ValueError(
                f"confirmOutsideWorkspace takes a list of paths (strings), got {_kind(paths)} {paths!r}; pass "
                "the paths of the outside-workspace error's data"
            )
        confirmed = tuple(paths)
    overrides, problems = convert_options(raw, "override ")
    if problems:
        raise ValueError("; ".join(problems))
    return ValidateExtra(overrides, confirmed)


def _strict_params(kind: type) -> Callable[[Any, type], Any]:
    method = _PARAM_TYPES[kind]
    fields = attrs.fields(kind)

    def structure(value: Any, _: type) -> Any:
        usage = f"{method} takes {REQUEST_USAGE[method]}"
        if isinstance(value, tuple) and hasattr(value, "_asdict"):  # pygls reads a JSON object as a namedtuple
            value = value._asdict()
        if not isinstance(value, Mapping):
            raise ValueError(f"{usage}; got {_kind(value)} {value!r}: pass an object")
        unknown = sorted(set(value) - {f.name for f in fields})
        if unknown:
            raise ValueError(f"{usage}; {', '.join(map(repr, unknown))} is not one of its keys: leave it out")
        given: dict[str, Any] = {}
        for f in fields:
            required = f.default is attrs.NOTHING
            if f.name not in value or value[f.name] is None:
                if required:
                    raise ValueError(f"{usage}; {f.name!r} is missing: pass it")
                continue
            item = value[f.name]
            flag = f.type in (bool, "bool")
            fits = isinstance(item, bool) if flag else isinstance(item, str) and bool(item.strip())
            if not fits:
                expected = "a boolean" if flag else "a non-empty string"
                raise ValueError(f"{usage}; {f.name!r} must be {expected}, got {_kind(item)} {item!r}")
            given[f.name] = item
        return kind(**given)

    return structure


def structure_params(converter: cattrs.Converter, value: Any, kind: type[T]) -> T:
    """`value` (a request's raw params) as `kind` through the server's converter, or the `-32602`
    error saying what the request takes."""
    try:
        result: T = converter.structure(value, kind)
    except (ValueError, TypeError, cattrs.BaseValidationError) as err:
        raise JsonRpcInvalidParams(str(err)) from err
    return result


def arity(handler: Callable[..., Any]) -> int:
    """The number of arguments a command handler takes after the server: its positional parameters
    but the first (the server) and any `*extra`."""
    params = list(inspect.signature(handler).parameters.values())[1:]
    return sum(1 for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD))


def too_many(command: str, extra: tuple[Any, ...]) -> JsonRpcInvalidParams:
    """The `-32602` error for `extra` arguments beyond what `command` takes."""
    return JsonRpcInvalidParams(
        f"{command} takes {USAGE.get(command, 'other arguments')}; {len(extra)} argument(s) too many "
        f"({', '.join(repr(e) for e in extra)}); leave them out"
    )


def converter_factory(arities: Mapping[str, int]) -> Callable[[], cattrs.Converter]:
    """A pygls converter factory: pygls' default converter plus the hooks of the typed command
    arguments and the padding of the commands in `arities` (read when a command arrives, so it may
    be filled after the server is made)."""

    def make() -> cattrs.Converter:
        converter: cattrs.Converter = default_converter()  # type: ignore[no-untyped-call]
        converter.register_structure_hook(TargetArg, _target)
        converter.register_structure_hook(ValidateExtra, _validate_extra)
        for kind in _PARAM_TYPES:
            converter.register_structure_hook(kind, _strict_params(kind))
        base = converter.get_structure_hook(types.ExecuteCommandParams)

        def execute_params(value: Any, kind: type) -> types.ExecuteCommandParams:
            params: types.ExecuteCommandParams = base(value, kind)
            count = arities.get(params.command)
            given = list(params.arguments or [])
            if count is not None and len(given) < count:
                params = attrs.evolve(params, arguments=[*given, *([None] * (count - len(given)))])
            return params

        converter.register_structure_hook(types.ExecuteCommandParams, execute_params)
        return converter

    return make
