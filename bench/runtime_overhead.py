"""Runtime overhead of distcheck's distributed runtime on the CPU, for the MPNN example.

Builds a periodic sample elongated along z (`examples.structures.periodic_slab_system` with a 5 x 5
cross-section, about `--atoms` atoms) and measures, side by side in one run:

(a) the single-process time of `model(batch)` for `examples.mpnn.model_factory()` (three interaction
    layers; the call includes the neighbour list and the autograd backward that gives the forces),
    with `torch.set_num_threads(1)` as a rank uses on a 2-core machine: the median of
    `--single-repeats` calls after two warm-up calls, plus the first (cold) call;
(b) `distcheck.run_distributed(..., device="cpu", backend="gloo")` for every world size in
    `--world-sizes`, `--repeats` times each after one warm-up run: per rank the forward time
    (`records[r].timings["forward"]`: the wrapper's forward + backward inside that rank, under the
    handlers), the time spent inside collectives (`timings["collectives"]`, which includes waiting
    for slower peers), the owned/halo/remote atom counts, and the run's `timings` (start, ranks,
    total).

Each rank of `run_distributed` runs the wrapper once, in a freshly started process, so its forward
is a *first* call and pays one-time costs (lazy imports inside torch among them); world size 1
through `run_distributed` is the like-for-like control (same process start, handlers installed, no
collectives). Two more measurements separate those costs from the steady state:

(c) warm rank forward: long-lived gloo ranks built from the same public pieces `run_distributed`
    uses (`build_rank_context`, `DistributedModel`) call the wrapper `--repeats`+1 times; per rank
    the first call and the median of the rest, summarised as median and max over ranks;
(d) the lazy imports a rank's first forward used to trigger (`torch._dynamo`, pulled in by the
    dispatch observer until `observer.dynamo_disabled_lazily`, and `torch.fx.experimental.symbolic_shapes`,
    pulled in by `torch.autograd.grad` with explicit `grad_outputs`, now loaded by the forkserver's
    `processes.mode_warmup`), timed in a fresh interpreter that has already imported torch.

A rank also computes over its halo rows, so its time is for more rows than it owns.

Prints figures only; it asserts nothing about time. Run from the repository root:

    .venv/bin/python bench/runtime_overhead.py [--atoms 2000] [--repeats 3] [--world-sizes 1,2,4]
                                               [--single-repeats 7] [--preload-lazy-imports]

`--preload-lazy-imports` adds those two modules to the forkserver's preload list first (an
experiment showing what they cost each run); results are in `bench/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from distcheck import Batch, MLIPSpec, run_distributed  # noqa: E402
from distcheck.processes import forkserver as launch  # noqa: E402
from distcheck.runtime import (  # noqa: E402
    DistributedModel,
    DistributedRun,
    RankRecord,
    build_rank_context,
    resolve_halo_width,
)
from examples.mpnn import model_factory  # noqa: E402
from examples.structures import make_batch, periodic_slab_system, slab_check  # noqa: E402

CROSS_SECTION = (5, 5)
FORKSERVER_PRELOAD = ("torch", "torch.distributed", "distcheck.processes.launch")  # what launch.py preloads
LAZY_IMPORTS = ("torch._dynamo", "torch.fx.experimental.symbolic_shapes")


def build_sample(atoms: int) -> tuple[Batch, tuple[int, int, int]]:
    """A periodic 13 x 13 x (2.6 * nz) Å box with 25 * nz atoms, nz = round(atoms / 25), and its n_cells."""
    nz = max(4, round(atoms / (CROSS_SECTION[0] * CROSS_SECTION[1])))
    return make_batch([periodic_slab_system((*CROSS_SECTION, nz), seed=7)]), (*CROSS_SECTION, nz)


def time_single(batch: Any, repeats: int) -> tuple[float, float, dict[str, torch.Tensor]]:
    """(first call, median of `repeats` calls after two warm-ups) in seconds, and the outputs."""
    model = model_factory()
    t0 = time.perf_counter()
    out = model(batch)
    cold = time.perf_counter() - t0
    model(batch)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        out = model(batch)
        times.append(time.perf_counter() - t0)
    return cold, statistics.median(times), {k: v.detach() for k, v in out.items()}


def _warm_rank(rank: int, world_size: int, atoms: int, calls: int, rendezvous: str, queue: Any) -> None:
    """One long-lived rank: the wrapper called `calls` times under the runtime (for measurement (c))."""
    import torch.distributed as dist

    try:
        torch.set_num_threads(max(1, (os.cpu_count() or 1) // world_size))  # as run_distributed's ranks do
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        dist.init_process_group("gloo", init_method="file://" + rendezvous, rank=rank, world_size=world_size)
        batch, _ = build_sample(atoms)
        wrapper = model_factory()
        spec = MLIPSpec.coerce(wrapper.distribution_spec)
        ctx, _ = build_rank_context(batch, spec, wrapper, rank, world_size)
        model = DistributedModel(wrapper, spec, ctx)
        local = model.local_batch(batch)
        fwd, coll = [], []
        for _ in range(calls):
            dist.barrier()
            before = ctx.timings.get("collectives", 0.0)
            t0 = time.perf_counter()
            model(local)
            fwd.append(time.perf_counter() - t0)
            coll.append(ctx.timings.get("collectives", 0.0) - before)
        dist.barrier()
        dist.destroy_process_group()
        queue.put((rank, fwd, coll, None))
    except BaseException as exc:  # report, never hang the parent
        queue.put((rank, [], [], f"{type(exc).__name__}: {exc}"))


def warm_ranks(atoms: int, world_size: int, calls: int) -> list[tuple[list[float], list[float]]]:
    """Per rank: (forward times, collective times) of `calls` consecutive calls in long-lived ranks."""
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with tempfile.TemporaryDirectory(prefix="distcheck-bench-") as tmp:
        rendezvous = os.path.join(tmp, "rendezvous")
        procs = [
            ctx.Process(target=_warm_rank, args=(r, world_size, atoms, calls, rendezvous, queue))
            for r in range(world_size)
        ]
        for p in procs:
            p.start()
        got: dict[int, tuple[list[float], list[float]]] = {}
        try:
            for _ in range(world_size):
                rank, fwd, coll, error = queue.get(timeout=600)
                if error:
                    raise RuntimeError(f"warm rank {rank} failed: {error}")
                got[rank] = (fwd, coll)
        finally:
            for p in procs:
                p.join(timeout=30)
                if p.exitcode is None:
                    p.kill()
                    p.join()
    return [got[r] for r in range(world_size)]


def lazy_import_seconds(module: str) -> float:
    """Time `import module` in a fresh interpreter that has already imported torch and torch.distributed."""
    code = (
        "import time, torch, torch.distributed\n"
        f"t = time.perf_counter(); import {module}; print(time.perf_counter() - t)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def _revision() -> str:
    """`git describe`-like provenance: the commit and whether the working tree had changes."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no"], cwd=REPO, capture_output=True, text=True
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "an unknown revision (not a git checkout)"
    return f"commit {head}" + (" with uncommitted changes in tracked files" if dirty else "")


def _load() -> str:
    try:
        return " / ".join(f"{x:.2f}" for x in os.getloadavg())
    except OSError:
        return "n/a"


def median(xs: list[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def summarise(runs: list[DistributedRun]) -> dict[str, Any]:
    """Medians over repeats of per-run figures (median and max over ranks)."""
    per_run_med, per_run_max, share_med, share_max = [], [], [], []
    for run in runs:
        fwd = [rec.timings["forward"] for rec in run.records]
        share = [rec.timings["collectives"] / rec.timings["forward"] for rec in run.records]
        per_run_med.append(median(fwd))
        per_run_max.append(max(fwd))
        share_med.append(median(share))
        share_max.append(max(share))
    world = runs[0].world_size
    per_rank = []
    for r in range(world):
        recs: list[RankRecord] = [run.records[r] for run in runs]
        per_rank.append(
            {
                "rank": r,
                "owned": recs[0].owned,
                "halo": recs[0].halo,
                "remote": recs[0].remote,
                "forward": median([x.timings["forward"] for x in recs]),
                "collectives": median([x.timings["collectives"] for x in recs]),
                "rendezvous": median([x.timings["rendezvous"] for x in recs]),
                "factory": median([x.timings["factory"] for x in recs]),
                # Present once run_distributed holds ranks at a barrier before the forward.
                "wait_peers": median([x.timings.get("wait_peers", float("nan")) for x in recs]),
                "handlers": dict(sorted(recs[0].handler_counts.items())),
            }
        )
    return {
        "world_size": world,
        "fwd_med": median(per_run_med),
        "fwd_max": median(per_run_max),
        "share_med": median(share_med),
        "share_max": median(share_max),
        "start": median([run.timings["start"] for run in runs]),
        "ranks": median([run.timings["ranks"] for run in runs]),
        "total": median([run.timings["total"] for run in runs]),
        "per_rank": per_rank,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--atoms", type=int, default=2000, help="approximate atom count (default 2000)")
    parser.add_argument("--repeats", type=int, default=3, help="distributed runs per world size (default 3)")
    parser.add_argument("--single-repeats", type=int, default=7, help="timed single-process calls (default 7)")
    parser.add_argument(
        "--preload-lazy-imports",
        action="store_true",
        help="also preload torch._dynamo and torch.fx.experimental.symbolic_shapes in run_distributed's "
        "forkserver (an experiment: shows what the first-call imports cost the rank forward)",
    )
    parser.add_argument(
        "--world-sizes", default="1,2,4", help="comma-separated world sizes (default 1,2,4; 1 is the control)"
    )
    args = parser.parse_args(argv)
    world_sizes = [int(w) for w in args.world_sizes.split(",") if w.strip()]
    if args.repeats < 1 or args.single_repeats < 1 or not world_sizes or min(world_sizes) < 1:
        parser.error("--repeats, --single-repeats and every world size must be >= 1")

    torch.set_num_threads(1)
    preload_note = "default forkserver preload (see distcheck.processes.launch.process_context)"
    if args.preload_lazy_imports:
        pool = launch.process_context()
        if hasattr(pool, "set_forkserver_preload"):
            pool.set_forkserver_preload([*FORKSERVER_PRELOAD, *LAZY_IMPORTS])
            preload_note = "forkserver ALSO preloads " + ", ".join(LAZY_IMPORTS) + " (--preload-lazy-imports)"
        else:
            preload_note = "--preload-lazy-imports ignored: ranks start with spawn, not forkserver"
    batch, n_cells = build_sample(args.atoms)
    probe = model_factory()
    spec = MLIPSpec.coerce(probe.distribution_spec)
    halo = resolve_halo_width(spec, probe)
    length = float(batch.cell[0, 2, 2])

    print("distcheck runtime overhead — MPNN example (examples.mpnn.model_factory, 3 interactions), CPU, gloo")
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, {os.cpu_count()} CPU cores, "
        f"cuda available: {torch.cuda.is_available()}, torch threads in this process: {torch.get_num_threads()}"
    )
    print(f"distcheck at {_revision()}")
    print(f"load average at start (1/5/15 min): {_load()} — other work on the machine skews every figure below")
    print(
        f"sample: periodic_slab_system(n_cells={n_cells}) -> {batch.num_atoms} atoms, "
        f"{float(batch.cell[0, 0, 0]):.1f} x {float(batch.cell[0, 1, 1]):.1f} x {length:.1f} Å, float64; "
        f"cutoff {probe.cutoff} Å, scatter_mode {spec.distribution.policy.scatter_mode}, halo width {halo} Å"
    )
    for w in world_sizes:
        if w > 1:
            problems = slab_check(batch, halo, w)
            print(
                f"partition check W={w}: "
                + ("every rank has owned, halo and remote atoms" if not problems else "; ".join(problems))
            )
    print(f"run_distributed: {preload_note}")
    print()

    cold, single, ref = time_single(batch, args.single_repeats)
    print("(a) single process, model(batch) incl. neighbour list + autograd forces, 1 thread:")
    print(f"    first call {cold:.3f} s; median of {args.single_repeats} after 2 warm-ups {single:.3f} s")
    print()

    spec_dict = spec.to_dict()
    t0 = time.perf_counter()
    first = run_distributed(model_factory, batch, spec_dict, world_size=world_sizes[0], device="cpu", backend="gloo")
    first_wall = time.perf_counter() - t0
    print(
        f"(b) first run_distributed call (W={world_sizes[0]}, starts the forkserver): "
        f"start {first.timings['start']:.3f} s, ranks {first.timings['ranks']:.3f} s, "
        f"total {first.timings['total']:.3f} s (wall {first_wall:.3f} s) — not counted below"
    )

    results = []
    for w in world_sizes:
        runs = []
        run_distributed(model_factory, batch, spec_dict, world_size=w, device="cpu", backend="gloo")  # warm-up
        for _ in range(args.repeats):
            runs.append(run_distributed(model_factory, batch, spec_dict, world_size=w, device="cpu", backend="gloo"))
        s = summarise(runs)
        last = runs[-1]
        s["max_abs_energy"] = float((last.outputs["energy"] - ref["energy"]).abs().max())
        s["max_abs_forces"] = float((last.outputs["forces"] - ref["forces"]).abs().max())
        s["max_forces"] = float(ref["forces"].abs().max())
        results.append(s)

    print(f"    {args.repeats} runs per world size after one warm-up run; figures are medians over those runs")
    print(
        "    torch threads per rank = max(1, cpu_count // W): "
        + ", ".join(f"W={w}: {max(1, (os.cpu_count() or 1) // w)}" for w in world_sizes)
    )
    print()
    header = (
        f"{'W':>2} | {'rank fwd med (s)':>16} | {'rank fwd max (s)':>16} | {'single (s)':>10} | "
        f"{'med/single':>10} | {'max/single':>10} | {'coll. share med/max':>19} | "
        f"{'start (s)':>9} | {'ranks (s)':>9} | {'total (s)':>9} | owned/halo per rank"
    )
    print(header)
    print("-" * len(header))
    for s in results:
        oh = ", ".join(f"{p['owned']}/{p['halo']}" for p in s["per_rank"])
        print(
            f"{s['world_size']:>2} | {s['fwd_med']:>16.3f} | {s['fwd_max']:>16.3f} | {single:>10.3f} | "
            f"{s['fwd_med'] / single:>10.2f} | {s['fwd_max'] / single:>10.2f} | "
            f"{100 * s['share_med']:>8.1f}% / {100 * s['share_max']:>5.1f}% | "
            f"{s['start']:>9.3f} | {s['ranks']:>9.3f} | {s['total']:>9.3f} | {oh}"
        )
    print()
    print("per rank (medians over runs): rows = owned + halo; collectives include waiting for peers")
    print(
        f"{'W':>2} {'rank':>4} {'owned':>6} {'halo':>5} {'remote':>6} {'rows/owned':>10} {'fwd (s)':>8} "
        f"{'coll (s)':>8} {'rendezvous (s)':>14} {'factory (s)':>11} {'wait peers (s)':>14}"
    )
    for s in results:
        for p in s["per_rank"]:
            ratio = (p["owned"] + p["halo"]) / p["owned"] if p["owned"] else float("inf")
            print(
                f"{s['world_size']:>2} {p['rank']:>4} {p['owned']:>6} {p['halo']:>5} {p['remote']:>6} "
                f"{ratio:>10.3f} {p['forward']:>8.3f} {p['collectives']:>8.3f} {p['rendezvous']:>14.3f} "
                f"{p['factory']:>11.3f} {p['wait_peers']:>14.3f}"
            )
    print()
    calls = args.repeats + 1
    print(
        f"(c) warm rank forward: long-lived ranks (spawned, gloo), {calls} consecutive calls each; "
        f"'warm' = median of calls 2..{calls}"
    )
    header_c = (
        f"{'W':>2} | {'first call med/max (s)':>22} | {'warm med (s)':>12} | {'warm max (s)':>12} | "
        f"{'single (s)':>10} | {'warm max/single':>15} | {'coll. share (warm, med/max)':>27}"
    )
    print(header_c)
    print("-" * len(header_c))
    for w in world_sizes:
        per_rank = warm_ranks(args.atoms, w, calls)
        first_calls = [fwd[0] for fwd, _ in per_rank]
        warm = [median(fwd[1:]) for fwd, _ in per_rank]
        shares = [median([c / f for f, c in zip(fwd[1:], coll[1:])]) for fwd, coll in per_rank]
        print(
            f"{w:>2} | {median(first_calls):>10.3f} / {max(first_calls):>9.3f} | {median(warm):>12.4f} | "
            f"{max(warm):>12.4f} | {single:>10.4f} | {max(warm) / single:>15.2f} | "
            f"{100 * median(shares):>14.1f}% / {100 * max(shares):>8.1f}%"
        )
    print()
    print("(d) lazy imports a rank's first forward triggers (fresh interpreter, torch already imported):")
    whys = (
        "first use of the dispatch-level observer (TorchDispatchMode)",
        "torch.autograd.grad with explicit grad_outputs (scaled seed)",
    )
    for module, why in zip(LAZY_IMPORTS, whys):
        print(f"    import {module}: {lazy_import_seconds(module):.3f} s  ({why})")
    print()
    print(f"load average at end (1/5/15 min): {_load()}")
    print("handler firings on rank 0 and agreement with the single-process outputs (last run):")
    for s in results:
        print(
            f"  W={s['world_size']}: {s['per_rank'][0]['handlers'] or '{}'}; max |dE| {s['max_abs_energy']:.1e}, "
            f"max |dF| {s['max_abs_forces']:.1e} (max |F| {s['max_forces']:.2f})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
