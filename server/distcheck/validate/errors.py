"""Turn a rank's failure into a short, actionable hint for the report and the editor.

`translate(failure)` takes a `RankFailure` (or its `to_dict()`, or an exception) and returns one to
three sentences naming the likely cause and what to change. `nan_hint(rank, output)` does the same for
a rank output holding NaN/Inf. Pattern matching only, on the failure as `failure.normalise` reads it
(by duck typing): no torch, no torch-importing part of `distcheck.runtime`, no user code.
"""

from __future__ import annotations

import dataclasses
import re
import signal
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from .failure import Failure, at, first_line, normalise, phase_context, user_frame, where, who

if TYPE_CHECKING:
    from ..runtime.errors import RankFailure

__all__ = ["nan_hint", "phase_context", "translate"]

PASS_THROUGH = frozenset({"WrapperError", "FactoryError", "SetupError", "SpecError", "AdapterError"})
"""distcheck's own errors: their messages already say what to change."""

GIB = 1024**3


def _memory(memory_by_rank: Mapping[int, int] | None) -> str:
    if not memory_by_rank:
        return ""
    per = ", ".join(f"rank {r} {b / GIB:.2f} GiB" for r, b in sorted(memory_by_rank.items()))
    return f" Peak memory per rank: {per}."


# -- the patterns -----------------------------------------------------------------------------------
_AUTOGRAD = re.compile(
    r"does not have a grad_fn|does not require grad|appears to not have been used in the graph", re.IGNORECASE
)
_OOM = re.compile(r"out of memory|OutOfMemoryError|can't allocate memory|DefaultCPUAllocator", re.IGNORECASE)
_DUPLICATE_GPU = re.compile(r"Duplicate GPU detected", re.IGNORECASE)
_NCCL = re.compile(r"\bNCCL\b|nccl[A-Z]\w+", re.IGNORECASE)
_TIMEOUT = re.compile(r"timed out|timeout|time out", re.IGNORECASE)
_KILLED = re.compile(r"killed by (SIG[A-Z0-9]+|signal \d+)")
_NO_MODULE = re.compile(r"No module named '([^']+)'")
_CANNOT_IMPORT = re.compile(r"cannot import name '([^']+)' from '([^']+)'")
_TRIED = re.compile(r"Tried to allocate ([\d.]+ [KMGT]i?B)")
_SHAPES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(
            r"size of tensor a \((\d+)\) must match the size of tensor b \((\d+)\) at non-singleton dimension (\d+)"
        ),
        "rows",
    ),
    (re.compile(r"Expected size (\d+) but got size (\d+)"), "rows"),
    (re.compile(r"index (-?\d+) is out of bounds for dimension \d+ with size (\d+)"), "index"),
    (re.compile(r"shape '\[([^\]]*)\]' is invalid for input of size (\d+)"), "view"),
    (re.compile(r"index out of range in self|device-side assert triggered"), "range"),
)


def _autograd_hint(f: Failure) -> str:
    return (
        f"The autograd graph from the positions to the outputs is severed{where(f)} ({first_line(f.message)}): "
        "look for a detach(), `.data`, `.item()` or numpy round trip in the wrapper, or a custom op without an "
        "autograd formula. Or an in-place `scatter_add_` / `index_add_` drops its return value on a tensor "
        "created under `torch.no_grad()`: rebind the result (`out = out.index_add_(...)`) and keep every step "
        "from positions to energy differentiable."
    )


def _oom_hint(f: Failure, memory_by_rank: Mapping[int, int] | None) -> str:
    tried = _TRIED.search(f.message)
    gpu = re.search(r"CUDA|GPU", f.message) is not None or f.type == "OutOfMemoryError"
    what = "GPU" if gpu else "host"
    asked = f" (tried to allocate {tried.group(1)})" if tried else ""
    advice = (
        "Use a smaller sample, fewer ranks per GPU (ranks on one GPU share its memory), or float32."
        if gpu
        else "Use a smaller sample, fewer ranks, or float32."
    )
    return f"Out of {what} memory{where(f)}{asked}.{_memory(memory_by_rank)} {advice}"


def _duplicate_gpu_hint(f: Failure) -> str:
    return (
        f"NCCL refused to start{where(f)}: several ranks share one GPU, and NCCL needs one GPU per rank "
        "(\"Duplicate GPU detected\"). Use backend='auto', which picks gloo when ranks share a GPU, or give "
        "every rank its own GPU (device='cuda')."
    )


def _nccl_hint(f: Failure) -> str:
    return (
        f"NCCL failed{where(f)}: {first_line(f.message)}. Rerun with NCCL_DEBUG=WARN for details; "
        "backend='gloo' (or 'auto' when ranks share a GPU) rules NCCL itself out."
    )


def _timeout_hint(f: Failure) -> str:
    place = where(f)
    if f.phase in ("forward", "collect"):
        return (
            f"The run timed out{place}: that rank was most likely waiting in a collective its peers never "
            "reached because ranks took different code paths (e.g. branching on the local atom "
            "count, or skipping a layer on a rank that holds no atoms of a system); make every rank run the "
            "same collectives. If the model is merely slow, raise timeout_sec."
        )
    if f.phase in ("rendezvous", "starting"):
        return (
            f"The run timed out{place} before the ranks all met: a rank failed to start or was very slow to "
            "import torch; check the other ranks' errors, or raise timeout_sec."
        )
    if f.phase == "factory":
        return (
            f"The run timed out{place}: building the model in every rank (downloading weights, compiling) took "
            "longer than timeout_sec; cache the weights or raise timeout_sec."
        )
    return (
        f"The run timed out{place}: a rank blocked in a collective its peers never reached (ranks took different "
        "code paths, e.g. branching on the local atom count), or the model is slower than timeout_sec; raise it."
    )


def _stuck_hint(f: Failure) -> str:
    """A process still busy outside any collective when its run timed out: the one that held the others."""
    during = phase_context(f.phase)
    if f.rank is not None and f.rank < 0:
        return (
            f"The single-process reference run timed out {during}{at(f)} (timeout_sec bounds each run): the "
            "model hangs or is this slow on the sample in one process already, before anything is distributed. "
            "Its Python stack when it was stopped is in the report: fix the loop or blocking call there, or raise "
            "timeout_sec or use a smaller sample if it is merely slow."
        )
    if f.phase in ("starting", "factory"):
        return _timeout_hint(f)
    return (
        f"{who(f)} was still busy {during}, outside any collective, when the run timed out{at(f)}; the other ranks "
        "were waiting for it. Its Python stack when it was stopped is in the report: a loop or a blocking call "
        "there never returned. Fix it, or raise timeout_sec if the model is merely this slow on the sample."
    )


def _waiting_hint(f: Failure) -> str:
    """Every rank still running was inside a collective: they wait for each other in different ones."""
    if f.collective == "init_process_group":
        return _timeout_hint(dataclasses.replace(f, phase="rendezvous"))
    during = phase_context(f.phase)
    return (
        f"The run timed out while {who(f, capital=False)} waited {during} in the collective {f.collective} for "
        "peers that never reached it: the ranks took different code paths (e.g. branching on the local atom "
        "count, or skipping a layer on a rank that holds no atoms of a system); make every rank run the same "
        "collectives. If the model is merely slow, raise timeout_sec."
    )


def _exited_hint(f: Failure) -> str:
    """A process that ended itself without a result and without a Python exception."""
    during = " " + phase_context(f.phase) if f.phase and (f.rank is None or f.rank >= 0) else ""
    return (
        f"{who(f)} ended its own process (exit code {f.exitcode}){during} without returning a result or raising "
        "an exception: the model or a library it calls runs os._exit(), or exit() in native code. Find that call "
        "(the process's last output is in the report) and raise an exception instead."
    )


def _killed_hint(f: Failure, memory_by_rank: Mapping[int, int] | None) -> str:
    m = _KILLED.search(f.message)
    name = m.group(1) if m else ""
    if not name and f.exitcode is not None and f.exitcode < 0:
        try:
            name = signal.Signals(-f.exitcode).name
        except ValueError:
            name = f"signal {-f.exitcode}"
    place = where(f)
    if name == "SIGKILL":
        return (
            f"A rank was killed by SIGKILL{place}, most likely by the operating system's out-of-memory killer "
            f"(host memory).{_memory(memory_by_rank)} Use less memory: a smaller sample, fewer ranks, or float32."
        )
    if name in ("SIGSEGV", "SIGBUS", "SIGABRT", "SIGILL", "SIGFPE"):
        return (
            f"A rank crashed with {name}{place}: a crash in native code (a compiled extension or custom op). "
            "Check whether the single-process reference crashes too, and read the rank's last output."
        )
    if name in ("SIGTERM", "SIGINT", "SIGHUP"):
        return f"A rank was stopped by {name}{place}: it was cancelled or killed from outside the run."
    return f"A rank was killed by {name or 'a signal'}{place}; read the rank's last output for the cause."


def _import_hint(f: Failure) -> str:
    missing = _NO_MODULE.search(f.message)
    name = _CANNOT_IMPORT.search(f.message)
    what = (
        f"module '{missing.group(1)}'"
        if missing
        else (f"'{name.group(1)}' from '{name.group(2)}'" if name else first_line(f.message))
    )
    if f.phase == "factory":
        return (
            f"{f.type}{where(f)}: {what} is not importable in a fresh "
            "process. Install the package into this interpreter's environment or add its directory to "
            "PYTHONPATH (every rank imports the factory's module anew)."
        )
    return (
        f"{f.type}{where(f)}: {what} cannot be imported. Install it into this interpreter's environment "
        "or fix PYTHONPATH."
    )


def _shape_hint(f: Failure) -> str | None:
    for pattern, form in _SHAPES:
        m = pattern.search(f.message)
        if not m:
            continue
        if form == "rows" and m.lastindex == 3 and m.group(3) != "0":
            clash = f"a tensor of size {m.group(1)} met one of size {m.group(2)} along dimension {m.group(3)}"
        elif form == "rows":
            clash = f"a tensor of {m.group(1)} rows met one of {m.group(2)} rows"
        elif form == "index":
            clash = f"index {m.group(1)} was used on a tensor of {m.group(2)} rows"
        elif form == "view":
            clash = f"{m.group(2)} elements could not be viewed as [{m.group(1)}]"
        else:
            clash = "an index ran past the end of a tensor"
        return (
            f"Shape mismatch{where(f)}: {clash} ({first_line(f.message)}). A rank holds only its owned + halo "
            "atoms, possibly of only some systems, so a wrapper that assumes a fixed atom count or takes the "
            "number of systems from `batch.batch.max() + 1` builds tensors of the wrong size; use "
            "`batch.positions.shape[0]` and `batch.num_systems` instead."
        )
    return None


def _fallback(f: Failure) -> str:
    place = where(f)
    head = f"{f.type}: {first_line(f.message)}" if f.type else first_line(f.message)
    text = f"{head} ({place.strip()})." if place else f"{head}."
    frame = user_frame(f.frames)
    if frame is not None:
        text += (
            f" See the traceback; the innermost frame in your code is {frame.file}:{frame.line} in {frame.function}."
        )
    else:
        text += " See the traceback."
    return text


def translate(
    failure: RankFailure | Mapping[str, Any] | BaseException,
    memory_by_rank: Mapping[int, int] | None = None,
) -> str:
    """A one-to-three sentence hint for a rank failure: the likely cause and what to change.

    `failure` is a `RankFailure`, its `to_dict()` (an optional `"timed_out": True` marks a timeout), or an
    exception (a `DistributedError`/`RankTimeout` is read through its first failure). `memory_by_rank`
    (bytes per rank, e.g. the records' `peak_memory_bytes`) is quoted in GiB for memory failures.
    """
    f = normalise(failure)
    if f.type in PASS_THROUGH:
        return f.message
    if f.type == "RankStuck":
        return _stuck_hint(f)
    if f.type == "RankWaiting":
        return _waiting_hint(f)
    if f.type == "RankExited" and f.exitcode is not None and f.exitcode >= 0:
        return _exited_hint(f)
    if f.type in ("ModuleNotFoundError", "ImportError"):
        return _import_hint(f)
    if f.type == "RankKilled" or (f.exitcode is not None and f.exitcode < 0) or _KILLED.search(f.message):
        if not f.timed_out:
            return _killed_hint(f, memory_by_rank)
    if f.type == "OutOfMemoryError" or _OOM.search(f.message):
        return _oom_hint(f, memory_by_rank)
    if _DUPLICATE_GPU.search(f.message):
        return _duplicate_gpu_hint(f)
    if "CUDA error: initialization error" in f.message:
        return (
            f"CUDA could not start{where(f)}: it was already initialised in the warm process pool the rank "
            "was forked from, usually by a module named in DISTCHECK_PRELOAD that touches the GPU on import. "
            "Remove that module from DISTCHECK_PRELOAD, or set DISTCHECK_START_METHOD=spawn."
        )
    if _AUTOGRAD.search(f.message):
        return _autograd_hint(f)
    # A rank still running when the run was stopped: the launcher records it with no exit code.
    still_running = f.type == "RankExited" and f.exitcode is None
    if f.timed_out or f.type == "RankTimeout" or still_running or _TIMEOUT.search(f.message):
        return _timeout_hint(f)
    if _NCCL.search(f.message) or f.type == "DistBackendError":
        return _nccl_hint(f)
    shape = _shape_hint(f)
    if shape is not None:
        return shape
    return _fallback(f)


def nan_hint(rank: int, output: str, count: int | None = None) -> str:
    """Hint for a rank output that holds NaN/Inf (the reference being finite)."""
    many = f" ({count} non-finite value{'s' if count != 1 else ''})" if count is not None else ""
    return (
        f"rank {rank} produced NaN in output {output}{many}: something distribution changed divides by zero "
        "or takes a log/sqrt of zero, typically a mean or normalisation over a rank's local atom count (zero "
        "when the rank holds no atoms of a system) or a norm of a zero-length edge vector. Count atoms with the "
        "runtime's reductions (`system_reductions`) instead of locally, and guard the division."
    )
