"""The first validation in a fresh interpreter and the CLI from a fresh shell, for one source tree or
two (to compare a change: `git worktree add /tmp/before <commit>`), alternately, `--repeats` times.
Prints figures; asserts nothing.

    .venv/bin/python bench/fresh_start.py [--root .] [--before /tmp/before] [--device cpu] [--repeats 3]

"fresh process": `validate_on_cpu` (or `trace_and_validate` on a GPU) of `examples.mpnn` at 1k atoms,
W=2, timed from after the imports of distcheck, the model and the sample (so the forkserver's start is
in it, the caller's `import torch` is not). "CLI": `python -m distcheck validate
examples/mpnn.py:model_factory` from the tree's root, timed from the shell. Output goes to files, not
pipes, so a helper process that outlives its owner cannot hold the measurement up.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FRESH = """
import json, sys, time
root, device = sys.argv[1], sys.argv[2]
sys.path[:0] = [root, root + "/server", root + "/bench"]
from distcheck import trace_and_validate, validate_on_cpu
from examples import mpnn
from gpu_validate import sample
batch = sample("1k")
t0 = time.perf_counter()
r = (validate_on_cpu(mpnn.model_factory, batch, world_size=2) if device == "cpu" else
     trace_and_validate(mpnn.model_factory, batch, world_size=2, device=device))
print(json.dumps({"wall": time.perf_counter() - t0, "reference": r.meta.timings["reference"], "ok": r.ok}))
"""


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> tuple[int, float, str]:
    with tempfile.TemporaryFile("w+") as out:
        t0 = time.perf_counter()
        code = subprocess.call(argv, cwd=cwd, env=env, stdout=out, stderr=subprocess.STDOUT, timeout=300)
        wall = time.perf_counter() - t0
        out.seek(0)
        return code, wall, out.read()


def measure(root: Path, device: str) -> str:
    inherited = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root / "server"), str(root), *inherited])}
    code, _, text = _run([sys.executable, "-c", FRESH, str(root), device], root, env)
    lines = [ln for ln in text.splitlines() if ln.startswith("{")]
    fresh = json.loads(lines[-1]) if code == 0 and lines else None
    cli = [sys.executable, "-m", "distcheck", "validate", "examples/mpnn.py:model_factory"]
    ccode, cwall, _ = _run([*cli, "--device", device, "--world-size", "2"], root, env)
    fresh_words = f"fresh process {fresh['wall']:.2f} s (reference {fresh['reference']:.2f} s)" if fresh else "failed"
    return f"{fresh_words}, CLI {cwall:.2f} s (exit {ccode})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--root", default=str(Path(__file__).resolve().parents[1]))
    parser.add_argument("--before", default=None, help="a second tree (the code before a change)")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    trees = [Path(args.before)] if args.before else []
    trees.append(Path(args.root))
    for _ in range(args.repeats):
        for tree in trees:
            print(f"{tree!s:<28} {measure(tree.resolve(), args.device)}", flush=True)


if __name__ == "__main__":
    main()
