"""A validation whose reference and ranks run in spares (the first attempt's ranks built while the
reference runs, a later attempt's in fresh spares, or built while the attempt before it ran where
there are cores for it) reports exactly what one with every process forked as before reports, and
learns the packages its model imported."""

from __future__ import annotations

import json
from typing import Any

import pytest

from distcheck import validate_on_cpu
from distcheck.runtime import spares, spares_cache, spares_prepared
from examples import helper_model, unaware_model

VOLATILE = {"timings", "elapsed_sec", "peak_memory_bytes"}


def _stable(value: Any) -> Any:
    """The report without what differs between any two runs (wall times)."""
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _validate() -> dict[str, Any]:
    report = validate_on_cpu(
        helper_model.model_factory, helper_model.sample_batch(), world_size=2, timeout_sec=120, max_fix_attempts=2
    )
    return json.loads(json.dumps(_stable(report.to_dict()), default=str))


def test_spares_give_the_same_report_as_fresh_processes(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(spares_prepared, "roomy", lambda world_size: False)  # later attempts: fresh spares
    pool = spares.pool()
    monkeypatch.setenv("DISTCHECK_SPARES", "0")
    before = dict(pool.counts)
    fresh = _validate()
    assert pool.counts == before, "spares were used although turned off"
    monkeypatch.delenv("DISTCHECK_SPARES")
    warm = _validate()
    kinds = ("claimed_warm", "claimed_warming", "started_on_claim")
    used = sum(pool.counts[k] - before[k] for k in kinds)
    assert used == 5, f"the reference and both attempts' ranks did not all run in spares: {pool.counts}"
    assert len(warm["attempts"]) == 2 and warm["attempts"][1]["passed"], warm["attempts"]
    assert warm == fresh
    assert pool.report()["devices"] == {}, "idle spares outlived the validation"
    learned = spares_cache.packages_for(helper_model.model_factory.__module__ + ":model_factory")
    assert "distcheck" not in learned and "examples" not in learned and "torch" not in learned, learned



def _claimed(pool: spares.SparePool) -> int:
    return sum(pool.counts[k] for k in ("claimed_warm", "claimed_warming", "started_on_claim"))


def _unaware(**options: Any) -> Any:
    """The halo-unaware MPNN under its wrong spec: the first attempt fails, a `local` halo (same
    TorchScript mode) passes."""
    return validate_on_cpu(
        unaware_model.model_factory,
        unaware_model.sample_batch(),
        world_size=2,
        timeout_sec=120,
        spec=unaware_model.WRONG_SPEC,
        **options,
    )


def test_each_later_attempt_runs_on_ranks_built_while_the_attempt_before_it_ran(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any
) -> None:
    """With cores enough to build beside the running ranks (forced here: CI has two), the second
    attempt's ranks built their wrappers while the first attempt ran (its `factory_ahead`), the
    report is the one fresh processes give, and the ranks built for a third attempt that never came
    are gone with the validation."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DISTCHECK_SPARES", "0")
    fresh = _stable(_unaware(max_fix_attempts=2).to_dict())
    monkeypatch.delenv("DISTCHECK_SPARES")
    monkeypatch.setattr(spares_prepared, "roomy", lambda world_size: True)
    pool = spares.pool()
    before = _claimed(pool)
    report = _unaware(max_fix_attempts=2)
    assert [a.passed for a in report.attempts] == [False, True], report.next_action
    for attempt in report.attempts:
        assert "factory_ahead" in attempt.timings, f"attempt {attempt.index + 1} built its ranks in the run"
        assert "rank_factory" not in attempt.timings
    # the reference, each attempt's ranks and the ranks built for a third attempt
    assert _claimed(pool) - before == 1 + 3 * 2, pool.counts
    assert json.loads(json.dumps(_stable(report.to_dict()), default=str)) == json.loads(
        json.dumps(fresh, default=str)
    )
    assert pool.report()["devices"] == {}, "idle spares outlived the validation"


def test_ranks_built_in_another_torchscript_mode_are_not_used(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The helper model's fix runs its TorchScript eagerly: the ranks built ahead under the scripted
    mode are discarded and the second attempt builds its wrapper in its own ranks, and passes."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(spares_prepared, "roomy", lambda world_size: True)
    report = validate_on_cpu(
        helper_model.model_factory, helper_model.sample_batch(), world_size=2, timeout_sec=120, max_fix_attempts=2
    )
    assert [a.passed for a in report.attempts] == [False, True], report.next_action
    assert report.attempts[1].spec.distribution.torchscript == "eager"
    assert "rank_factory" in report.attempts[1].timings and "factory_ahead" not in report.attempts[1].timings
    assert spares.pool().report()["devices"] == {}, "idle spares outlived the validation"


def test_no_ranks_are_built_ahead_when_no_attempt_can_follow(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """Without auto-fix no attempt follows the first: nothing is built beside it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setattr(spares_prepared, "roomy", lambda world_size: True)
    pool = spares.pool()
    before = _claimed(pool)
    report = _unaware(auto_fix=False)
    assert len(report.attempts) == 1 and not report.ok
    assert _claimed(pool) - before == 1 + 2, pool.counts
