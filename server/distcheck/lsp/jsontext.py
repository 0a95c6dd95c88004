"""A small JSON-text editor: change a value in JSON text without touching the rest of the text.

Quick fixes edit spec files users may have formatted by hand, so they must keep the file's
indentation, key order, line breaks and everything they do not change. `parse` reads JSON text into
a tree of nodes with code-point offsets; `set_value`, `append_item`, `remove_item` and
`remove_member` return the new text, changing only the span they must (a value replaced in place, a
member or array item inserted after the last one with the indentation of its siblings, or of the
file's indentation unit in an empty container). `minimal_edits` turns old and new text into small
`Edit`s, the form a `WorkspaceEdit` wants.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Edit",
    "JsonEditError",
    "Member",
    "Node",
    "append_item",
    "apply_edits",
    "find",
    "minimal_edits",
    "parse",
    "remove_item",
    "remove_member",
    "set_value",
]

PathPart = str | int


class JsonEditError(ValueError):
    """The text is not valid JSON, or the path runs through something that is not an object/array."""


@dataclass
class Member:
    """`"key": value` in an object; offsets of the key string (quotes included)."""

    key: str
    key_start: int
    key_end: int
    value: Node


@dataclass
class Node:
    """A JSON value spanning `text[start:end]`; `members` for objects, `items` for arrays."""

    kind: str
    start: int
    end: int
    members: list[Member] = field(default_factory=list)
    items: list[Node] = field(default_factory=list)


@dataclass(frozen=True)
class Edit:
    """Replace `text[start:end]` (code-point offsets in the old text) by `new_text`."""

    start: int
    end: int
    new_text: str


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
        if depth > 200:
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

    def obj(self, depth: int) -> Node:
        node = Node("object", self.i, self.i)
        self.i += 1
        self.ws()
        if self.i < len(self.text) and self.text[self.i] == "}":
            self.i += 1
            node.end = self.i
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
            self.ws()
            if self.i >= len(self.text):
                raise self.error("unterminated object")
            c = self.text[self.i]
            self.i += 1
            if c == "}":
                node.end = self.i
                return node
            if c != ",":
                raise self.error("expected ',' or '}'")

    def arr(self, depth: int) -> Node:
        node = Node("array", self.i, self.i)
        self.i += 1
        self.ws()
        if self.i < len(self.text) and self.text[self.i] == "]":
            self.i += 1
            node.end = self.i
            return node
        while True:
            node.items.append(self.value(depth + 1))
            self.ws()
            if self.i >= len(self.text):
                raise self.error("unterminated array")
            c = self.text[self.i]
            self.i += 1
            if c == "]":
                node.end = self.i
                return node
            if c != ",":
                raise self.error("expected ',' or ']'")


def parse(text: str) -> Node:
    """The tree of the JSON document `text` (a leading BOM is allowed); `JsonEditError` if invalid."""
    p = _Parser(text)
    if text.startswith("\ufeff"):
        p.i = 1
    root = p.value()
    p.ws()
    if p.i != len(text):
        raise p.error("text after the JSON value")
    return root


def find(root: Node, parts: Sequence[PathPart]) -> Node | None:
    """The node at `parts` (keys and indices), or None."""
    node = root
    for part in parts:
        if isinstance(part, int):
            if node.kind != "array" or not 0 <= part < len(node.items):
                return None
            node = node.items[part]
        else:
            if node.kind != "object":
                return None
            member = _member(node, part)
            if member is None:
                return None
            node = member.value
    return node


def _member(node: Node, key: str) -> Member | None:
    found = None
    for m in node.members:
        if m.key == key:
            found = m  # the last one counts, as for JSON readers
    return found


# --------------------------------------------------------------------------------------------------
# formatting


def _indent_unit(text: str) -> str:
    widths: list[int] = []
    for line in text.splitlines():
        stripped = line.lstrip(" \t")
        if not stripped or len(stripped) == len(line):
            continue
        lead = line[: len(line) - len(stripped)]
        if lead.startswith("\t"):
            return "\t"
        widths.append(len(lead))
    return " " * min(widths) if widths else "  "


def _newline(text: str) -> str:
    return "\r\n" if "\r\n" in text else "\n"


def _line_indent(text: str, offset: int) -> str:
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    end = start
    while end < len(text) and text[end] in " \t":
        end += 1
    return text[start:end]


def _first_on_line(text: str, offset: int) -> bool:
    start = max(text.rfind("\n", 0, offset), text.rfind("\r", 0, offset)) + 1
    return text[start:offset].strip(" \t") == ""


def _multiline(text: str, node: Node) -> bool:
    return "\n" in text[node.start : node.end] or "\r" in text[node.start : node.end]


def _pretty(text: str) -> bool:
    return "\n" in text.strip() or "\r" in text.strip()


def _format(value: Any, unit: str, base: str, newline: str, multiline: bool) -> str:
    if not multiline or not isinstance(value, (dict, list)) or not value:
        return json.dumps(value, ensure_ascii=False, separators=(", ", ": "))
    out = json.dumps(value, ensure_ascii=False, indent=unit)
    return out.replace("\n", newline + base)


def _key_text(key: str) -> str:
    return json.dumps(key, ensure_ascii=False)


# --------------------------------------------------------------------------------------------------
# editing


def _replace(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def _child_indent(text: str, container: Node, first_child_start: int | None) -> str:
    if first_child_start is not None and _first_on_line(text, first_child_start):
        return _line_indent(text, first_child_start)
    return _line_indent(text, container.start) + _indent_unit(text)


def _insert_into(text: str, container: Node, piece: str, multiline: bool) -> str:
    """`text` with `piece` (a member `"k": v` or an item, already formatted for `multiline` at the
    child indentation) added after the container's last child."""
    newline = _newline(text)
    children = (
        [(m.key_start, m.value.end) for m in container.members]
        if container.kind == "object"
        else [(n.start, n.end) for n in container.items]
    )
    if children:
        last_start, last_end = children[-1]
        if multiline:
            indent = _child_indent(text, container, last_start)
            return _replace(text, last_end, last_end, "," + newline + indent + piece)
        return _replace(text, last_end, last_end, ", " + piece)
    opening, closing = ("{", "}") if container.kind == "object" else ("[", "]")
    if multiline:
        outer = _line_indent(text, container.start)
        indent = outer + _indent_unit(text)
        new = opening + newline + indent + piece + newline + outer + closing
    else:
        new = opening + piece + closing
    return _replace(text, container.start, container.end, new)


def _walk(root: Node, parts: Sequence[PathPart]) -> tuple[Node, int]:
    """The deepest existing node along `parts` and how many parts it consumed."""
    node = root
    for depth, part in enumerate(parts):
        child = find(node, [part])
        if child is None:
            if isinstance(part, int) or node.kind != "object":
                where = "/".join(str(p) for p in parts[: depth + 1])
                raise JsonEditError(f"cannot create {where}: its parent is not an object")
            return node, depth
        node = child
    return node, len(parts)


def set_value(text: str, parts: Sequence[PathPart], value: Any) -> str:
    """`text` with the value at `parts` set to `value`: replaced in place when present, else added as
    the last member of the deepest existing object (with any missing objects in between)."""
    root = parse(text)
    node, depth = _walk(root, parts)
    unit, newline, pretty = _indent_unit(text), _newline(text), _pretty(text)
    if depth == len(parts):
        if parts and json.loads(text[node.start : node.end]) == value:
            return text
        base = _line_indent(text, node.start)
        return _replace(text, node.start, node.end, _format(value, unit, base, newline, pretty))
    if node.kind != "object":
        raise JsonEditError("cannot add a key to something that is not an object")
    rest = list(parts[depth:])
    nested: Any = value
    for key in reversed(rest[1:]):
        nested = {key: nested}
    multiline = _multiline(text, node) if node.members else pretty
    last = node.members[-1].key_start if node.members else None
    indent = _child_indent(text, node, last)
    piece = _key_text(str(rest[0])) + ": " + _format(nested, unit, indent, newline, multiline)
    return _insert_into(text, node, piece, multiline)


def append_item(text: str, parts: Sequence[PathPart], value: Any) -> str:
    """`text` with `value` appended to the array at `parts` (created as `[value]` when missing)."""
    root = parse(text)
    node = find(root, parts)
    if node is None:
        return set_value(text, parts, [value])
    if node.kind != "array":
        raise JsonEditError(f"{'/'.join(str(p) for p in parts)} is not an array")
    unit, newline = _indent_unit(text), _newline(text)
    multiline = _multiline(text, node) if node.items else _pretty(text)
    last = node.items[-1].start if node.items else None
    indent = _child_indent(text, node, last)
    piece = _format(value, unit, indent, newline, multiline)
    return _insert_into(text, node, piece, multiline)


def _remove_child(text: str, container: Node, index: int) -> str:
    spans = (
        [(m.key_start, m.value.end) for m in container.members]
        if container.kind == "object"
        else [(n.start, n.end) for n in container.items]
    )
    if len(spans) == 1:
        opening, closing = ("{", "}") if container.kind == "object" else ("[", "]")
        return _replace(text, container.start, container.end, opening + closing)
    start, end = spans[index]
    if index + 1 < len(spans):
        return _replace(text, start, spans[index + 1][0], "")
    return _replace(text, spans[index - 1][1], end, "")


def remove_item(text: str, parts: Sequence[PathPart], value: Any) -> str:
    """`text` without the first item equal to `value` in the array at `parts` (unchanged if absent)."""
    root = parse(text)
    node = find(root, parts)
    if node is None or node.kind != "array":
        return text
    for index, item in enumerate(node.items):
        if json.loads(text[item.start : item.end]) == value:
            return _remove_child(text, node, index)
    return text


def remove_member(text: str, parts: Sequence[PathPart]) -> str:
    """`text` without the member at `parts` (unchanged if absent)."""
    if not parts or isinstance(parts[-1], int):
        raise JsonEditError("remove_member needs a path ending in a key")
    root = parse(text)
    parent = find(root, parts[:-1])
    if parent is None or parent.kind != "object":
        return text
    for index in range(len(parent.members) - 1, -1, -1):
        if parent.members[index].key == parts[-1]:
            return _remove_child(text, parent, index)
    return text


# --------------------------------------------------------------------------------------------------
# edits


def minimal_edits(old: str, new: str) -> list[Edit]:
    """Non-overlapping edits (in order) that turn `old` into `new`, each as small as a line diff with
    the common prefix and suffix trimmed makes it."""
    if old == new:
        return []
    old_lines = old.splitlines(keepends=True)
    new_lines = new.splitlines(keepends=True)
    old_starts = [0]
    for line in old_lines:
        old_starts.append(old_starts[-1] + len(line))
    new_starts = [0]
    for line in new_lines:
        new_starts.append(new_starts[-1] + len(line))
    edits: list[Edit] = []
    matcher = difflib.SequenceMatcher(a=old_lines, b=new_lines, autojunk=False)
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            continue
        a_start, a_end = old_starts[i1], old_starts[i2]
        b_start, b_end = new_starts[j1], new_starts[j2]
        a, b = old[a_start:a_end], new[b_start:b_end]
        prefix = 0
        while prefix < min(len(a), len(b)) and a[prefix] == b[prefix]:
            prefix += 1
        suffix = 0
        while suffix < min(len(a), len(b)) - prefix and a[len(a) - 1 - suffix] == b[len(b) - 1 - suffix]:
            suffix += 1
        edits.append(Edit(a_start + prefix, a_end - suffix, b[prefix : len(b) - suffix]))
    return edits


def apply_edits(text: str, edits: Sequence[Edit]) -> str:
    """`text` with non-overlapping `edits` (offsets in `text`) applied."""
    out = text
    for e in sorted(edits, key=lambda e: (e.start, e.end), reverse=True):
        out = out[: e.start] + e.new_text + out[e.end :]
    return out
