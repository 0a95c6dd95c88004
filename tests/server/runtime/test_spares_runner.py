"""The editor's runner keeps spares warm between validations: the second validation's processes are
spares that were warm before it was asked for, and the pool holds only what it wanted afterwards."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from distcheck.jobs import runner
from distcheck.jobs.target import Target
from distcheck.processes import spares

ROOT = Path(__file__).resolve().parents[3]
FACTORY = f"{ROOT / 'examples' / 'pair_potential.py'}:model_factory"


def _params() -> dict[str, Any]:
    target = Target(
        name=None,
        factory=FACTORY,
        root=str(ROOT),
        options={"world_size": 2, "device": "cpu", "auto_fix": False, "layer_diagnostic": False, "timeout_sec": 60},
    )
    return {"target": target.to_wire(), "spec": None}


def _validate_as_the_runner_does(params: dict[str, Any]) -> Any:
    runner.keep_spares_warm(params)
    report, _ = runner.validate(params, lambda e, i: None)
    runner.keep_spares_warm(params, report)
    return report


def _wait_warm(n: int, timeout_s: float = 60.0) -> dict[str, Any]:
    import time

    deadline = time.monotonic() + timeout_s
    while True:
        held = spares.report()
        if held["devices"].get("cpu", {}).get("warm", 0) >= n or time.monotonic() > deadline:
            return held
        time.sleep(0.2)


@pytest.mark.procs
@pytest.mark.timeout(240)
def test_a_second_validation_through_the_runner_runs_in_warm_spares(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DISTCHECK_SPARES_KEEP_S", "120")
    monkeypatch.delenv("DISTCHECK_SPARES", raising=False)
    pool = spares.pool()
    try:
        params = _params()
        first = _validate_as_the_runner_does(params)
        assert first.verdict == "passed", first.next_action
        held = _wait_warm(3)
        assert held["keep_s"] == 120.0, held
        assert held["devices"]["cpu"]["warm"] >= 3, f"no warm spares kept for the next validation: {held}"
        before = dict(pool.counts)
        second = _validate_as_the_runner_does(params)
        assert second.verdict == "passed", second.next_action
        warm = pool.counts["claimed_warm"] - before["claimed_warm"]
        forked = pool.counts["started_on_claim"] - before["started_on_claim"]
        assert warm >= 3 and forked == 0, f"the second validation did not reuse warm spares: {pool.counts}"
        assert sum(d["idle"] for d in spares.report()["devices"].values()) <= pool.max_spares
    finally:
        pool.keep_s = None
        pool.trim()


def test_the_runner_turns_keep_warm_off_with_spares(monkeypatch: pytest.MonkeyPatch) -> None:
    """DISTCHECK_SPARES=0: the runner asks the pool for nothing (every process forked as before)."""
    monkeypatch.setenv("DISTCHECK_SPARES", "0")
    pool = spares.pool()
    keep, wanted = pool.keep_s, pool.report()["wanted"]
    runner.keep_spares_warm(_params())
    assert pool.keep_s == keep and pool.report()["wanted"] == wanted
