"""`TraceReport.log_summary`: the facts of `render_text`, line for line, through a stdlib logger and a
loguru-style one, with the verdict line at a level that says how it went."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest

from distcheck.report import TraceReport

FIXTURES = Path(__file__).resolve().parents[1] / "extension" / "fixtures"
CASES = sorted(FIXTURES.glob("*.json"))
# every verdict and state the fixtures hold, with the level its verdict line goes out at
LEVELS = {
    "passed": "info",
    "passed_after_fix": "warning",
    "failed": "warning",
    "inconclusive": "warning",
    "error": "error",
}


class LoguruLike:
    """Formats `{}` fields whenever arguments come with the message, as loguru does."""

    def __init__(self) -> None:
        self.records: list[tuple[str, str]] = []

    def _log(self, level: str, msg: str, *args: Any, **kwargs: Any) -> None:
        self.records.append((level, msg.format(*args, **kwargs) if args or kwargs else msg))

    def info(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._log("info", msg, *args, **kwargs)

    def warning(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._log("warning", msg, *args, **kwargs)

    def error(self, msg: str, *args: Any, **kwargs: Any) -> None:
        self._log("error", msg, *args, **kwargs)


def _text_lines(report: TraceReport) -> list[str]:
    return [line for line in report.render_text().split("\n") if line.strip()]


def test_the_fixtures_cover_every_state() -> None:
    states = {TraceReport.from_json(p.read_text()).state for p in CASES}
    assert states == set(LEVELS)


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_stdlib_logger_gets_render_texts_lines(path: Path, caplog: pytest.LogCaptureFixture) -> None:
    report = TraceReport.from_json(path.read_text())
    logger = logging.getLogger(f"distcheck-test-{path.stem}")
    with caplog.at_level(logging.DEBUG, logger=logger.name):
        report.log_summary(logger)
    messages = [r.getMessage() for r in caplog.records]
    assert messages == [f"distcheck: {line}" for line in _text_lines(report)]
    assert caplog.records[0].levelname.lower() == LEVELS[report.state]
    assert {r.levelname for r in caplog.records[1:]} == {"INFO"}
    assert any("{" in m for m in messages)  # the spec JSON came through unformatted


@pytest.mark.parametrize("path", CASES, ids=[p.stem for p in CASES])
def test_loguru_style_logger_gets_the_same_lines(path: Path) -> None:
    report = TraceReport.from_json(path.read_text())
    logger = LoguruLike()
    report.log_summary(logger, prefix="")
    assert [m for _, m in logger.records] == _text_lines(report)
    assert logger.records[0][0] == LEVELS[report.state]
