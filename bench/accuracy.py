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
    cause: tuple[str, ...] = ()  # any of these in next_action or the attempts' unrouted ops names it
    sample: str = "sample_batch"
    spec: str | None = "SPEC"


ROUTED = ("mask_loop", "method_forms", "multi_total", "segment_offsets", "scatter_reduce_forms", "unique_counts")
SCRIPTED = ("scripted_local", "scripted_imported", "scripted_module")

CASES = [
    *(Case(m, f"examples.accuracy.{m}", "model_factory", "pass") for m in ROUTED),
    *(
        Case(f"{m} (buggy)", f"examples.accuracy.{m}", "buggy_model_factory", "fail", ("forces", "energy"))
        for m in ROUTED
    ),
    *(
        Case(m, f"examples.accuracy.{m}", "model_factory", "pass after fix", ("TorchScript", "torchscript"))
        for m in SCRIPTED
    ),
    *(
        Case(f"{m} (buggy)", f"examples.accuracy.{m}", "buggy_model_factory", "fail", ("TorchScript", "torchscript"))
        for m in SCRIPTED
    ),
    Case("named_only", "examples.accuracy.named_only", "model_factory", "fail", ("scatter_reduce", "prod")),
    Case("rank adds a constant", "accuracy_models.rank_split", "factory_rank_constant", "fail", ("rank",), spec=None),
    Case("last rank differs", "accuracy_models.rank_split", "factory_last_rank", "fail", ("rank",), spec=None),
    Case(
        "depth one hop short",
        "sensitivity_models.shallow_depth",
        "model_factory",
        "pass after fix",
        ("num_interactions", "receptive"),
    ),
    Case("runaway halo", "sensitivity_models.runaway", "model_factory", "fail", ("halo",)),
    Case(
        "per-edge virial in local",
        "sensitivity_models.edge_virial",
        "model_factory",
        "pass after fix",
        ("stress", "halo_correction"),
    ),
]


def _outcome(report: TraceReport) -> str:
    if report.verdict == "passed":
        return "pass after fix" if report.fix_applied else "pass"
    return "fail" if report.verdict == "failed" else report.verdict


def _named(report: TraceReport, words: tuple[str, ...]) -> bool:
    text = report.next_action + " ".join(
        f"{u.op} {u.function} {u.file}" for attempt in report.attempts for u in attempt.unrouted
    )
    return any(word.lower() in text.lower() for word in words)


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
    named = "—" if case.expected == "pass" else ("yes" if _named(report, case.cause) else "no")
    fixed = {"pass": "not needed", "fail": "no fix (right)" if got == "fail" else "—"}.get(case.expected)
    if case.expected == "pass after fix":
        fixed = (
            f"yes: {report.attempts[report.best_index].rule}"
            if got == "pass after fix" and report.best_index is not None
            else "no"
        )
    mark = "" if got == case.expected else " ✗"
    return f"| {case.name} | {case.expected} | {got}{mark} | {named} | {fixed} | {wall:.1f} s |"


def main(argv: list[str]) -> None:
    """Print the scoreboard for every case (or those whose name holds argv[0])."""
    wanted = [c for c in CASES if not argv or argv[0] in c.name]
    print("| case | expected | verdict | cause named | fixed | wall |")
    print("| --- | --- | --- | --- | --- | --- |")
    for case in wanted:
        print(run(case), flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
