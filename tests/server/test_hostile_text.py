"""One hostile corpus through every surface the CLI writes (`distcheck.safe_text`): the terminal (the
report's text, progress and error lines), JUnit XML and the report's JSON. Each result must parse, hold
no character that acts (an escape sequence, a carriage return, NUL, a C1 control, a bidirectional
override, a lone surrogate), and still show what was there, escaped."""

from __future__ import annotations

import copy
import io
import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from distcheck.cli_output import Printer, print_error
from distcheck.report.document import TraceReport
from distcheck.report.junit import junit_xml, write_junit
from distcheck.safe_text import MAX_LINE, UNSAFE, for_terminal

FIXTURES = Path(__file__).resolve().parents[1] / "extension" / "fixtures"

HOSTILE = {
    "csi_clear": "energy\x1b[2J\x1b[H",
    "osc_title": "forces\x1b]0;pwned\x07",
    "carriage_return": "stress\rOK all good",
    "nul": "e\x00nergy",
    "c1_csi": "dipole\x9b31m",
    "bidi_override": "charges\u202egnp.exe",
    "lone_surrogate": "virial\ud800",
    "huge": "m" * 1_000_000,
}

_ACTING = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def _report(text: str) -> TraceReport:
    """The worker-error fixture with `text` in its error message and as an output name."""
    data = json.loads((FIXTURES / "worker_error.json").read_text())
    attempt = data["attempts"][0]
    attempt["error"]["message"] = f"boom {text}"
    data["next_action"] = f"FAIL — {text}"
    return TraceReport.from_dict(copy.deepcopy(data))


def _inert(shown: str) -> None:
    assert not _ACTING.search(shown), repr(_ACTING.search(shown))
    assert all(len(line) <= MAX_LINE + 120 for line in shown.split("\n"))  # a prefix and the cut note


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_terminal_shows_hostile_text_escaped(name: str) -> None:
    text = HOSTILE[name]
    _inert(for_terminal(text))
    report = _report(text)
    _inert(report.render_text(color=False))
    coloured = report.render_text(color=True)
    assert "\x1b[2J" not in coloured and "\x1b]" not in coloured  # only distcheck's own colours
    assert set(re.findall(r"\x1b\[[0-9;]*m", coloured)) <= {
        "\x1b[31m",
        "\x1b[32m",
        "\x1b[33m",
        "\x1b[1m",
        "\x1b[2m",
        "\x1b[0m",
    }
    stream = io.StringIO()
    Printer(stream, quiet=False).notice(f"loaded {text}")
    print_error(stream, f"cannot import {text}", f"rename {text}")
    _inert(stream.getvalue())
    if name != "huge":
        assert for_terminal(text) in stream.getvalue()  # what was there is still shown, escaped
        assert UNSAFE.search(text) is None or "\\" in for_terminal(text)


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_junit_is_well_formed_xml_whatever_the_user_named(name: str, tmp_path: Path) -> None:
    report = _report(HOSTILE[name])
    path = tmp_path / "junit.xml"
    write_junit(report, f"suite {HOSTILE[name][:50]}", str(path))
    tree = ET.parse(path)  # parses: no character XML forbids
    messages = [e.get("message", "") for e in tree.iter() if e.tag in ("error", "failure")]
    assert messages and any("boom" in m for m in messages)
    assert ET.tostring(junit_xml(report, "s")).decode()  # the element form too


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_the_reports_json_is_written_whatever_the_user_named(name: str) -> None:
    report = _report(HOSTILE[name])
    for text in (report.to_json(), report.to_json(indent=True)):
        again = json.loads(text)
        assert "boom" in again["attempts"][0]["error"]["message"]
    assert TraceReport.from_json(report.to_json()).ok == report.ok
