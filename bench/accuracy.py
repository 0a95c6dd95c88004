"""The accuracy scoreboard: every model of the accuracy corpus validated on the CPU, its verdict against
the expected one, whether the cause was named and whether auto-fix fixed it, and the wall time.

Cases: `examples/accuracy` (each correct model and its buggy twin; the scripted ones must pass only after
the eager remedy; `named_only` must fail with its op named) and the issue-13 models under
`tests/server/validate` (ranks that disagree, a depth declared one hop short, a runaway halo, per-edge
virials in `local`). Prints a Markdown table; asserts nothing. Run from the repository root:

    python bench/accuracy.py            # all cases (a few minutes on 2 cores)
    python bench/accuracy.py mask       # only cases whose name contains "mask"
"""

from __future__ import annotations

import copy
import importlib
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "server"), str(ROOT), str(ROOT / "tests" / "server" / "validate")]

from distcheck import TraceReport, validate_on_cpu  # noqa: E402

OPTIONS: dict[str, Any] = {"world_size": 2, "timeout_sec": 120.0, "max_fix_attempts": 4}


@dataclass(frozen=True)
class Case:
    """One row: a module, its factory, what should come out, and the words that name the cause."""

    name: str
    module: str
    factory: str
    expected: str  # "pass", "pass after fix" or "fail"
    cause: tuple[str, ...] = ()  # each must be in next_action (or the unrouted ops); "a|b": either
    sample: str = "sample_batch"
    spec: str | None = "SPEC"


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


def _fixed_before_run(report: TraceReport) -> bool:
    """The receptive-field check set `halo_width` before the first run (the fix is in attempt 0)."""
    return report.receptive_field is not None and report.receptive_field.halo_width_set is not None


def _outcome(report: TraceReport) -> str:
    if report.verdict == "passed":
        return "pass after fix" if report.fix_applied or _fixed_before_run(report) else "pass"
    return "fail" if report.verdict == "failed" else report.verdict


def _named(report: TraceReport, words: tuple[str, ...]) -> bool:
    text = "\n".join(
        [report.next_action, *(a.rationale for a in report.attempts)]
        + [f"{u.op} {u.function} {u.file}" for attempt in report.attempts for u in attempt.unrouted]
    ).lower()
    return all(any(alt.lower() in text for alt in word.split("|")) for word in words)


def _fix(report: TraceReport) -> str:
    """The rules whose mutations the best attempt carries (those not rolled back, in order)."""
    best = report.best_index
    if best is None:
        return "no"
    rules = [a.rule for a in report.attempts[1 : best + 1] if a.rule and a.rolled_back is None]
    if _fixed_before_run(report):
        rules.insert(0, "halo_width from the measured receptive field, before the first run")
    return "yes: " + " → ".join(rules) if rules else "no"


def run(case: Case) -> str:
    """Validate one case; its table row."""
    module = importlib.import_module(case.module)
    spec = copy.deepcopy(getattr(module, case.spec)) if case.spec and hasattr(module, case.spec) else None
    t0 = time.perf_counter()
    try:
        report = validate_on_cpu(getattr(module, case.factory), getattr(module, case.sample)(), spec=spec, **OPTIONS)
    except Exception as exc:  # a crash is a result too
        return (
            f"| {case.name} | {case.expected} | crashed: {type(exc).__name__} | | | {time.perf_counter() - t0:.1f} s |"
        )
    wall = time.perf_counter() - t0
    got = _outcome(report)
    named = "—" if case.expected == "pass" else ("yes" if _named(report, case.cause) else "no ✗")
    fixed = {"pass": "not needed", "fail": "no fix (right)" if got == "fail" else "—"}.get(case.expected)
    if case.expected == "pass after fix":
        fixed = _fix(report) if got == "pass after fix" else "no"
    mark = "" if got == case.expected else " ✗"
    return f"| {case.name} | {case.expected} | {got}{mark} | {named} | {fixed} | {wall:.1f} s |"


def summary(rows: list[str]) -> str:
    """The line under the table: verdicts right, false passes, false alarms, causes named, total wall."""
    cells = [[c.strip() for c in row.strip("|").split("|")] for row in rows]
    right = sum(1 for c in cells if not c[2].endswith("✗") and not c[2].startswith("crashed"))
    false_pass = sum(1 for c in cells if c[1] == "fail" and c[2].startswith("pass"))
    false_alarm = sum(1 for c in cells if c[1].startswith("pass") and not c[2].startswith("pass"))
    asked = [c for c in cells if c[1] != "pass"]
    named = sum(1 for c in asked if c[3] == "yes")
    wall = sum(float(c[5].split()[0]) for c in cells)
    return (
        f"{right}/{len(cells)} verdicts right, {false_pass} false passes, {false_alarm} false alarms, "
        f"cause named {named}/{len(asked)}; {wall:.0f} s in all"
    )


def main(argv: list[str]) -> None:
    """Print the scoreboard for every case (or those whose name holds argv[0]), then its summary."""
    wanted = [c for c in CASES if not argv or argv[0] in c.name]
    print("| case | expected | verdict | cause named | fixed | wall |")
    print("| --- | --- | --- | --- | --- | --- |")
    rows = []
    for case in wanted:
        rows.append(run(case))
        print(rows[-1], flush=True)
    print()
    print(summary(rows))


if __name__ == "__main__":
    main(sys.argv[1:])
