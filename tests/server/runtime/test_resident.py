"""Resident ranks: a validation's runs served by the ranks of its last run that ended well, each run
still pristine (the user's module imported afresh, a new wrapper, the global state put back), and a
run that fails, hangs or is of another factory stopping them (the next one starts new ranks).

The folder's fixture checks that no process is left after each test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from conftest import HERE
from distcheck import DistributedError, RankTimeout, run_distributed
from distcheck.processes.rank_source import ValidationRanks
from distcheck.processes.resident import ResidentRanks
from distcheck.runtime import load_object

pytestmark = pytest.mark.procs

SPARES = f"{HERE}/spare_models.py"
MODELS = f"{HERE}/resident_models.py"
SPEC = {"format": "distcheck-spec", "version": 1}


@pytest.fixture
def kept() -> Iterator[ResidentRanks]:
    with ResidentRanks() as ranks:
        yield ranks


def _batch() -> object:
    return load_object(f"{MODELS}:sample_batch")()


def _pids(ranks: ResidentRanks) -> list[int]:
    return [p.pid for p in ranks.procs]


def test_later_runs_reuse_the_ranks_and_import_the_user_module_afresh(kept: ResidentRanks) -> None:
    """Three runs on the same two processes: in each, the model file was executed once more (imported
    afresh), its module-level state holds only that run's forward, and the outputs are a fresh run's."""
    fresh = run_distributed(f"{SPARES}:model_factory", _batch(), SPEC, world_size=2, timeout_sec=60)
    pids = None
    for n in range(1, 4):
        run = run_distributed(
            f"{SPARES}:model_factory",
            _batch(),
            SPEC,
            world_size=2,
            timeout_sec=60,
            ranks=ValidationRanks(resident=kept),
        )
        facts = [out["facts"].tolist() for out in run.rank_outputs]
        assert [int(f[0]) for f in facts] == [n, n], "the model's module was not imported afresh for this run"
        assert [int(f[1]) for f in facts] == [1, 1], "module-level state of an earlier run was carried over"
        assert [f[3] for f in facts] == [0.0, 1.0]
        pids = pids or _pids(kept)
        assert [int(f[2]) for f in facts] == pids == _pids(kept), "the run did not use the kept ranks"
        assert torch.equal(run.outputs["energy"], fresh.outputs["energy"])
        if n > 1:
            assert all(rec.timings["rendezvous"] == 0.0 for rec in run.records), "a kept rank rendezvoused again"


def test_global_state_a_run_changed_is_put_back_before_the_next(kept: ResidentRanks) -> None:
    first = run_distributed(
        f"{MODELS}:state_factory", _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(resident=kept)
    )
    second = run_distributed(
        f"{MODELS}:state_factory", _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(resident=kept)
    )
    assert _pids(kept) and all(p.exitcode is None for p in kept.procs)
    for a, b in zip(first.rank_outputs, second.rank_outputs):
        # default dtype float32 again, the same draw from the generator, grad mode as it was, no leaked
        # environment variable, import path entry or working directory
        assert a["facts"].tolist() == b["facts"].tolist()
        assert a["facts"][0] == 0.0 and a["facts"][3:].tolist() == [0.0, 0.0, 0.0]


def test_a_run_of_another_factory_or_environment_starts_new_ranks(kept: ResidentRanks) -> None:
    run_distributed(
        f"{MODELS}:state_factory", _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(resident=kept)
    )
    first = _pids(kept)
    run = run_distributed(
        f"{MODELS}:flagged_factory", _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(resident=kept)
    )
    assert not set(_pids(kept)) & set(first)
    assert [int(o["pid"]) for o in run.rank_outputs] == _pids(kept)
    second = _pids(kept)
    run_distributed(
        f"{MODELS}:flagged_factory",
        _batch(),
        SPEC,
        world_size=2,
        timeout_sec=60,
        env={"X": "1"},
        ranks=ValidationRanks(resident=kept),
    )
    assert not set(_pids(kept)) & set(second)


@pytest.mark.parametrize(("what", "error"), [("raise", DistributedError), ("hang", RankTimeout)])
def test_a_failed_run_stops_the_kept_ranks_and_the_next_run_starts_new_ones(
    kept: ResidentRanks, tmp_path: Path, what: str, error: type[Exception]
) -> None:
    flag = tmp_path / "flag"
    env = {"DISTCHECK_TEST_FLAG": str(flag)}

    def run(timeout: float = 60) -> object:
        return run_distributed(
            f"{MODELS}:flagged_factory",
            _batch(),
            SPEC,
            world_size=2,
            timeout_sec=timeout,
            env=env,
            ranks=ValidationRanks(resident=kept),
        )

    run()
    old = list(kept.procs)
    flag.write_text(what)
    with pytest.raises(error) as info:
        run(timeout=5)
    if what == "raise":
        assert info.value.failures[0].type == "RuntimeError" and "flagged" in info.value.failures[0].message
    assert kept.procs == [] and kept.run_dir is None
    assert all(p.exitcode is not None for p in old), "the failed run's ranks are still alive"
    flag.write_text("")
    again = run()
    assert not {int(o["pid"]) for o in again.rank_outputs} & {p.pid for p in old}  # type: ignore[attr-defined]


def test_a_run_that_changed_what_cannot_be_put_back_retires_its_ranks(kept: ResidentRanks) -> None:
    """A model that sets torch's inter-op thread count (once per process, never undone) leaves ranks a
    next run must not inherit: they hand over their result and exit, and the next run starts new ones."""
    first = run_distributed(
        f"{MODELS}:interop_factory", _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(resident=kept)
    )
    changed = [int(out["facts"][0]) for out in first.rank_outputs]
    assert changed == [1, 1], f"the model could not set the inter-op threads in a fresh rank: {changed}"
    pids = {int(out["facts"][1]) for out in first.rank_outputs}
    second = run_distributed(
        f"{MODELS}:interop_factory", _batch(), SPEC, world_size=2, timeout_sec=60, ranks=ValidationRanks(resident=kept)
    )
    assert not {int(out["facts"][1]) for out in second.rank_outputs} & pids, "the ranks served another run"
