"""GPU validation (run with `pytest -m gpu` on a machine with CUDA; skipped elsewhere)."""

from __future__ import annotations

import pytest
import torch

from distcheck import SetupError, trace_and_validate
from examples import helper_model, mpnn, pair_potential

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]


@pytest.mark.parametrize("world_size", [2, 4, 8])
@pytest.mark.parametrize("module", [pair_potential, mpnn])
def test_examples_pass_on_one_gpu(module: object, world_size: int) -> None:
    report = trace_and_validate(
        module.model_factory,
        module.sample_batch(),
        world_size=world_size,  # type: ignore[attr-defined]
        device="cuda:0",
    )
    assert report.meta.backend == "gloo"
    # Every output must match; "inconclusive" is accepted only for a degenerate partition (a rank without
    # remote atoms at this world size), where the pass proves less.
    best = report.best_attempt
    assert best is not None and best.passed, report.next_action
    assert report.verdict == "passed" or best.degenerate, report.next_action


def test_helper_found_on_gpu() -> None:
    report = trace_and_validate(
        helper_model.model_factory,
        helper_model.sample_batch(),
        device="cuda:0",
        watched_helper_packages=["examples.thirdparty.nbops"],
    )
    assert report.ok and report.attempts[-1].rule == "declare_helper_adapter"


def test_nccl_on_one_gpu_fails_up_front() -> None:
    with pytest.raises(SetupError, match="Duplicate GPU"):
        trace_and_validate(pair_potential.model_factory, pair_potential.sample_batch(), device="cuda:0", backend="nccl")


@pytest.mark.parametrize("resident", ["1", "0"])
def test_later_attempts_on_resident_ranks_on_the_gpu(monkeypatch: pytest.MonkeyPatch, resident: str) -> None:
    """The halo-unaware MPNN under its wrong spec on cuda:0: the second attempt runs on the first
    attempt's ranks (no rendezvous) with their CUDA context, or in new ranks, and passes either way with
    the same numbers."""
    from examples import unaware_model

    monkeypatch.setenv("DISTCHECK_RESIDENT_RANKS", resident)
    report = trace_and_validate(
        unaware_model.model_factory,
        unaware_model.sample_batch(),
        device="cuda:0",
        spec=unaware_model.WRONG_SPEC,
        max_fix_attempts=2,
    )
    assert [a.passed for a in report.attempts] == [False, True], report.next_action
    rendezvous = report.attempts[1].timings["rank_rendezvous"]
    assert (rendezvous == 0.0) == (resident == "1"), report.attempts[1].timings


def test_a_gpu_validation_returns_before_its_processes_are_reaped_and_none_is_left(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The ranks and the reference child are killed when the validation returns and reaped in the
    background (a CUDA process takes 0.1-0.3 s to end); once reaped, none of them is left."""
    import psutil

    from distcheck.processes import reaper

    killed: list[int] = []
    kill_now = reaper.kill_now

    def recording(procs: list[object]) -> None:
        killed.extend(int(p.pid) for p in procs if getattr(p, "pid", None))  # type: ignore[attr-defined]
        kill_now(procs)

    monkeypatch.setattr(reaper, "kill_now", recording)
    report = trace_and_validate(mpnn.model_factory, mpnn.sample_batch(), world_size=2, device="cuda:0")
    assert report.ok, report.next_action
    assert len(killed) >= 3, f"the ranks and the reference child were not retired: {killed}"
    assert reaper.settle(30)
    alive = []
    for pid in killed:
        try:
            if psutil.Process(pid).status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            pass
    assert not alive, f"processes of the validation still running once reaped: {alive}"
