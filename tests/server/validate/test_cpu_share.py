"""The caller's share of the cores during a validation (`runtime/cpu_share.py`): its torch threads are
bounded while the ranks and the reference child run beside it, and its own number is put back after."""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch

from distcheck import validate_on_cpu
from distcheck.runtime.cpu_share import share, threads_at_most
from examples import pair_potential


def test_share_divides_the_cores_and_never_gives_none(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert [share(n) for n in (1, 2, 4, 5, 16, 40)] == [16, 8, 4, 3, 1, 1]
    assert share(0) == 16
    monkeypatch.setattr(os, "cpu_count", lambda: None)
    assert share(4) == 1


def test_threads_at_most_lowers_and_puts_back_even_on_error() -> None:
    before = torch.get_num_threads()
    torch.set_num_threads(4)
    try:
        with threads_at_most(2):
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 4
        with pytest.raises(RuntimeError), threads_at_most(1):
            assert torch.get_num_threads() == 1
            raise RuntimeError("boom")
        assert torch.get_num_threads() == 4
        with threads_at_most(8):  # never more than the caller asked for
            assert torch.get_num_threads() == 4
    finally:
        torch.set_num_threads(before)


@pytest.mark.procs
def test_the_caller_uses_its_share_during_a_validation_and_gets_its_threads_back(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from distcheck.validate import executor

    asked: list[int] = []

    def share_of(processes: int) -> int:  # as on a 16-core machine, without telling the pool so
        asked.append(processes)
        return 16 // processes

    monkeypatch.setattr(executor, "share", share_of)
    before = torch.get_num_threads()
    torch.set_num_threads(8)
    seen: dict[str, int] = {}

    def progress(event: str, info: Any) -> None:
        seen.setdefault(event, torch.get_num_threads())

    try:
        report = validate_on_cpu(
            pair_potential.model_factory, pair_potential.sample_batch(), world_size=2, progress=progress
        )
        after = torch.get_num_threads()
    finally:
        torch.set_num_threads(before)
    assert report.ok, report.next_action
    assert asked == [2 + 2]
    assert seen["reference_started"] == seen["attempt_finished"] == 4
    assert after == 8


@pytest.mark.procs
@pytest.mark.parametrize("ranks_beside", [0, 2])
def test_the_reference_forward_takes_its_share_only_while_ranks_run_beside_it(ranks_beside: int) -> None:
    """With the first attempt's ranks running at the same time, the reference child's forward uses
    `share(1 + ranks)` threads; alone, the child's own number (one per core)."""
    from distcheck.runtime.factory import resolve_factory
    from distcheck.validate.reference import run_reference

    with run_reference(
        resolve_factory(pair_potential.model_factory),
        pair_potential.sample_batch(),
        device="cpu",
        helper_packages=[],
        helper_sample_every=8,
        layer_diagnostic=False,
        timeout_sec=120,
        ranks_beside=ranks_beside,
    ) as run:
        threads = run.result["threads"]
    assert threads == (share(1 + ranks_beside) if ranks_beside else _pool_default_threads())


def _threads(queue: Any) -> None:
    queue.put(torch.get_num_threads())


def _pool_default_threads() -> int:
    """How many intra-op threads a process of the pool starts with (one per core unless the
    environment says otherwise)."""
    from distcheck.processes.forkserver import process_context

    ctx = process_context()
    queue = ctx.SimpleQueue()
    proc = ctx.Process(target=_threads, args=(queue,))
    proc.start()
    try:
        return int(queue.get())
    finally:
        proc.join(60)
