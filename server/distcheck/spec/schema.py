"""The spec's JSON Schema (draft 2020-12), derived from the model's dataclass fields and metadata.

The same fields, metadata and enum tuples drive the reader, so the schema and the reader cannot drift
apart; `write_schema` writes it for the editor (`extension/schemas/distspec.schema.json`, refreshed
with `python -m distcheck.spec --write-schema PATH` and kept in sync by `tests/server/test_spec.py`).
"""

from __future__ import annotations

import dataclasses
import os
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import orjson

from .fields import SCHEMA_URI, SPEC_FORMAT, SPEC_VERSION, field_default, field_types, non_null, union_args
from .model import MLIPSpec
from .parts import METHOD_ATTR_PATTERN, HelperAdapter

__all__ = ["json_schema", "schema_text", "write_schema"]


def _schema_for(tp: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
    args = union_args(tp)
    if args is not None:
        inner = non_null(args)
        schema = _schema_for(inner, meta)
        schema["type"] = [schema["type"], "null"]
        return schema
    if tp is bool:
        return {"type": "boolean"}
    if tp is int or tp is float:
        schema = {"type": "integer" if tp is int else "number"}
        if "minimum" in meta:
            schema["minimum"] = meta["minimum"]
        if "exclusive_minimum" in meta:
            schema["exclusiveMinimum"] = meta["exclusive_minimum"]
        return schema
    if tp is str:
        schema = {"type": "string"}
        if "enum" in meta:
            schema["enum"] = list(meta["enum"])
        if "pattern" in meta:
            schema["pattern"] = meta["pattern"]
        if "min_length" in meta:
            schema["minLength"] = meta["min_length"]
        return schema
    origin = typing.get_origin(tp)
    if origin is list:
        item_tp = typing.get_args(tp)[0]
        schema = {
            "type": "array",
            "items": _annotated(_schema_for(item_tp, meta.get("items", {})), meta.get("items")),
        }
        if meta.get("unique") is True:
            schema["uniqueItems"] = True
        return schema
    if origin is dict:
        value_tp = typing.get_args(tp)[1]
        keys: Mapping[str, Any] = meta.get("keys", {})
        names = _schema_for(str, keys)
        del names["type"]
        schema = {"type": "object"}
        if names:
            schema["propertyNames"] = names
        schema["additionalProperties"] = _annotated(_schema_for(value_tp, meta.get("values", {})), meta.get("values"))
        return schema
    if isinstance(tp, type) and dataclasses.is_dataclass(tp):
        return _object_schema(tp)
    raise TypeError(f"spec field type {tp!r} has no schema")


def _annotated(schema: dict[str, Any], meta: Mapping[str, Any] | None) -> dict[str, Any]:
    if not meta or "title" not in meta:
        return schema
    return {"title": meta["title"], "description": meta["description"], **schema}


def _object_schema(cls: type, extra_properties: Mapping[str, Any] | None = None) -> dict[str, Any]:
    hints = field_types(cls)
    properties: dict[str, Any] = dict(extra_properties or {})
    required = list(extra_properties or {})
    for f in dataclasses.fields(cls):
        inner = _schema_for(hints[f.name], f.metadata)
        inner.pop("title", None)
        inner.pop("description", None)
        prop: dict[str, Any] = {
            "title": f.metadata["title"],
            "description": f.metadata["description"],
            **inner,
        }
        has_default, default = field_default(f)
        if has_default:
            prop["default"] = default
        else:
            required.append(f.name)
        properties[f.name] = prop
    schema: dict[str, Any] = {
        "title": getattr(cls, "_schema_title", cls.__name__),
        "description": getattr(cls, "_schema_description", ""),
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = required
    if cls is HelperAdapter:
        schema["allOf"] = [
            {
                "if": {"properties": {"kind": {"const": "python"}}, "required": ["kind"]},
                "then": {
                    "required": ["replacement"],
                    "properties": {"replacement": {"type": "string"}},
                    "not": {"anyOf": [{"required": ["atom_arg"]}, {"required": ["atom_dim"]}]},
                },
            },
            {
                "if": {"properties": {"kind": {"const": "reduction"}}, "required": ["kind"]},
                "then": {"properties": {"replacement": {"type": "null"}}},
            },
            {
                "if": {"properties": {"kind": {"const": "method"}}, "required": ["kind"]},
                "then": {"properties": {"attr_name": {"pattern": METHOD_ATTR_PATTERN}}},
            },
            {
                "if": {
                    "properties": {"kind": {"const": "method"}, "replacement": {"type": "string"}},
                    "required": ["kind", "replacement"],
                },
                "then": {"not": {"anyOf": [{"required": ["atom_arg"]}, {"required": ["atom_dim"]}]}},
            },
        ]
    return schema


def json_schema() -> dict[str, Any]:
    """The JSON Schema (draft 2020-12) of a spec document, derived from the dataclasses.

    Every property has a title and a short description, every object forbids additional
    properties, `format` and `version` are required, and `python` helpers require `replacement`.
    Semantic checks that span fields (owned-only outputs vs. output kinds, duplicate helpers) are
    only done by the reader.
    """
    top = {
        "format": {
            "title": "Format",
            "description": f'Always "{SPEC_FORMAT}".',
            "const": SPEC_FORMAT,
        },
        "version": {
            "title": "Version",
            "description": f"Spec format version; this distcheck writes and reads {SPEC_VERSION}.",
            "type": "integer",
            "const": SPEC_VERSION,
        },
    }
    body = _object_schema(MLIPSpec, top)
    return {"$schema": SCHEMA_URI, **body}


def schema_text() -> str:
    """`json_schema()` as 2-space-indented JSON (keys in definition order) with a trailing newline."""
    return orjson.dumps(json_schema(), option=orjson.OPT_INDENT_2).decode() + "\n"


def write_schema(path: str | os.PathLike[str]) -> None:
    """Write `json_schema()` to `path` as 2-space-indented JSON (keys in definition order) + newline."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(schema_text(), encoding="utf-8")
