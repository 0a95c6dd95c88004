"""Per-attempt start-up and total validation time with the warm forkserver pool vs plain spawn, and the
overhead of the helper trace + layer hooks against a plain rank forward. Prints figures; asserts nothing.

    .venv/bin/python bench/validate_latency.py [--repeats 3] [--world-size 2]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)


DEVICE = "cpu"


def _attempt(method: str, world_size: int, instrumented: bool, model: str = "mpnn") -> tuple[float, float]:
    import importlib

    from distcheck import run_distributed
    from distcheck.validate import DEFAULT_WATCHED_HELPERS
    from distcheck.validate.api import _findable

    module = importlib.import_module(f"examples.{model}")
    batch = module.sample_batch()
    spec = getattr(module, "CORRECT_SPEC", None) or module.model_factory().distribution_spec
    # The MPNN runs with the default watched package (aimnet.nbops: absent here, skipped); the helper model
    # with the package it calls, so its calls are traced and sampled.
    watched = ["examples.thirdparty.nbops"] if model == "helper_model" else list(DEFAULT_WATCHED_HELPERS)
    watched = [p for p in watched if _findable(p)]  # as validate does: absent packages never reach the ranks
    options = {"helper_packages": watched, "helper_sample_every": 8, "layer_diagnostic": True}
    t0 = time.perf_counter()
    run = run_distributed(
        module.model_factory,
        batch,
        spec,
        world_size=world_size,
        device=DEVICE,
        start_method=method,
        instrumentation="distcheck.validate.instrument:RankInstrumentation" if instrumented else None,
        instrumentation_options=options if instrumented else None,
    )
    wall = time.perf_counter() - t0
    forward = max(rec.timings["forward"] for rec in run.records)
    return wall, forward


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--world-size", type=int, default=2)
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N (every rank on that device)")
    parser.add_argument("--skip-validate", action="store_true", help="leave out the whole-validation timing")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    from distcheck import trace_and_validate, validate_on_cpu
    from examples import mpnn

    def validate(world_size: int) -> None:
        if DEVICE == "cpu":
            validate_on_cpu(mpnn.model_factory, mpnn.sample_batch(), world_size=world_size)
        else:
            trace_and_validate(mpnn.model_factory, mpnn.sample_batch(), world_size=world_size, device=DEVICE)

    print(f"MPNN example ({mpnn.sample_batch().num_atoms} atoms), world_size {args.world_size}, {DEVICE}, gloo")
    rows = []
    for method in ("forkserver", "spawn"):
        _attempt(method, args.world_size, True)  # warm-up: starts the pool for forkserver
        walls, forwards = [], []
        for _ in range(args.repeats):
            wall, fwd = _attempt(method, args.world_size, True)
            walls.append(wall)
            forwards.append(fwd)
        os.environ["DISTCHECK_START_METHOD"] = method
        t0 = time.perf_counter()
        validate(args.world_size)
        total = time.perf_counter() - t0
        del os.environ["DISTCHECK_START_METHOD"]
        wall, fwd = statistics.median(walls), statistics.median(forwards)
        rows.append((method, wall, wall - fwd, total))
    print(f"{'start method':<12} {'attempt wall s':>15} {'start-up s':>11} {'validation s':>18}")
    for method, wall, startup, total in rows:
        print(f"{method:<12} {wall:>15.3f} {startup:>11.3f} {total:>18.3f}")
    print(f"start-up ratio spawn/forkserver: {rows[1][2] / rows[0][2]:.2f}x")
    for model in ("mpnn", "helper_model"):
        plain = [_attempt("forkserver", args.world_size, False, model)[1] for _ in range(args.repeats)]
        traced = [_attempt("forkserver", args.world_size, True, model)[1] for _ in range(args.repeats)]
        p, t = statistics.median(plain), statistics.median(traced)
        print(
            f"{model}: rank forward plain {p * 1e3:.1f} ms, with helper trace + layer hooks {t * 1e3:.1f} ms, "
            f"ratio {t / p:.2f}x"
        )


if __name__ == "__main__":
    main()
