"""Spares: warm processes forked ahead, one job each, the user's module imported fresh in every rank,
ranks built ahead used only for the run they were built for, the pool bounded and emptied.

Every test leaves the pool empty (the folder's fixture checks that no process is left)."""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import torch

from conftest import HERE
from distcheck import DistributedError, run_distributed
from distcheck.processes import spares
from distcheck.processes.rank_source import ValidationRanks
from distcheck.processes.spares import child, warmup
from distcheck.processes.spares.prepared import prepare_ranks
from distcheck.runtime import load_object, resolve_factory

pytestmark = pytest.mark.procs

MODELS = f"{HERE}/spare_models.py"
SPEC = {"format": "distcheck-spec", "version": 1}
EAGER = {"format": "distcheck-spec", "version": 1, "distribution": {"torchscript": "eager"}}


@pytest.fixture(autouse=True)
def empty_pool() -> Iterator[spares.SparePool]:
    """The pool, emptied after the test (and its settings restored)."""
    pool = spares.pool()
    saved = (pool.max_spares, pool.idle_timeout_s, pool.keep_s)
    yield pool
    pool.keep_s = None
    pool.trim()
    pool.max_spares, pool.idle_timeout_s, pool.keep_s = saved


def _batch() -> object:
    return load_object(f"{MODELS}:sample_batch")()


def _wait_warm(pool: spares.SparePool, device: str, n: int, timeout: float = 60.0) -> dict[str, object]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        rep = pool.report()
        held = rep["devices"].get(device, {})  # type: ignore[union-attr]
        if held.get("warm", 0) >= n:
            return rep
        time.sleep(0.05)
    pytest.fail(f"{n} warm spares not ready within {timeout} s: {pool.report()}")


def _facts(run: object) -> list[list[float]]:
    return [out["facts"].tolist() for out in run.rank_outputs]  # type: ignore[attr-defined]


def test_every_rank_imports_the_user_module_fresh_and_no_spare_runs_twice(empty_pool: spares.SparePool) -> None:
    """Three runs from a pool kept warm: in every rank the module was imported once, inside that rank
    (never preloaded into the spare), its module-level state holds one forward, and no process ran
    two jobs (each run's ranks have pids no other run had)."""
    empty_pool.want({"cpu": 2})
    seen: set[int] = set()
    for _ in range(3):
        _wait_warm(empty_pool, "cpu", 2)
        before = dict(empty_pool.counts)
        run = run_distributed(f"{MODELS}:model_factory", _batch(), SPEC, world_size=2, timeout_sec=60)
        assert empty_pool.counts["claimed_warm"] - before["claimed_warm"] == 2, "the ranks were not warm spares"
        facts = _facts(run)
        for rank, (imports, forwards, _pid, imported_in) in enumerate(facts):
            assert imports == 1.0, f"rank {rank} executed the module {imports:g} times"
            assert forwards == 1.0, f"rank {rank} carried module state of an earlier job ({forwards:g} forwards)"
            assert imported_in == float(rank), f"rank {rank}'s module was imported before its job ({imported_in:g})"
        pids = {int(f[2]) for f in facts}
        assert len(pids) == 2 and not pids & seen, f"a process ran two jobs: {pids} and earlier {seen}"
        seen |= pids


def test_ranks_built_ahead_are_the_run_s_ranks_and_match_a_fresh_run() -> None:
    factory = resolve_factory(f"{MODELS}:model_factory")
    fresh = run_distributed(factory, _batch(), SPEC, world_size=2, timeout_sec=60)
    prepared = prepare_ranks(factory, SPEC, 2, ["cpu", "cpu"])
    assert prepared is not None
    pids = [s.pid for s in prepared.spares]
    ahead = run_distributed(
        factory, _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(prepared=prepared)
    )
    facts = _facts(ahead)
    assert [int(f[2]) for f in facts] == pids, "the run did not use the ranks built for it"
    assert [f[3] for f in facts] == [0.0, 1.0], "the wrapper was not built as its rank"
    assert torch.equal(ahead.outputs["energy"], fresh.outputs["energy"])
    assert all(s.exitcode is not None for s in prepared.spares)


@pytest.mark.parametrize(
    ("spec", "world_size", "factory"),
    [(EAGER, 2, "model_factory"), (SPEC, 2, "failing_factory")],
    ids=["other-torchscript-mode", "other-factory"],
)
def test_ranks_built_for_another_run_are_discarded(spec: dict[str, object], world_size: int, factory: str) -> None:
    """Built for the scripted mode of `model_factory`: a run in eager mode, or of another factory, does
    not use them (its wrapper is built afresh under its own mode), and they are gone afterwards."""
    prepared = prepare_ranks(resolve_factory(f"{MODELS}:model_factory"), SPEC, 2, ["cpu", "cpu"])
    assert prepared is not None
    pids = [s.pid for s in prepared.spares]
    try:
        run = run_distributed(
            f"{MODELS}:{factory}",
            _batch(),
            spec,
            world_size=world_size,
            timeout_sec=60,
            ranks=ValidationRanks(prepared=prepared),
        )
    except DistributedError as err:
        assert factory == "failing_factory" and "cannot load weights" in str(err)
    else:
        assert not {int(f[2]) for f in _facts(run)} & set(pids)
    assert all(s.exitcode is not None for s in prepared.spares), "discarded spares still alive"


def test_a_factory_failing_while_built_ahead_is_reported_as_in_a_fresh_run() -> None:
    factory = resolve_factory(f"{MODELS}:failing_factory")
    with pytest.raises(DistributedError) as fresh:
        run_distributed(factory, _batch(), SPEC, world_size=2, timeout_sec=60)
    prepared = prepare_ranks(factory, SPEC, 2, ["cpu", "cpu"])
    with pytest.raises(DistributedError) as ahead:
        run_distributed(factory, _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(prepared=prepared))
    for info in (fresh, ahead):
        first = info.value.failures[0]
        assert first.type == "ValueError" and first.phase == "factory", first
        assert first.frames[-1].function == "failing_factory", first.frames

    def failures(err: DistributedError) -> set[tuple[str, str, str]]:
        return {(f.type, f.message, f.phase) for f in err.failures}

    assert failures(fresh.value) == failures(ahead.value)


def test_pool_is_bounded_reports_memory_and_idle_spares_exit(empty_pool: spares.SparePool) -> None:
    started = empty_pool.counts["started"]
    empty_pool.max_spares = 2
    empty_pool.idle_timeout_s = 2.0  # what each spare is told: it exits on its own after that long idle
    empty_pool.want({"cpu": 4}, hold_s=120.0)
    rep = _wait_warm(empty_pool, "cpu", 2)
    time.sleep(0.5)  # the keeper would have started more by now if it were not bounded
    held = empty_pool.report()["devices"]["cpu"]
    assert held["idle"] == 2 and empty_pool.counts["started"] - started <= 2, (held, empty_pool.counts)
    assert held["memory_bytes"] > 0 and held["gpu_bytes"] == 0 and held["gpu_bytes_source"] == "none"
    assert rep["max_spares"] == 2
    empty_pool.lower({"cpu": 0})  # nothing wanted any more: no refill after they exit
    deadline = time.monotonic() + 30
    while empty_pool.report()["devices"].get("cpu", {}).get("idle", 0) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert empty_pool.report()["devices"] == {}, "idle spares did not exit after their idle timeout"


def test_settle_drops_idle_spares_unless_kept_warm(empty_pool: spares.SparePool) -> None:
    empty_pool.want({"cpu": 1})
    _wait_warm(empty_pool, "cpu", 1)
    empty_pool.keep_s = 60.0
    empty_pool.settle()
    assert empty_pool.report()["devices"]["cpu"]["idle"] == 1
    empty_pool.keep_s = None
    empty_pool.settle()
    assert empty_pool.report()["devices"] == {}


def test_a_spare_whose_job_came_while_it_warmed_skips_the_rest_of_the_warm_up() -> None:
    """The autograd pass, the named packages and the memory reading happen only while no job waits; a waiting job makes
    the spare skip them (its model loads what it needs itself), and the report says what was skipped."""
    import sys

    sys.modules.pop("colorsys", None)
    idle = child._warm({"device": "cpu", "packages": ["colorsys"]}, lambda: False)
    assert "autograd" in idle["phases"] and idle["packages"] == ["colorsys"] and idle["skipped"] == []
    sys.modules.pop("colorsys", None)
    claimed = child._warm({"device": "cpu", "packages": ["colorsys"]}, lambda: True)
    assert "autograd" not in claimed["phases"] and claimed["packages"] == []
    families = [name for name, _ in warmup.FAMILIES]
    assert claimed["skipped"] == ["autograd", "colorsys", *families, "memory_query"] and "colorsys" not in sys.modules
    assert idle["failed_kernels"] == [] and "kernels" in idle["phases"] and "kernels" not in claimed["phases"]
