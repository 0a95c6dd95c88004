"""Reading a spec: a parsed JSON document → `MLIPSpec`, or every `SpecError` with its JSON path.

Reading never guesses: an unknown field (with "did you mean ...?"), a wrong type, a bad enum value,
a broken pattern, a newer format version or a contradiction between fields (`checks`) is an error whose path
says where (`distribution.third_party_helpers[1].replacement`) and whose message says what to write
instead. The walk is over the model's dataclass fields and their metadata (`fields`), so the reader,
the writer and the JSON Schema cannot drift apart; `validate_dict` collects every error instead of
stopping at the first.
"""

from __future__ import annotations

import dataclasses
import difflib
import math
import re
import typing
from collections.abc import Mapping, Sequence
from typing import Any, TypeVar

from .checks import CHECKS
from .errors import Sink, SpecError, format_path, json_type, quote_all, show
from .fields import SPEC_FORMAT, SPEC_VERSION, field_default, field_types, non_null, union_args
from .jsontext import PathPart
from .model import MLIPSpec

__all__ = ["read_part", "read_spec", "validate_dict"]

_PartT = TypeVar("_PartT")


class _Bad:
    """Marks a value that could not be read."""


_BAD = _Bad()


def _expected_words(tp: Any, meta: Mapping[str, Any]) -> tuple[str, str]:
    """(what was expected, what to write instead) for a type error on a value of type `tp`."""
    args = union_args(tp)
    if args is not None:
        inner = non_null(args)
        what, _ = _expected_words(inner, meta)
        return f"{what} or null", f"write {what} or null"
    if tp is bool:
        return "a boolean", "set it to true or false"
    if tp is int:
        return "an integer", "write a whole number such as 0"
    if tp is float:
        return "a number", "write a number such as 6.0"
    if tp is str:
        if "enum" in meta:
            return "a string", f"set it to one of {quote_all(meta['enum'])}"
        return "a string", "write it as a JSON string in double quotes"
    origin = typing.get_origin(tp)
    if origin is list:
        return "an array", "write a JSON array [...]"
    if origin is dict or dataclasses.is_dataclass(tp):
        return "an object", "write a JSON object {...}"
    return str(tp), "fix its type"


def _type_error(sink: Sink, parts: Sequence[PathPart], tp: Any, meta: Mapping[str, Any], value: object) -> None:
    what, fix = _expected_words(tp, meta)
    sink.add(parts, f"expected {what}, got {json_type(value)} {show(value)}; {fix}")


def _parse_value(tp: Any, meta: Mapping[str, Any], value: Any, parts: tuple[PathPart, ...], sink: Sink) -> Any:
    """The value read as `tp`, or `_BAD` after recording why not (best-effort for containers)."""
    args = union_args(tp)
    if args is not None:
        if value is None and type(None) in args:
            return None
        inner = non_null(args)
        if not _is_instance_of(inner, value):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return _parse_value(inner, meta, value, parts, sink)
    if tp is bool:
        if not isinstance(value, bool):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return value
    if tp is int:
        if not isinstance(value, int) or isinstance(value, bool):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return _check_number(meta, value, parts, sink)
    if tp is float:
        if not isinstance(value, (int, float)) or isinstance(value, bool):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        if not math.isfinite(value):
            sink.add(parts, f"expected a finite number, got {value!r}; write a finite number")
            return _BAD
        checked = _check_number(meta, value, parts, sink)
        return checked if isinstance(checked, _Bad) else float(value)
    if tp is str:
        if not isinstance(value, str):
            _type_error(sink, parts, tp, meta, value)
            return _BAD
        return _check_string(meta, value, parts, sink)
    origin = typing.get_origin(tp)
    if origin is list:
        return _parse_list(typing.get_args(tp)[0], meta, value, parts, sink)
    if origin is dict:
        return _parse_dict(typing.get_args(tp)[1], meta, value, parts, sink)
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        obj, _ok = _parse_object(tp, value, parts, sink)
        return obj
    raise TypeError(f"spec field type {tp!r} is not supported")  # a bug in this module, not in a spec


def _is_instance_of(tp: Any, value: object) -> bool:
    if tp is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if isinstance(tp, type):
        return isinstance(value, tp)
    return True


def _check_number(meta: Mapping[str, Any], value: float, parts: tuple[PathPart, ...], sink: Sink) -> Any:
    name = parts[-1] if parts else "value"
    if "exclusive_minimum" in meta and not value > meta["exclusive_minimum"]:
        low = meta["exclusive_minimum"]
        fix = meta.get("range_hint", f"write a number above {low}")
        sink.add(parts, f"{name} must be greater than {low}, got {show(value)}; {fix}")
        return _BAD
    if "minimum" in meta and not value >= meta["minimum"]:
        low = meta["minimum"]
        sink.add(parts, f"{name} must be {low} or more, got {show(value)}; write a number of at least {low}")
        return _BAD
    return value


def _check_string(meta: Mapping[str, Any], value: str, parts: tuple[PathPart, ...], sink: Sink) -> Any:
    if "enum" in meta and value not in meta["enum"]:
        sink.add(parts, f"expected one of {quote_all(meta['enum'])}, got {show(value)}; set it to one of those")
        return _BAD
    if meta.get("min_length", 0) > len(value):
        sink.add(parts, 'expected a non-empty string, got ""; write the name')
        return _BAD
    if "pattern" in meta and not re.fullmatch(meta["pattern"], value):
        hint = meta.get("pattern_hint", f"a string matching {meta['pattern']}")
        sink.add(parts, f"expected {hint}, got {show(value)}; rewrite it in that form")
        return _BAD
    return value


def _parse_list(item_tp: Any, meta: Mapping[str, Any], value: Any, parts: tuple[PathPart, ...], sink: Sink) -> Any:
    if not isinstance(value, (list, tuple)):
        _type_error(sink, parts, list[Any], meta, value)
        return _BAD
    item_meta: Mapping[str, Any] = meta.get("items", {})
    unique = meta.get("unique")
    noun = meta.get("unique_noun", "entry")
    seen: dict[Any, int] = {}
    out: list[Any] = []
    for i, item in enumerate(value):
        before = len(sink.errors)
        parsed = _parse_value(item_tp, item_meta, item, (*parts, i), sink)
        if len(sink.errors) != before or isinstance(parsed, _Bad):
            continue
        if unique:
            key = parsed if unique is True else getattr(parsed, unique)
            if key in seen:
                first = format_path((*parts, seen[key]))
                sink.add(
                    (*parts, i),
                    f"{noun} {show(key)} is listed twice (first at {first}); remove this entry"
                    + (" or merge the two" if unique is not True else ""),
                )
                continue
            seen[key] = i
        out.append(parsed)
    return out


def _parse_dict(value_tp: Any, meta: Mapping[str, Any], value: Any, parts: tuple[PathPart, ...], sink: Sink) -> Any:
    if not isinstance(value, Mapping):
        _type_error(sink, parts, dict[str, Any], meta, value)
        return _BAD
    key_meta: Mapping[str, Any] = meta.get("keys", {})
    value_meta: Mapping[str, Any] = meta.get("values", {})
    out: dict[str, Any] = {}
    for key, item in value.items():
        if not isinstance(key, str):
            sink.add((*parts, str(key)), f"keys must be strings, got {json_type(key)} {show(key)}; quote the key")
            continue
        before = len(sink.errors)
        if _check_string(key_meta, key, (*parts, key), sink) is _BAD:
            continue
        parsed = _parse_value(value_tp, value_meta, item, (*parts, key), sink)
        if len(sink.errors) == before and not isinstance(parsed, _Bad):
            out[key] = parsed
    return out


def _unknown_field_message(key: str, allowed: Sequence[str]) -> str:
    close = difflib.get_close_matches(key, allowed, n=1)
    guess = f"did you mean {show(close[0])}? " if close else ""
    return (
        f"unknown field {show(key)}; {guess}allowed fields here are {quote_all(allowed)}; remove it or correct its name"
    )


def _parse_object(
    cls: type,
    value: Any,
    parts: tuple[PathPart, ...],
    sink: Sink,
    *,
    extra_keys: Sequence[str] = (),
) -> tuple[Any, bool]:
    """(instance of `cls` or `_BAD`, whether the object was error-free)."""
    if not isinstance(value, Mapping):
        _type_error(sink, parts, cls, {}, value)
        return _BAD, False
    before = len(sink.errors)
    hints = field_types(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    allowed = [*extra_keys, *fields]
    values: dict[str, Any] = {}
    for key, item in value.items():
        if key in extra_keys:
            continue
        if not isinstance(key, str) or key not in fields:
            sink.add((*parts, str(key)), _unknown_field_message(str(key), allowed))
            continue
        parsed = _parse_value(hints[key], fields[key].metadata, item, (*parts, key), sink)
        if not isinstance(parsed, _Bad):
            values[key] = parsed
    for name, f in fields.items():
        if name in value:
            continue
        if not field_default(f)[0]:
            example = f.metadata.get("example", "...")
            sink.add((*parts, name), f'required field "{name}" is missing; add it, e.g. "{name}": {example}')
    check = CHECKS.get(cls)
    if check is not None:
        check(value, values, parts, sink)
    if len(sink.errors) != before:
        return _BAD, False
    return cls(**values), True


def _parse_document(d: object, sink: Sink) -> MLIPSpec | None:
    """The spec in `d`, or None after recording errors; stops early on a foreign or newer document."""
    if not isinstance(d, Mapping):
        sink.add((), f"expected a JSON object at the top level, got {json_type(d)}; write the spec as {{...}}")
        return None
    if "format" not in d:
        sink.add(("format",), f'required field "format" is missing; add "format": "{SPEC_FORMAT}"')
    elif d["format"] != SPEC_FORMAT:
        sink.add(
            ("format",),
            f'expected "{SPEC_FORMAT}", got {show(d["format"])}; this is not a distcheck spec — if it is '
            f'meant to be one, set "format": "{SPEC_FORMAT}"',
        )
        return None
    if "version" not in d:
        sink.add(("version",), f'required field "version" is missing; add "version": {SPEC_VERSION}')
    else:
        version = d["version"]
        if not isinstance(version, int) or isinstance(version, bool):
            sink.add(
                ("version",),
                f'expected an integer version, got {json_type(version)} {show(version)}; set "version": {SPEC_VERSION}',
            )
        elif version > SPEC_VERSION:
            sink.add(
                ("version",),
                f"this spec has version {version} but this distcheck reads versions up to {SPEC_VERSION}: "
                "the spec was written by a newer distcheck; upgrade distcheck (pip install -U distcheck)",
            )
            return None
        elif version < 1:
            sink.add(("version",), f'version must be 1 or more, got {version}; set "version": {SPEC_VERSION}')
    spec, ok = _parse_object(MLIPSpec, d, (), sink, extra_keys=("format", "version"))
    return spec if ok and not sink.errors else None


def validate_dict(d: object) -> list[SpecError]:
    """Every error in the spec document `d` (a parsed JSON object), in the order found; [] if valid.

    Only stops early when `d` is not a distcheck spec (wrong `format`) or is from a newer version,
    where the other errors would be noise.
    """
    sink = Sink()
    _parse_document(d, sink)
    return sink.errors


def read_spec(d: Mapping[str, Any]) -> MLIPSpec:
    """The spec document `d` (a parsed JSON object); raises the first `SpecError` found."""
    sink = Sink()
    spec = _parse_document(d, sink)
    if sink.errors:
        raise sink.errors[0]
    assert spec is not None
    return spec


def read_part(cls: type[_PartT], d: Mapping[str, Any]) -> _PartT:
    """The spec part `cls` read from `d`; raises the first `SpecError` (paths relative to the part)."""
    sink = Sink()
    value, ok = _parse_object(cls, d, (), sink)
    if sink.errors:
        raise sink.errors[0]
    assert ok and isinstance(value, cls)
    return value
