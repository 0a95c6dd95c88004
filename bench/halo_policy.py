"""Halo size and time of scatter mode `owned_complete` against `local` for a 3-layer self-graph model.

`examples.self_graph.model_factory()` builds its own radius graph (cutoff 3 Å) from positions and
passes messages three times with `index_add`. Under `local` its halo must cover the receptive field
(3 × 3 + 0.5 = 9.5 Å); under `owned_complete` one cutoff (3.5 Å), the halo rows being refreshed from
their owners after each aggregation. For periodic boxes of `cross` x `cross` x `nz` lattice cells (2.6 Å,
so `cross`² atoms per plane, cut along z), this runs `distcheck.run_distributed` on the CPU (gloo) under both
specs, `--repeats` times each after one warm-up run, and prints per mode: halo rows per rank, local
rows per rank, the ranks' forward time (`records[r].timings["forward"]`: the wrapper's forward and
backward under the handlers, median over repeats of the slowest rank), the time inside collectives,
the whole run's wall time, and the largest relative difference from the single-process forces
(both modes must be exact; the figures compare equals), and the single-process time of one call
(median of three after a warm-up, `torch.set_num_threads(1)` as a rank uses).

Prints figures only; it asserts nothing about time. Run from the repository root:

    .venv/bin/python bench/halo_policy.py [--cross 3,6] [--nz 20,40] [--world-size 2] [--repeats 5]
"""

from __future__ import annotations

import argparse
import copy
import statistics
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from distcheck import run_distributed  # noqa: E402
from examples import self_graph  # noqa: E402
from examples.structures import make_batch, periodic_slab_system  # noqa: E402

MODES = ("local", "owned_complete")


def _spec(mode: str) -> dict[str, Any]:
    spec = copy.deepcopy(self_graph.SPEC)
    spec["distribution"]["policy"]["scatter_mode"] = mode
    return spec


def _max_rel(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).abs().max()) / max(float(b.abs().max()), 1e-300)


def measure(cross: int, nz: int, world_size: int, repeats: int) -> list[dict[str, Any]]:
    """One row per mode for a `cross` x `cross` x `nz` box."""
    batch = make_batch([periodic_slab_system((cross, cross, nz), seed=71)])
    model = self_graph.model_factory()
    ref = {k: v.detach() for k, v in model(batch).items()}  # also the warm-up call
    calls = []
    for _ in range(3):
        t0 = time.perf_counter()
        model(batch)
        calls.append(time.perf_counter() - t0)
    single = statistics.median(calls)
    rows = []
    for mode in MODES:
        spec = _spec(mode)
        run_distributed(self_graph.model_factory, batch, spec, world_size=world_size)  # warm-up
        forward, collectives, wall, err = [], [], [], 0.0
        records: list[Any] = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            run = run_distributed(self_graph.model_factory, batch, spec, world_size=world_size)
            wall.append(time.perf_counter() - t0)
            records = run.records
            forward.append(max(r.timings.get("forward", 0.0) for r in records))
            collectives.append(max(r.timings.get("collectives", 0.0) for r in records))
            err = max(err, _max_rel(run.outputs["forces"], ref["forces"]))
        rows.append(
            {
                "atoms": batch.num_atoms,
                "mode": mode,
                "halo_width": records[0].halo_width,
                "halo": [r.halo for r in records],
                "local_rows": [r.owned + r.halo for r in records],
                "remote": [r.remote for r in records],
                "forward": statistics.median(forward),
                "collectives": statistics.median(collectives),
                "wall": statistics.median(wall),
                "single": single,
                "err": err,
            }
        )
    return rows


def main(argv: list[str] | None = None) -> int:
    """Print the table (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cross", default="3,6", help="lattice cells across (x and y), comma-separated")
    parser.add_argument("--nz", default="20,40", help="lattice planes along z, comma-separated")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, world size {args.world_size}, {args.repeats} repeats, gloo on CPU")
    header = (
        "| atoms | mode | halo width Å | halo rows per rank | local rows per rank | remote per rank | "
        "rank forward s | collectives s | run wall s | one process s | max rel err forces |"
    )
    print(header)
    print("|" + " --- |" * (header.count("|") - 1))
    sizes = [(int(c), int(z)) for c in args.cross.split(",") for z in args.nz.split(",")]
    for cross, nz in sizes:
        for row in measure(cross, nz, args.world_size, args.repeats):
            print(
                f"| {row['atoms']} | {row['mode']} | {row['halo_width']:.1f} | {row['halo']} | {row['local_rows']} | "
                f"{row['remote']} | {row['forward']:.3f} | {row['collectives']:.3f} | {row['wall']:.2f} | "
                f"{row['single']:.3f} | {row['err']:.1e} |"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
