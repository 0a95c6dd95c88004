"""Advice follows evidence: no advice whose precondition the report contradicts, and a fix is tried where
the diagnosis names one. A halo-unaware model (no `batch.neighbor_list`) under halo_correction is told
its halo is incomplete; auto-fix now tries the local mode that advice names, and when that attempt, with
a complete halo, fails the same outputs, the headline no longer says "halo too shallow"."""

from __future__ import annotations

from pathlib import Path

import pytest

from distcheck import validate_on_cpu
from distcheck.runtime.factory import load_object

pytestmark = [pytest.mark.timeout(240), pytest.mark.procs]

MODELS = Path(__file__).resolve().parent / "pair_matrix_models.py"


def _validate(factory: str) -> object:
    return validate_on_cpu(f"{MODELS}:{factory}", load_object(f"{MODELS}:sample_batch")(), world_size=2)


@pytest.mark.parametrize("factory", ["upper_factory", "rows_factory"])
def test_a_per_rank_pair_sum_is_not_blamed_on_the_halo_once_a_complete_halo_failed_too(factory: str) -> None:
    report = _validate(factory)
    assert not report.ok  # type: ignore[attr-defined]
    attempts = report.attempts  # type: ignore[attr-defined]
    first = attempts[0]
    assert first.halo_completeness.matches is False  # halo-unaware under halo_correction
    local = [a for a in attempts[1:] if a.rule == "halo_correction_to_local"]
    assert local, "the fix the halo advice names was not tried"
    assert local[0].halo_completeness.matches is True and not local[0].passed
    action = report.next_action  # type: ignore[attr-defined]
    assert "halo too shallow" not in action, action
    assert f"halo: not the cause: attempt {local[0].index + 1} ran with a complete halo" in action, action
    assert "no auto-fix rule found evidence" not in action, action  # a fix was tried


def test_the_symmetric_pair_sum_still_passes_at_once() -> None:
    report = _validate("symmetric_factory")
    assert report.ok and len(report.attempts) == 1  # type: ignore[attr-defined]
