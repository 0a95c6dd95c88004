"""Validate every example model at world size 2: `python -m examples.demo` from the repository root
(what `make demo` runs).

On a machine where torch sees a GPU each example goes through `trace_and_validate` on `cuda:0`;
elsewhere through `validate_on_cpu` (the same pipeline with gloo). Two examples start from a wrong
spec on purpose and must be repaired by auto-fix:

- `helper_model` sums per system through a TorchScript helper (`examples.thirdparty.nbops.mol_sum`)
  that its spec does not declare; watching that package lets the helper trace flag it, and auto-fix
  declares a `reduction` adapter.
- `unaware_model` builds its own neighbour list; it starts from `WRONG_SPEC` (`halo_correction`), and
  auto-fix switches it to `local`.

For each example the demo prints the verdict line, the attempts (rule and PASS/FAIL) and the final
spec in one paragraph, then a summary table. Exit code 0 when every example passed, else 1.
The same targets are in `examples/pyproject.toml` for `distcheck validate NAME`.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from distcheck import TraceReport, trace_and_validate, validate_on_cpu
from distcheck.spec import MLIPSpec
from examples import charge_eq, helper_model, mpnn, pair_potential, stress_model, unaware_model

WORLD_SIZE = 2


@dataclass
class Example:
    """One example: its module (with `model_factory` and `sample_batch`) and extra validator options."""

    name: str
    module: Any
    options: dict[str, Any] = field(default_factory=dict)
    note: str = ""


EXAMPLES: tuple[Example, ...] = (
    Example("pair_potential", pair_potential, note="Morse pair potential, one interaction"),
    Example("mpnn", mpnn, note="3-layer message passing, halo correction after each layer"),
    Example("charge_eq", charge_eq, note="charge equilibration; charges read from owned rows"),
    Example("stress_model", stress_model, note="stress by the strain trick, all-reduced over ranks"),
    Example(
        "helper_model",
        helper_model,
        {"watched_helper_packages": ["examples.thirdparty.nbops"]},
        note="per-system sums in an undeclared TorchScript helper; auto-fix must declare an adapter",
    ),
    Example(
        "unaware_model",
        unaware_model,
        {"spec": unaware_model.WRONG_SPEC},
        note="halo-unaware backbone started from WRONG_SPEC; auto-fix must switch to scatter_mode local",
    ),
)


@dataclass
class Outcome:
    """What one example ended with."""

    name: str
    verdict: str
    attempts: int
    seconds: float


def validator() -> tuple[Callable[..., TraceReport], dict[str, Any], str]:
    """`trace_and_validate` on cuda:0 when torch sees a GPU, else `validate_on_cpu`; with its options and
    a description."""
    if torch.cuda.is_available():
        return trace_and_validate, {"device": "cuda:0"}, f"on the GPU ({torch.cuda.get_device_name(0)})"
    return validate_on_cpu, {}, "on the CPU with gloo (no GPU: validate_on_cpu)"


def spec_summary(spec: MLIPSpec) -> str:
    """The spec in one line: policy, output kinds, consolidation and declared helpers."""
    policy = spec.distribution.policy
    width = "auto" if policy.halo_width is None else f"{policy.halo_width:g} Å"
    kinds = ", ".join(f"{name}={kind}" for name, kind in spec.output_kinds.items()) or "-"
    helpers = ", ".join(f"{h.qualname} ({h.kind})" for h in spec.distribution.third_party_helpers) or "-"
    ops = ", ".join(op.op for op in spec.distribution.custom_ops) or "-"
    parts = [
        f"policy {policy.kind}/{policy.scatter_mode} (halo width {width})",
        f"system_reductions {'on' if spec.system_reductions else 'off'}",
        f"kinds {kinds}",
        f"all-reduce {', '.join(spec.all_reduce_outputs) or '-'}",
        f"owned-only {', '.join(spec.owned_only_outputs) or '-'}",
        f"helpers {helpers}",
        f"custom ops {ops}",
    ]
    return "; ".join(parts)


def describe(report: TraceReport) -> list[str]:
    """The verdict line, one line per attempt and the final spec summary."""
    lines = [report.render_text(color=False).split("\n")[0]]
    for attempt in report.attempts:
        status = "PASS" if attempt.passed else "FAIL"
        rule = attempt.rule or "initial spec"
        detail = ""
        if not attempt.passed and attempt.failing_outputs:
            detail = f" ({', '.join(attempt.failing_outputs)} out of tolerance)"
        elif attempt.error is not None:
            message = attempt.error.message.splitlines()[0] if attempt.error.message else ""
            detail = f" ({attempt.error.type}: {message})"
        lines.append(f"  attempt {attempt.index} [{rule}] {status}{detail}")
    lines.append(f"  final spec: {spec_summary(report.spec)}")
    return lines


def run_example(example: Example, validate: Callable[..., TraceReport], base: Mapping[str, Any]) -> Outcome:
    """Validate one example, print what happened and return the outcome."""
    print(f"== {example.name}: {example.note}", flush=True)
    t0 = time.perf_counter()
    try:
        report = validate(
            example.module.model_factory,
            example.module.sample_batch(),
            world_size=WORLD_SIZE,
            **base,
            **example.options,
        )
    except Exception as exc:  # a demo reports and carries on with the next example
        seconds = time.perf_counter() - t0
        print(f"ERROR: {type(exc).__name__}: {exc}\n", flush=True)
        return Outcome(example.name, "error", 0, seconds)
    seconds = time.perf_counter() - t0
    print("\n".join(describe(report)) + "\n", flush=True)
    return Outcome(example.name, report.verdict, len(report.attempts), seconds)


def table(outcomes: Sequence[Outcome]) -> str:
    """The summary table as text."""
    rows = [["example", "verdict", "attempts", "wall time"]]
    rows += [[o.name, o.verdict, str(o.attempts), f"{o.seconds:.1f} s"] for o in outcomes]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


def main() -> int:
    """Run every example; 0 when all passed, else 1."""
    validate, base, where = validator()
    print(f"distcheck demo: {len(EXAMPLES)} example models at world size {WORLD_SIZE}, {where}\n", flush=True)
    t0 = time.perf_counter()
    outcomes = [run_example(example, validate, base) for example in EXAMPLES]
    print(table(outcomes))
    failed = [o.name for o in outcomes if o.verdict != "passed"]
    total = time.perf_counter() - t0
    if failed:
        print(f"\n{len(failed)} of {len(outcomes)} examples did not pass: {', '.join(failed)} ({total:.1f} s)")
        return 1
    print(f"\nall {len(outcomes)} examples passed ({total:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
