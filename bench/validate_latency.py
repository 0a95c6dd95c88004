"""Validation latency, today's path (every process forked from the warm pool when it is needed) against
spares (processes forked ahead, warm, the first attempt's ranks built while the reference runs, later
runs on the first attempt's ranks kept resident), with and without the first attempt run ahead of the
reference (`validate/attempt_ahead.py`: the warm rows validate one target repeatedly, so from the
warm-up on the spec is remembered), side by side in one run. Prints figures; asserts nothing.

    .venv/bin/python bench/validate_latency.py [--device cpu|cuda:0] [--repeats 3] [--sizes 1k,10k,100k]

Rows (issue 15's table): the MPNN example at 1k atoms W=2 and W=4, 10k and 100k atoms W=2, MACE
(`examples/real`, 384 atoms, only when `mace` imports), the first validation in a fresh process, the CLI
from a fresh shell, plus two two-attempt auto-fix cases (the later attempt in new spares and on the
kept ranks) and the editor daemon's time to first diagnostic.
Warm rows: min of `--repeats` after one warm-up; "spares" keeps them warm between validations as the
editor's runner does (`spares.keep_warm`) and waits (bounded) until they are warm before each run.
Fresh-process rows run once each: "today" with DISTCHECK_SPARES=0 DISTCHECK_RESIDENT_RANKS=0, "spares"
as shipped (the CLI starts its pool, and its spares for a device named outright, before it loads the
target: `jobs/early_start.py`).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
for p in (str(ROOT), str(ROOT / "server"), str(ROOT / "bench")):
    if p not in sys.path:
        sys.path.insert(0, p)

DEVICE = "cpu"


@contextmanager
def mode(spares_on: bool, world_size: int = 2, ahead: bool = True) -> Iterator[None]:
    """Today's path (DISTCHECK_SPARES=0) or spares kept warm for validations of `world_size` ranks,
    with the first attempt run ahead of the reference (the target validated before) or not."""
    from distcheck.processes import spares

    pool = spares.pool()
    if not spares_on:  # today's path: no spares, every run in new processes
        os.environ["DISTCHECK_SPARES"] = "0"
        os.environ["DISTCHECK_RESIDENT_RANKS"] = "0"
    else:
        os.environ.pop("DISTCHECK_SPARES", None)
        spares.keep_warm(DEVICE, world_size)
    os.environ["DISTCHECK_ATTEMPT_AHEAD"] = "1" if ahead else "0"  # forced: by default it depends on the cores
    try:
        yield
    finally:
        os.environ.pop("DISTCHECK_SPARES", None)
        os.environ.pop("DISTCHECK_RESIDENT_RANKS", None)
        os.environ.pop("DISTCHECK_ATTEMPT_AHEAD", None)
        pool.keep_s = None
        pool.trim()


def wait_warm(world_size: int, timeout: float = 60.0) -> float:
    """Seconds until the pool holds a validation's spares warm (0 when spares are off)."""
    from distcheck.processes import spares

    if os.environ.get("DISTCHECK_SPARES") == "0":
        return 0.0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < timeout:
        held = spares.report()["devices"].get(DEVICE, {})
        if held.get("warm", 0) >= world_size + 1:
            break
        time.sleep(0.02)
    return time.perf_counter() - t0


def validate(factory: Any, batch: Any, world_size: int, **options: Any) -> Any:
    from distcheck import trace_and_validate, validate_on_cpu

    if DEVICE == "cpu":
        return validate_on_cpu(factory, batch, world_size=world_size, **options)
    return trace_and_validate(factory, batch, world_size=world_size, device=DEVICE, **options)


def split(report: Any, wall: float) -> tuple[float, float, float]:
    """(wall, reference, ranks): ranks = everything after the reference (the reference includes the
    first attempt when it ran ahead)."""
    ref = float(report.meta.timings["reference"])
    return wall, ref, float(report.meta.timings["total"]) - ref


def timed(factory: Any, batch: Any, world_size: int, repeats: int, **options: Any) -> tuple[float, float, float, Any]:
    """Min wall over `repeats` after a warm-up, with that run's reference / ranks split and report."""
    validate(factory, batch, world_size, **options)  # warm-up
    best: tuple[float, float, float, Any] | None = None
    for _ in range(repeats):
        wait_warm(world_size)
        t0 = time.perf_counter()
        report = validate(factory, batch, world_size, **options)
        row = (*split(report, time.perf_counter() - t0), report)
        if best is None or row[0] < best[0]:
            best = row
    assert best is not None
    return best


def single_forward(factory: Callable[[], Any], batch: Any, repeats: int) -> float:
    import torch

    model = factory()
    if isinstance(model, torch.nn.Module):
        model = model.to(DEVICE)
    b = batch.to(DEVICE)
    times = []
    for _ in range(repeats + 1):
        t0 = time.perf_counter()
        model(b)
        if DEVICE.startswith("cuda"):
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return min(times[1:])


PHASES = (
    "until_entry",
    "factory",
    "forward",
    "receptive_field",
    "body",
    "until_result",
    "prepare_ranks",
    "while_running",
    "load",
)


def attempt_phases(report: Any) -> str:
    """The first attempt's phases (launch, ranks, the wait for the receptive field, evaluation, and each
    phase of its slowest rank), in s."""
    timings = report.attempts[0].timings if report.attempts else {}
    return "  ".join(f"{k} {float(v):.3f}" for k, v in timings.items())


def phases(report: Any) -> str:
    """The reference run's phases of one report (`meta.timings["reference_*"]`), in s."""
    timings = report.meta.timings or {}
    return "  ".join(f"{k} {float(timings[f'reference_{k}']):.3f}" for k in PHASES if f"reference_{k}" in timings)


def _phase_words(meta_timings: dict[str, Any], attempt: dict[str, Any]) -> str:
    """A fresh run's reference phases and its first attempt's, in s."""
    ref = "  ".join(
        f"{k} {float(meta_timings[f'reference_{k}']):.3f}" for k in PHASES if f"reference_{k}" in meta_timings
    )
    return f"reference: {ref} | attempt 0: " + "  ".join(f"{k} {float(v):.3f}" for k, v in attempt.items())


def fmt(t: tuple[float, float, float] | None) -> str:
    if t is None:
        return f"{'—':>22}"
    return f"{t[0]:6.2f} s ({t[1]:5.2f} / {t[2]:5.2f})"


FRESH = """
import json, sys, time
t0 = time.perf_counter()
sys.path[:0] = [{root!r}, {server!r}]
from distcheck import trace_and_validate, validate_on_cpu
from examples import mpnn
from gpu_validate import sample
t1 = time.perf_counter()
b = sample("1k")
r = (validate_on_cpu(mpnn.model_factory, b, world_size=2) if {device!r} == "cpu" else
     trace_and_validate(mpnn.model_factory, b, world_size=2, device={device!r}))
print(json.dumps({{"wall": time.perf_counter() - t1, "reference": r.meta.timings["reference"],
                  "total": r.meta.timings["total"], "ok": r.ok, "timings": r.meta.timings,
                  "attempt": r.attempts[0].timings if r.attempts else {{}}}}))
"""


def _env(spares_on: bool) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "server"), str(ROOT), str(ROOT / "bench"), env.get("PYTHONPATH", "")]
    )
    env.pop("DISTCHECK_SPARES", None)
    env.pop("DISTCHECK_RESIDENT_RANKS", None)
    if not spares_on:
        env["DISTCHECK_SPARES"] = "0"
        env["DISTCHECK_RESIDENT_RANKS"] = "0"
    return env


def fresh_process(spares_on: bool) -> tuple[float, float, float] | None:
    code = FRESH.format(root=str(ROOT), server=str(ROOT / "server"), device=DEVICE)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_env(spares_on), cwd=ROOT)
    if out.returncode != 0:
        print(f"  fresh process failed: {out.stderr.strip().splitlines()[-1:]}")
        return None
    data = json.loads(out.stdout.strip().splitlines()[-1])
    print(f"    fresh ({'spares' if spares_on else 'today'}): {_phase_words(data['timings'], data['attempt'])}")
    return data["wall"], data["reference"], data["total"] - data["reference"]


def fresh_cli(spares_on: bool) -> tuple[float, float, float] | None:
    with tempfile.TemporaryDirectory() as tmp:
        report = os.path.join(tmp, "report.json")
        args = ["validate", "examples/mpnn.py:model_factory", "--device", DEVICE, "--world-size", "2", "--json", report]
        t0 = time.perf_counter()  # the CLI starts its spares itself, while it loads the target
        out = subprocess.run(
            [sys.executable, "-m", "distcheck", *args], capture_output=True, text=True, env=_env(spares_on), cwd=ROOT
        )
        wall = time.perf_counter() - t0
        if out.returncode not in (0, 1):
            print(f"  CLI exited {out.returncode}: {out.stderr.strip().splitlines()[-1:]}")
            return None
        doc = json.loads(Path(report).read_text())
        meta = doc["meta"]
        attempt = doc["attempts"][0].get("timings", {}) if doc.get("attempts") else {}
        print(f"    CLI ({'spares' if spares_on else 'today'}): {_phase_words(meta['timings'], attempt)}")
        return wall, float(meta["timings"]["reference"]), wall - float(meta["timings"]["reference"])


async def daemon_first_diagnostic(spares_on: bool) -> tuple[float, float]:
    """(cold runner, warm runner) seconds from `distcheck.validate mpnn` to its first diagnostic."""
    import shutil

    import lsp_latency
    from lsprotocol import types
    from pygls.uris import from_fs_path

    tmp = Path(tempfile.mkdtemp(prefix="distcheck-spares-bench-"))
    workspace = tmp / "examples"
    shutil.copytree(ROOT / "examples", workspace, ignore=shutil.ignore_patterns("__pycache__", "*.distspec.json"))
    doc = workspace / "mpnn.py"
    doc_uri, root_uri = from_fs_path(str(doc)), from_fs_path(str(workspace))
    env = _env(spares_on)
    if spares_on:
        env["DISTCHECK_SPARES_KEEP_S"] = "600"  # what `spares.keep_warm()` in the runner does
    client = lsp_latency.make_client({"device": DEVICE})

    await client.start_io(sys.executable, "-m", "distcheck.lsp", "--stdio", env=env, cwd=str(workspace))
    try:
        caps = types.ClientCapabilities(window=types.WindowClientCapabilities(work_done_progress=True))
        await client.initialize_async(
            types.InitializeParams(
                capabilities=caps,
                root_uri=root_uri,
                workspace_folders=[types.WorkspaceFolder(uri=root_uri, name="examples")],
                initialization_options={"trusted": True},
            )
        )
        client.initialized(types.InitializedParams())
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=doc_uri, language_id="python", version=1, text=doc.read_text())
            )
        )
        cold, _, _ = await lsp_latency._validate_to_first_diagnostic(client, "mpnn", doc_uri)
        await asyncio.sleep(3.0)  # between validations: the runner refills its spares
        warm = min([(await lsp_latency._validate_to_first_diagnostic(client, "mpnn", doc_uri))[0] for _ in range(2)])
        return cold, warm
    finally:
        try:
            await asyncio.wait_for(client.shutdown_async(None), timeout=10)
            client.exit(None)
        except Exception:
            pass
        await client.stop()
        shutil.rmtree(tmp, ignore_errors=True)


@contextmanager
def resident_ranks(on: bool) -> Iterator[None]:
    """Later runs of a validation on its first attempt's ranks (as shipped) or in new ones."""
    saved = os.environ.pop("DISTCHECK_RESIDENT_RANKS", None)
    if not on:
        os.environ["DISTCHECK_RESIDENT_RANKS"] = "0"
    try:
        yield
    finally:
        os.environ.pop("DISTCHECK_RESIDENT_RANKS", None)
        if saved is not None:
            os.environ["DISTCHECK_RESIDENT_RANKS"] = saved


def autofix_rows(repeats: int) -> None:
    """Two-attempt auto-fix cases: today's path (every run in new processes forked when needed), spares
    whose later attempt claims new spares, and spares as shipped (the later attempt, and the control
    run, on the first attempt's ranks kept resident: the user's module imported afresh, a new wrapper;
    the first attempt run ahead of the reference, forced on whatever the cores)."""
    from examples import helper_model, unaware_model

    cases = [
        (
            "examples.helper_model, SPEC lacks the adapter (fix: TorchScript eager + adapter)",
            helper_model.model_factory,
            helper_model.sample_batch(),
            {},
        ),
        (
            "examples.unaware_model under WRONG_SPEC (fix: local halo)",
            unaware_model.model_factory,
            unaware_model.sample_batch(),
            {"spec": unaware_model.WRONG_SPEC},
        ),
    ]
    for title, factory, batch, extra in cases:
        print(f"\ntwo-attempt auto-fix, W=2: {title}")
        for label, on, kept in (
            ("today", False, False),
            ("spares, new", True, False),
            ("spares, kept", True, True),
        ):
            with mode(on, 2, ahead=kept), resident_ranks(kept):
                wall, ref, ranks, report = timed(factory, batch, 2, repeats, max_fix_attempts=2, **extra)
            last = report.attempts[-1]
            t = last.timings
            print(
                f"  {label:<13}: {fmt((wall, ref, ranks))}, {len(report.attempts)} attempts (last passed: "
                f"{last.passed}); attempt {last.index + 1}: wall {t.get('attempt', float('nan')):.3f} s",
                flush=True,
            )
            print("    " + "  ".join(f"{k} {float(v):.3f}" for k, v in t.items()), flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cpu", help="cpu or cuda:N (every rank on that device)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--sizes", default=None, help="MPNN sample sizes (default 1k,10k,100k; on the CPU 1k,10k)")
    parser.add_argument("--skip", default="", help="comma-separated: mace,fresh,cli,autofix,daemon")
    args = parser.parse_args()
    global DEVICE
    DEVICE = args.device
    skip = {s.strip() for s in args.skip.split(",") if s.strip()}
    sizes = (args.sizes or ("1k,10k" if DEVICE == "cpu" else "1k,10k,100k")).split(",")
    import torch
    from gpu_validate import sample

    from examples import mpnn

    print(f"distcheck validation latency, {DEVICE}, gloo, torch {torch.__version__}, {os.cpu_count()} CPUs")
    print(f"load average at start: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print("wall (reference / ranks) in s; warm rows min of", args.repeats, "after a warm-up\n")
    header = f"{'case':<34} {'today':>22} {'spares, not ahead':>22} {'spares, ahead':>22} {'single fwd+F':>13}"
    print(header)
    print("-" * len(header))
    rows: list[tuple[str, Any, Any, int]] = []
    for size in sizes:
        rows.append((f"examples.mpnn, {size} atoms, W=2", mpnn.model_factory, sample(size), 2))
        if size == "1k":
            rows.append(("same, W=4", mpnn.model_factory, sample(size), 4))
    if "mace" not in skip:
        if importlib.util.find_spec("mace") is None:
            print(f"{'MACE (examples/real, 384 atoms), W=2':<34} skipped: `mace` does not import here")
        else:
            from examples.real import mace_model

            rows.append(
                ("MACE (examples/real, 384 atoms), W=2", mace_model.model_factory, mace_model.sample_batch(), 2)
            )
    for name, factory, batch, w in rows:
        results, reports = [], []
        for on, ahead in ((False, False), (True, False), (True, True)):
            with mode(on, w, ahead):
                *row, report = timed(factory, batch, w, args.repeats)
                results.append(tuple(row))
                reports.append(report)
        fwd = single_forward(factory, batch, args.repeats)
        print(f"{name:<34} {fmt(results[0])} {fmt(results[1])} {fmt(results[2])} {fwd:11.3f} s", flush=True)
        for label, report in zip(("today", "not ahead", "ahead"), reports):
            print(f"    reference, {label:<9}: {phases(report)}", flush=True)
            print(f"    attempt 0, {label:<9}: {attempt_phases(report)}", flush=True)
    if "fresh" not in skip:
        print(
            f"{'first validation, fresh process':<34} {fmt(fresh_process(False))} {fmt(fresh_process(True))}",
            flush=True,
        )
    if "cli" not in skip:
        print(f"{'CLI examples/mpnn.py, fresh shell':<34} {fmt(fresh_cli(False))} {fmt(fresh_cli(True))}", flush=True)
    if "autofix" not in skip:
        autofix_rows(args.repeats)
    if "daemon" not in skip:
        print("\neditor daemon, `distcheck.validate mpnn` → first diagnostic (cold runner / warm runner):")
        for on in (False, True):
            cold, warm = asyncio.run(daemon_first_diagnostic(on))
            print(f"  {'spares' if on else 'today ':<6}: cold {cold:6.2f} s, warm {warm:6.2f} s", flush=True)
    print(f"\nload average at end: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
