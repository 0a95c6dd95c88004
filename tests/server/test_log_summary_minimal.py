"""`TraceReport.log_summary` with loggers that lack levels: a loguru-like one with only `info` and
`warning` (no `error`, `debug` or `log`) and one with only `info` get every line of `render_text`, the
verdict line at the nearest level they have; a logger without `info` is refused before anything is
written, naming what it needs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distcheck.report import TraceReport

FIXTURES = Path(__file__).resolve().parents[1] / "extension" / "fixtures"
CASES = sorted(FIXTURES.glob("*.json"))
LEVEL = {"passed": "info", "passed_after_fix": "warning", "failed": "warning", "inconclusive": "warning"}


class InfoWarning:
    """loguru-style: `{}` formatting when arguments come with the message; no `error`, `debug`, `log`."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.records.append(("info", msg.format(*args, **kwargs) if args or kwargs else msg))

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self.records.append(("warning", msg.format(*args, **kwargs) if args or kwargs else msg))


class InfoOnly:
    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def info(self, msg: str) -> None:
        self.records.append(("info", msg))


def _lines(report: TraceReport) -> list[str]:
    return [line for line in report.render_text().split("\n") if line.strip()]


def test_the_fixtures_include_an_error_report() -> None:
    assert "error" in {TraceReport.from_json(p.read_text()).state for p in CASES}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_an_info_and_warning_logger_gets_every_line_with_errors_as_warnings(path: Path) -> None:
    report = TraceReport.from_json(path.read_text())
    logger = InfoWarning()
    report.log_summary(logger, prefix="")
    assert [m for _, m in logger.records] == _lines(report)
    assert logger.records[0][0] == LEVEL.get(report.state, "warning")
    assert {level for level, _ in logger.records[1:]} <= {"info"}


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_an_info_only_logger_gets_every_line(path: Path) -> None:
    report = TraceReport.from_json(path.read_text())
    logger = InfoOnly()
    report.log_summary(logger)
    assert [m for _, m in logger.records] == [f"distcheck: {line}" for line in _lines(report)]


def test_a_logger_without_info_is_refused_before_anything_is_written() -> None:
    class WarningOnly:
        def __init__(self) -> None:
            self.records: list[str] = []

        def warning(self, msg: str) -> None:
            self.records.append(msg)

    report = TraceReport.from_json(CASES[0].read_text())
    logger = WarningOnly()
    with pytest.raises(TypeError, match=r"needs a logger with an info\(message\) method; WarningOnly"):
        report.log_summary(logger)  # type: ignore[arg-type]
    assert logger.records == []
