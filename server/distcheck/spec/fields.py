"""The spec's vocabulary: format constants, enum values, name patterns and the field-metadata language.

One description drives the reader, the writer and the JSON Schema: each dataclass field of the model
carries `meta(...)` with these keys: title, description (editor hover); enum (allowed strings);
pattern + pattern_hint (regex and the words the error uses); min_length; minimum / exclusive_minimum
(numbers) and range_hint (what to write instead); example (JSON text used when a required field is
missing); items / keys / values (sub-metadata for list items, dict keys and dict values); unique (True
for plain items, or the attribute that identifies an object item) and unique_noun (how an item is
called in the duplicate message). The helpers below read a model dataclass's fields the same way for
every one of those layers (types, defaults, JSON values).
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from collections.abc import Mapping
from typing import Any, Union

__all__ = [
    "ARG_TRANSFORMS",
    "DOTTED_PATTERN",
    "GATHER_MODES",
    "HELPER_KINDS",
    "OP_NAME_PATTERN",
    "OUTPUT_KINDS",
    "OUTPUT_NAME",
    "OUTPUT_TRANSFORMS",
    "POLICY_KINDS",
    "POSITION_PATTERN",
    "REPLACEMENT_PATTERN",
    "SCATTER_MODES",
    "SCHEMA_URI",
    "SPEC_FORMAT",
    "SPEC_VERSION",
    "TORCHSCRIPT_MODES",
    "field_default",
    "field_types",
    "fields_to_dict",
    "meta",
    "non_null",
    "to_json_value",
    "union_args",
]

SPEC_FORMAT = "distcheck-spec"
"""The value of the top-level `format` field of every spec document."""
SPEC_VERSION = 1
"""The newest spec version this distcheck reads and the version it writes."""
SCHEMA_URI = "https://json-schema.org/draft/2020-12/schema"
"""The JSON Schema dialect `json_schema()` produces."""

POLICY_KINDS: tuple[str, ...] = ("halo", "replicated")
SCATTER_MODES: tuple[str, ...] = ("halo_correction", "local", "owned_complete")
TORCHSCRIPT_MODES: tuple[str, ...] = ("scripted", "eager")
GATHER_MODES: tuple[str, ...] = ("halo_read",)
OUTPUT_KINDS: tuple[str, ...] = ("per_node", "per_graph", "global")
HELPER_KINDS: tuple[str, ...] = ("python", "reduction", "method")
ARG_TRANSFORMS: tuple[str, ...] = ("gather_inputs", "slice_owned", "none")
OUTPUT_TRANSFORMS: tuple[str, ...] = ("scatter_outputs", "all_reduce_sum", "none")

# Patterns are written so that Python's `re.fullmatch` and ECMA-262 (JSON Schema) read them alike.
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
_DOTTED = rf"{_IDENT}(\.{_IDENT})*"
OP_NAME_PATTERN = rf"^{_IDENT}::{_IDENT}(\.{_IDENT})?$"
DOTTED_PATTERN = rf"^{_DOTTED}$"
REPLACEMENT_PATTERN = rf"^{_DOTTED}:{_DOTTED}$"
POSITION_PATTERN = r"^(0|[1-9][0-9]*)$"


def meta(title: str, description: str, **rules: Any) -> dict[str, Any]:
    """The metadata of one field: its title and description (shown by the editor) and its rules."""
    return {"title": title, "description": description, **rules}


OUTPUT_NAME: dict[str, Any] = {
    "min_length": 1,
    "title": "Output name",
    "description": "A key of the wrapper's output mapping.",
}
"""The rules of an output name (a key of `output_kinds`, an item of the output lists)."""


@functools.cache
def field_types(cls: type) -> dict[str, Any]:
    """The resolved type of every field of the model dataclass `cls`, by name."""
    return typing.get_type_hints(cls)


def union_args(tp: Any) -> tuple[Any, ...] | None:
    """The members of `tp` when it is a union (`float | None`), else None."""
    origin = typing.get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return typing.get_args(tp)
    return None


def non_null(args: tuple[Any, ...]) -> Any:
    """The one member of an optional union's members `args` that is not `None`."""
    return next(a for a in args if a is not type(None))


def field_default(f: dataclasses.Field[Any]) -> tuple[bool, Any]:
    """(whether field `f` has a default, that default as a JSON value); a required field gives (False, None)."""
    if f.default is not dataclasses.MISSING:
        return True, to_json_value(f.default)
    if f.default_factory is not dataclasses.MISSING:
        return True, to_json_value(f.default_factory())
    return False, None


def fields_to_dict(obj: Any) -> dict[str, Any]:
    """Every field of the model dataclass `obj` as a JSON value, in field order."""
    return {f.name: to_json_value(getattr(obj, f.name)) for f in dataclasses.fields(obj)}


def to_json_value(value: Any) -> Any:
    """`value` as JSON data: model parts by their own `to_dict`, containers item by item."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return typing.cast(Any, value).to_dict()
    if isinstance(value, (list, tuple)):
        return [to_json_value(v) for v in value]
    if isinstance(value, Mapping):
        return {k: to_json_value(v) for k, v in value.items()}
    return value
