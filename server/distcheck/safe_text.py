"""One rule for text that came from the user's code, on every surface distcheck writes it to.

Output and module names, paths, exception messages and anything else a model or its sample chose can
hold characters that act instead of showing: ANSI and OSC escape sequences (a cleared screen, a new
terminal title), carriage returns that overwrite a line, NUL, C1 controls, bidirectional overrides
that reorder what a reader sees, lone surrogates that no UTF-8 encoder takes (a JSON writer raises on
them), characters XML forbids (a JUnit file that no CI can parse). `UNSAFE` is that set; each such
character is shown as its escape (`\\x1b`, `\\u202e`, `\\ud800`), so it is visible and inert. Newlines
and tabs stay. A line longer than `MAX_LINE` characters is cut, saying how much was cut.

- `for_terminal(text)`: what the CLI prints (progress, notices, errors, the report's text; the
  report's own colours are added after, by `report.render`);
- `for_xml(text)`: JUnit attributes and text (`UNSAFE` holds every character XML 1.0 forbids, and
  U+FFFE/U+FFFF);
- `for_editor(text)`: the LSP diagnostics' messages and details (`lsp.diagnostics_place.make_diagnostic`);
  the extension's report panel applies the same rule (`extension/src/safeText.ts`, its `UNSAFE` and
  `MAX_LINE` this module's, checked by `tests/extension/safeText.test.ts` on
  `tests/extension/corpus/safe_text.json`);
- `json_safe(value)`: a JSON-able value whose strings have their lone surrogates escaped (the rest
  is JSON's own escaping).

No torch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

__all__ = ["MAX_LINE", "UNSAFE", "for_editor", "for_terminal", "for_xml", "json_safe"]

UNSAFE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ufeff\ufffe\uffff\ud800-\udfff]"
)
"""Characters shown escaped: C0 controls but newline and tab, DEL, C1 controls, bidirectional marks,
overrides and isolates, the byte-order mark, the two non-characters XML forbids, lone surrogates."""

MAX_LINE = 10_000
"""The longest line shown whole (a 1 MB module name would bury everything after it)."""

_SURROGATE = re.compile("[\ud800-\udfff]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def _cut(line: str) -> str:
    if len(line) <= MAX_LINE:
        return line
    return f"{line[:MAX_LINE]}… ({len(line) - MAX_LINE} more characters)"


def for_terminal(text: object) -> str:
    """`text` as a terminal may show it: every `UNSAFE` character escaped, each line cut at `MAX_LINE`."""
    return "\n".join(_cut(line) for line in UNSAFE.sub(_escape, str(text)).split("\n"))


def for_xml(text: object) -> str:
    """`text` as XML 1.0 may hold it (an attribute or element text): the same escapes as the terminal."""
    return for_terminal(text)


def for_editor(text: object) -> str:
    """`text` as an editor's diagnostic may show it: the same escapes and cuts as the terminal."""
    return for_terminal(text)


def json_safe(value: Any) -> Any:
    """`value` (dicts, lists, strings, numbers) with every string's lone surrogates escaped; the same
    object where there is none."""
    if isinstance(value, str):
        return _SURROGATE.sub(_escape, value) if _SURROGATE.search(value) else value
    if isinstance(value, Mapping):
        return {json_safe(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value
