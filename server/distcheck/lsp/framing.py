"""LSP base-protocol framing that survives a badly framed message: `FrameParser` (pure, no I/O).

pygls' loop (`pygls.io_.run_async`) reads header *lines* and takes a length only from a line that is
exactly `Content-Length: N\\r\\n`. A body ends without a newline, so after one frame whose header is
garbled or whose length is wrong, the next header is glued onto the tail of the broken body, never
matches again, and every later message is lost while the process stays alive.

`FrameParser` reframes the byte stream instead: a frame is a `Content-Length` header, other header
lines up to a blank line, and a body of that many bytes that is JSON. Anything else — text before a
header, a length that is not a number or is over `MAX_BODY`, a body that is not JSON, a body cut
short by the next header (a valid JSON body can never hold `Content-Length: N` followed by a raw line
break) — is dropped, the parser resynchronises on the next header, and the dropped bytes are logged
once the stream is back in step. More than `MAX_JUNK` bytes in a row without a frame means the peer
does not speak LSP: the parser gives up (`broken`). `transport.py` feeds it stdin.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["MAX_BODY", "MAX_HEADER_BLOCK", "MAX_JUNK", "FrameParser"]

logger = logging.getLogger(__name__)

MAX_BODY = 64 * 1024 * 1024
"""The longest body accepted; a longer `Content-Length` is taken for a garbled header."""
MAX_JUNK = 1024 * 1024
"""Bytes dropped in a row, without one good frame, after which the stream is given up."""
MAX_HEADER_BLOCK = 8 * 1024
"""The longest header block (the lines after `Content-Length` up to the blank line)."""

_HEADER = re.compile(rb"content-length[ \t]{0,8}:[ \t]{0,8}(\d{1,12})[ \t]{0,8}\r?\n", re.IGNORECASE)
_TAIL = 64  # longer than any header line _HEADER matches: a header split across reads is kept whole
_SAMPLE = 160


@dataclass
class _Dropped:
    """Bytes dropped since the last good frame: how many, why, and the first few of them."""

    count: int = 0
    noisy: int = 0
    reasons: list[str] = field(default_factory=list)
    sample: bytearray = field(default_factory=bytearray)

    def add(self, data: bytes, reason: str | None) -> None:
        self.count += len(data)
        if data.strip() or reason is not None:
            self.noisy += len(data)
        if reason is not None and reason not in self.reasons and len(self.reasons) < 6:
            self.reasons.append(reason)
        if len(self.sample) < _SAMPLE:
            self.sample += data[: _SAMPLE - len(self.sample)]


class FrameParser:
    """Bytes in (`feed`), whole JSON bodies out (`next_frame`); never raises on what it is fed.

    `next_frame()` returns a body, or None when it needs more bytes (or, once `broken` is set, when
    the stream has been given up). `on_resync(message)` is called with a one-line account of the
    bytes that were dropped, once the next good frame is found or at `finish()`.
    """

    def __init__(self, on_resync: Callable[[str], None] | None = None) -> None:
        self._buf = bytearray()
        self._clean = 0  # the current frame's body holds no header before this offset
        self._dropped = _Dropped()
        self._on_resync = on_resync or (lambda message: logger.warning("%s", message))
        self.broken: str | None = None
        """Why the stream was given up (more than `MAX_JUNK` bytes without a frame); None while it is fine."""
        self.frames = 0
        self.resyncs = 0

    def feed(self, data: bytes) -> None:
        """Append bytes read from the stream."""
        self._buf += data

    def next_frame(self) -> bytes | None:
        """The next complete, well-formed body, or None until more bytes are fed."""
        while self.broken is None:
            match = _HEADER.search(self._buf)
            if match is None:
                self._drop(max(0, len(self._buf) - _TAIL), None)
                return None
            if match.start() > 0:
                stray = self._buf[: match.start()].strip()  # blank lines between messages are harmless
                self._drop(match.start(), "bytes outside any message" if stray else None)
                continue
            body_start = self._header_block_end(match.end())
            if body_start is None:
                return None
            if body_start < 0:
                continue
            length = int(match.group(1))
            if length > MAX_BODY:
                self._drop(match.end(), f"a Content-Length of {length} bytes, over the {MAX_BODY >> 20} MiB limit")
                continue
            end = body_start + length
            inner = _HEADER.search(self._buf, max(body_start, self._clean - _TAIL), end)
            if inner is not None:
                self._drop(inner.start(), "a body cut short by the next message's header")
                continue
            if len(self._buf) < end:
                self._clean = len(self._buf)  # searched up to here: a later read rescans only its tail
                return None
            body = bytes(self._buf[body_start : body_start + length])
            if not _is_json(body):
                self._drop(body_start, "a body that is not JSON" if length else "an empty body")
                continue
            del self._buf[:end]
            self._clean = 0
            self._good_frame()
            return body
        return None

    def finish(self) -> None:
        """The stream ended: account for whatever was left unframed."""
        if self._buf:
            self._drop(len(self._buf), "an incomplete message at the end of the stream")
        self._report()

    def _header_block_end(self, pos: int) -> int | None:
        """Offset of the body after the header block starting at `pos`; None: need more bytes;
        -1: the block was broken and dropped (the caller rescans)."""
        while True:
            newline = self._buf.find(b"\n", pos, pos + MAX_HEADER_BLOCK)
            if newline < 0:
                if len(self._buf) - pos >= MAX_HEADER_BLOCK:
                    self._drop(pos, "a header block with no blank line")
                    return -1
                return None
            line = bytes(self._buf[pos : newline + 1])
            if not line.strip():
                return newline + 1
            again = _HEADER.search(line)
            if again is not None:
                # another Content-Length before the blank line: the first was not a message's header
                self._drop(pos + again.start(), "a header block without a blank line")
                return -1
            pos = newline + 1  # Content-Type or an unknown header line: ignored

    def _drop(self, n: int, reason: str | None) -> None:
        if n <= 0:
            return
        self._dropped.add(bytes(self._buf[:n]), reason)
        del self._buf[:n]
        self._clean = 0
        if self._dropped.noisy > MAX_JUNK:
            self.broken = (
                f"more than {MAX_JUNK >> 20} MiB arrived on stdin without one well-framed LSP message"
                f" ({'; '.join(self._dropped.reasons) or 'no Content-Length header'})"
            )
            self._buf.clear()
            self._report()

    def _good_frame(self) -> None:
        self.frames += 1
        self._report()

    def _report(self) -> None:
        dropped = self._dropped
        self._dropped = _Dropped()
        if not dropped.noisy:
            return
        self.resyncs += 1
        why = "; ".join(dropped.reasons) or "bytes outside any message"
        self._on_resync(
            f"distcheck-lsp: dropped {dropped.count} bytes that were not a well-framed LSP message ({why}); "
            f"{'the stream was given up' if self.broken else 'resynchronised on the next Content-Length header'}. "
            f"First bytes: {bytes(dropped.sample)!r}. If this repeats, report it with this log."
        )


def _is_json(body: bytes) -> bool:
    try:
        json.loads(body)
    except (ValueError, RecursionError):
        return False
    return True
