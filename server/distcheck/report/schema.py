"""The report's JSON Schema (draft 2020-12), derived from the records' fields through `codec.slots`, the
same description the writer and the reader use, so the three cannot drift apart.

`write_schema` writes it for other readers (`extension/schemas/report.schema.json`, next to the spec's; refreshed with
`python -m distcheck.report --write-schema extension/schemas/report.schema.json` and kept in sync by
`tests/server/test_report_schema.py`, which also checks the extension's report types against it).
The schema accepts what the reader accepts (older documents included): a key the reader requires is
required, a key it may do without (added in a later distcheck, written only when set, or derived) is
optional, a record's unknown keys are refused; derived keys (written for other readers, ignored when
read) are `readOnly`. The open parts (`meta`, `target`, `partition_health`, `halo_completeness`,
`layer_divergence`) list their usual keys and allow others.
"""

from __future__ import annotations

import inspect
import os
import typing
from pathlib import Path
from typing import Any

import orjson

from distcheck.spec import MLIPSpec
from distcheck.spec.fields import SCHEMA_URI, non_null, union_args

from .codec import derived_type, is_record, slots, wire_keys
from .document import REPORT_VERSION, TraceReport

__all__ = ["json_schema", "schema_text", "write_schema"]

_NUMBER = {
    "description": 'A number; a non-finite one is written as "NaN", "Infinity" or "-Infinity".',
    "anyOf": [{"type": "number"}, {"enum": ["NaN", "Infinity", "-Infinity"]}],
}
_SPEC = {
    "description": "A distribution spec document (its own schema: extension/schemas/distspec.schema.json).",
    "type": "object",
    "required": ["format", "version"],
}
_RANK_KEY = {"pattern": "^-?(0|[1-9][0-9]*)$"}


class _Builder:
    def __init__(self) -> None:
        self.defs: dict[str, Any] = {"number": _NUMBER, "MLIPSpec": _SPEC}

    def of(self, tp: Any, enum: tuple[str, ...] | None = None, shape: type | None = None) -> dict[str, Any]:
        if tp is Any:
            return {}
        args = union_args(tp)
        if args is not None:
            return {"anyOf": [self.of(non_null(args), enum, shape), {"type": "null"}]}
        if tp is bool:
            return {"type": "boolean"}
        if tp is int:
            return {"type": "integer"}
        if tp is float:
            return {"$ref": "#/$defs/number"}
        if tp is str:
            return {"type": "string", "enum": list(enum)} if enum else {"type": "string"}
        if tp is MLIPSpec:
            return {"$ref": "#/$defs/MLIPSpec"}
        if is_record(tp):
            return self.record(tp)
        origin, targs = typing.get_origin(tp), typing.get_args(tp)
        if origin is list:
            return {"type": "array", "items": self.of(targs[0])}
        if origin is dict:
            if targs[1] is Any:
                return self.record(shape) if shape is not None else {"type": "object"}
            schema: dict[str, Any] = {"type": "object", "additionalProperties": self.of(targs[1])}
            if targs[0] is int:
                schema["propertyNames"] = _RANK_KEY
            return schema
        raise TypeError(f"report type {tp!r} has no schema")

    def record(self, cls: type) -> dict[str, Any]:
        name = cls.__name__
        if name not in self.defs:
            self.defs[name] = {}  # a placeholder: records may refer to each other
            self.defs[name] = self.object(cls)
        return {"$ref": f"#/$defs/{name}"}

    def object(self, cls: type) -> dict[str, Any]:
        is_open = bool(getattr(cls, "_open", False))
        props: dict[str, Any] = {}
        required: list[str] = []
        by_key = {s.key: s for s in slots(cls)}
        enums = dict(getattr(cls, "_derived_enums", ()))
        for key in wire_keys(cls):
            s = by_key.get(key)
            if s is None:
                props[key] = {**self.of(derived_type(cls, key), enums.get(key)), "readOnly": True}
                continue
            props[key] = self.of(s.tp, s.enum, s.shape)
            if s.required and not is_open:
                required.append(key)
        schema: dict[str, Any] = {
            "title": cls.__name__,
            "description": _summary(cls),
            "type": "object",
            "properties": props,
            "additionalProperties": is_open,
        }
        if required:
            schema["required"] = required
        return schema


def _summary(cls: type) -> str:
    """The first paragraph of `cls`'s docstring, on one line."""
    doc = inspect.getdoc(cls) or ""
    return " ".join(doc.split("\n\n")[0].split())


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a report document as `TraceReport.to_dict()` writes it: the
    report's own keys at the top level (`report_version` included), every record in `$defs`; required
    keys are the ones `TraceReport.from_dict` requires."""
    builder = _Builder()
    top = builder.object(TraceReport)
    version = {
        "description": "The report format's version; this distcheck reads versions up to its own.",
        "type": "integer",
        "minimum": 1,
        "maximum": REPORT_VERSION,
    }
    top["properties"] = {"report_version": version, **top["properties"]}
    top["required"] = ["report_version", *top["required"]]
    return {
        "$schema": SCHEMA_URI,
        **top,
        "title": "distcheck validation report",
        "$defs": dict(sorted(builder.defs.items())),
    }


def schema_text() -> str:
    """`json_schema()` as the text that is checked in: 2-space indented, sorted keys, a final newline."""
    return orjson.dumps(json_schema(), option=orjson.OPT_INDENT_2 | orjson.OPT_SORT_KEYS).decode() + "\n"


def write_schema(path: str | os.PathLike[str]) -> None:
    """Write `schema_text()` to `path` (its directory created); `OSError` when it cannot."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(schema_text(), encoding="utf-8")
