"""What `distcheck validate` prints while it runs: plain progress and notice lines on stderr.

One line per progress event of the validator (`progress=` callback, see `validate.api`), prefixed with
the seconds since the command started; no cursor tricks, so CI logs stay readable.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any, TextIO

from .safe_text import for_terminal

__all__ = ["Printer", "one_line", "print_error", "progress_line", "rank_tag"]


class Printer:
    """Plain progress and notice lines on stderr (no cursor tricks, so CI logs stay readable)."""

    def __init__(self, stream: TextIO, quiet: bool) -> None:
        self.stream = stream
        self.quiet = quiet
        self.t0 = time.perf_counter()

    def write(self, line: str, *, always: bool = False) -> None:
        """Write one line (unless quiet and not `always`); characters the stream cannot encode are escaped."""
        if self.quiet and not always:
            return
        line = for_terminal(line)  # user-derived names and messages: shown, never acted on
        try:
            self.stream.write(line + "\n")
        except UnicodeEncodeError:
            enc = getattr(self.stream, "encoding", None) or "ascii"
            self.stream.write(line.encode(enc, "backslashreplace").decode(enc, "replace") + "\n")
        self.stream.flush()

    def notice(self, text: str) -> None:
        """A `distcheck: ...` line (hidden by --quiet)."""
        self.write(f"distcheck: {text}")

    def progress(self, event: str, info: Mapping[str, Any]) -> None:
        """The validator's `progress` callback: one timed line per event."""
        line = progress_line(event, info)
        if line:
            self.write(f"[{time.perf_counter() - self.t0:6.1f}s] {line}")


def one_line(text: object) -> str:
    """`text` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def progress_line(event: str, info: Mapping[str, Any]) -> str:
    """The line shown for one progress event (attempts numbered from 1); unknown events as `name (k=v, ...)`."""
    if event == "reference_started":
        return "reference run…"
    if event == "reference_finished":
        seconds = info.get("seconds")
        return f"reference run finished ({seconds:.1f} s)" if isinstance(seconds, (int, float)) else "reference done"
    if event == "attempt_started":
        index = int(info.get("index", 0))
        rule = one_line(info.get("rule") or "initial spec")
        rationale = one_line(info.get("rationale") or "")
        return f"attempt {index + 1}/{info.get('total', '?')}: {rule}" + (f" — {rationale}" if rationale else "")
    if event == "rank_started":
        pid = info.get("pid")
        return f"rank {info.get('rank')} started" + (f" (pid {pid})" if pid is not None else "")
    if event == "rank_finished":
        code = info.get("exitcode")
        return f"rank {info.get('rank')} finished" + ("" if code in (0, None) else f" with exit code {code}")
    if event == "attempt_finished":
        index = int(info.get("index", 0))
        if info.get("passed"):
            return f"attempt {index + 1} passed"
        failing = [str(f) for f in info.get("failing") or []]
        return f"attempt {index + 1} failed" + (f" ({', '.join(failing)} out of tolerance)" if failing else "")
    if event == "finished":
        return "validation finished: " + ("ok" if info.get("ok") else "not ok")
    details = ", ".join(f"{k}={one_line(v)}" for k, v in info.items())
    return f"{event}" + (f" ({details})" if details else "")


def rank_tag() -> str:
    """` (rank N)` in a launched job of several ranks, where every rank writes to the same log."""
    rank, size = os.environ.get("RANK"), os.environ.get("WORLD_SIZE", "1")
    return f" (rank {rank})" if rank is not None and size.isdigit() and int(size) > 1 else ""


def print_error(err: TextIO, message: str, hint: str = "") -> None:
    """`distcheck: error: MESSAGE` and, when there is one, `  what to do: HINT` on `err`."""
    err.write(f"distcheck: error{rank_tag()}: {for_terminal(message)}\n")
    if hint:
        err.write(f"  what to do: {for_terminal(hint)}\n")
    err.flush()
