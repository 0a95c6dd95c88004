"""Time `validate_on_cpu` on the real models and print a Markdown table (figures only, no verdicts asserted).

    python -m examples.real.measure                          # every installed model, world sizes 2 and 4
    python -m examples.real.measure --warm                   # with the third-party packages preloaded
    python -m examples.real.measure --models aimnet2 --world-sizes 4

Each validation starts from the wrapper's inferred spec with auto-fix on, as a user would run it.
The forkserver warm pool is started (and, with `--warm`, made to preload `examples.real.warm`) before
the first timed validation; its start-up is printed separately. Run from the repository root.
"""

from __future__ import annotations

import argparse
import importlib
import multiprocessing.forkserver
import os
import platform
import time
import warnings
from typing import Any

import torch

MODELS = ("aimnet2", "mace_model", "schnet")
PACKAGES = {"aimnet2": "aimnet.models", "mace_model": "mace.modules", "schnet": "torch_geometric.nn"}


def _start_pool(warm: bool) -> float:
    """Start distcheck's forkserver (preloading `examples.real.warm` when `warm`); seconds it took."""
    from distcheck.processes.forkserver import process_context

    context = process_context()
    if warm:
        server: Any = getattr(multiprocessing.forkserver, "_forkserver", None)
        current = list(getattr(server, "_preload_modules", []) or [])
        context.set_forkserver_preload([*current, "examples.real.warm"])
    t0 = time.perf_counter()
    proc = context.Process(target=os._exit, args=(0,))
    proc.start()
    proc.join()
    return time.perf_counter() - t0


def _row(name: str, world_size: int) -> dict[str, Any]:
    from distcheck import validate_on_cpu

    module = importlib.import_module(f"examples.real.{name}")
    t0 = time.perf_counter()
    report = validate_on_cpu(module.model_factory, module.sample_batch(), world_size=world_size)
    wall = time.perf_counter() - t0
    best = report.best_attempt
    return {
        "model": name,
        "world_size": world_size,
        "ok": report.ok,
        "wall": wall,
        "reference": report.meta.timings["reference"],
        "attempts": len(report.attempts),
        "per_attempt": [a.timings.get("attempt", 0.0) for a in report.attempts],
        "rules": [a.rule for a in report.attempts[1:]],
        "forces_rel": best.max_rel_diff.get("forces") if best else None,
        "forces_abs": best.max_abs_diff.get("forces") if best else None,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    parser.add_argument("--world-sizes", nargs="+", type=int, default=[2, 4])
    parser.add_argument("--warm", action="store_true", help="preload the third-party packages in the forkserver")
    args = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    models = [m for m in args.models if importlib.util.find_spec(PACKAGES[m].split(".")[0]) is not None]
    for missing in sorted(set(args.models) - set(models)):
        print(f"skipped {missing}: {PACKAGES[missing]} is not installed")
    print(
        f"torch {torch.__version__}, Python {platform.python_version()}, {os.cpu_count()} CPUs; "
        f"pool {'warm (examples.real.warm preloaded)' if args.warm else 'cold (torch + distcheck preloaded)'}; "
        f"pool start {_start_pool(args.warm):.1f} s"
    )
    print()
    print(
        "| model | world size | verdict | wall (s) | reference (s) | attempts | attempt times (s) | fix "
        "| forces max abs diff |"
    )
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for name in models:
        for world_size in args.world_sizes:
            r = _row(name, world_size)
            per = ", ".join(f"{t:.1f}" for t in r["per_attempt"])
            fix = ", ".join(str(x) for x in r["rules"]) or "—"
            diff = f"{r['forces_abs']:.1e}" if r["forces_abs"] is not None else "—"
            verdict = "pass" if r["ok"] else "FAIL"
            print(
                f"| {name} | {world_size} | {verdict} | {r['wall']:.1f} | {r['reference']:.1f} | {r['attempts']} | "
                f"{per} | {fix} | {diff} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
