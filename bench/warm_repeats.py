"""Warm validations of `examples.mpnn`, one after another with spares kept warm: each one's wall time and
the reference's forward. For an A/B of one change, run it on both trees (`git stash` between). Prints
figures; asserts nothing.

    .venv/bin/python bench/warm_repeats.py [--device cpu] [--size 1k] [--world-size 2] [--repeats 5] [--ahead 1]
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT), str(ROOT / "server"), str(ROOT / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N")
    parser.add_argument("--size", default="1k", help="sample size (gpu_validate.sample)")
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--ahead", default="1", help="DISTCHECK_ATTEMPT_AHEAD: 1, 0, or auto (unset)")
    args = parser.parse_args()
    if args.ahead != "auto":
        os.environ["DISTCHECK_ATTEMPT_AHEAD"] = args.ahead
    import validate_latency
    from gpu_validate import sample

    from distcheck.processes import spares
    from examples import mpnn

    validate_latency.DEVICE = args.device
    batch = sample(args.size)
    spares.keep_warm(args.device, args.world_size)
    walls, forwards = [], []
    for _ in range(args.repeats):
        validate_latency.wait_warm(args.world_size)
        t0 = time.perf_counter()
        report = validate_latency.validate(mpnn.model_factory, batch, args.world_size)
        walls.append(time.perf_counter() - t0)
        forwards.append(float((report.meta.timings or {}).get("reference_forward", float("nan"))))
    print(
        f"{args.size} W={args.world_size} {args.device} ahead={args.ahead}: walls "
        + " ".join(f"{w:.3f}" for w in walls)
        + f" (min {min(walls):.3f} s); reference forward {min(forwards):.3f}-{max(forwards):.3f} s"
    )


if __name__ == "__main__":
    main()
