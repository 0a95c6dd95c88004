"""GPU memory after the CLI is killed mid-validation: how long until the GPU is back to its baseline.

Starts `distcheck validate` on `cuda:0` (two ranks sharing the GPU) with the fault model whose rank 1
starts a grandchild in a new session and blocks in its forward, waits for that moment, kills the CLI
with each signal in turn and measures, with `nvidia-smi`, how long the GPU memory takes to return to
what it was before the run, and whether any process of the run is left. Prints a table; asserts
nothing (run it on a GPU machine: `python3 bench/gpu_kill_cli.py`).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MODEL = ROOT / "tests" / "server" / "faults" / "models" / "grandchild.py"
DEVICE = os.environ.get("DISTCHECK_BENCH_DEVICE", "cuda:0")
SLACK_MIB = 64  # what nvidia-smi's reading may wander by with nothing of ours on the GPU


def used_mib() -> int:
    """GPU memory in use on GPU 0, as nvidia-smi reports it."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(out.strip().splitlines()[0])


def marked(marker: str) -> list[int]:
    """Live processes whose environment carries this run's marker."""
    needle = f"DISTCHECK_BENCH_MARKER={marker}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/environ", "rb") as fh:
                if needle not in fh.read().split(b"\0"):
                    continue
            with open(f"/proc/{entry}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] == b"Z":
                    continue
            found.append(int(entry))
        except (OSError, IndexError):
            continue
    return found


def one(sig: signal.Signals) -> str:
    """One kill: a table row."""
    base = used_mib()
    work = Path(tempfile.mkdtemp(prefix="gpu-kill-"))
    markers = work / "markers"
    markers.mkdir()
    tmp = work / "tmp"
    tmp.mkdir()
    tag = f"{sig.name}-{os.getpid()}-{time.time_ns()}"
    env = dict(os.environ, FAULT_MARKER_DIR=str(markers), TMPDIR=str(tmp), DISTCHECK_BENCH_MARKER=tag)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "server"), str(ROOT), env.get("PYTHONPATH", "")])
    argv = [sys.executable, "-m", "distcheck", "validate", f"{MODEL}:model_factory", "--world-size", "2"]
    argv += ["--device", DEVICE, "--no-auto-fix", "--no-layer-diagnostic", "--timeout", "300"]
    err = open(work / "cli.err", "w")
    out = open(work / "cli.out", "w")
    proc = subprocess.Popen(argv, cwd=work, env=env, stdout=out, stderr=err, start_new_session=True)
    deadline = time.monotonic() + 240
    while not (markers / "grandchild").exists():
        if proc.poll() is not None or time.monotonic() > deadline:
            text = (work / "cli.out").read_text() + (work / "cli.err").read_text()
            tail = " / ".join(text.strip().splitlines()[:6])
            return f"| {sig.name} | CLI exited {proc.returncode} before the forward: {tail} | | | |"
        time.sleep(0.1)
    time.sleep(1.0)
    held = used_mib()
    t0 = time.monotonic()
    os.kill(proc.pid, sig)
    code = proc.wait(timeout=60)
    back = None
    while time.monotonic() - t0 < 120:
        if used_mib() <= base + SLACK_MIB:
            back = time.monotonic() - t0
            break
        time.sleep(0.1)
    time.sleep(1.0)
    left = marked(tag)
    dirs = sorted(p.name for p in tmp.iterdir() if p.name.startswith(("distcheck-", "pymp-")))
    back_text = f"{back:.2f} s" if back is not None else "not within 120 s"
    return f"| {sig.name} | {base} → {held} MiB | {code} | {back_text} | {len(left)} processes, {len(dirs)} run dirs |"


def main() -> None:
    """Kill the CLI with SIGKILL, SIGTERM and SIGHUP; print one row each."""
    print("| signal to the CLI | GPU memory before → during | CLI exit | memory back to baseline after | left |")
    print("| --- | --- | --- | --- | --- |")
    for sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP):
        print(one(sig), flush=True)


if __name__ == "__main__":
    main()
