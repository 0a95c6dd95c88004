"""Spec errors and the words they are made of: JSON paths, `SpecError`, and the sink a reader fills.

Every problem in a spec is a `SpecError` at a JSON path (`$` for the document,
`distribution.policy.scatter_mode`, `distribution.third_party_helpers[1].replacement`, ...) whose
message ends with what to change. `Sink` collects them while a document is walked; `json_type`,
`show` and `quote_all` are how values appear inside the messages.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

import orjson

from .jsontext import PathPart

__all__ = ["PathPart", "Sink", "SpecError", "format_path", "json_type", "quote_all", "show"]

_PLAIN_KEY = re.compile(r"[\w\-]+")


def format_path(parts: Sequence[PathPart]) -> str:
    """The JSON path of `parts` as shown to users: `$` for the root, keys dotted, list items `[i]`.

    A key that is not made of (Unicode) letters, digits, `_` and `-` is written as a quoted JSON string in
    brackets (`output_kinds["my.output"]`), so every path reads back unambiguously.
    """
    if not parts:
        return "$"
    out: list[str] = []
    for part in parts:
        if isinstance(part, int):
            out.append(f"[{part}]")
        elif _PLAIN_KEY.fullmatch(part):
            out.append(f".{part}" if out else part)
        else:
            out.append(f"[{orjson.dumps(part).decode()}]")
    return "".join(out)


class SpecError(ValueError):
    """A spec that cannot be read, with the JSON path of the problem and what to do about it.

    `path` is the dotted JSON path (`$` for the document itself), `parts` the same path as keys and
    indices, `message` the explanation (it always ends with what to change). `line` and `column` are
    1-based (columns count Unicode code points) and set when the JSON text was at hand; `file` is the
    file the spec came from, if any. `str(err)` is `f"{path}: {message}"`.
    """

    def __init__(
        self,
        path: str,
        message: str,
        *,
        line: int | None = None,
        column: int | None = None,
        parts: Sequence[PathPart] | None = None,
        file: str | None = None,
    ) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path
        self.message = message
        self.line = line
        self.column = column
        self.parts: tuple[PathPart, ...] = tuple(parts) if parts is not None else ()
        self.file = file

    @classmethod
    def at(cls, parts: Sequence[PathPart], message: str) -> SpecError:
        """An error at the path `parts` (formatted with `format_path`)."""
        return cls(format_path(parts), message, parts=parts)

    def __str__(self) -> str:
        return f"{self.path}: {self.message}"

    def __reduce__(self) -> tuple[Any, ...]:
        kwargs = {
            "line": self.line,
            "column": self.column,
            "parts": self.parts,
            "file": self.file,
        }
        return (_rebuild_spec_error, (self.path, self.message, kwargs))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready record: path, message, line, column, file."""
        return {
            "path": self.path,
            "message": self.message,
            "line": self.line,
            "column": self.column,
            "file": self.file,
        }


def _rebuild_spec_error(path: str, message: str, kwargs: dict[str, Any]) -> SpecError:
    return SpecError(path, message, **kwargs)


class Sink:
    """Collects errors while a document is walked, in the order found."""

    def __init__(self) -> None:
        self.errors: list[SpecError] = []

    def add(self, parts: Sequence[PathPart], message: str) -> None:
        """Record an error at `parts`."""
        self.errors.append(SpecError.at(parts, message))

    def has(self, parts: Sequence[PathPart]) -> bool:
        """Whether an error at exactly `parts` was recorded."""
        key = tuple(parts)
        return any(e.parts == key for e in self.errors)


def json_type(value: object) -> str:
    """The JSON name of `value`'s type (`integer`, `array`, ...), or `Python <type>` for anything else."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, (list, tuple)):
        return "array"
    if isinstance(value, Mapping):
        return "object"
    return f"Python {type(value).__name__}"


def show(value: object, limit: int = 40) -> str:
    """`value` as JSON text for a message, cut to `limit` characters (ending in `...` when cut)."""
    try:
        text = orjson.dumps(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def quote_all(values: Sequence[str]) -> str:
    """`values` as comma-separated JSON strings, for "one of ..." messages."""
    return ", ".join(orjson.dumps(v).decode() for v in values)
