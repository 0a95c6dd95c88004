"""A validation whose reference and ranks run in spares (the first attempt's ranks built while the
reference runs, a later attempt's on the first attempt's ranks kept resident, or in fresh spares)
reports exactly what one with every process forked as before reports, and learns the packages its
model imported."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from distcheck import validate_on_cpu
from distcheck.processes import spares
from distcheck.processes.spares import learned
from examples import helper_model, unaware_model

pytestmark = pytest.mark.procs


def _validate() -> Any:
    return validate_on_cpu(
        helper_model.model_factory, helper_model.sample_batch(), world_size=2, timeout_sec=120, max_fix_attempts=2
    )


def test_spares_give_the_same_report_as_fresh_processes(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, stable_report: Callable[[Any], dict[str, Any]]
) -> None:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DISTCHECK_RESIDENT_RANKS", "0")  # the second attempt in fresh spares
    pool = spares.pool()
    monkeypatch.setenv("DISTCHECK_SPARES", "0")
    before = dict(pool.counts)
    fresh = stable_report(_validate())
    assert pool.counts == before, "spares were used although turned off"
    monkeypatch.delenv("DISTCHECK_SPARES")
    report = _validate()
    warm = stable_report(report)
    kinds = ("claimed_warm", "claimed_warming", "started_on_claim")
    used = sum(pool.counts[k] - before[k] for k in kinds)
    # the reference, both attempts' ranks, and the ranks of each diagnostic run (the op trace of a failing attempt)
    diagnostic = sum(1 for a in report.attempts if "diagnostic_run" in a.timings)
    assert used == 5 + 2 * diagnostic, f"the reference and the attempts' ranks did not all run in spares: {pool.counts}"
    assert len(warm["attempts"]) == 2 and warm["attempts"][1]["passed"], warm["attempts"]
    assert warm == fresh
    assert pool.report()["devices"] == {}, "idle spares outlived the validation"
    packages = learned.packages_for(helper_model.model_factory.__module__ + ":model_factory")
    assert "distcheck" not in packages and "examples" not in packages and "torch" not in packages, packages


def _unaware(**options: Any) -> Any:
    """The halo-unaware MPNN under its wrong spec: the first attempt fails, a `local` halo passes."""
    return validate_on_cpu(
        unaware_model.model_factory,
        unaware_model.sample_batch(),
        world_size=2,
        timeout_sec=120,
        spec=unaware_model.WRONG_SPEC,
        **options,
    )


@pytest.mark.parametrize("case", ["unaware", "helper"])
def test_later_attempts_run_on_the_ranks_of_the_first_and_report_what_fresh_ranks_do(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, case: str, stable_report: Callable[[Any], dict[str, Any]]
) -> None:
    """The second attempt (and the control run) are served by the first attempt's ranks, without a
    rendezvous, whether the fix keeps the TorchScript mode (a `local` halo) or runs it eagerly (the
    helper model): the report is the one every run in new processes gives, and no rank outlives it."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    pool = spares.pool()

    def run() -> Any:
        if case == "unaware":
            return _unaware(max_fix_attempts=2)
        return validate_on_cpu(
            helper_model.model_factory, helper_model.sample_batch(), world_size=2, timeout_sec=120, max_fix_attempts=2
        )

    monkeypatch.setenv("DISTCHECK_RESIDENT_RANKS", "0")
    fresh = run()
    assert fresh.attempts[1].timings["rank_rendezvous"] > 0.0
    monkeypatch.delenv("DISTCHECK_RESIDENT_RANKS")
    before = sum(pool.counts[k] for k in ("claimed_warm", "claimed_warming", "started_on_claim"))
    kept = run()
    claimed = sum(pool.counts[k] for k in ("claimed_warm", "claimed_warming", "started_on_claim")) - before
    assert [a.passed for a in kept.attempts] == [False, True], kept.next_action
    assert kept.attempts[1].timings["rank_rendezvous"] == 0.0, "the second attempt started new ranks"
    if case == "helper":
        assert kept.attempts[1].spec.distribution.torchscript == "eager"
    assert claimed == 1 + 2, f"only the reference and the first attempt take spares: {pool.counts}"

    assert stable_report(kept) == stable_report(fresh)
    assert pool.report()["devices"] == {}, "idle spares outlived the validation"


@pytest.mark.parametrize(("resident", "wanted"), [("1", 0), ("0", 2)])
def test_spares_are_wanted_for_later_attempts_only_where_no_ranks_serve_them(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Any, resident: str, wanted: int
) -> None:
    """Once the reference runs, the pool refills spares for a later attempt's ranks only when those
    ranks will be new processes; the first attempt's resident ranks need none."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    monkeypatch.setenv("DISTCHECK_RESIDENT_RANKS", resident)
    seen: list[Any] = []

    def progress(event: str, info: Any) -> None:
        if event == "attempt_started":
            seen.append(spares.pool().report()["wanted"].get("cpu"))

    _unaware(max_fix_attempts=2, progress=progress)
    assert seen and seen[0] == wanted, seen
