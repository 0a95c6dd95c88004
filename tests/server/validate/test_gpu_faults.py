"""GPU failure modes (run with `pytest -m gpu` on a machine with CUDA; skipped elsewhere).

Each test injects one failure on one rank of a two-rank run on `cuda:0` (ranks share the GPU, gloo):
CUDA out of memory, NaN produced by a GPU kernel, a rank that skips a collective, a CUDA error
(device-side assert). After every test no process of ours is left and the GPU's used memory, read
in a fresh interpreter, is back to what it was before the test.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import time
from collections.abc import Iterator
from typing import Any

import pytest
import torch

from distcheck import DistributedError, RankTimeout, run_distributed, trace_and_validate
from distcheck.runtime import load_object
from distcheck.validate.errors import translate

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
]

RUNTIME_TESTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "runtime")
MODELS = os.path.join(RUNTIME_TESTS, "gpu_fault_models.py")
SPEC = {"format": "distcheck-spec", "version": 1}
MIB = 1024**2
MEMORY_TOLERANCE = 512 * MIB
"""Allowed growth of the GPU's used memory over a test (the driver frees a killed process's memory
asynchronously; the fixture polls for a while before it compares)."""


def _load_leftover_processes() -> Any:
    """`leftover_processes` from tests/server/runtime/conftest.py, loaded under a private name so
    pytest does not see a second conftest (its autouse fixture stays in that folder)."""
    spec = importlib.util.spec_from_file_location("_distcheck_runtime_conftest", f"{RUNTIME_TESTS}/conftest.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.leftover_processes


leftover_processes = _load_leftover_processes()


def gpu_used_bytes() -> int:
    """Used memory of GPU 0 (total - free) as a fresh interpreter sees it (its own context included)."""
    code = "import torch; free, total = torch.cuda.mem_get_info(0); print(total - free)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    return int(out.stdout.split()[-1])


@pytest.fixture(autouse=True)
def gpu_and_processes_clean() -> Iterator[None]:
    """No rank left behind (killed ones are given a moment to end) and the GPU's memory back to its
    starting level after each test."""
    before = gpu_used_bytes()
    yield
    deadline = time.monotonic() + 20.0  # killed CUDA processes end in the background (`processes/reaper.py`)
    leftovers = leftover_processes()
    while leftovers and time.monotonic() < deadline:
        time.sleep(0.2)
        leftovers = leftover_processes()
    assert not leftovers, f"processes left behind: {leftovers}"
    after = gpu_used_bytes()
    while after - before > MEMORY_TOLERANCE and time.monotonic() < deadline:
        time.sleep(1.0)
        after = gpu_used_bytes()
    assert after - before <= MEMORY_TOLERANCE, (
        f"GPU memory not released: {before / MIB:.0f} MiB used before the test, {after / MIB:.0f} MiB after"
    )


def _sample() -> Any:
    return load_object(f"{MODELS}:sample")()


def _validate(factory: str, **options: Any) -> Any:
    return trace_and_validate(
        f"{MODELS}:{factory}", _sample(), world_size=2, device="cuda:0", auto_fix=False, **options
    )


def test_cuda_oom_in_one_rank_is_reported_with_memory_per_rank() -> None:
    t0 = time.perf_counter()
    with pytest.raises(DistributedError) as info:
        run_distributed(f"{MODELS}:factory_oom", _sample(), SPEC, world_size=2, device="cuda:0", timeout_sec=120)
    elapsed = time.perf_counter() - t0
    first = info.value.primary
    assert first is not None and first.rank == 1 and first.phase == "forward"
    assert first.type == "OutOfMemoryError", first.message
    assert first.peak_memory_bytes is not None and first.peak_memory_bytes >= 64 * MIB
    assert "The other ranks were stopped" in str(info.value)
    assert elapsed < 60, f"an out-of-memory rank took {elapsed:.1f} s to report"

    report = _validate("factory_oom")
    assert not report.ok
    err = report.attempts[-1].error
    assert err is not None and err.type == "OutOfMemoryError" and err.rank == 1
    assert "Out of GPU memory during the forward on rank 1" in err.hint, err.hint
    assert re.search(r"Peak memory per rank: (rank \d \d+\.\d\d GiB, )*rank 1 \d+\.\d\d GiB", err.hint), err.hint


def test_nan_from_a_gpu_kernel_names_rank_and_output() -> None:
    report = _validate("factory_nan")
    assert not report.ok
    err = report.attempts[0].error
    assert err is not None and err.type == "NonFiniteOutput", err
    assert err.rank == 1 and "atom_energy" in err.message
    assert "rank 1 produced NaN in output atom_energy" in err.hint


def test_rank_skipping_a_collective_times_out_and_the_group_is_killed() -> None:
    t0 = time.perf_counter()
    with pytest.raises(RankTimeout) as info:
        run_distributed(
            f"{MODELS}:factory_skip_collective", _sample(), SPEC, world_size=2, device="cuda:0", timeout_sec=15.0
        )
    elapsed = time.perf_counter() - t0
    assert elapsed < 15.0 + 15.0, f"timeout took {elapsed:.1f} s"
    assert "timed out after 15 s" in str(info.value) and "rank 0 in 'forward'" in str(info.value)
    hint = translate(info.value)
    assert "timed out" in hint and "collective" in hint, hint


def test_cuda_error_in_one_rank_is_reported_with_rank_and_hint() -> None:
    report = _validate("factory_cuda_error", timeout_sec=60.0)
    assert not report.ok
    err = report.attempts[-1].error
    assert err is not None and err.rank == 1 and err.phase == "forward", err
    assert "CUDA error" in err.message or "device-side assert" in err.message, err.message
    assert "rank 1" in err.hint and err.hint, err.hint
    assert report.next_action
