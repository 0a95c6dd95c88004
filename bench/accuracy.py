"""The accuracy scoreboard: models validated on the CPU, each verdict against the expected one, whether
the cause was named, which fixes the passing spec carries, whether the advice is consistent with the
attempts (`accuracy_checks.advice_consistent`), and the wall time.

Two sections. `corpus`: `examples/accuracy` (each correct model and its buggy twin; the scripted ones
must pass only after the eager remedy; `named_only` must fail with its op named) and the issue-13 models
under `tests/server/validate` (ranks that disagree, a depth declared one hop short, a runaway halo,
per-edge virials in `local`). `real`: the `examples/real` models (SchNet, MACE, AIMNet2), each correct
and with seeded distribution bugs (`examples.real.seeded`); a case whose package is not installed is
skipped, and the forkserver preloads the packages (`examples.real.warm`) so each process does not import
them again. Prints a Markdown table per section; asserts nothing. Run from the repository root:

    python bench/accuracy.py            # both sections (several minutes on 2 cores)
    python bench/accuracy.py --real     # only the real-package section
    python bench/accuracy.py mask       # only cases whose name contains "mask"
"""

from __future__ import annotations

import copy
import importlib
import importlib.util
import os
import sys
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "server"), str(ROOT), str(ROOT / "tests" / "server" / "validate"), str(ROOT / "bench")]

from accuracy_checks import advice_consistent, fix_rules, named, outcome  # noqa: E402

from distcheck import validate_on_cpu  # noqa: E402

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 120.0, "max_fix_attempts": 4}
WARM_MODULE = "examples.real.warm"
HEADER = (
    "| case | expected | verdict | cause named | fix | advice consistent with attempts | wall |\n"
    "| --- | --- | --- | --- | --- | --- | --- |"
)


@dataclass(frozen=True)
class Case:
    """One row: a module, its factory, what should come out, and the words that name the cause.

    `factory`, `sample` and `spec` are attributes of `module`, or `"module:attr"` references; `spec` None
    (or an attribute `module` lacks) validates under the wrapper's own spec. `package` is the third-party
    package the case needs (skipped when it is not installed)."""

    name: str
    module: str
    factory: str
    expected: str  # "pass", "pass after fix" or "fail"
    cause: tuple[str, ...] = ()  # each must be in next_action (or the unrouted ops); "a|b": either
    sample: str = "sample_batch"
    spec: str | None = "SPEC"
    package: str | None = None


ROUTED = ("mask_loop", "method_forms", "multi_total", "segment_offsets", "scatter_reduce_forms", "unique_counts")
SCRIPTED = ("scripted_local", "scripted_imported", "scripted_module")
ROW_BUG = ("depends on which atoms a rank holds|a coupling that skips the neighbour graph",)
SCRIPT = ("ran inside TorchScript|in TorchScript",)

CASES = [
    *(Case(m, f"examples.accuracy.{m}", "model_factory", "pass") for m in ROUTED),
    *(Case(f"{m} (buggy)", f"examples.accuracy.{m}", "buggy_model_factory", "fail", ROW_BUG) for m in ROUTED),
    *(Case(m, f"examples.accuracy.{m}", "model_factory", "pass after fix", SCRIPT) for m in SCRIPTED),
    *(
        Case(f"{m} (buggy)", f"examples.accuracy.{m}", "buggy_model_factory", "fail", (*SCRIPT, *ROW_BUG))
        for m in SCRIPTED
    ),
    Case("named_only", "examples.accuracy.named_only", "model_factory", "fail", ("scatter_reduce(prod)",)),
    Case(
        "rank adds a constant",
        "accuracy_models.rank_split",
        "factory_rank_constant",
        "fail",
        ("ranks 0, 1 disagree on energy",),
        spec=None,
    ),
    Case(
        "last rank differs",
        "accuracy_models.rank_split",
        "factory_last_rank",
        "fail",
        ("ranks 0, 1 disagree on energy",),
        spec=None,
    ),
    Case(
        "depth one hop short",
        "sensitivity_models.shallow_depth",
        "model_factory",
        "pass after fix",
        ("set num_interactions = 3",),
    ),
    Case("runaway halo", "sensitivity_models.runaway", "model_factory", "fail", ("- halo: ", "batch.num_atoms")),
    Case(
        "per-edge virial in local",
        "sensitivity_models.edge_virial",
        "model_factory",
        "pass after fix",
        ("per-edge derivatives",),
    ),
]
"""Cause words, checked in `next_action` and the rationales of the attempts (every entry must appear):
the buggy twins read row 0, which each rank holds differently; the scripted ones also name the
TorchScript aggregations."""


SCHNET, MACE, AIMNET2 = "examples.real.schnet", "examples.real.mace_model", "examples.real.aimnet2"
SEEDED = "examples.real.seeded"

REAL_CASES = [
    Case("schnet", SCHNET, "model_factory", "pass", package="torch_geometric"),
    Case(
        "schnet: num_interactions 1 of 3 (local)",
        SCHNET,
        f"{SEEDED}:schnet_shallow_factory",
        "pass after fix",
        ("num_interactions = 3",),
        spec=f"{SEEDED}:SCHNET_LOCAL",
        package="torch_geometric",
    ),
    Case(
        "schnet: cutoff declared 3 Å, graph 5 Å",
        SCHNET,
        f"{SEEDED}:schnet_short_cutoff_factory",
        "pass after fix",
        ("cutoff = 5|cutoff to 5|cutoff of 5|cutoff 5",),
        package="torch_geometric",
    ),
    Case(
        "schnet: energy all-reduced twice",
        SCHNET,
        "model_factory",
        "pass after fix",
        ("reduced twice",),
        spec=f"{SEEDED}:SCHNET_ENERGY_REDUCED_TWICE",
        package="torch_geometric",
    ),
    Case(
        "schnet: forces declared owned-only",
        SCHNET,
        "model_factory",
        "pass after fix",
        ("summing every copy|halo copies hold contributions",),
        spec=f"{SEEDED}:SCHNET_FORCES_OWNED_ONLY",
        package="torch_geometric",
    ),
    Case("mace", MACE, "model_factory", "pass", package="mace"),
    Case(
        "mace: stress partial not all-reduced",
        MACE,
        "model_factory",
        "pass after fix",
        ("stress", "all_reduce"),
        spec=f"{SEEDED}:MACE_STRESS_NOT_REDUCED",
        package="mace",
    ),
    Case(
        "mace: num_interactions 1 of 2 (local)",
        MACE,
        f"{SEEDED}:mace_shallow_factory",
        "pass after fix",
        ("num_interactions = 2",),
        spec=f"{SEEDED}:MACE_LOCAL",
        package="mace",
    ),
    Case("aimnet2", AIMNET2, "model_factory", "pass", spec="CORRECT_SPEC", package="aimnet"),
    Case(
        "aimnet2: per-rank sum in mol_sum, no adapter",
        AIMNET2,
        "model_factory",
        "pass after fix",
        ("mol_sum",),
        spec=f"{SEEDED}:AIMNET2_NO_ADAPTER",
        package="aimnet",
    ),
    Case(
        "aimnet2: halo_correction for dense neighbour sums",
        AIMNET2,
        "model_factory",
        "pass after fix",
        ("is a scatter the runtime can correct|padded neighbour matrix",),
        spec=f"{SEEDED}:AIMNET2_HALO_CORRECTION",
        package="aimnet",
    ),
    Case(
        "aimnet2: num_interactions 1, reach 2 × 4 Å (local)",
        AIMNET2,
        f"{SEEDED}:aimnet2_shallow_factory",
        "pass after fix",
        ("num_interactions",),
        spec=f"{SEEDED}:AIMNET2_LOCAL",
        package="aimnet",
    ),
]
"""The real-package section: each model correct, then with one seeded distribution bug
(`examples.real.seeded`); the cause words name the declaration to change."""

SECTIONS = {"corpus": CASES, "real": REAL_CASES}


def _resolve(module: Any, ref: str) -> Any:
    if ":" in ref:
        name, attr = ref.split(":", 1)
        return getattr(importlib.import_module(name), attr)
    return getattr(module, ref)


def _spec(module: Any, case: Case) -> Any:
    if case.spec is None or (":" not in case.spec and not hasattr(module, case.spec)):
        return None
    return copy.deepcopy(_resolve(module, case.spec))


def _fix_cell(case: Case, got: str, rules: list[str]) -> str:
    if rules:
        return "yes: " + " → ".join(rules)
    if case.expected == "pass":
        return "not needed"
    if case.expected == "fail":
        return "no fix (right)" if got == "fail" else "—"
    return "no"


def run(case: Case) -> str:
    """Validate one case; its table row (`| case | expected | verdict | cause named | fix | advice | wall |`)."""
    if case.package is not None and importlib.util.find_spec(case.package) is None:
        return f"| {case.name} | {case.expected} | skipped: {case.package} is not installed | | | | |"
    module = importlib.import_module(case.module)
    t0 = time.perf_counter()
    try:
        report = validate_on_cpu(
            _resolve(module, case.factory), _resolve(module, case.sample)(), spec=_spec(module, case), **OPTIONS
        )
    except Exception as exc:  # a crash is a result too
        wall = time.perf_counter() - t0
        return f"| {case.name} | {case.expected} | crashed: {type(exc).__name__} | | | | {wall:.1f} s |"
    wall = time.perf_counter() - t0
    got = outcome(report)
    cause = "—" if case.expected == "pass" else ("yes" if named(report, case.cause) else "no ✗")
    consistent, why = advice_consistent(report)
    advice = "yes" if consistent else f"no ✗ ({why})"
    mark = "" if got == case.expected else " ✗"
    fixed = _fix_cell(case, got, fix_rules(report))
    return f"| {case.name} | {case.expected} | {got}{mark} | {cause} | {fixed} | {advice} | {wall:.1f} s |"


def summary(rows: list[str]) -> str:
    """The line under a table: verdicts right, false passes, false alarms, causes named, advice
    consistent, total wall (skipped rows not counted)."""
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    cells = [c for c in cells if not c[2].startswith("skipped")]
    right = sum(1 for c in cells if not c[2].endswith("✗") and not c[2].startswith("crashed"))
    false_pass = sum(1 for c in cells if c[1] == "fail" and c[2].startswith("pass"))
    false_alarm = sum(1 for c in cells if c[1].startswith("pass") and not c[2].startswith("pass"))
    asked = [c for c in cells if c[1] != "pass"]
    cause = sum(1 for c in asked if c[3] == "yes")
    advice = sum(1 for c in cells if c[5] == "yes")
    wall = sum(float(c[6].split()[0]) for c in cells if c[6])
    return (
        f"{right}/{len(cells)} verdicts right, {false_pass} false passes, {false_alarm} false alarms, "
        f"cause named {cause}/{len(asked)}, advice consistent {advice}/{len(cells)}; {wall:.0f} s in all"
    )


def warm_pool() -> None:
    """Start distcheck's forkserver preloading `WARM_MODULE` (the real models' packages), as
    tests/server/real/conftest.py does; nothing when the forkserver already runs."""
    from distcheck.processes.forkserver import _CONTEXTS, process_context

    if "forkserver" in _CONTEXTS:
        return
    before = os.environ.get("DISTCHECK_PRELOAD")
    os.environ["DISTCHECK_PRELOAD"] = ",".join(m for m in [before, WARM_MODULE] if m)
    try:
        process_context("forkserver")
    finally:
        if before is None:
            del os.environ["DISTCHECK_PRELOAD"]
        else:
            os.environ["DISTCHECK_PRELOAD"] = before


def main(argv: list[str]) -> None:
    """Print each section's table for every case (or `--real` / `--corpus` only, or the cases whose name
    holds the first other argument), then its summary."""
    names = [a for a in argv if a in ("--real", "--corpus")]
    words = [a for a in argv if a not in names]
    sections = [n.lstrip("-") for n in names] or list(SECTIONS)
    warnings.simplefilter("ignore")
    if "real" in sections:
        warm_pool()
    for section in sections:
        wanted = [c for c in SECTIONS[section] if not words or words[0] in c.name]
        if not wanted:
            continue
        print(f"### {section}\n")
        print(HEADER)
        rows = []
        for case in wanted:
            rows.append(run(case))
            print(rows[-1], flush=True)
        print()
        print(summary(rows))
        print()


if __name__ == "__main__":
    main(sys.argv[1:])
