"""What the first forward of a freshly built model costs in a warm spare, and where that time goes.

    python3 bench/first_forward.py [--device cuda:0] [--sizes 1k] [--top 20]

Each case runs in a fresh interpreter that first does what a spare does before it is handed a job
(`spares.child._warm`: CUDA context, the autograd warm-up, the operator families of
`spares.warmup.warm_kernels`), then builds `examples.mpnn`'s model and
times, with `torch.cuda.synchronize()` around each: the first forward + forces, the second, and a
first forward of a second model instance. Cases: the spare's warm-up as it is; its autograd pass
without the operator families; no warm-up; and with
`CUDA_MODULE_LOADING=EAGER` (every kernel loaded when the context starts), which separates lazy kernel
loading from the rest. Then one more fresh interpreter profiles the first forward after the warm-up
(`torch.profiler`, CPU and CUDA activities) and prints the operators with the most self CPU time:
the ones whose first call is slow are what the warm-up does not cover. Measures; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

CHILD = r"""
import json, sys, time
sys.path[:0] = [{server!r}, {root!r}, {bench!r}]
t0 = time.perf_counter()
import torch
from distcheck.processes.spares import warmup as spare_warmup
from gpu_validate import sample
from examples import mpnn
device = torch.device({device!r})
timings = {{"import": time.perf_counter() - t0}}
t = time.perf_counter()
if device.type == "cuda":
    torch.cuda.set_device(device)
    torch.cuda.init()
timings["cuda_init"] = time.perf_counter() - t
t = time.perf_counter()
if {warm!r}:
    spares.warmup.warm_autograd(device)
    if {kernels!r}:
        spares.warmup.warm_kernels(device)
if device.type == "cuda":
    torch.cuda.synchronize(device)
timings["warm_up"] = time.perf_counter() - t
batch = sample({size!r}).to(device)

def call(model):
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    t = time.perf_counter()
    model(batch)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter() - t

t = time.perf_counter()
model = mpnn.model_factory().to(device)
timings["build"] = time.perf_counter() - t
if {profile!r}:
    from torch.profiler import ProfilerActivity, profile
    acts = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if device.type == "cuda" else [])
    with profile(activities=acts) as prof:
        call(model)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit={top}))
    sys.exit(0)
timings["first_forward"] = call(model)
timings["second_forward"] = call(model)
timings["new_instance_first_forward"] = call(mpnn.model_factory().to(device))
print("RESULT " + json.dumps(timings))
"""


def run(
    device: str, size: str, *, warm: bool, eager: bool, kernels: bool = True, profile: bool = False, top: int = 20
) -> str:
    code = CHILD.format(
        server=str(ROOT / "server"),
        root=str(ROOT),
        bench=str(ROOT / "bench"),
        device=device,
        size=size,
        warm=warm,
        kernels=kernels,
        profile=profile,
        top=top,
    )
    env = dict(os.environ)
    env.pop("CUDA_MODULE_LOADING", None)
    if eager:
        env["CUDA_MODULE_LOADING"] = "EAGER"
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    if done.returncode != 0:
        return f"FAILED ({done.returncode}): {done.stderr[-2000:]}"
    return done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--device", default="cuda:0")
    parser.add_argument("--sizes", default="1k")
    parser.add_argument("--top", type=int, default=20)
    args = parser.parse_args()
    keys = ["import", "cuda_init", "warm_up", "build", "first_forward", "second_forward", "new_instance_first_forward"]
    print(f"{'case':<34}" + "".join(f"{k:>14}" for k in keys))
    for size in args.sizes.split(","):
        for label, warm, eager, kernels in (
            ("spare warm-up", True, False, True),
            ("autograd pass only", True, False, False),
            ("no warm-up", False, False, False),
            ("EAGER + warm-up", True, True, True),
        ):
            out = run(args.device, size, warm=warm, eager=eager, kernels=kernels)
            line = next((ln for ln in out.splitlines() if ln.startswith("RESULT ")), None)
            if line is None:
                print(f"{size} {label:<28} {out.strip()[:400]}")
                continue
            t = json.loads(line[len("RESULT ") :])
            print(f"{size + ' ' + label:<34}" + "".join(f"{t[k]:>13.3f}s" for k in keys), flush=True)
        print(f"\nfirst forward after the spare's warm-up, {size}: operators by self CPU time")
        print(run(args.device, size, warm=True, eager=False, profile=True, top=args.top))


if __name__ == "__main__":
    main()
