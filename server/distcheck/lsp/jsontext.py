"""The JSON-text editor the quick fixes use, under its old name in the daemon's package.

The one implementation lives in the data model, shared with `MLIPSpec.save`: the text tree in
`distcheck.spectext` (`parse`, `find`, `Node`, `Member`, `JsonEditError`) and the minimal edits in
`distcheck.spec_edit` (`set_value`, `append_item`, `remove_item`, `remove_member`, `minimal_edits`,
`apply_edits`, `Edit`). This module only re-exports them.
"""

from __future__ import annotations

from ..spec_edit import (
    Edit,
    append_item,
    apply_edits,
    minimal_edits,
    remove_item,
    remove_member,
    set_value,
)
from ..spectext import JsonEditError, Member, Node, find, parse

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
