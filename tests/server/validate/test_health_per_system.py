"""Partition health per system of a batch, and the sample checks (forces ~0, no cell)."""

from __future__ import annotations

import os

import pytest

from distcheck import TraceReport, validate_on_cpu
from distcheck.runtime.factory import load_object
from distcheck.runtime.run_result import RankRecord
from distcheck.validate.health import partition_health, system_health

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "sensitivity_models", "two_systems.py")

pytestmark = pytest.mark.timeout(180)


def _validate(sample: str) -> TraceReport:
    return validate_on_cpu(f"{HERE}:model_factory", load_object(f"{HERE}:{sample}")(), timeout_sec=60)


@pytest.mark.procs
def test_a_system_held_whole_by_every_rank_is_named_and_not_a_clean_pass() -> None:
    report = _validate("sample_batch")
    best = report.best_attempt
    assert best is not None
    assert all(v.passed for v in best.verdicts.values())  # the outputs agree...
    assert report.verdict == "inconclusive" and not report.ok
    assert {(h.system, h.rank, h.problem) for h in best.system_health} == {(1, 0, "no_remote"), (1, 1, "no_remote")}
    head = report.next_action.split("\n")[0]
    assert "system 1 (8 atoms) is held whole by rank 0" in head and "longer" in head


@pytest.mark.procs
def test_healthy_two_system_batch_passes() -> None:
    report = _validate("sample_two_long")
    assert report.verdict == "passed" and report.best_attempt is not None
    assert not report.best_attempt.system_health
    assert not report.sample_warnings


@pytest.mark.procs
def test_unrattled_lattice_is_warned_about() -> None:
    report = _validate("sample_unrattled")
    warnings = report.sample_warnings
    assert [(w.kind, w.systems, w.outputs) for w in warnings] == [("zero_forces", [0], ["forces"])]
    assert "unrattled" in warnings[0].message and "proves little" in warnings[0].message
    assert "Rattle" in warnings[0].remedy
    assert "sample: the reference forces of system 0 are ~0" in report.next_action
    assert "rattle" in report.render_text()


@pytest.mark.procs
def test_open_system_without_a_cell_is_warned_about() -> None:
    report = _validate("sample_batch")
    kinds = {w.kind: w for w in report.sample_warnings}
    assert kinds["no_cell"].systems == [1] and "Lattice=" in kinds["no_cell"].message
    assert "pbc" in kinds["no_cell"].remedy
    assert "system 1 has no cell" in report.next_action


def _record(rank: int, systems: list[tuple[int, int, int]]) -> RankRecord:
    per_system = [{"system": s, "owned": o, "halo": h, "remote": r} for s, (o, h, r) in enumerate(systems)]
    return RankRecord(
        rank=rank,
        device="cpu",
        owned=sum(o for o, _, _ in systems),
        halo=sum(h for _, h, _ in systems),
        remote=sum(r for _, _, r in systems),
        per_system=per_system,
        handler_counts={},
        timings={},
        requested_cutoffs=[],
        halo_width=5.5,
    )


@pytest.mark.parametrize(
    ("systems", "problem"),
    [
        ([(50, 10, 40), (4, 4, 0)], "no_remote"),
        ([(50, 10, 40), (0, 5, 3)], "no_owned"),
        ([(50, 10, 40), (4, 0, 4)], "no_halo"),
    ],
)
def test_each_problem_of_one_system_is_named(systems: list[tuple[int, int, int]], problem: str) -> None:
    records = [_record(0, systems), _record(1, [(50, 10, 40), (4, 4, 4)])]
    found = system_health(records)
    assert [(h.system, h.rank, h.problem) for h in found] == [(1, 0, problem)]
    degenerate = partition_health(records).degenerate
    assert len(degenerate) == 1 and degenerate[0].startswith("system 1") and "rank 0" in degenerate[0]


def test_one_system_batches_keep_the_per_rank_messages_only() -> None:
    records = [_record(0, [(50, 10, 0)]), _record(1, [(50, 10, 40)])]
    assert system_health(records) == []
    assert partition_health(records).degenerate[0].startswith("rank 0 has no remote atoms")
