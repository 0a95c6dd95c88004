"""The single-process reference run, in a child process forked from the warm pool (or a spare), under
the caller's environment, working directory and `sys.path` as they are when `run_reference` starts
(`processes.caller_context`: carried in its job, applied before the factory's module is imported).

Besides the outputs it records what the validator needs to infer a spec and explain differences:
which per-system reductions and per-edge aggregations the wrapper performs (a `TorchFunctionMode`
that only observes), what `torch.autograd.grad` returned (to tell autograd-derived outputs from
the others), whether neighbours came from `batch.neighbor_list`, helper calls, layer records and
where the wrapper's class is defined.
"""

from __future__ import annotations

import contextlib
import inspect
import multiprocessing.connection
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.overrides import TorchFunctionMode

from ..batch import Batch
from ..environment import RANK
from ..processes import lifeline, run_dirs, spares
from ..processes.caller_context import CallerContext, caller_of
from ..processes.forkserver import main_hidden, process_context
from ..processes.rank_main import end_child_process, start_child_process, write_error
from ..processes.spares.learned import Stamps, third_party_since
from ..processes.spares.prepared import ValidationSpares
from ..processes.supervise import stop_all, supervise
from ..runtime import beacon, env_reads, file_reads
from ..runtime.cpu_share import share
from ..runtime.errors import DistributedError, RankTimeout
from ..runtime.factory import FactoryRef
from ..runtime.model import wrapper_attr
from ..runtime.model_build import build_wrapper, weights_fingerprint
from ..runtime.rank import error_record
from ..runtime.source import definition_site
from .field_cache import module_files
from .helpers import HelperTracer
from .layers import LayerRecorder
from .receptive import SCATTERS, SourceCapture
from .reference_field import FIELD_FILE, FieldProbe, PendingField

__all__ = ["ReferenceRun", "ReferenceTrace", "run_reference"]

_POLL_S = 0.005
"""How often the parent looks for the reference's result file while the child runs."""


class ReferenceTrace(TorchFunctionMode):
    """Observes (never changes) the ops a wrapper runs in one process."""

    def __init__(self, batch: Batch) -> None:
        super().__init__()
        self.batch = batch
        self.counts: Counter[str] = Counter()
        self.grad_results: list[torch.Tensor] = []
        self.grad_input_shapes: list[list[int]] = []

    def __torch_function__(
        self, func: Any, types: Any, args: Sequence[Any] = (), kwargs: Mapping[str, Any] | None = None
    ) -> Any:
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        n, b = self.batch.num_atoms, self.batch.num_systems
        if func in SCATTERS and len(args) >= 3 and isinstance(args[0], torch.Tensor):
            index = args[2] if len(args) > 2 else kwargs.get("index")
            rows = args[0].shape[0] if args[0].ndim else 0
            if isinstance(index, torch.Tensor) and index.ndim >= 1:
                if rows == b and index.shape[0] == n:
                    self.counts[f"per_system_reduce[{func.__name__}]"] += 1
                elif rows == n and index.shape[0] != n:
                    self.counts[f"edge_aggregation[{func.__name__}]"] += 1
                elif rows == b:
                    self.counts[f"edge_to_system[{func.__name__}]"] += 1
        elif func is torch.segment_reduce:
            self.counts["per_system_reduce[segment_reduce]"] += 1
        elif func is torch.bincount:
            self.counts["per_system_count[bincount]"] += 1
        elif func is torch.autograd.grad:
            inputs = args[1] if len(args) > 1 else kwargs.get("inputs")
            ins = [inputs] if isinstance(inputs, torch.Tensor) else list(inputs or [])
            self.grad_input_shapes += [list(t.shape) for t in ins]
            self.grad_results += [g.detach() for g in out if isinstance(g, torch.Tensor)]
            self.counts["autograd.grad"] += 1
        return out


def _squeezed(shape: Sequence[int]) -> list[int]:
    """A shape without its size-1 dimensions: `[1, 3, 3]` and `[3, 3]` are the same per-graph value."""
    return [int(d) for d in shape if int(d) != 1]


def _autograd_derived(outputs: Mapping[str, torch.Tensor], trace: ReferenceTrace, batch: Batch) -> dict[str, bool]:
    derived: dict[str, bool] = {}
    extra_shapes = [_squeezed(s) for s in trace.grad_input_shapes if s != [batch.num_atoms, 3]]
    for name, value in outputs.items():
        v = value.detach()
        # allclose raises on mixed dtypes: compare in the output's dtype (integer outputs, which the
        # validator refuses anyway, are never autograd results)
        comparable = v.is_floating_point() or v.is_complex()
        hit = comparable and any(
            g.numel() == v.numel()
            and _squeezed(g.shape) == _squeezed(v.shape)
            and (
                torch.allclose(v, g.reshape(v.shape).to(v.dtype)) or torch.allclose(v, -g.reshape(v.shape).to(v.dtype))
            )
            for g in trace.grad_results
        )
        per_graph = v.ndim >= 1 and (v.shape[0] == batch.num_systems or batch.num_systems == 1)
        if not hit and per_graph and v.ndim >= 1 and _squeezed(v.shape) and _squeezed(v.shape) in extra_shapes:
            hit = True  # e.g. stress from the strain trick: d E / d strain, rescaled ([1,3,3] and [3,3] alike)
        derived[name] = bool(hit)
    return derived


def _wrapper_info(wrapper: Any) -> dict[str, Any]:
    cls = type(wrapper.__self__ if inspect.ismethod(wrapper) else wrapper)  # a bound method: its object's class
    info: dict[str, Any] = {"class": f"{cls.__module__}.{cls.__qualname__}", "file": None, "line": None}
    try:
        info["file"] = inspect.getsourcefile(cls)
        info["line"] = inspect.getsourcelines(cls)[1]
    except (TypeError, OSError):
        pass
    cutoff = wrapper_attr(wrapper, "cutoff")
    info["cutoff"] = float(cutoff) if cutoff is not None else None
    depth = wrapper_attr(wrapper, "num_interactions")
    info["num_interactions"] = int(depth) if depth is not None else None
    prior = wrapper_attr(wrapper, "distribution_spec")
    if prior is not None and not isinstance(prior, (dict, str, os.PathLike)):
        prior = prior.to_dict() if hasattr(prior, "to_dict") else None
    info["distribution_spec"] = os.fspath(prior) if isinstance(prior, os.PathLike) else prior
    kinds = wrapper_attr(wrapper, "output_kinds")
    info["output_kinds"] = dict(kinds) if isinstance(kinds, Mapping) else None
    return info


def _model_packages(before: set[str], built: set[str], watched: Sequence[str]) -> dict[str, Stamps]:
    """Installed packages the model imported (building it, or in its forward), not those the helper
    trace imported to watch them (unless the model had imported them itself)."""
    found = third_party_since(before)
    tracer_only = {p.partition(".")[0] for p in watched} - {m.partition(".")[0] for m in built - before}
    return {k: v for k, v in found.items() if k not in tracer_only}


def _factory_frame(factory: FactoryRef) -> dict[str, Any] | None:
    """Where the factory is defined (`{"file", "line", "function"}`), for a report that points at it;
    None when its source cannot be found."""
    site = definition_site(factory.load())
    return None if site is None else {"file": site[0], "line": site[1], "function": factory.qualname}


def reference_body(job: dict[str, Any]) -> tuple[dict[str, Any], FieldProbe]:
    """Run the wrapper once in this process with every recorder attached (called in the child): the
    result to hand over, and the probe that measures the receptive field afterwards."""
    device = torch.device(job["device"])
    if device.type == "cuda":
        torch.cuda.set_device(device)
    loaded_before = set(sys.modules)
    reads = env_reads.start()  # the variables the model reads, for the caches' keys (stopped below)
    files = file_reads.start()  # and the data files it opens
    t0 = time.perf_counter()
    factory: FactoryRef = job["factory"]
    wrapper = build_wrapper(factory, device)
    weights = weights_fingerprint(wrapper)
    t_factory = time.perf_counter() - t0
    built = set(sys.modules)
    batch = Batch.from_state(job["batch"]).to(device)
    neighbor_cutoffs: list[float] = []
    original = batch.neighbor_list

    def counting_neighbor_list(cutoff: float) -> Any:
        neighbor_cutoffs.append(float(cutoff))
        return original(cutoff)

    batch.neighbor_list = counting_neighbor_list  # type: ignore[method-assign]
    trace = ReferenceTrace(batch)
    capture = SourceCapture(batch.num_atoms, batch.num_systems)  # the field measurement's first run
    tracer = HelperTracer(job["helper_packages"], job["helper_sample_every"], batch.num_atoms, batch.num_systems)
    layers = LayerRecorder(wrapper, batch.num_atoms, batch.num_systems)
    t1 = time.perf_counter()
    with tracer.installed():
        if job["layer_diagnostic"]:
            with layers.attached(), trace, capture:
                raw = wrapper(batch)
        else:
            with trace, capture:
                raw = wrapper(batch)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t_forward = time.perf_counter() - t1
    from ..runtime.model import check_outputs

    outputs = check_outputs(raw, type(wrapper).__name__)
    derived = _autograd_derived(outputs, trace, batch)
    info = _wrapper_info(wrapper)
    reach = max(neighbor_cutoffs) if neighbor_cutoffs else info["cutoff"]
    probe = FieldProbe(wrapper, job["batch"], device, reach, derived, t_forward, capture.sources, outputs)
    result = {
        "outputs": {k: v.detach().to("cpu") for k, v in outputs.items()},
        "counts": dict(trace.counts),
        "autograd_derived": derived,
        "receptive_cutoff": reach,
        "grad_input_shapes": trace.grad_input_shapes,
        "neighbor_cutoffs": neighbor_cutoffs,
        "helpers": tracer.collect(),
        "layers": layers.collect(),
        "ops": layers.op_records(),
        "wrapper": info,
        "weights": weights,
        "factory_frame": _factory_frame(factory),
        "timings": {"factory": t_factory, "forward": t_forward},
        # what the spares of this target's next validation import ahead (`spares.learned`)
        "imported_packages": _model_packages(loaded_before, built, job["helper_packages"]),
        # the files of what building and running the model imported: part of `field_cache`'s key
        "model_files": module_files(set(sys.modules) - loaded_before),
        "env_reads": reads.stop(),
        "file_reads": files.stop(),
    }
    return result, probe


def _save(result: Mapping[str, Any], workdir: str, name: str) -> None:
    """Write `result` as `name` in one step (the parent waits for the file to appear)."""
    torch.save(result, os.path.join(workdir, name + ".tmp"))
    os.replace(os.path.join(workdir, name + ".tmp"), os.path.join(workdir, name))


def _reference_entry(job: dict[str, Any]) -> None:
    entered = time.time()  # wall clock: the parent subtracts its own stamp of the start
    workdir = job["workdir"]
    code = 1
    try:
        caller = caller_of(job)
        if caller is not None:  # the caller's environment, directory and path, before any user code
            caller.apply()
        start_child_process(workdir, "rank0", job.get("owner"))
        os.environ[RANK.name] = "reference"
        beacon.set_phase("reference")
        own_threads = torch.get_num_threads()
        if job.get("threads"):  # the first attempt's ranks run beside the forward
            torch.set_num_threads(int(job["threads"]))
        t0 = time.perf_counter()
        result, probe = reference_body(job)
        result["timings"]["body"] = time.perf_counter() - t0
        result["timings"]["entered_at"] = entered
        result["threads"] = torch.get_num_threads()
        _save(result, workdir, "reference.pt")
        del result
        torch.set_num_threads(own_threads)  # the measurement runs once the ranks are done
        beacon.set_phase("receptive_field")
        _save(probe.measure(), workdir, FIELD_FILE)
        code = 0
    except BaseException as exc:
        with contextlib.suppress(BaseException):
            write_error(workdir, 0, error_record(exc, job["device"]))
    finally:
        end_child_process(code)


@dataclass
class ReferenceRun:
    """The reference's `result` (every key but the receptive field) and its child, still measuring
    the field (`field.collect()`; close it, or use the run as a `with` block, to stop the child)."""

    result: dict[str, Any]
    field: PendingField

    def __enter__(self) -> ReferenceRun:
        return self

    def __exit__(self, *exc: object) -> None:
        self.field.close()


def _first_result(proc: Any, path: str, deadline: float) -> bool:
    """Wait until the child has written `path` (True) or has exited, or `deadline` passed (False)."""
    while time.perf_counter() < deadline:
        if os.path.exists(path):
            return True
        if multiprocessing.connection.wait([proc.sentinel], timeout=_POLL_S):
            return os.path.exists(path)
    return os.path.exists(path)


def run_reference(
    factory: FactoryRef,
    batch: Batch,
    *,
    device: str,
    helper_packages: Sequence[str],
    helper_sample_every: int,
    layer_diagnostic: bool,
    timeout_sec: float,
    ahead: ValidationSpares | None = None,
    while_running: Callable[[], None] | None = None,
    ranks_beside: int = 0,
) -> ReferenceRun:
    """The reference run in a fresh child process; raises `DistributedError` (rank -1 in the failure
    is the reference) or `RankTimeout` (with the child's Python stack) like a distributed run would.
    `timeout_sec` bounds this run alone, as it bounds each attempt's ranks. Nothing it started
    outlives the call, also when the call is interrupted (KeyboardInterrupt) while the child starts.
    The child is a spare when the pool has one (warm: torch, its CUDA context, the target's packages).
    `ahead` (the validation's spares) is asked for its spares first and, once this run has its process,
    has the first attempt's ranks built while it runs. `while_running()` is called once the child is
    started and those ranks are asked for (the first attempt run ahead, `attempt_ahead.py`); the child
    is stopped when it raises. `ranks_beside`: how many ranks run at the same time as the child's
    forward (those of `while_running`); the forward then takes its share of the cores (`cpu_share`).
    Returns as soon as the child has handed over its outputs; the child measures the receptive field
    on (`ReferenceRun.field`), within the same bound, with its own threads again. The child runs under
    this process's environment, working directory and `sys.path` as they are when this call starts."""
    caller = CallerContext.capture()  # before anything of this run starts
    procs: list[Any] = []
    handed_over = False  # once returned, the child and its directory belong to the `PendingField`
    run_dir = run_dirs.make_run_dir("ref")
    try:  # from the directory's making on: a stop signal anywhere after it still removes it
        workdir = run_dir.path
        job = {
            "workdir": workdir,
            "owner": os.getpid(),
            "factory": factory,
            "batch": batch.to_state(),
            "device": device,
            "helper_packages": list(helper_packages),
            "helper_sample_every": helper_sample_every,
            "layer_diagnostic": layer_diagnostic,
            "threads": share(1 + ranks_beside) if ranks_beside else None,
            "caller": caller,
        }
        result_path = os.path.join(workdir, "reference.pt")
        if ahead is not None:
            ahead.start()
        with lifeline.helpers_ignore_sigint():
            ctx = process_context()
        proc = spares.process(ctx, device, _reference_entry, (job,), "distcheck-reference")
        procs.append(proc)  # before start: an interrupted start still gets stopped
        with main_hidden():
            proc.start()  # returns once forked: a cold pool's start-up (torch imported) is not the run's time
        started_at, t_start = time.time(), time.perf_counter()
        if ahead is not None:
            ahead.prepare()
        t_prepared = time.perf_counter()
        if while_running is not None:
            while_running()
        t_ahead = time.perf_counter()
        deadline = t_start + timeout_sec
        if not _first_result(proc, result_path, deadline):
            try:  # the child exited without a result or ran out of time: name why
                supervise(
                    procs,
                    workdir,
                    timeout_sec=timeout_sec,
                    t_start=t_start,
                    has_result=lambda _: False,
                    who=lambda _: "the reference run",
                    rank_of=lambda _: -1,
                    label="the reference run",
                )
            except RankTimeout:
                raise
            except DistributedError as err:
                failure = err.failures[0]
                if failure.phase in ("starting", "reference"):
                    failure.phase = "reference"
                raise DistributedError(
                    f"the single-process reference run failed: {failure.type}: {failure.message}", err.failures
                ) from None
        t_seen = time.perf_counter()
        result: dict[str, Any] = torch.load(result_path, weights_only=True)
        phases = result["timings"]
        phases["until_entry"] = phases.pop("entered_at") - started_at
        phases["prepare_ranks"] = t_prepared - t_start
        if while_running is not None:
            phases["while_running"] = t_ahead - t_prepared
        phases["until_result"] = t_seen - t_start
        phases["load"] = time.perf_counter() - t_seen
        pending = PendingField(procs, run_dir, deadline, result.get("receptive_cutoff"), str(device))
        procs, handed_over = [], True
        return ReferenceRun(result, pending)
    except BaseException as exc:
        if not isinstance(exc, Exception):  # interrupted: this process is stopping, so is its pool
            lifeline.stop_forkserver()
        raise
    finally:
        if not handed_over:
            stop_all(procs)
            run_dir.remove()
