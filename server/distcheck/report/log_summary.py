"""`TraceReport.log_summary`: the report's text summary written to a logger, for scripts that log rather
than print (written against nvalchemi's validator, which offers the same call).

The lines are `render_text`'s, uncoloured, so the two can never state different facts. Any logger with
`info` / `warning` / `error` methods taking one message works: the stdlib's `logging.Logger` and
loguru's `logger` alike. Each line goes out as the message alone, with no arguments, so neither
`%`-style (stdlib) nor `{}`-style (loguru) formatting touches the braces of the spec JSON.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .render import render_text

if TYPE_CHECKING:
    from .document import TraceReport

__all__ = ["SummaryLogger", "headline_level", "log_summary"]


class SummaryLogger(Protocol):
    """What `log_summary` calls: one method per level, each taking the message."""

    def info(self, msg: str, /) -> object: ...

    def warning(self, msg: str, /) -> object: ...

    def error(self, msg: str, /) -> object: ...


def headline_level(report: TraceReport) -> str:
    """The level of the verdict line: `info` for a plain pass, `error` when the validation could not
    run, `warning` otherwise (a failure, an inconclusive run, a pass that needs the fixed spec)."""
    if report.state == "passed":
        return "info"
    return "error" if report.verdict == "error" else "warning"


def log_summary(report: TraceReport, logger: SummaryLogger, *, prefix: str = "distcheck: ") -> None:
    """Write `render_text(report)` to `logger`, one record per non-blank line, each starting with
    `prefix`: the verdict line at `headline_level(report)`, the rest at `info`."""
    lines = [line for line in render_text(report).split("\n") if line.strip()]
    if not lines:
        return
    getattr(logger, headline_level(report))(prefix + lines[0])
    for line in lines[1:]:
        logger.info(prefix + line)
