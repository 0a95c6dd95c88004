"""Spec JSON text and files → specs and located errors.

`spec_from_text` and `load_spec` read a spec from JSON text or a file; `validate_json` lists every
error in JSON text, each with the 1-based line and column of the offending key (read off the one
JSON-text scanner, `jsontext`), keys repeated within one object included; `locate_path` gives the
line and column of any path. Bytes must be UTF-8; a leading byte-order mark is allowed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import orjson

from .errors import SpecError, show
from .jsontext import Locations, PathPart
from .model import MLIPSpec
from .reader import read_spec, validate_dict

__all__ = ["load_spec", "locate_path", "spec_from_text", "validate_json"]

Text = str | bytes | bytearray | memoryview
"""JSON text as read from a file or an editor buffer."""


def _decode(text: Text, file: str | None) -> tuple[str, Any]:
    """(the text as str, the parsed JSON); raises SpecError at `$` for undecodable or broken JSON."""
    if isinstance(text, str):
        src = text
    else:
        raw = bytes(text)
        try:
            src = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise SpecError(
                "$",
                f"the file is not valid UTF-8 (bad byte at offset {exc.start}); save it as UTF-8",
                parts=(),
                file=file,
            ) from exc
    src = src.removeprefix("\ufeff")
    try:
        data = orjson.loads(src)
    except orjson.JSONDecodeError as exc:
        raise SpecError(
            "$",
            f"invalid JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}; fix the syntax there",
            line=exc.lineno,
            column=exc.colno,
            parts=(),
            file=file,
        ) from exc
    return src, data


def locate_path(text: str, parts: Sequence[PathPart]) -> tuple[int, int] | None:
    """1-based (line, column) of the key at `parts` in JSON `text` (of the item, for list items).

    A path that is not in the text (a missing field) falls back to its nearest present ancestor.
    Best effort: None if the text cannot be scanned. Columns count Unicode code points.
    """
    return Locations(text.removeprefix("\ufeff")).locate(parts)


def _errors_in_text(src: str, data: Any, file: str | None) -> list[SpecError]:
    errors = validate_dict(data)
    where: Locations | None = None
    if errors or isinstance(data, Mapping):
        where = Locations(src)
        for child, offset in where.duplicates:
            err = SpecError.at(
                child,
                f"key {show(child[-1])} appears more than once in this object and only the last one "
                "counts; remove the other occurrences",
            )
            err.line, err.column = where.position(offset)
            errors.append(err)
    for err in errors:
        err.file = file
        if err.line is None and where is not None:
            found = where.locate(err.parts)
            if found is not None:
                err.line, err.column = found
    return errors


def validate_json(text: Text, *, file: str | None = None) -> list[SpecError]:
    """Every error in the JSON spec `text`, each with line and column; [] if valid.

    Broken JSON gives one error at `$`; a key repeated within one object is reported too (JSON readers
    keep only the last one).
    """
    try:
        src, data = _decode(text, file)
    except SpecError as err:
        return [err]
    return _errors_in_text(src, data, file)


def spec_from_text(text: Text, file: str | None) -> MLIPSpec:
    """The spec in JSON `text` (from `file`, if any); raises the first error, with its line and column."""
    src, data = _decode(text, file)
    errors = _errors_in_text(src, data, file)
    if errors:
        raise errors[0]
    return read_spec(data)


def load_spec(path: str | os.PathLike[str]) -> MLIPSpec:
    """The spec in the file at `path`.

    A missing or unreadable file raises `SpecError` with path `$` (chained from the `OSError`), so
    callers need to catch one exception type; `err.file` names the file.
    """
    name = os.fspath(path)
    try:
        data = Path(name).read_bytes()
    except FileNotFoundError as exc:
        raise SpecError(
            "$",
            f"file {name!r} does not exist; check the path, or create the spec with MLIPSpec().save(path)",
            parts=(),
            file=name,
        ) from exc
    except OSError as exc:
        raise SpecError(
            "$",
            f"cannot read {name!r}: {exc.strerror or exc}; check the path and its permissions",
            parts=(),
            file=name,
        ) from exc
    return spec_from_text(data, file=name)
