"""Positions through pygls' codec: code units of the negotiated encoding, lines ended only where LSP
ends them, and the edits and diagnostics built on them landing on the right characters of a line
that holds an emoji (a non-BMP character: two UTF-16 units, four UTF-8 bytes, one code point)."""

from __future__ import annotations

import re

import pytest
from lsprotocol import types
from pygls.workspace import TextDocument

from distcheck.lsp import actions, diagnostics
from distcheck.lsp.text import LineIndex, units

ENCODINGS = ("utf-16", "utf-8", "utf-32")
TEXTS = [
    "",
    "plain ascii\nsecond line\n",
    "a\U0001f600b\r\nsecond\nthird",
    "\U0001f600\U0001f4a9 x = 1\n\U0001f600",
    "caf\u00e9 \u4e2d\u6587 \U0001f600 end\rnext\r\n\r\nlast",
    "page\x0cbreak \U0001f600\u2028same line\nnext \x85 still",
    "\n\n\U0001f600\n",
]


def _unit_count(ch: str, encoding: str) -> int:
    """The stdlib encoder's count, independent of the code under test."""
    if encoding == "utf-16":
        return len(ch.encode("utf-16-le")) // 2
    return len(ch.encode("utf-8")) if encoding == "utf-8" else 1


def _truth(text: str, offset: int, encoding: str) -> tuple[int, int]:
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    line = max(i for i, s in enumerate(starts) if s <= offset)
    return line, sum(_unit_count(c, encoding) for c in text[starts[line] : offset])


def _inside_crlf(text: str, offset: int) -> bool:
    return 0 < offset < len(text) and text[offset - 1 : offset + 1] == "\r\n"


def _apply(text: str, edits: list[types.TextEdit], encoding: str) -> str:
    """Apply LSP edits by walking code units with the stdlib encoder (as an editor would)."""

    def offset(pos: types.Position) -> int:
        starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
        i, count = starts[pos.line], 0
        while i < len(text) and text[i] not in "\r\n" and count < pos.character:
            count += _unit_count(text[i], encoding)
            i += 1
        return i

    spans = sorted(((offset(e.range.start), offset(e.range.end), e.new_text) for e in edits), reverse=True)
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize("text", TEXTS)
def test_every_offset_maps_to_the_code_units_of_the_encoding_and_back(text: str, encoding: str) -> None:
    index = LineIndex(text, encoding)
    for offset in range(len(text) + 1):
        if _inside_crlf(text, offset):
            continue
        position = index.position(offset)
        assert position == _truth(text, offset, encoding), (offset, text[offset : offset + 1])
        assert index.offset(*position) == offset
    assert index.position(len(text) + 5) == _truth(text, len(text), encoding)


def test_a_position_inside_a_character_or_past_its_line_moves_to_a_boundary() -> None:
    text = "a\U0001f600b\nsecond"
    utf16, utf8 = LineIndex(text, "utf-16"), LineIndex(text, "utf-8")
    assert utf16.offset(0, 2) == 2  # between the emoji's two UTF-16 units: after the emoji
    assert utf8.offset(0, 3) == 2 and utf8.offset(0, 5) == 2 and utf8.offset(0, 6) == 3
    assert utf16.offset(0, 99) == 3, "past the line: the line's end, not the next line"
    assert utf16.offset(1, 99) == len(text) and utf16.offset(7, 0) == len(text) and utf16.offset(-1, 3) == 0
    assert units("\U0001f600") == 2 and units("\U0001f600", "utf-8") == 4 and units("\U0001f600", "utf-32") == 1


def test_lines_end_only_where_lsp_ends_them() -> None:
    text = "a\x0cb\u2028c\x85d\ne"
    index = LineIndex(text)
    assert index.line_count == 2 and index.line_text(0) == "a\x0cb\u2028c\x85d"
    assert index.position(text.index("d")) == (0, 6) and index.position(text.index("e")) == (1, 0)
    # pygls' TextDocument splits with str.splitlines, which LSP clients do not: the reason text.py
    # keeps its own line split and takes only the unit counting from pygls.
    assert len(TextDocument("file:///x", text).lines) == 5


@pytest.mark.parametrize("text", [t for t in TEXTS if not re.search("[\x0c\x85\u2028]", t)])
def test_agrees_with_pygls_text_document_where_their_lines_agree(text: str) -> None:
    for encoding in ENCODINGS:
        doc = TextDocument("file:///x", text, position_codec=LineIndex(text, encoding).codec)
        index = LineIndex(text, encoding)
        for offset in range(len(text)):
            if _inside_crlf(text, offset) or text[offset] == "\r":
                continue
            expected = doc.client_position_at_offset(offset)
            assert index.position(offset) == (expected.line, expected.character)
            assert index.offset(expected.line, expected.character) == doc.offset_at_position(expected)


EDITS = [
    ('{"a": "\U0001f600", "b": 1}\n', '{"a": "\U0001f600", "b": 2}\n'),
    ('{"a": "\U0001f600\U0001f600",\r\n "b": [1, 2]}\r\n', '{"a": "\U0001f600\U0001f600",\r\n "b": [1, 2, 3]}\r\n'),
    ('{"a": "\U0001f600"}\n', '{"a": "\U0001f4a9"}\n'),
    ('{"\u4e2d": "\u00e9\U0001f600", "x": true}', '{"\u4e2d": "\u00e9\U0001f600", "x": false, "y": 0}'),
]


@pytest.mark.parametrize("encoding", ENCODINGS)
@pytest.mark.parametrize(("current", "new"), EDITS)
def test_quick_fix_edits_after_an_emoji_land_on_the_changed_characters(current: str, new: str, encoding: str) -> None:
    for document_changes in (True, False):
        edit = actions.workspace_edit(
            "file:///s.json", current, 3, new, encoding=encoding, document_changes=document_changes, check_spec=False
        )
        if document_changes:
            assert edit.document_changes is not None
            change = edit.document_changes[0]
            assert isinstance(change, types.TextDocumentEdit) and change.text_document.version == 3
            edits = [e for e in change.edits if isinstance(e, types.TextEdit)]
        else:
            assert edit.changes is not None
            edits = list(edit.changes["file:///s.json"])
        assert edits and _apply(current, edits, encoding) == new


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_a_config_diagnostic_after_an_emoji_starts_at_its_column(encoding: str) -> None:
    text = '[tool.distcheck]\nname = "\U0001f600\U0001f600"; atol = "tight"  \n'
    column = text.splitlines()[1].index("atol") + 1  # 1-based code points, as the config reader reports
    d = diagnostics.config_diagnostic("/p/pyproject.toml", text, 2, column, "atol must be a number", "fix it", encoding)
    line = text.splitlines()[1]
    assert d.range.start == types.Position(line=1, character=_truth(line, column - 1, encoding)[1])
    assert d.range.end == types.Position(line=1, character=_truth(line, len(line.rstrip()), encoding)[1])
