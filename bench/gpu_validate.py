"""Where `trace_and_validate` spends its time on one GPU, for the MPNN example (float64).

For samples of about 1k, 10k and 100k atoms (`examples.structures.periodic_slab_system` with the
cross-section growing slowly and the box elongated along z, so every rank has owned, halo and remote
atoms; checked with `examples.structures.slab_check`, degenerate combinations are skipped) and world
sizes 2, 4 and 8 (every rank on `--device`, gloo), measures:

- the wall time of one `trace_and_validate(examples.mpnn.model_factory, sample, ...)` and its split as
  recorded by the code: `report.meta.timings["reference"]` (the single-process reference run in a
  child of the warm pool), each attempt's `timings` (`start`: starting the rank processes, `ranks`:
  until the last rank finished, `attempt`: the attempt including diff and diagnostics);
- per rank, from one more `run_distributed` of the report's spec with the same sample and devices
  (the report keeps no per-rank records): `RankRecord.timings` (`rendezvous`, `factory`, `wait_peers`,
  `forward` = forward + backward under the handlers, `collectives`) and `peak_memory_bytes`;
- the floor: the bare forward + backward work the validation has to do, i.e. the single-process
  model call on the full sample plus, for every rank, the single-process model call on that rank's
  `[owned | halo]` atoms as a plain batch (warm, in this process, median of `--repeats` after a
  warm-up, `torch.cuda.synchronize()` around each), and the ratio wall / floor;
- process start-up per attempt with the warm forkserver pool against `start_method="spawn"`
  (`run_distributed` on the smallest sample), as `timings["total"]` minus the slowest rank's forward.

Prints tables only; it asserts nothing about time. Run from the repository root on a CUDA machine:

    python3 bench/gpu_validate.py [--device cuda:0] [--sizes 1k,10k,100k] [--world-sizes 2,4,8]
                                  [--repeats 3] [--budget 330]

`--budget` (seconds) skips the remaining combinations once the script has run that long.
Figures are in `bench/RESULTS_gpu.md`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (REPO, os.path.join(REPO, "server")):
    if path not in sys.path:
        sys.path.insert(0, path)

import torch  # noqa: E402

from distcheck import Batch, MLIPSpec, run_distributed, trace_and_validate  # noqa: E402
from distcheck.runtime.model import resolve_halo_width  # noqa: E402
from distcheck.runtime.partition import partition_batch  # noqa: E402
from examples import mpnn  # noqa: E402
from examples.structures import make_batch, periodic_slab_system, slab_check  # noqa: E402

SIZES: dict[str, tuple[int, int, int]] = {
    "1k": (5, 5, 40),  # 1,000 atoms, 13 x 13 x 104 Å
    "10k": (10, 10, 100),  # 10,000 atoms, 26 x 26 x 260 Å
    "100k": (20, 20, 250),  # 100,000 atoms, 52 x 52 x 650 Å
}
GIB = 1024**3


def sample(size: str) -> Batch:
    return make_batch([periodic_slab_system(SIZES[size], seed=11)])


def timed_call(model: Any, batch: Batch) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    model(batch)
    torch.cuda.synchronize()
    return time.perf_counter() - t0


def warm_forward(model: Any, batch: Batch, repeats: int) -> float:
    """Median single-process model call (neighbour list + forward + autograd forces) after a warm-up."""
    timed_call(model, batch)
    return statistics.median(timed_call(model, batch) for _ in range(repeats))


def rank_subbatch(batch: Batch, local_ids: torch.Tensor) -> Batch:
    """One rank's `[owned | halo]` atoms as a plain batch (same cell and pbc)."""
    ids = local_ids.to(batch.positions.device)
    return Batch(
        positions=batch.positions[ids],
        atomic_numbers=batch.atomic_numbers[ids],
        cell=batch.cell,
        pbc=batch.pbc,
        batch=batch.batch[ids],
    )


def floor_seconds(batch: Batch, world_size: int, halo: float, device: str, repeats: int) -> tuple[float, float]:
    """(single-process call on the full sample, sum over ranks of the call on the rank's rows)."""
    model = mpnn.model_factory().to(device)
    on_device = batch.to(device)
    full = warm_forward(model, on_device, repeats)
    part = partition_batch(batch, world_size, halo)
    ranks = sum(warm_forward(model, rank_subbatch(on_device, rp.local_ids), repeats) for rp in part.ranks)
    return full, ranks


def startup(run: Any) -> float:
    """Seconds of a run not spent in the slowest rank's forward: process start, imports, rendezvous,
    factory, waiting for peers, collecting and loading the outputs."""
    return run.timings["total"] - max(r.timings["forward"] for r in run.records)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda:0")
    ap.add_argument("--sizes", default="1k,10k,100k")
    ap.add_argument("--world-sizes", default="2,4,8")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--budget", type=float, default=330.0)
    args = ap.parse_args()
    t_script = time.perf_counter()
    device: str = args.device
    sizes = [s.strip() for s in args.sizes.split(",") if s.strip()]
    world_sizes = [int(w) for w in args.world_sizes.split(",") if w.strip()]
    props = torch.cuda.get_device_properties(torch.device(device))
    print("distcheck trace_and_validate on one GPU — MPNN example (examples.mpnn, 3 interactions, float64)")
    print(
        f"python {platform.python_version()}, torch {torch.__version__}, {props.name} "
        f"({props.total_memory / GIB:.0f} GiB), {os.cpu_count()} CPU cores; every rank on {device}, backend gloo"
    )
    halo = resolve_halo_width(MLIPSpec.coerce(mpnn.SPEC), mpnn.model_factory())
    print(f"halo width {halo:.2f} Å (cutoff 4 Å, halo_correction)")

    # Start the forkserver pool once; its cost is reported, not counted below.
    t0 = time.perf_counter()
    first = run_distributed(mpnn.model_factory, sample("1k"), mpnn.SPEC, world_size=2, device=device, backend="gloo")
    print(
        f"first run_distributed (starts the forkserver, 1k atoms, W=2): total {time.perf_counter() - t0:.2f} s "
        f"(start {first.timings['start']:.2f} s, ranks {first.timings['ranks']:.2f} s)\n"
    )

    rows: list[dict[str, Any]] = []
    per_rank: list[str] = []
    for size in sizes:
        batch = sample(size)
        for w in world_sizes:
            if time.perf_counter() - t_script > args.budget:
                print(f"skipped {size} W={w}: past --budget {args.budget:g} s")
                continue
            problems = slab_check(batch, halo, w)
            if problems:
                print(f"skipped {size} W={w}: degenerate partition: {problems[0]}")
                continue
            t0 = time.perf_counter()
            report = trace_and_validate(mpnn.model_factory, batch, world_size=w, device=device)
            wall = time.perf_counter() - t0
            ref_s = float(report.meta.timings["reference"])
            att = [a.timings for a in report.attempts]
            start_s = sum(t.get("start", 0.0) for t in att)
            ranks_s = sum(t.get("ranks", 0.0) for t in att)
            run = run_distributed(mpnn.model_factory, batch, report.spec, world_size=w, device=device, backend="gloo")
            fwd = [r.timings["forward"] for r in run.records]
            coll = [r.timings.get("collectives", 0.0) for r in run.records]
            boot = [r.timings.get("rendezvous", 0.0) + r.timings.get("factory", 0.0) for r in run.records]
            mem = [r.peak_memory_bytes for r in run.records]
            full, ranks_floor = floor_seconds(batch, w, halo, device, args.repeats)
            floor = full + ranks_floor
            rows.append(
                {
                    "size": size,
                    "atoms": batch.num_atoms,
                    "w": w,
                    "verdict": report.verdict,
                    "attempts": len(report.attempts),
                    "wall": wall,
                    "ref": ref_s,
                    "start": start_s,
                    "ranks": ranks_s,
                    "fwd_max": max(fwd),
                    "coll_max": max(coll),
                    "boot_max": max(boot),
                    "mem_max": max(mem),
                    "full": full,
                    "ranks_floor": ranks_floor,
                    "floor": floor,
                    "run_startup": startup(run),
                }
            )
            for r in run.records:
                t = r.timings
                per_rank.append(
                    f"{size:>5} {w:>2} {r.rank:>4} {r.owned:>7} {r.halo:>6} {r.remote:>7} "
                    f"{t.get('rendezvous', 0.0):>8.3f} {t.get('factory', 0.0):>8.3f} {t.get('wait_peers', 0.0):>8.3f} "
                    f"{t['forward']:>8.3f} {t.get('collectives', 0.0):>8.3f} {r.peak_memory_bytes / 2**20:>10.1f}"
                )
            print(
                f"done {size} W={w}: {report.verdict}, {len(report.attempts)} attempt(s), wall {wall:.2f} s "
                f"(script at {time.perf_counter() - t_script:.0f} s)",
                flush=True,
            )

    print("\n(1) trace_and_validate wall time and its split (shares of the wall time)")
    print("    ref = reference run; start = starting rank processes (sum over attempts); ranks = start of the ranks")
    print("    to the last one finishing (sum over attempts); fwd/coll max = slowest rank's forward and time in")
    print("    collectives, rendezvous+factory max = rank boot, all three from a separate run_distributed of the")
    print("    report's spec; floor = single-process call on the full sample + on every rank's rows (warm)")
    head = (
        f"{'size':>5} {'atoms':>7} {'W':>2} {'verdict':>8} {'att':>3} {'wall s':>7} {'ref':>6} {'start':>6} "
        f"{'ranks':>6} {'fwd max':>8} {'coll max':>8} {'boot max':>8} {'peak GiB':>8} {'floor s':>8} "
        f"{'wall/floor':>10}"
    )
    print(head)
    print("-" * len(head))
    for r in rows:
        wall = r["wall"]
        print(
            f"{r['size']:>5} {r['atoms']:>7} {r['w']:>2} {r['verdict']:>8} {r['attempts']:>3} {wall:>7.2f} "
            f"{r['ref'] / wall:>6.1%} {r['start'] / wall:>6.1%} {r['ranks'] / wall:>6.1%} "
            f"{r['fwd_max'] / wall:>8.1%} {r['coll_max'] / wall:>8.1%} {r['boot_max'] / wall:>8.1%} "
            f"{r['mem_max'] / GIB:>8.3f} {r['floor']:>8.4f} {wall / r['floor']:>10.0f}"
        )
    print("\n    floor parts (s): single-process full sample + sum over ranks of the call on the rank's rows")
    for r in rows:
        print(
            f"    {r['size']:>5} W={r['w']}: {r['full']:.4f} + {r['ranks_floor']:.4f} = {r['floor']:.4f}; "
            f"slowest rank forward in the run {r['fwd_max']:.3f} s; run_distributed start-up {r['run_startup']:.2f} s"
        )

    print("\n(2) per rank, from the separate run_distributed (seconds; peak = max_memory_allocated during forward)")
    print(
        f"{'size':>5} {'W':>2} {'rank':>4} {'owned':>7} {'halo':>6} {'remote':>7} {'rendezv':>8} {'factory':>8} "
        f"{'wait':>8} {'forward':>8} {'coll':>8} {'peak MiB':>10}"
    )
    for line in per_rank:
        print(line)

    print("\n(3) start-up per attempt: warm forkserver pool vs spawn (1k atoms; start-up = total - slowest forward)")
    print(f"{'W':>2} {'method':>10} {'start s':>8} {'total s':>8} {'start-up s':>10} {'rendezvous max':>14}")
    small = sample(sizes[0] if sizes else "1k")
    for w in (2, 8):
        if time.perf_counter() - t_script > args.budget + 60:
            print(f"skipped W={w}: past --budget")
            continue
        for method in ("forkserver", "spawn"):
            run = run_distributed(
                mpnn.model_factory, small, mpnn.SPEC, world_size=w, device=device, backend="gloo", start_method=method
            )
            rdv = max(r.timings.get("rendezvous", 0.0) for r in run.records)
            print(
                f"{w:>2} {method:>10} {run.timings['start']:>8.3f} {run.timings['total']:>8.3f} "
                f"{startup(run):>10.3f} {rdv:>14.3f}",
                flush=True,
            )
    print(f"\nscript wall time {time.perf_counter() - t_script:.1f} s")


if __name__ == "__main__":
    main()
