"""The same validation with every rank on one GPU (gloo) and with one rank per GPU (NCCL), side by side.

For the MPNN example (float64) on samples of about 1k, 10k and 100k atoms (the slabs of
`bench/gpu_validate.py`) at world size 2, runs `trace_and_validate` twice per configuration:

- `gloo, 1 GPU`: `device="cuda:0"` (every rank on GPU 0; `backend="auto"` resolves to gloo);
- `NCCL, W GPUs`: `device="cuda"` (rank r on GPU r; `backend="auto"` resolves to NCCL), only when
  torch sees at least W GPUs — otherwise the row says so and nothing is measured;

and, once per configuration, the seeded bug of `examples.unaware_model` (its `WRONG_SPEC`, no
auto-fix) on the 1k sample, to show that both give the same verdict. For each run it prints the
verdict, the wall time of the call, the reference run, and the attempt's `ranks` time (from starting
the ranks to the last one finishing), as recorded in the report. The first of `--repeats` runs
includes the pool's warm-up; the table shows the median and the minimum.

Prints tables only; it asserts nothing about time. Run from the repository root on a CUDA machine:

    python3 bench/gloo_vs_nccl.py [--sizes 1k,10k,100k] [--world-size 2] [--repeats 3]

Figures are in `bench/RESULTS.md` (section "gloo on one GPU against NCCL on several").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
for path in (REPO, os.path.join(REPO, "server")):
    if path not in sys.path:
        sys.path.insert(0, path)

import torch  # noqa: E402

from distcheck import Batch, MLIPSpec, trace_and_validate  # noqa: E402
from examples import mpnn, unaware_model  # noqa: E402
from examples.structures import make_batch, periodic_slab_system  # noqa: E402

SIZES: dict[str, tuple[int, int, int]] = {"1k": (5, 5, 40), "10k": (10, 10, 100), "100k": (20, 20, 250)}


def _sample(size: str) -> Batch:
    return make_batch([periodic_slab_system(SIZES[size], seed=11)])


def _configs(world_size: int) -> list[tuple[str, str]]:
    return [("gloo, 1 GPU", "cuda:0"), (f"NCCL, {world_size} GPUs", "cuda")]


def _measure(factory: Any, batch: Batch, world_size: int, device: str, **kwargs: Any) -> dict[str, Any]:
    t0 = time.perf_counter()
    report = trace_and_validate(factory, batch, world_size=world_size, device=device, **kwargs)
    wall = time.perf_counter() - t0
    attempt = report.attempts[0]
    return {
        "verdict": report.verdict,
        "backend": report.meta.backend,
        "wall": wall,
        "reference": report.meta.timings["reference"],
        "ranks": attempt.timings.get("ranks", float("nan")),
        "failing": ",".join(attempt.failing_outputs) or "-",
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="1k,10k,100k")
    ap.add_argument("--world-size", type=int, default=2)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    gpus = torch.cuda.device_count() if torch.cuda.is_available() else 0
    if gpus == 0:
        sys.exit("bench/gloo_vs_nccl.py needs CUDA; run it on a machine with a GPU")
    names = [torch.cuda.get_device_name(i) for i in range(gpus)]
    print(f"torch {torch.__version__}, {gpus} GPU(s): {', '.join(names)}; world size {args.world_size}\n")
    print("| sample | atoms | configuration | verdict | wall median (min) s | reference s | ranks median (min) s |")
    print("|---|---|---|---|---|---|---|")
    for size in args.sizes.split(","):
        batch = _sample(size)
        for label, device in _configs(args.world_size):
            if device == "cuda" and gpus < args.world_size:
                print(f"| {size} | {batch.num_atoms} | {label} | not run: torch sees {gpus} GPU(s) | | | |")
                continue
            runs = [_measure(mpnn.model_factory, batch, args.world_size, device) for _ in range(args.repeats)]
            walls, ranks = [r["wall"] for r in runs], [r["ranks"] for r in runs]
            reference = statistics.median(r["reference"] for r in runs)
            verdicts = sorted({f"{r['verdict']} ({r['backend']})" for r in runs})
            print(
                f"| {size} | {batch.num_atoms} | {label} | {', '.join(verdicts)} | "
                f"{statistics.median(walls):.2f} ({min(walls):.2f}) | {reference:.2f} | "
                f"{statistics.median(ranks):.2f} ({min(ranks):.2f}) |",
                flush=True,
            )
    print("\nSeeded bug (examples.unaware_model with WRONG_SPEC, no auto-fix):\n")
    print("| configuration | verdict | failing outputs | wall s |")
    print("|---|---|---|---|")
    wrong = MLIPSpec.from_dict(unaware_model.WRONG_SPEC)
    for label, device in _configs(args.world_size):
        if device == "cuda" and gpus < args.world_size:
            print(f"| {label} | not run: torch sees {gpus} GPU(s) | | |")
            continue
        sample = unaware_model.sample_batch()
        r = _measure(unaware_model.model_factory, sample, args.world_size, device, spec=wrong, auto_fix=False)
        print(f"| {label} | {r['verdict']} ({r['backend']}) | {r['failing']} | {r['wall']:.2f} |", flush=True)


if __name__ == "__main__":
    main()
