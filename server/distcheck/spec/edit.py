"""Minimal edits of spec JSON text: change a value without touching the rest of the text.

Spec files are formatted by hand, so both the editor's quick fixes (`distcheck.lsp.actions`) and
`MLIPSpec.save` over an existing file change them here, keeping the file's indentation (spaces or
tabs), line endings, key order, compact or expanded containers, trailing newline and everything they
do not change. `set_value`, `append_item`, `remove_item` and `remove_member` return the new text,
changing only the span they must (a value replaced in place, a member or array item inserted after
the last one with the indentation of its siblings, or the file's indentation unit in an empty
container). `spec_changes` lists what differs between two parsed documents and `apply_changes` makes
those changes in the text; `minimal_edits` turns old and new text into small `Edit`s (what an LSP
`WorkspaceEdit` wants), `apply_edits` applies them.

Data-model layer: imports neither torch nor `distcheck.lsp`; the text tree is `distcheck.spec.jsontext`'s
(its `JsonEditError` is re-exported: every function here raises it for text that is not JSON).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from .jsontext import JsonEditError, Node, PathPart, find, parse

__all__ = [
    "Edit",
    "JsonEditError",
    "append_item",
    "apply_changes",
    "apply_edits",
    "brief_change",
    "describe_change",
    "minimal_edits",
    "remove_item",
    "remove_member",
    "set_value",
    "spec_changes",
]


@dataclass(frozen=True)
class Edit:
    """Replace `text[start:end]` (code-point offsets in the old text) by `new_text`."""

    start: int
    end: int
    new_text: str


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


# --------------------------------------------------------------------------------------------------
# documents


def spec_changes(
    old: Mapping[str, Any],
    new: Mapping[str, Any],
    path: tuple[PathPart, ...] = (),
    *,
    by_index: bool = False,
) -> list[dict[str, Any]]:
    """The edits that turn spec object `old` into `new`: `{"op": "set", "path", "value"}` for a changed
    or added value, `{"op": "append" | "remove", "path", "value"}` for an array item added or removed,
    `{"op": "delete", "path"}` for a removed key. Paths are lists of keys.

    With `by_index` the changes give `new` exactly, order included: arrays of the same length are
    compared item by item (objects member by member), so a changed member of a list item is set in
    place (paths then hold indices too), and an array whose new order removing and appending items
    cannot give is set whole.
    """
    changes: list[dict[str, Any]] = []
    for key, value in new.items():
        here = (*path, key)
        if key not in old:
            changes.append({"op": "set", "path": list(here), "value": value})
            continue
        changes.extend(_value_changes(old[key], value, here, by_index))
    for key in old:
        if key not in new:
            changes.append({"op": "delete", "path": [*path, key]})
    return changes


def _value_changes(before: Any, value: Any, here: tuple[PathPart, ...], by_index: bool) -> list[dict[str, Any]]:
    if before == value:
        return []
    if isinstance(before, Mapping) and isinstance(value, Mapping):
        return spec_changes(before, value, here, by_index=by_index)
    if isinstance(before, list) and isinstance(value, list):
        if by_index and len(before) == len(value):
            out: list[dict[str, Any]] = []
            for index, (a, b) in enumerate(zip(before, value)):
                out.extend(_value_changes(a, b, (*here, index), by_index))
            return out
        removed = [item for item in before if item not in value]
        added = [item for item in value if item not in before]
        if not removed and not added:
            return [{"op": "set", "path": list(here), "value": value}]
        if by_index and [item for item in before if item in value] + added != value:
            return [{"op": "set", "path": list(here), "value": value}]  # removing and appending cannot give this order
        return [
            *({"op": "remove", "path": list(here), "value": item} for item in removed),
            *({"op": "append", "path": list(here), "value": item} for item in added),
        ]
    return [{"op": "set", "path": list(here), "value": value}]


def apply_changes(text: str, changes: Sequence[Mapping[str, Any]]) -> str:
    """`text` with each change of `spec_changes` applied as a minimal text edit, in order; an `append`
    of an item already in the array is skipped. Raises `JsonEditError` when `text` is not JSON or a
    path runs through something that is not an object or array."""
    out = text
    for change in changes:
        path = list(change.get("path") or [])
        op = change.get("op")
        if op == "append":
            node = find(parse(out), path)
            if node is not None and node.kind == "array":
                present = [json.loads(out[item.start : item.end]) for item in node.items]
                if change.get("value") in present:
                    continue
            out = append_item(out, path, change.get("value"))
        elif op == "remove":
            out = remove_item(out, path, change.get("value"))
        elif op == "delete":
            out = remove_member(out, path)
        else:
            out = set_value(out, path, change.get("value"))
    return out


def _dotted(parts: Sequence[Any]) -> str:
    return ".".join(str(p) for p in parts)


def describe_change(change: Mapping[str, Any]) -> str:
    """`set distribution.policy.scatter_mode to "local"`, `add {...} to all_reduce_outputs`, ..."""
    where = _dotted(change.get("path") or [])
    value = json.dumps(change.get("value"), ensure_ascii=False)
    op = change.get("op")
    if op == "append":
        return f"add {value} to {where}"
    if op == "remove":
        return f"remove {value} from {where}"
    if op == "delete":
        return f"remove {where}"
    return f"set {where} to {value}"


def brief_change(change: Mapping[str, Any]) -> str:
    """`describe_change` without a long value: `add an item to third_party_helpers`, ..."""
    text = describe_change(change)
    if len(text) <= 60:
        return text
    where = _dotted(change.get("path") or [])
    op = change.get("op")
    if op == "append":
        return f"add an item to {where}"
    if op in ("remove", "delete"):
        return f"remove an item from {where}" if op == "remove" else f"remove {where}"
    return f"change {where}"
