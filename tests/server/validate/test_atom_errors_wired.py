"""A failing attempt carries `atom_errors` for each failing per-atom output, cut as the run cut the batch,
in the report and in its JSON; a passing one carries none; an old report without the field reads as []."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from seeded_bugs import seeded_spec

from distcheck import TraceReport, validate_on_cpu
from distcheck.batch import as_batch
from distcheck.report import Attempt
from distcheck.runtime.partition import partition_batch
from examples import mpnn

pytestmark = pytest.mark.procs

TIMEOUT = 60.0


def _policy(**fields: Any) -> Callable[[dict[str, Any]], None]:
    return lambda spec: spec["distribution"]["policy"].update(**fields)


# (mutation of the spec, halo width the partition must report)
WRONG: list[tuple[str, Callable[[dict[str, Any]], None]]] = [
    ("narrow_halo", _policy(scatter_mode="local", halo_width=4.5)),
    ("owned_only_forces", lambda s: s.update(owned_only_outputs=["forces"])),
]


@pytest.mark.parametrize(("label", "mutate"), WRONG, ids=[w[0] for w in WRONG])
def test_a_failing_per_atom_output_has_its_atom_errors(label: str, mutate: Callable[[dict[str, Any]], None]) -> None:
    spec = seeded_spec(mpnn, mutate)
    sample = mpnn.sample_batch()
    report = validate_on_cpu(mpnn.model_factory, sample, spec=spec, auto_fix=False, timeout_sec=TIMEOUT)
    [attempt] = report.attempts
    assert "forces" in attempt.failing_outputs, label
    per_atom = {n for n in attempt.failing_outputs if attempt.verdicts[n].kind == "per_node"}
    assert {r.output for r in attempt.atom_errors} == per_atom
    [rec] = [r for r in attempt.atom_errors if r.output == "forces"]
    verdict = attempt.verdicts["forces"]
    assert verdict.max_abs_diff is not None and rec.worst
    assert rec.worst[0].abs_diff == pytest.approx(verdict.max_abs_diff)
    assert verdict.worst_index is not None and rec.worst[0].index == verdict.worst_index[0]
    assert max(rec.profile) == pytest.approx(verdict.max_abs_diff)
    # the geometry is the run's: the owner of each worst atom is the partition's owner
    batch = as_batch(mpnn.sample_batch())
    part = partition_batch(batch, 2, float(rec.halo_width) if rec.halo_width is not None else float("inf"))
    assert [w.rank for w in rec.worst] == [int(part.owner[w.index]) for w in rec.worst]
    assert len(rec.ranks) == 2 and rec.n_components == 3
    if label == "narrow_halo":
        assert rec.halo_width == pytest.approx(4.5)
    # in the JSON too, and read back
    wire = json.loads(report.to_json())
    [on_wire] = [r for r in wire["attempts"][0]["atom_errors"] if r["output"] == "forces"]
    assert on_wire["worst"][0]["index"] == rec.worst[0].index
    back = TraceReport.from_json(report.to_json())
    assert back.attempts[0].atom_errors[0].to_dict() == attempt.atom_errors[0].to_dict()


def test_a_passing_attempt_has_none_and_old_reports_read_as_empty() -> None:
    report = validate_on_cpu(mpnn.model_factory, mpnn.sample_batch(), auto_fix=False, timeout_sec=TIMEOUT)
    assert report.ok and report.attempts[-1].atom_errors == []
    old = report.attempts[-1].to_dict()
    old.pop("atom_errors")
    assert Attempt.from_dict(old).atom_errors == []
