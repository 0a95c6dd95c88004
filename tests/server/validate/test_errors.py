"""Worker-error translation: every pattern, fed with real exception text (real ranks where it is cheap)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import torch

from distcheck import DistributedError, RankTimeout, run_distributed
from distcheck.runtime.errors import Frame, RankFailure
from distcheck.runtime.model import WrapperError, check_outputs
from distcheck.validate.errors import nan_hint, phase_context, translate

SPEC = {"format": "distcheck-spec", "version": 1}
GIB = 1024**3

MODELS = '''
"""Wrappers with the bugs whose errors the translator explains (written by test_errors.py)."""

import torch
from torch import nn

from examples.structures import make_batch, periodic_slab_system

NUM_ATOMS = 108


def sample():
    return make_batch([periodic_slab_system((3, 3, 12), seed=3)])


class Detaching(nn.Module):
    """Forces by autograd, but the per-atom energies are detached: the graph is severed."""

    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch):
        pos = batch.positions.clone().requires_grad_(True)
        e_atom = (pos.detach() ** 2).sum(dim=1)
        energy = torch.zeros(batch.num_systems, dtype=pos.dtype).index_add(0, batch.batch, e_atom)
        forces = -torch.autograd.grad(energy.sum(), pos)[0]
        return {"energy": energy, "forces": forces}


class FixedCount(nn.Module):
    """Assumes the whole sample's atom count: breaks on a rank's [owned | halo] rows."""

    cutoff = 3.0
    num_interactions = 1

    def forward(self, batch):
        weights = torch.ones(NUM_ATOMS, dtype=batch.positions.dtype)
        e_atom = (batch.positions**2).sum(dim=1) * weights
        return {"energy": torch.zeros(batch.num_systems, dtype=e_atom.dtype).index_add(0, batch.batch, e_atom)}


def factory_detaching():
    return Detaching()


def factory_fixed_count():
    return FixedCount()
'''

MISSING_IMPORT = """
import distcheck_test_no_such_package  # noqa: F401


def factory():
    return None
"""

ROOT = Path(__file__).resolve().parents[3]
FAULTS = ROOT / "tests" / "server" / "runtime" / "fault_models.py"


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "buggy_models.py"
    path.write_text(textwrap.dedent(MODELS))
    return path


def run_failing(factory: str, sample: str, timeout: float = 60.0) -> DistributedError:
    from distcheck.runtime import load_object

    with pytest.raises(DistributedError) as info:
        run_distributed(factory, load_object(sample)(), SPEC, world_size=2, timeout_sec=timeout)
    return info.value


def failure(message: str, type: str = "RuntimeError", phase: str = "forward", rank: int = 1) -> dict[str, object]:
    return {"rank": rank, "type": type, "message": message, "phase": phase, "frames": [], "exitcode": 1}


def caught(fn: object) -> BaseException:
    try:
        fn()  # type: ignore[operator]
    except BaseException as exc:
        return exc
    raise AssertionError("expected an exception")


# -- severed autograd graph --------------------------------------------------------------------------
def assert_autograd_hint(text: str) -> None:
    assert "severed" in text
    assert "detach()" in text and ".data" in text and "custom op" in text
    assert "out = out.index_add_(...)" in text and "no_grad" in text
    assert "positions to energy differentiable" in text


def test_grad_fn_error_from_a_detached_tensor() -> None:
    pos = torch.randn(4, 3, requires_grad=True)
    exc = caught(lambda: torch.autograd.grad((pos.detach() ** 2).sum(), pos))
    assert "does not have a grad_fn" in str(exc)
    text = translate(failure(str(exc)))
    assert_autograd_hint(text)
    assert "during the forward on rank 1" in text


def test_does_not_require_grad() -> None:
    pos = torch.randn(4, 3, requires_grad=True)
    exc = caught(lambda: torch.autograd.grad((pos**2).sum(), pos.detach()))
    assert "does not require grad" in str(exc)
    assert_autograd_hint(translate(failure(str(exc))))


def test_differentiated_tensor_not_used_in_graph() -> None:
    pos = torch.randn(4, 3, requires_grad=True)
    other = torch.randn(4, 3, requires_grad=True)
    exc = caught(lambda: torch.autograd.grad((pos**2).sum(), [pos, other]))
    assert "appears to not have been used in the graph" in str(exc)
    assert_autograd_hint(translate(failure(str(exc))))


def test_dropped_inplace_result_under_no_grad() -> None:
    """The handler returns a corrected tensor; a wrapper that drops it keeps the no-grad original."""
    pos = torch.randn(4, 3, requires_grad=True)
    e_atom = (pos**2).sum(dim=1)
    with torch.no_grad():
        energy = torch.zeros(1, dtype=pos.dtype)
    _corrected = energy.clone().index_add_(0, torch.zeros(4, dtype=torch.long), e_atom)  # stands for the handler
    exc = caught(lambda: torch.autograd.grad(energy.sum(), pos))
    assert_autograd_hint(translate(failure(str(exc))))


@pytest.mark.procs
@pytest.mark.slow
def test_severed_graph_in_a_real_rank(models: Path) -> None:
    err = run_failing(f"{models}:factory_detaching", f"{models}:sample")
    first = err.failures[0]
    assert first.phase == "forward"
    text = translate(first)
    assert_autograd_hint(text)
    assert "during the forward on rank" in text
    assert translate(err) == text  # a DistributedError is read through its first failure


# -- memory ------------------------------------------------------------------------------------------
CUDA_OOM = (
    "CUDA out of memory. Tried to allocate 20.00 GiB. GPU 0 has a total capacity of 139.81 GiB of which "
    "3.12 GiB is free. Including non-PyTorch memory, this process has 136.68 GiB memory in use. Of the "
    "allocated memory 135.90 GiB is allocated by PyTorch, and 210.50 MiB is reserved by PyTorch but "
    "unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory "
    "Management  (https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
)


def test_cuda_out_of_memory_with_memory_per_rank() -> None:
    text = translate(
        failure(CUDA_OOM, type="OutOfMemoryError", rank=0),
        memory_by_rank={1: int(11.5 * GIB), 0: 12 * GIB},
    )
    assert "Out of GPU memory during the forward on rank 0 (tried to allocate 20.00 GiB)" in text
    assert "rank 0 12.00 GiB, rank 1 11.50 GiB" in text
    assert "smaller sample" in text and "fewer ranks per GPU" in text and "float32" in text


def test_host_out_of_memory_real_message() -> None:
    exc = caught(lambda: torch.empty(2**60, dtype=torch.uint8))
    text = translate(failure(str(exc), type=type(exc).__name__))
    assert text.startswith("Out of host memory during the forward on rank 1.")
    assert "smaller sample" in text and "float32" in text


@pytest.mark.procs
@pytest.mark.slow
def test_sigkill_is_the_oom_killer() -> None:
    err = run_failing(f"{FAULTS}:factory_die", f"{FAULTS}:sample")
    first = err.failures[0]
    assert first.type == "RankKilled" and first.exitcode == -9
    text = translate(first, memory_by_rank={0: 2 * GIB, 1: 3 * GIB})
    assert "SIGKILL during the forward on rank 1" in text and "out-of-memory killer" in text
    assert "rank 1 3.00 GiB" in text and "Use less memory" in text
    # No memory figures: still the same advice, and no "Peak memory" sentence.
    assert "Peak memory" not in translate(first)


def test_other_signals() -> None:
    segv = RankFailure(
        rank=0,
        type="RankKilled",
        message="rank 0 was killed by SIGSEGV during 'forward' (out of memory or a crash in native code?)",
        phase="forward",
        exitcode=-11,
    )
    assert "native code" in translate(segv) and "SIGSEGV" in translate(segv)
    term = RankFailure(rank=0, type="RankKilled", message="", phase="forward", exitcode=-15)
    assert "SIGTERM" in translate(term)


# -- NCCL --------------------------------------------------------------------------------------------
DUPLICATE_GPU = (
    "NCCL error in: /pytorch/torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:3356, invalid usage (run with "
    "NCCL_DEBUG=WARN for details), NCCL version 2.26.2\nncclInvalidUsage: This usually reflects invalid usage "
    "of NCCL library.\nLast error:\nDuplicate GPU detected : rank 1 and rank 0 both on CUDA device 1a000"
)


def test_duplicate_gpu_needs_gloo() -> None:
    text = translate(failure(DUPLICATE_GPU, type="DistBackendError", phase="rendezvous"))
    assert "share one GPU" in text and "backend='auto'" in text and "gloo" in text
    assert "while the ranks rendezvoused" in text


def test_other_nccl_errors() -> None:
    msg = (
        "NCCL error in: /pytorch/torch/csrc/distributed/c10d/NCCLUtils.cpp:77, unhandled cuda error (run with "
        "NCCL_DEBUG=INFO for details), NCCL version 2.26.2\nncclUnhandledCudaError: Call to CUDA function failed."
    )
    text = translate(failure(msg, type="DistBackendError"))
    assert text.startswith("NCCL failed during the forward on rank 1: NCCL error in:")
    assert "NCCL_DEBUG" in text and "backend='gloo'" in text


# -- timeouts ----------------------------------------------------------------------------------------
@pytest.mark.procs
@pytest.mark.slow
def test_real_timeout_in_a_collective() -> None:
    err = run_failing(f"{FAULTS}:factory_skip_collective", f"{FAULTS}:sample", timeout=4.0)
    assert isinstance(err, RankTimeout)
    blocked = next(f for f in err.failures if f.phase == "forward")
    text = translate(blocked)
    assert "timed out" in text and "collective" in text and "different code paths" in text
    assert "timeout_sec" in text
    assert "timed out" in translate(err)


def test_timeout_messages_by_phase() -> None:
    gloo = (
        "[/pytorch/third_party/gloo/gloo/transport/tcp/unbound_buffer.cc:81] Timed out waiting 30000ms for recv "
        "operation to complete"
    )
    text = translate(failure(gloo))
    assert "collective its peers never reached" in text and "raise timeout_sec" in text
    factory = translate({"rank": 0, "type": "RankExited", "message": "", "phase": "factory", "exitcode": None})
    assert "while importing the factory" in factory and "timeout_sec" in factory
    rendezvous = translate({"rank": 0, "type": "RankTimeout", "message": "", "phase": "rendezvous"})
    assert "before the ranks all met" in rendezvous
    unknown = translate({"type": "RankTimeout", "message": "timed out after 8 s", "phase": ""})
    assert "collective" in unknown and "timeout_sec" in unknown and "before the ranks all met" not in unknown


# -- imports -----------------------------------------------------------------------------------------
@pytest.mark.procs
@pytest.mark.slow
def test_missing_module_while_importing_the_factory(tmp_path: Path) -> None:
    path = tmp_path / "factory_with_missing_import.py"
    path.write_text(MISSING_IMPORT)
    err = run_failing(f"{path}:factory", f"{FAULTS}:sample")
    first = err.failures[0]
    assert first.type == "ModuleNotFoundError" and first.phase == "factory"
    text = translate(first)
    assert "while importing the factory on rank" in text
    assert "module 'distcheck_test_no_such_package' is not importable in a fresh process" in text
    assert "PYTHONPATH" in text and "Install" in text


def test_import_error_during_the_forward() -> None:
    exc = caught(lambda: __import__("distcheck_test_no_such_package"))
    text = translate(failure(str(exc), type=type(exc).__name__))
    assert "during the forward on rank 1" in text and "'distcheck_test_no_such_package'" in text
    assert "PYTHONPATH" in text


# -- wrapper errors pass through ---------------------------------------------------------------------
def test_wrapper_error_passes_through() -> None:
    exc = caught(lambda: check_outputs(torch.zeros(3), "MyWrapper"))
    assert isinstance(exc, WrapperError)
    assert translate(failure(str(exc), type="WrapperError")) == str(exc)
    assert translate(exc) == str(exc)


# -- shapes ------------------------------------------------------------------------------------------
@pytest.mark.procs
@pytest.mark.slow
def test_fixed_atom_count_in_a_real_rank(models: Path) -> None:
    err = run_failing(f"{models}:factory_fixed_count", f"{models}:sample")
    first = err.failures[0]
    assert "must match the size of tensor b (108)" in first.message
    text = translate(first)
    assert "Shape mismatch during the forward on rank" in text
    assert "rows met one of 108 rows" in text
    assert "batch.batch.max() + 1" in text and "batch.num_systems" in text


def test_index_out_of_bounds_from_system_count() -> None:
    batch_index = torch.tensor([0, 0, 2, 2])  # this rank holds atoms of systems 0 and 2 only
    num_systems = int(batch_index.max()) + 1  # the bug: 3 here, but a sample of 4 systems has index 3 too
    exc = caught(lambda: torch.zeros(num_systems).scatter_add_(0, torch.tensor([0, 3]), torch.ones(2)))
    text = translate(failure(str(exc)))
    assert "index 3 was used on a tensor of 3 rows" in text and "batch.batch.max() + 1" in text
    exc = caught(lambda: torch.zeros(num_systems).index_add_(0, torch.tensor([0, 3]), torch.ones(2)))
    assert "index out of range in self" in str(exc)
    text = translate(failure(str(exc)))
    assert "an index ran past the end of a tensor" in text and "batch.num_systems" in text


def test_concatenation_size_mismatch() -> None:
    exc = caught(lambda: torch.cat([torch.zeros(3, 2), torch.zeros(4, 3)], 1))
    assert "a tensor of 3 rows met one of 4 rows" in translate(failure(str(exc)))


def test_view_shape_mismatch() -> None:
    exc = caught(lambda: torch.zeros(30).view(4, 3))
    assert "could not be viewed as [4, 3]" in translate(failure(str(exc)))


# -- NaN ---------------------------------------------------------------------------------------------
def test_nan_hint() -> None:
    text = nan_hint(1, "forces")
    assert text.startswith("rank 1 produced NaN in output forces: ")
    assert "system_reductions" in text
    assert nan_hint(0, "energy", count=3).startswith("rank 0 produced NaN in output energy (3 non-finite values): ")


# -- fallback ----------------------------------------------------------------------------------------
def _user_code_calling_torch() -> None:
    torch.nn.Linear(3, 2)(torch.zeros(1, 4))


def test_fallback_names_the_innermost_user_frame() -> None:
    exc = caught(_user_code_calling_torch)
    text = translate(exc)
    assert text.startswith("RuntimeError: mat1 and mat2 shapes cannot be multiplied")
    assert f"the innermost frame in your code is {__file__}:" in text
    assert "in _user_code_calling_torch" in text


def test_fallback_with_rank_failure_frames_and_phase(tmp_path: Path) -> None:
    wrapper = tmp_path / "mymodel" / "wrapper.py"  # a user frame is a real file
    wrapper.parent.mkdir()
    wrapper.write_text("\n" * 42)
    frames = [
        Frame(file="/work/main/server/distcheck/runtime/launch.py", line=312, function="_run_rank"),
        Frame(file=str(wrapper), line=42, function="factory"),
        Frame(file=os.path.join(os.path.dirname(os.__file__), "json", "decoder.py"), line=353, function="raw_decode"),
    ]
    f = RankFailure(
        rank=0,
        type="JSONDecodeError",
        message="Expecting value: line 1 column 1 (char 0)",
        phase="factory",
        frames=frames,
    )
    text = translate(f)
    assert text.startswith("JSONDecodeError: Expecting value: line 1 column 1 (char 0) (while importing the factory")
    assert f"innermost frame in your code is {wrapper}:42 in factory" in text
    assert translate(f.to_dict()) == text


def test_phase_context() -> None:
    assert phase_context("factory") == "while importing the factory"
    assert phase_context("forward") == "during the forward"
    assert phase_context("weird") == "in phase 'weird'"


@pytest.mark.procs
def test_modules_do_not_import_torch() -> None:
    """failure.py, errors.py and health.py, with everything they import, load without torch: imported
    under a bare `distcheck.validate` package, so that the package's own __init__ (which imports torch)
    does not run."""
    validate_dir = ROOT / "server" / "distcheck" / "validate"
    code = textwrap.dedent(
        f"""
        import importlib, sys, types
        sys.path.insert(0, {str(ROOT / "server")!r})
        import distcheck  # its public names load lazily: no torch
        package = types.ModuleType("distcheck.validate")
        package.__path__ = [{str(validate_dir)!r}]
        sys.modules[package.__name__] = package
        for name in ("failure", "errors", "health"):
            module = importlib.import_module("distcheck.validate." + name)
            assert module.__file__ == {str(validate_dir)!r} + "/" + name + ".py", module.__file__
        print("torch" in sys.modules)
        """
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_cuda_initialised_in_the_pool_is_explained() -> None:
    hint = translate(
        {"type": "AcceleratorError", "message": "CUDA error: initialization error", "phase": "forward", "rank": 1}
    )
    assert "DISTCHECK_PRELOAD" in hint and "spawn" in hint
