"""The suspicious-output headline under `local` follows the receptive field the reference measured:
a halo that covers it is ruled out (no "raise num_interactions" when the depth was measured and
covered), a halo short of it is widened to it, and an unmeasured field, or a lower bound the halo
covers (a per-system quantity moved every atom), gives one cutoff more."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from distcheck.report import TraceReport
from distcheck.validate.trust_action import suspicious_head

FIXTURE = Path(__file__).resolve().parents[2] / "extension" / "fixtures" / "suspicious.json"


def _report(halo_width: float | None, **field: Any) -> TraceReport:
    data = copy.deepcopy(json.loads(FIXTURE.read_text()))
    data["attempts"][0]["spec"]["distribution"]["policy"]["halo_width"] = halo_width
    data["receptive_field"].update(field)
    return TraceReport.from_dict(data)


def _head(report: TraceReport) -> str:
    head = suspicious_head(report.attempts[0], report.receptive_field)
    assert head is not None
    return head


@pytest.mark.parametrize(
    ("halo_width", "field"),
    [
        (None, {"lower_bound": False}),  # derived from the wrapper: 2 × 3 Å declared, 1 × 3 Å measured
        (6.5, {"lower_bound": False, "measured_depth": 2, "measured_field": 6.0}),
        (9.5, {"lower_bound": False, "measured_depth": 2, "measured_field": 6.0, "reach_angstrom": 8.7}),
    ],
)
def test_a_halo_that_covers_the_measured_field_is_ruled_out(halo_width: float | None, field: dict[str, Any]) -> None:
    head = _head(_report(halo_width, **field))
    assert "covers the receptive field the reference measured" in head
    assert "num_interactions" not in head and "set distribution.policy.halo_width" not in head
    assert "tighten atol/rtol" in head


@pytest.mark.parametrize(
    ("halo_width", "field", "reach"),
    [
        (3.5, {"measured_depth": 2, "measured_field": 6.0}, "6 Å"),
        (6.5, {"measured_depth": 2, "measured_field": 6.0, "reach_angstrom": 8.7}, "8.7 Å"),
        (None, {"declared_field": 3.0, "measured_depth": 3, "measured_field": 9.0}, "9 Å"),
    ],
)
def test_a_halo_short_of_the_measured_field_is_widened_to_it(
    halo_width: float | None, field: dict[str, Any], reach: str
) -> None:
    head = _head(_report(halo_width, **field))
    assert f"shallower than the receptive field the reference measured ({reach})" in head
    assert f"halo_width to at least {reach}" in head
    assert "num_interactions" not in head


@pytest.mark.parametrize("status", ["unbounded", "not_measured"])
def test_an_unmeasured_field_gives_one_cutoff_more(status: str) -> None:
    head = _head(_report(6.5, status=status, measured_depth=None, measured_field=None))
    assert f"could not be measured here ({status})" in head
    assert "set distribution.policy.halo_width = 9.5 (one cutoff more)" in head


def test_outside_local_the_advice_is_the_tolerances() -> None:
    report = _report(None)
    data = report.to_dict()
    data["attempts"][0]["spec"]["distribution"]["policy"]["scatter_mode"] = "halo_correction"
    head = _head(TraceReport.from_dict(data))
    assert "scatter_mode 'local'" not in head and "tighten atol/rtol" in head


@pytest.mark.parametrize(
    ("halo_width", "field", "wider"),
    [
        (None, {"lower_bound": True}, "halo_width = 9 (one cutoff more)"),  # the sensitivity model's shape
        (6.5, {"lower_bound": True, "measured_depth": 2, "measured_field": 6.0}, "halo_width = 9.5 (one cutoff more)"),
        (9.5, {"lower_bound": True, "measured_depth": 1, "measured_field": 3.0}, "halo_width = 12.5 (one cutoff more)"),
    ],
)
def test_a_lower_bound_the_halo_covers_rules_nothing_out(
    halo_width: float | None, field: dict[str, Any], wider: str
) -> None:
    head = _head(_report(halo_width, **field))
    assert "covers the receptive field" not in head
    assert "only a lower bound of the field" in head and wider in head


def test_a_lower_bound_beyond_the_halo_still_widens_to_it() -> None:
    head = _head(_report(3.5, lower_bound=True, measured_depth=2, measured_field=6.0))
    assert "halo_width to at least 6 Å" in head
