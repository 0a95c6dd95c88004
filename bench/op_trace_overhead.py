"""What the op trace costs the reference run's forward, on the CPU.

The reference run always traces its torch operations (`runtime.op_trace.OpTracer`, through
`validate.layers.LayerRecorder`) so that a failing validation can name the first op whose value
departs. For each example model below this script times the wrapper's call on the example's own
sample (`model(batch)`: the neighbour list, the forward and the autograd backward that gives the
forces) with the layer recorder attached twice: with `trace_ops=False` (module hooks only) and with
`trace_ops=True` (hooks and the op trace), alternating, `--repeats` times each after one warm-up
call of each, with `torch.set_num_threads(--threads)`. It prints the median of each, the added time
and its ratio, and how many ops the trace kept. Prints figures only; asserts nothing about time.

    .venv/bin/python bench/op_trace_overhead.py [--repeats 15] [--threads 1] [--models examples.mpnn,...]

Results are in `bench/RESULTS.md`.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the examples, run from anywhere

from distcheck.runtime.factory import load_object
from distcheck.validate.layers import LayerRecorder

MODELS = (
    "examples.mpnn",
    "examples.helper_model",
    "examples.unaware_model",
    "examples.pair_potential",
    "examples.stress_model",
    "examples.self_graph",
    "examples.charge_eq",
)


def _call(wrapper: Any, batch: Any, trace_ops: bool) -> tuple[float, int]:
    recorder = LayerRecorder(wrapper, batch.num_atoms, batch.num_systems, trace_ops=trace_ops)
    t0 = time.perf_counter()
    with recorder.attached():
        wrapper(batch)
    seconds = time.perf_counter() - t0
    ops = recorder.op_records().get("ops") or []
    return seconds, len(ops)


def measure(module: str, repeats: int) -> dict[str, float]:
    """Median seconds of the call without and with the op trace, and the ops the trace kept."""
    wrapper = load_object(f"{module}:model_factory")()
    batch = load_object(f"{module}:sample_batch")()
    for trace in (False, True):
        _call(wrapper, batch, trace)  # warm-up of each
    plain: list[float] = []
    traced: list[float] = []
    kept = 0
    for _ in range(repeats):
        plain.append(_call(wrapper, batch, False)[0])
        seconds, kept = _call(wrapper, batch, True)
        traced.append(seconds)
    return {
        "atoms": float(batch.num_atoms),
        "plain": statistics.median(plain),
        "traced": statistics.median(traced),
        "ops": float(kept),
    }


def main() -> None:
    """Parse the arguments, measure every model, print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--models", default=",".join(MODELS))
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print(f"op trace overhead, cpu, torch {torch.__version__}, {os.cpu_count()} CPUs, {platform.processor() or '?'}")
    print(f"load average at start: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"median of {args.repeats} calls (alternating), {args.threads} thread(s)\n")
    print(f"{'model':<26}{'atoms':>7}{'hooks only':>13}{'+ op trace':>13}{'added':>10}{'ratio':>8}{'ops':>7}")
    for module in args.models.split(","):
        m = measure(module, args.repeats)
        added = m["traced"] - m["plain"]
        print(
            f"{module:<26}{m['atoms']:>7.0f}{m['plain'] * 1e3:>10.2f} ms{m['traced'] * 1e3:>10.2f} ms"
            f"{added * 1e3:>7.2f} ms{m['traced'] / m['plain']:>7.2f}×{m['ops']:>7.0f}"
        )
    print(f"\nload average at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
