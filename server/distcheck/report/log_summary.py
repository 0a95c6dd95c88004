"""`TraceReport.log_summary`: the report's text summary written to a logger, for scripts that log rather
than print (written against nvalchemi's validator, which offers the same call).

The lines are `render_text`'s, uncoloured, so the two can never state different facts. Any logger with
an `info` method taking one message works: the stdlib's `logging.Logger` and loguru's `logger` alike,
and a minimal one; the verdict line goes to `warning` / `error` when the logger has them, else to the
nearest level below it that it has (`error` → `warning` → `info`). Each line goes out as the message
alone, with no arguments, so neither `%`-style (stdlib) nor `{}`-style (loguru) formatting touches the
braces of the spec JSON.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

from .render import render_text

if TYPE_CHECKING:
    from .document import TraceReport

__all__ = ["SummaryLogger", "headline_level", "log_summary"]


class SummaryLogger(Protocol):
    """What `log_summary` needs: `info` taking the message (`warning` and `error`, when the logger has
    them, are used for the verdict line)."""

    def info(self, msg: str, /) -> object: ...


_FALLBACK = {"error": ("error", "warning", "info"), "warning": ("warning", "info"), "info": ("info",)}
"""A level → the methods tried for it, in order."""


def _method(logger: SummaryLogger, level: str) -> Callable[[str], object]:
    """The logger's method for `level`, or for the nearest level below it that it has."""
    for name in _FALLBACK[level]:
        method = getattr(logger, name, None)
        if callable(method):
            return method  # type: ignore[no-any-return]
    raise TypeError(
        f"log_summary needs a logger with an info(message) method; {type(logger).__name__} has none "
        "(pass a logging.Logger or a loguru logger)"
    )


def headline_level(report: TraceReport) -> str:
    """The level of the verdict line: `info` for a plain pass, `error` when the validation could not
    run, `warning` otherwise (a failure, an inconclusive run, a pass that needs the fixed spec)."""
    if report.state == "passed":
        return "info"
    return "error" if report.verdict == "error" else "warning"


def log_summary(report: TraceReport, logger: SummaryLogger, *, prefix: str = "distcheck: ") -> None:
    """Write `render_text(report)` to `logger`, one record per non-blank line, each starting with
    `prefix`: the verdict line at `headline_level(report)` (or the nearest level below it the logger has),
    the rest at `info`. A logger without `info` is refused (TypeError) before anything is written."""
    info = _method(logger, "info")
    headline = _method(logger, headline_level(report))
    lines = [line for line in render_text(report).split("\n") if line.strip()]
    if not lines:
        return
    headline(prefix + lines[0])
    for line in lines[1:]:
        info(prefix + line)
