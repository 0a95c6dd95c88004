"""Where the receptive-field measurement spends its time, on the MPNN example.

    .venv/bin/python bench/receptive_probe.py [--device cpu|cuda:0] [--sizes 1k,10k,100k] [--top 25]

Per size: one warm forward of the reference's kind (neighbour list + forward + autograd forces), the
measurement's wall time (`measure_receptive_field`, given the forward's per-atom quantities as the
reference gives them), and the functions it spent the most cumulative time in (cProfile). Measures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "server"), str(ROOT), str(ROOT / "bench")]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--sizes", default="1k,10k")
    parser.add_argument("--top", type=int, default=25)
    args = parser.parse_args()

    import torch
    from gpu_validate import sample

    from distcheck.runtime.model import check_outputs
    from distcheck.validate.receptive import SourceCapture, measure_receptive_field, per_atom_quantities
    from examples import mpnn

    device = torch.device(args.device)

    def sync() -> None:
        if device.type == "cuda":
            torch.cuda.synchronize(device)

    for size in args.sizes.split(","):
        wrapper = mpnn.model_factory().to(device)
        batch = sample(size).to(device)
        wrapper(batch)  # warm-up
        sync()
        capture = SourceCapture(batch.num_atoms, batch.num_systems)
        t0 = time.perf_counter()
        with capture:
            raw = wrapper(batch)
        sync()
        forward = time.perf_counter() - t0
        outputs = check_outputs(raw, type(wrapper).__name__)
        base = per_atom_quantities(capture.sources, outputs, batch)
        profile = cProfile.Profile()
        t0 = time.perf_counter()
        profile.enable()
        result = measure_receptive_field(
            wrapper,
            batch,
            cutoff=float(wrapper.cutoff),
            derived={"energy": False, "forces": True},
            forward_seconds=forward,
            base=base,
        )
        sync()
        profile.disable()
        seconds = time.perf_counter() - t0
        print(
            f"MPNN {size} ({batch.num_atoms} atoms) on {device}: forward {forward:.3f} s, "
            f"measurement {seconds:.3f} s, {result['status']} depth {result['measured_depth']}"
        )
        text = io.StringIO()
        pstats.Stats(profile, stream=text).sort_stats("cumulative").print_stats(args.top)
        print("\n".join(line for line in text.getvalue().splitlines() if line.strip())[:6000])


if __name__ == "__main__":
    main()
