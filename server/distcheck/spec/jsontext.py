"""The project's one JSON-text scanner: a tree of JSON text with the offset of every key and value.

Spec files are hand-edited, so whatever reads or rewrites them by text (error locations, duplicate
keys, minimal edits in `distcheck.spec.edit`, the editor's quick fixes and diagnostics) works on the
same tree: `parse` reads JSON text into `Node`s with code-point offsets into the text (a leading
byte-order mark is allowed and counted), `find` walks a path of keys and indices, and `Locations`
flattens a tree into where each path's key and value start, the keys repeated within one object,
and the 1-based line and column of an offset.

Data-model layer: imports neither torch nor `distcheck.lsp`.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field

__all__ = [
    "JsonEditError",
    "Locations",
    "Member",
    "Node",
    "PathPart",
    "find",
    "member",
    "parse",
]

PathPart = str | int
"""One step of a JSON path: an object key (str) or an array index (int)."""

_MAX_DEPTH = 200


class JsonEditError(ValueError):
    """The text is not valid JSON, or an edit's path runs through something that is not an object/array."""


@dataclass
class Member:
    """`"key": value` in an object; offsets of the key string (quotes included)."""

    key: str
    key_start: int
    key_end: int
    value: Node


@dataclass
class Node:
    """A JSON value spanning `text[start:end]`; `members` for objects (every occurrence of a repeated
    key, in text order), `items` for arrays. `kind` is object, array, string, number or literal."""

    kind: str
    start: int
    end: int
    members: list[Member] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)


_NUMBER = re.compile(r"-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?")
_WS = " \t\r\n"


class _Parser:
    def __init__(self, text: str) -> None:
        self.text = text
        self.i = 0

    def error(self, what: str) -> JsonEditError:
        line = self.text.count("\n", 0, self.i) + 1
        return JsonEditError(f"invalid JSON at line {line}: {what}")

    def ws(self) -> None:
        t = self.text
        while self.i < len(t) and t[self.i] in _WS:
            self.i += 1

    def value(self, depth: int = 0) -> Node:
        if depth > _MAX_DEPTH:
            raise self.error("nested too deeply")
        self.ws()
        if self.i >= len(self.text):
            raise self.error("unexpected end of text")
        c = self.text[self.i]
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.arr(depth)
        if c == '"':
            start = self.i
            self.string()
            return Node("string", start, self.i)
        for word in ("true", "false", "null"):
            if self.text.startswith(word, self.i):
                start = self.i
                self.i += len(word)
                return Node("literal", start, self.i)
        m = _NUMBER.match(self.text, self.i)
        if m is None or m.end() == self.i:
            raise self.error(f"unexpected {c!r}")
        self.i = m.end()
        return Node("number", m.start(), m.end())

    def string(self) -> str:
        t = self.text
        start = self.i
        self.i += 1
        while True:
            if self.i >= len(t):
                raise self.error("unterminated string")
            c = t[self.i]
            if c == "\\":
                self.i += 2
                continue
            self.i += 1
            if c == '"':
                break
        try:
            decoded = json.loads(t[start : self.i])
        except ValueError as exc:
            raise self.error(f"bad string: {exc}") from exc
        return str(decoded)

    def expect(self, c: str) -> None:
        self.ws()
        if self.i >= len(self.text) or self.text[self.i] != c:
            raise self.error(f"expected {c!r}")
        self.i += 1

    def opened(self, node: Node, close: str) -> bool:
        """Past the opening bracket of `node`; True (and `node` ends) when `close` follows at once."""
        self.i += 1
        self.ws()
        if self.i < len(self.text) and self.text[self.i] == close:
            self.i += 1
            node.end = self.i
            return False
        return True

    def closed(self, node: Node, close: str, what: str) -> bool:
        """After a member or item of `node`: True (and `node` ends) at `close`, False after a comma."""
        self.ws()
        if self.i >= len(self.text):
            raise self.error(f"unterminated {what}")
        c = self.text[self.i]
        self.i += 1
        if c == close:
            node.end = self.i
            return True
        if c != ",":
            raise self.error(f"expected ',' or {close!r}")
        return False

    def obj(self, depth: int) -> Node:
        node = Node("object", self.i, self.i)
        if not self.opened(node, "}"):
            return node
        while True:
            self.ws()
            if self.i >= len(self.text) or self.text[self.i] != '"':
                raise self.error("expected a key")
            key_start = self.i
            key = self.string()
            key_end = self.i
            self.expect(":")
            value = self.value(depth + 1)
            node.members.append(Member(key, key_start, key_end, value))
            if self.closed(node, "}", "object"):
                return node

    def arr(self, depth: int) -> Node:
        node = Node("array", self.i, self.i)
        if not self.opened(node, "]"):
            return node
        while True:
            node.items.append(self.value(depth + 1))
            if self.closed(node, "]", "array"):
                return node


def parse(text: str) -> Node:
    """The tree of the JSON document `text` (a leading BOM is allowed); `JsonEditError` if invalid.

    Offsets are code points into `text`, the BOM included. Strict JSON only (no comments, no trailing
    commas); nesting deeper than 200 levels is refused.
    """
    p = _Parser(text)
    if text.startswith("\ufeff"):
        p.i = 1
    root = p.value()
    p.ws()
    if p.i != len(text):
        raise p.error("text after the JSON value")
    return root


def member(node: Node, key: str) -> Member | None:
    """The member `key` of object `node` (the last one when repeated, as JSON readers keep), or None."""
    found = None
    for m in node.members:
        if m.key == key:
            found = m
    return found


def find(root: Node, parts: Sequence[PathPart]) -> Node | None:
    """The node at `parts` (keys and indices), or None when the path is not in the tree."""
    node = root
    for part in parts:
        if isinstance(part, int):
            if node.kind != "array" or not 0 <= part < len(node.items):
                return None
            node = node.items[part]
        else:
            if node.kind != "object":
                return None
            found = member(node, part)
            if found is None:
                return None
            node = found.value
    return node


class Locations:
    """Where each path of a JSON text starts: `keys[path]` (the key of an object member), `values[path]`
    (every value, list items and the root included), and `duplicates` (each key repeated within one
    object after its first occurrence: its path and key offset, in text order). A repeated key's
    paths point at its last occurrence. Text that is not valid JSON gives empty maps. Lines are
    split on `\\n` for `position` and `locate`."""

    def __init__(self, text: str) -> None:
        self.line_starts = [0] + [m.end() for m in re.finditer("\n", text)]
        self.keys: dict[tuple[PathPart, ...], int] = {}
        self.values: dict[tuple[PathPart, ...], int] = {}
        self.duplicates: list[tuple[tuple[PathPart, ...], int]] = []
        try:
            root = parse(text)
        except JsonEditError:
            return
        for path, node in _walk(root, ()):
            self.values[path] = node.start
            seen: set[str] = set()
            for m in node.members:
                child = (*path, m.key)
                if m.key in seen:
                    self.duplicates.append((child, m.key_start))
                seen.add(m.key)
                self.keys[child] = m.key_start

    def offset(self, parts: Sequence[PathPart]) -> int | None:
        """The offset of the key at `parts` (of the value for list items and the root), falling back to
        the nearest ancestor present; None when nothing is (invalid text)."""
        key = tuple(parts)
        while True:
            if key in self.keys:
                return self.keys[key]
            if key in self.values:
                return self.values[key]
            if not key:
                return None
            key = key[:-1]

    def position(self, offset: int) -> tuple[int, int]:
        """1-based (line, column) of the code-point `offset`; columns count code points."""
        line = bisect_right(self.line_starts, offset)
        return line, offset - self.line_starts[line - 1] + 1

    def locate(self, parts: Sequence[PathPart]) -> tuple[int, int] | None:
        """1-based (line, column) of `offset(parts)`; None when nothing of the path is in the text."""
        offset = self.offset(parts)
        return None if offset is None else self.position(offset)


def _walk(node: Node, path: tuple[PathPart, ...]) -> Iterator[tuple[tuple[PathPart, ...], Node]]:
    """Every node in text order with its path (a repeated key's children under the same path)."""
    yield path, node
    for m in node.members:
        yield from _walk(m.value, (*path, m.key))
    for index, item in enumerate(node.items):
        yield from _walk(item, (*path, index))
