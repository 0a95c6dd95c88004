"""Positions in text: code-point offsets ⇄ LSP (line, character) through pygls' `PositionCodec`.

Python strings index code points; LSP positions count UTF-16 code units by default (`utf-16`), or
bytes (`utf-8`) or code points (`utf-32`) when the client and server agree on it. The counting of
code units is pygls' (`PositionCodec`, the codec its `TextDocument`s use); only the line split is
ours: LSP ends lines at `\\n`, `\\r\\n` and `\\r` alone, while `TextDocument.lines` uses
`str.splitlines`, which also breaks at a form feed, `\\x85`, `\\u2028` and friends — a Python file
with a form feed would have every later diagnostic one line off.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

from lsprotocol import types
from pygls.workspace import PositionCodec, ServerTextPosition

__all__ = ["LineIndex", "Span", "codec", "units"]

_NEWLINE = re.compile(r"\r\n|\r|\n")
_CODECS: dict[str, PositionCodec] = {}


def codec(encoding: str = "utf-16") -> PositionCodec:
    """pygls' position codec for `encoding` (`utf-16`, `utf-8` or `utf-32`; anything else is UTF-16,
    the LSP default)."""
    found = _CODECS.get(encoding)
    if found is None:
        found = _CODECS[encoding] = PositionCodec(types.PositionEncodingKind(encoding) if _known(encoding) else None)
    return found


def _known(encoding: str) -> bool:
    return encoding in {kind.value for kind in types.PositionEncodingKind}


def units(text: str, encoding: str = "utf-16") -> int:
    """Length of `text` in the code units of `encoding` (`utf-16`, `utf-8` or `utf-32`)."""
    count: int = codec(encoding).client_num_units(text)
    return count


@dataclass(frozen=True)
class Span:
    """A range of 0-based (line, character) positions in some encoding, end exclusive."""

    start_line: int
    start_char: int
    end_line: int
    end_char: int

    def to_range(self) -> types.Range:
        """The span as an LSP `Range`."""
        return types.Range(
            start=types.Position(line=self.start_line, character=self.start_char),
            end=types.Position(line=self.end_line, character=self.end_char),
        )


class LineIndex:
    """Maps code-point offsets in `text` to LSP positions in `encoding` and back."""

    def __init__(self, text: str, encoding: str = "utf-16") -> None:
        self.text = text
        self.encoding = encoding
        self.codec = codec(encoding)
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]
        ends = [m.start() for m in _NEWLINE.finditer(text)] + [len(text)]
        # Lines without their breaks: what the codec counts in (and all a position may point into).
        self.lines = [text[s:e] for s, e in zip(self.starts, ends, strict=True)]

    @property
    def line_count(self) -> int:
        """Number of lines (a trailing newline starts one more, empty line)."""
        return len(self.starts)

    def line_text(self, line: int) -> str:
        """The text of 0-based `line` without its line break ("" past the end)."""
        return self.lines[line] if 0 <= line < len(self.lines) else ""

    def position(self, offset: int) -> tuple[int, int]:
        """0-based (line, character in `encoding`) of the code-point `offset` (clamped to the text)."""
        offset = max(0, min(offset, len(self.text)))
        line = bisect.bisect_right(self.starts, offset) - 1
        # An offset inside a `\r\n` break belongs to the end of its line.
        column = min(offset - self.starts[line], len(self.lines[line]))
        client = self.codec.position_to_client_units(self.lines, ServerTextPosition(line, column))
        return client.line, client.character

    def offset(self, line: int, character: int) -> int:
        """The code-point offset of the 0-based LSP position (clamped to the line and the text; a
        character inside a surrogate pair or a UTF-8 sequence moves to the end of that character)."""
        if line < 0:
            return 0
        if line >= len(self.lines):
            return len(self.text)
        # Clamped first: pygls' codec clamps a character past the line to one unit before its end.
        character = max(0, min(character, self.codec.client_num_units(self.lines[line])))
        server = self.codec.position_from_client_units(self.lines, types.Position(line=line, character=character))
        return self.starts[line] + server.character

    def span(self, start: int, end: int) -> Span:
        """The span between two code-point offsets."""
        a = self.position(start)
        b = self.position(end)
        return Span(a[0], a[1], b[0], b[1])

    def range(self, start: int, end: int) -> types.Range:
        """The LSP `Range` between two code-point offsets."""
        return self.span(start, end).to_range()

    def line_span(self, line: int, first_column: int | None = None) -> Span:
        """The span of 0-based `line` without its leading whitespace (from code-point `first_column`
        when given), or an empty span at the end of the text when the line does not exist."""
        if line >= len(self.lines):
            end = self.position(len(self.text))
            return Span(end[0], end[1], end[0], end[1])
        text = self.line_text(line)
        start_col = first_column if first_column is not None else len(text) - len(text.lstrip())
        start_col = max(0, min(start_col, len(text)))
        end_col = len(text.rstrip())
        if end_col <= start_col:
            end_col = len(text)
        return Span(line, self.column_units(line, start_col), line, self.column_units(line, end_col))

    def column_units(self, line: int, column: int) -> int:
        """The code-point `column` of 0-based `line` as a character count in `encoding`."""
        if not 0 <= line < len(self.lines):
            return 0
        client = self.codec.position_to_client_units(self.lines, ServerTextPosition(line, max(0, column)))
        character: int = client.character
        return character
