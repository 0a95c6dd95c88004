"""The editor settings of the validator options as JSON Schema, derived from `distcheck.options.OPTIONS`.

`package.json`'s `contributes.configuration.properties["distcheck.<setting>"]` holds these keys (plus its
own description); `tests/server/test_options_record.py` fails when they differ. No torch.
"""

from __future__ import annotations

from typing import Any

from .options import OPTIONS, Option

__all__ = ["SCHEMA_KEYS", "setting_schema", "settings_schema"]

SCHEMA_KEYS = ("type", "default", "minimum", "exclusiveMinimum", "enum", "pattern", "items", "additionalProperties")
"""The keys of a setting's schema that state a fact of the record (the rest is prose)."""

_TYPES = {"int": "integer", "float": "number", "bool": "boolean", "str": "string", "list[str]": "array"}


def _bound(o: Option) -> dict[str, Any]:
    if o.minimum is None:
        return {}
    low: float | int = int(o.minimum) if o.kind == "int" else o.minimum
    if isinstance(low, float) and low.is_integer():
        low = int(low)
    return {"exclusiveMinimum": low} if o.exclusive else {"minimum": low}


def setting_schema(o: Option) -> dict[str, Any]:
    """The JSON Schema of the setting `distcheck.<o.setting>`: type (with null when `nullable` and the default
    is None), default, bound (`minimum` / `exclusiveMinimum`), `enum`, `pattern`, and for a tolerance a
    number or an object of numbers (per output name, output kind and `default`)."""
    out: dict[str, Any] = {}
    if o.kind == "tolerance":
        out["type"] = ["number", "object"]
        out["additionalProperties"] = {"type": "number", **_bound(o)}
    else:
        kind = _TYPES[o.kind]
        out["type"] = [kind, "null"] if o.nullable and o.default is None else kind
    if o.kind == "list[str]":
        out["items"] = {"type": "string"}
    out["default"] = list(o.default) if isinstance(o.default, tuple) else o.default
    out.update(_bound(o))
    if o.choices:
        out["enum"] = list(o.choices)
    if o.pattern is not None:
        out["pattern"] = f"^({o.pattern})$"
    return out


def settings_schema() -> dict[str, dict[str, Any]]:
    """`distcheck.<setting>` → `setting_schema` for every validator option, in the record's order."""
    return {f"distcheck.{o.setting}": setting_schema(o) for o in OPTIONS}
