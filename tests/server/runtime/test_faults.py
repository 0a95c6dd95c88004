"""Bad input never hangs: each failure is reported quickly, clearly, and leaves no process behind."""

from __future__ import annotations

import time

import pytest

from conftest import HERE, leftover_processes
from distcheck import DistributedError, RankTimeout, SetupError, run_distributed
from distcheck.option_check import OptionError
from distcheck.runtime import FactoryError, load_object

MODELS = f"{HERE}/fault_models.py"
SPEC = {"format": "distcheck-spec", "version": 1}


def _batch() -> object:
    return load_object(f"{MODELS}:sample")()


def _run(factory: str, timeout: float = 120.0) -> tuple[BaseException, float]:
    t0 = time.perf_counter()
    with pytest.raises(DistributedError) as info:
        run_distributed(f"{MODELS}:{factory}", _batch(), SPEC, world_size=2, timeout_sec=timeout)
    return info.value, time.perf_counter() - t0


@pytest.mark.procs
def test_factory_that_raises_is_reported_with_its_traceback() -> None:
    err, elapsed = _run("factory_raises")
    assert "cannot load weights" in str(err) and "'factory'" in str(err)
    first = err.failures[0]  # type: ignore[attr-defined]
    assert first.type == "ValueError"
    assert first.frames[-1].file.endswith("fault_models.py") and first.frames[-1].function == "factory_raises"
    assert elapsed < 60


@pytest.mark.procs
def test_exception_in_forward_names_rank_and_phase() -> None:
    err, _ = _run("factory_raise_in_forward")
    assert "rank 1" in str(err) and "'forward'" in str(err) and "injected failure" in str(err)
    assert "other ranks were stopped" in str(err)


@pytest.mark.procs
@pytest.mark.parametrize("factory", ["factory_die", "factory_exit"])
def test_dead_rank_is_reported_without_waiting_for_the_timeout(factory: str) -> None:
    err, elapsed = _run(factory, timeout=120.0)
    first = err.failures[0]  # type: ignore[attr-defined]
    assert first.rank == 1 and first.phase == "forward"
    assert ("SIGKILL" in str(err)) if factory == "factory_die" else ("code 7" in str(err))
    assert elapsed < 30, f"a dead rank took {elapsed:.1f} s to report"


@pytest.mark.procs
@pytest.mark.parametrize("factory", ["factory_sleep", "factory_skip_collective", "factory_grandchild"])
def test_hanging_rank_is_killed_at_the_timeout(factory: str) -> None:
    t0 = time.perf_counter()
    with pytest.raises(RankTimeout) as info:
        run_distributed(f"{MODELS}:{factory}", _batch(), SPEC, world_size=2, timeout_sec=8.0)
    elapsed = time.perf_counter() - t0
    assert elapsed < 8.0 + 10, f"timeout took {elapsed:.1f} s"
    assert "timed out after 8 s" in str(info.value)
    assert not leftover_processes()


def test_lambda_and_closure_factories_are_refused_before_anything_starts() -> None:
    with pytest.raises(FactoryError, match="module scope"):
        run_distributed(lambda: None, _batch(), SPEC)

    def nested() -> None:
        return None

    with pytest.raises(FactoryError, match="module scope"):
        run_distributed(nested, _batch(), SPEC)
    assert not leftover_processes()


def test_setup_errors_are_raised_up_front() -> None:
    with pytest.raises(SetupError, match=r"NCCL|nccl"):
        run_distributed(f"{MODELS}:factory_die", _batch(), SPEC, backend="nccl")
    with pytest.raises(SetupError, match="one device per rank"):
        run_distributed(f"{MODELS}:factory_die", _batch(), SPEC, world_size=2, device=["cpu"])
    with pytest.raises(OptionError, match="world_size"):  # an option out of bounds, before anything starts
        run_distributed(f"{MODELS}:factory_die", _batch(), SPEC, world_size=0)


@pytest.mark.procs
def test_wrapper_contract_violations_are_explained() -> None:
    with pytest.raises(DistributedError, match="must return a mapping"):
        run_distributed(f"{MODELS}:factory_not_a_mapping", _batch(), SPEC, world_size=2)
    with pytest.raises(DistributedError, match="no `cutoff` attribute"):
        run_distributed(f"{MODELS}:factory_no_cutoff", _batch(), SPEC, world_size=2)


def test_bad_batch_is_refused_before_start() -> None:
    with pytest.raises(TypeError, match="positions"):
        run_distributed(f"{MODELS}:factory_die", object(), SPEC)
