"""Positions in text: code-point offsets ⇄ LSP (line, character) in the negotiated position encoding.

Python strings index code points; LSP positions count UTF-16 code units by default (`utf-16`), or
bytes (`utf-8`) or code points (`utf-32`) when the client and server agree on it. Lines are split on
`\\n`, `\\r\\n` and `\\r` as LSP says.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

__all__ = ["LineIndex", "Span", "units"]

_NEWLINE = re.compile(r"\r\n|\r|\n")


def units(text: str, encoding: str = "utf-16") -> int:
    """Length of `text` in the code units of `encoding` (`utf-16`, `utf-8` or `utf-32`)."""
    if encoding == "utf-32":
        return len(text)
    if encoding == "utf-8":
        return len(text.encode("utf-8", "surrogatepass"))
    return len(text) + sum(1 for c in text if ord(c) > 0xFFFF)


@dataclass(frozen=True)
class Span:
    """A range of 0-based (line, character) positions in some encoding, end exclusive."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int


class LineIndex:
    """Maps code-point offsets in `text` to LSP positions and back."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.encoding = encoding
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    @property
    def line_count(self) -> int:
        """Number of lines (a trailing newline starts one more, empty line)."""
        return len(self.starts)

    def line_text(self, line: int) -> str:
        """The text of 0-based `line` without its line break ("" past the end)."""
        if line < 0 or line >= len(self.starts):
            return ""
        start = self.starts[line]
        end = self.starts[line + 1] if line + 1 < len(self.starts) else len(self.text)
        return self.text[start:end].rstrip("\r\n")

    def position(self, offset: int) -> tuple[int, int]:
        """0-based (line, character in `encoding`) of the code-point `offset`."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        start = self.starts[line]
        return line, units(self.text[start:offset], self.encoding)

    def offset(self, line: int, character: int) -> int:
        """The code-point offset of the 0-based LSP position (clamped to the line and the text)."""
        if line < 0:
            return 0
        if line >= len(self.starts):
            return len(self.text)
        start = self.starts[line]
        text = self.line_text(line)
        count = 0
        for i, c in enumerate(text):
            if count >= character:
                return start + i
            count += units(c, self.encoding)
        return start + len(text)

    def span(self, start: int, end: int) -> Span:
        """The span between two code-point offsets."""
        a = self.position(start)
        b = self.position(end)
        return Span(a[0], a[1], b[0], b[1])

    def line_span(self, line: int, first_column: int | None = None) -> Span:
        """The span of 0-based `line` without its leading whitespace (from code-point `first_column`
        when given), or an empty span at the end of the text when the line does not exist."""
        if line >= len(self.starts):
            end = self.position(len(self.text))
            return Span(end[0], end[1], end[0], end[1])
        text = self.line_text(line)
        start_col = first_column if first_column is not None else len(text) - len(text.lstrip())
        start_col = max(0, min(start_col, len(text)))
        end_col = len(text.rstrip())
        if end_col <= start_col:
            end_col = len(text)
        return Span(
            line,
            units(text[:start_col], self.encoding),
            line,
            units(text[:end_col], self.encoding),
        )

    def column_units(self, line: int, column: int) -> int:
        """The code-point `column` of 0-based `line` as a character count in `encoding`."""
        return units(self.line_text(line)[:column], self.encoding)
