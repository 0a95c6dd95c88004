"""The records' JSON codec, driven by their dataclass fields: one description for writing, reading and
the schema (`distcheck.report.schema` reads the same `slots`).

A record is a dataclass deriving from `Record`. Each field is written under its name (or
`wire(key=...)`), encoded by its type: `bool`, `int`, `float` (non-finite as a string), `str`,
`X | None`, `list[X]`, `Any` (a free-form value), `dict[str, X]`, `dict[int, X]` (a rank map:
decimal-string keys), `dict[str, Any]` (a free-form dict, see `distcheck.report.values`), another
record, or `MLIPSpec`. Reading is strict: a field without a default is required, one with a default
may be absent (older reports), an unknown key is refused, `wire(enum=...)` limits a string; every
error names its JSON path. Derived properties listed in `_derived` are written for readers in other
languages and ignored when read (`_derived_enums` names the values a derived string takes);
`_placed` (key, anchor) pairs move a key right after another one on the wire, so the documents keep
their key order.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, TypeVar

from distcheck.spec import MLIPSpec
from distcheck.spec.fields import non_null, union_args

from .values import (
    _SCALARS,
    _bad,
    _dec_float,
    _dec_free,
    _dec_free_dict,
    _dec_list,
    _dec_rank_map,
    _dec_scalar,
    _dec_spec,
    _dec_str_map,
    _enc_float,
    _enc_free,
    _enc_free_dict,
    _fields,
    _PathT,
)

__all__ = ["Record", "Slot", "decode", "derived_type", "encode", "slots", "wire"]

_R = TypeVar("_R", bound="Record")


def wire(
    *, key: str | None = None, enum: tuple[str, ...] | None = None, omit_empty: bool = False, shape: type | None = None
) -> dict[str, Any]:
    """Field metadata for the codec: `key` (the JSON name, if not the field's), `enum` (the allowed
    strings), `omit_empty` (not written when None or empty), `shape` (for a free-form dict: the
    `distcheck.report.parts` record that documents its usual keys in the schema)."""
    return {"key": key, "enum": enum, "omit_empty": omit_empty, "shape": shape}


@dataclass(frozen=True)
class Slot:
    """One field of a record as the codec sees it."""

    name: str
    key: str
    tp: Any
    required: bool
    enum: tuple[str, ...] | None
    omit_empty: bool
    shape: type | None
    field: dataclasses.Field[Any]

    def default(self) -> Any:
        """The field's default (a fresh one for a default factory)."""
        if self.field.default_factory is not dataclasses.MISSING:
            return self.field.default_factory()
        return self.field.default


_SLOTS: dict[type, tuple[Slot, ...]] = {}


def slots(cls: type) -> tuple[Slot, ...]:
    """The fields of record class `cls`, in field order, with their resolved types and wire metadata."""
    found = _SLOTS.get(cls)
    if found is None:
        found = _SLOTS[cls] = _slots_of(cls)
    return found


def _slots_of(cls: type) -> tuple[Slot, ...]:
    hints = typing.get_type_hints(cls)
    out = []
    for f in dataclasses.fields(cls):
        m = f.metadata
        if m.get("extra"):
            continue  # an open record's other keys (`parts._Open.extra`): no slot of their own
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        out.append(
            Slot(
                name=f.name,
                key=m.get("key") or f.name,
                tp=hints[f.name],
                required=required,
                enum=m.get("enum"),
                omit_empty=bool(m.get("omit_empty")),
                shape=m.get("shape"),
                field=f,
            )
        )
    return tuple(out)


def derived_type(cls: type, name: str) -> Any:
    """The return type of the derived property `name` of record class `cls`."""
    prop = getattr(cls, name)
    return typing.get_type_hints(prop.fget)["return"]


def is_record(tp: Any) -> bool:
    """Is `tp` a record class (a dataclass deriving from `Record`)?"""
    return isinstance(tp, type) and issubclass(tp, Record) and dataclasses.is_dataclass(tp)


def encode(value: Any, tp: Any, path: _PathT) -> Any:
    """`value` of type `tp` as JSON data; `TypeError` naming `path` for a free-form value JSON cannot hold."""
    if tp is Any:
        return _enc_free(value, path)
    args = union_args(tp)
    if args is not None:
        return None if value is None else encode(value, non_null(args), path)
    if tp is bool:
        return bool(value)
    if tp is int:
        return int(value)
    if tp is float:
        return _enc_float(value)
    if tp is str:
        return value
    if tp is MLIPSpec:
        return value.to_dict()
    if is_record(tp):
        return value._encode(path)
    origin, targs = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return [encode(item, targs[0], (*path, i)) for i, item in enumerate(value)]
    if origin is dict:
        if targs[1] is Any:
            return _enc_free_dict(value, path)
        if targs[0] is int:
            return {str(int(k)): encode(v, targs[1], (*path, str(k))) for k, v in value.items()}
        return {k: encode(v, targs[1], (*path, k)) for k, v in value.items()}
    raise TypeError(f"report type {tp!r} has no JSON encoding")


def decode(value: Any, tp: Any, path: _PathT, enum: tuple[str, ...] | None = None) -> Any:
    """Parsed JSON `value` read as type `tp`; `ValueError` naming `path` when it is not one."""
    if tp is Any:
        return _dec_free(value, path)
    args = union_args(tp)
    if args is not None:
        return None if value is None else decode(value, non_null(args), path, enum)
    if tp is float:
        return _dec_float(value, path)
    if tp in _SCALARS:
        found = _dec_scalar(value, path, tp)
        if tp is str and enum is not None and found not in enum:
            raise _bad(path, f"expected one of {', '.join(enum)}, got {found!r}")
        return found
    if tp is MLIPSpec:
        return _dec_spec(value, path)
    if is_record(tp):
        return tp._read(value, path)
    origin, targs = typing.get_origin(tp), typing.get_args(tp)
    if origin is list:
        return _dec_list(value, path, lambda v, p: decode(v, targs[0], p))
    if origin is dict:
        if targs[1] is Any:
            return _dec_free_dict(value, path)
        if targs[0] is int:
            return _dec_rank_map(value, path, lambda v, p: decode(v, targs[1], p))
        return _dec_str_map(value, path, lambda v, p: decode(v, targs[1], p))
    raise TypeError(f"report type {tp!r} has no JSON decoding")


def wire_keys(cls: type) -> list[str]:
    """The JSON keys of record class `cls` in the order they are written (fields, then derived, then
    each `_placed` key moved after its anchor)."""
    keys = [s.key for s in slots(cls)] + list(getattr(cls, "_derived", ()))
    for key, after in getattr(cls, "_placed", ()):
        keys.remove(key)
        keys.insert(keys.index(after) + 1, key)
    return keys


class Record:
    """A report record: JSON through its fields (see the module docstring); equality by JSON form (so
    NaN equals NaN, tuples equal lists).

    A record also reads as a read-only mapping of its JSON keys (`record["key"]`, `.get`, `in`,
    `keys()`, `values()`, `items()`, so `dict(record)` works), for code written against a dict-shaped
    report: see `keys` and `__getitem__`. It stays a record otherwise: always truthy (no `__len__`),
    not iterable (iterate over `keys()`), not a `collections.abc.Mapping`, equal only to a record of
    its own class."""

    _derived: ClassVar[tuple[str, ...]] = ()
    _derived_enums: ClassVar[tuple[tuple[str, tuple[str, ...]], ...]] = ()
    _placed: ClassVar[tuple[tuple[str, str], ...]] = ()
    _ignored: ClassVar[tuple[str, ...]] = ()

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON data: every field (by its JSON key) plus the derived values."""
        return self._encode(())

    def _encode(self, path: _PathT) -> dict[str, Any]:
        cls = type(self)
        out: dict[str, Any] = {}
        for s in slots(cls):
            value = getattr(self, s.name)
            if s.omit_empty and (value is None or value == []):
                continue
            out[s.key] = encode(value, s.tp, (*path, s.key))
        for name in cls._derived:
            out[name] = encode(getattr(self, name), derived_type(cls, name), (*path, name))
        return {key: out[key] for key in wire_keys(cls) if key in out}

    @classmethod
    def from_dict(cls: type[_R], d: Mapping[str, Any]) -> _R:
        """Read the record from JSON data; `ValueError` naming the JSON path of a problem."""
        return cls._read(d, ())

    @classmethod
    def _read(cls: type[_R], d: object, path: _PathT) -> _R:
        return cls(**cls._kwargs(d, path))

    @classmethod
    def _kwargs(cls, d: object, path: _PathT) -> dict[str, Any]:
        """The constructor's keywords read from the JSON object `d` at `path`."""
        all_slots = slots(cls)
        required = [s.key for s in all_slots if s.required]
        optional = [s.key for s in all_slots if not s.required]
        m = _fields(d, path, required, optional, ignored=(*cls._derived, *cls._ignored))
        return {
            s.name: decode(m[s.key], s.tp, (*path, s.key), s.enum) if s.key in m else s.default() for s in all_slots
        }

    # ---- the read-only mapping view

    def _present(self) -> list[str]:
        """The JSON keys `_encode` writes for this record's current values, in its order (without the
        values: nothing is encoded)."""
        cls = type(self)
        omitted = {s.key for s in slots(cls) if s.omit_empty and _empty(getattr(self, s.name))}
        return [key for key in wire_keys(cls) if key not in omitted]

    def _value_of(self, key: str) -> Any:
        """The typed value behind the JSON key `key` (a field's attribute, or a derived property)."""
        for s in slots(type(self)):
            if s.key == key:
                return getattr(self, s.name)
        return getattr(self, key)

    def keys(self) -> list[str]:
        """The record's JSON keys, exactly those `to_dict` writes for its current values and in the same
        order: each field under its JSON name (`class`, `best_attempt`), the derived values, an open
        part's other keys (`extra`); a field written only when set (`deadline`, an open part's None
        entries) is a key only then. The report document's `report_version` is no key of the record."""
        return self._present()

    def __getitem__(self, key: str) -> Any:
        """The value under the JSON key `key`, typed as the attribute holds it (a nested part is a record,
        itself mapping-readable; lists, dicts, numbers and the spec as the attributes hold them, so a
        float is a float and a rank key an int); `KeyError` for a key not in `keys()`."""
        if not isinstance(key, str) or key not in self._present():
            raise KeyError(key)
        return self._value_of(key)

    def get(self, key: str, default: Any = None) -> Any:
        """`self[key]`, or `default` when `key` is not one of `keys()`."""
        try:
            return self[key]
        except KeyError:
            return default

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and key in self._present()

    def values(self) -> list[Any]:
        """`self[key]` for each of `keys()`, in order."""
        return [self[key] for key in self.keys()]

    def items(self) -> list[tuple[str, Any]]:
        """`(key, self[key])` for each of `keys()`, in order."""
        return [(key, self[key]) for key in self.keys()]

    __iter__: ClassVar[None] = None  # type: ignore[assignment]
    """Not iterable: `for key in record` would read as iterating a dict, `list(record)` as a list of keys
    (and `__getitem__` alone would make Python try `record[0]`); `keys()` says what it does."""

    def __setitem__(self, key: str, value: Any) -> None:
        raise TypeError(_read_only(self, key, "set"))

    def __delitem__(self, key: str) -> None:
        raise TypeError(_read_only(self, key, "delete"))

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        if self is other:
            return True
        try:
            return self.to_dict() == other.to_dict()
        except (TypeError, ValueError):
            return False

    __hash__ = None  # type: ignore[assignment]


def _empty(value: Any) -> bool:
    """A field value an `omit_empty` field is not written with."""
    return value is None or (isinstance(value, list) and not value)


def _read_only(record: Record, key: object, verb: str) -> str:
    """Why `record[key]` cannot be set or deleted, and what to do instead."""
    cls = type(record)
    name = cls.__name__
    by_key = {s.key: s.name for s in slots(cls)}
    extra = getattr(record, "extra", None)
    if isinstance(extra, dict) and key in extra:
        return f"{name} reads as a read-only mapping; {verb} its other key in extra: record.extra[{key!r}]"
    if key in by_key:
        value = "None" if verb == "delete" else "..."
        return f"{name} reads as a read-only mapping; set the attribute instead: record.{by_key[key]} = {value}"
    if key in cls._derived:
        return f"{name}[{key!r}] is derived from the record's fields; set those instead (see {name}.{key})"
    instead = f"keep another key in record.extra[{key!r}]" if isinstance(extra, dict) else "it holds only these"
    return (
        f"{name} reads as a read-only mapping and has no key {key!r} (its keys: {', '.join(wire_keys(cls))}); {instead}"
    )
