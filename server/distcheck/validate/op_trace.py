"""The first torch operation whose value departs, from the op traces the reference and every rank keep
(`runtime.op_trace`): the line a divergence starts at, as `report.DivergentOp`.

Ops are matched by key (`file:line:op#k`, the k-th call of the op at that line) and compared in the
reference's call order; an op a rank did not record (routed by a handler, or not run there) is
skipped. `per_atom` fingerprints are compared as the ranks' sum against the reference's, the others
rank by rank. A departure is `|a - b| > atol·size + rtol·scale` (`size` the weight of the compared
rows for a `per_atom` op, else 1; `scale` the reference's `Σ w·|r|`, else its largest magnitude).
Tensor operations go through `runtime.pristine` (the user's replaced torch functions never judge).

The reference always traces its ops (one forward); the ranks only in a diagnostic run: once an
attempt's outputs failed (`needs_diagnostic_run`), the engine
runs its spec once more with the op trace on (`Executor.run(spec, op_trace=True)`, at most
`MAX_DIAGNOSTIC_RUNS` per validation) and `name_from_run` names the op from it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..report import Attempt, DivergentOp, LayerDivergence, RankDisagreement
from ..runtime import pristine as P

__all__ = [
    "MAX_DIAGNOSTIC_RUNS",
    "first_departing_op",
    "first_disagreeing_op",
    "name_first_ops",
    "name_from_run",
    "needs_diagnostic_run",
    "op_records",
]


def op_records(instrumentation: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """The op records of a process's instrumentation (or a reference result), None when it kept none."""
    found = (instrumentation or {}).get("ops")
    ops = found.get("ops") if isinstance(found, Mapping) else None
    return list(ops) if isinstance(ops, list) else None


def _tensor(rec: Mapping[str, Any] | None) -> torch.Tensor | None:
    value = rec.get("value") if rec is not None else None
    return value if isinstance(value, torch.Tensor) else None


def _op(rec: Mapping[str, Any], against: str, ranks: list[int], rel: float, compared: int) -> DivergentOp:
    key = str(rec["key"])
    return DivergentOp(
        op=str(rec["op"]),
        file=str(rec["file"]),
        line=int(rec["line"]),
        function=str(rec.get("function") or ""),
        call=int(key.rsplit("#", 1)[-1]) if "#" in key else 0,
        level=str(rec["level"]),
        against=against,
        ranks=ranks,
        rel_diff=rel,
        compared=compared,
        site=str(rec["site"]) if rec.get("site") else None,
    )


def _largest(t: torch.Tensor) -> float:
    return P.float_of(P.amax(P.abs(t))) if P.numel(t) else 0.0


def _all(t: torch.Tensor) -> bool:
    return not P.truth(P.any(P.logical_not(t)))


def _departs(a: torch.Tensor, b: torch.Tensor, scale: float, atol: float, rtol: float) -> tuple[bool, float]:
    """Whether `a` departs from `b` (same shape) beyond the tolerances, and by how much relative to `scale`."""
    if not P.numel(a):
        return False, 0.0
    both = P.logical_and(P.isfinite(a), P.isfinite(b))
    if not _all(both):  # a NaN or inf where the other has none departs; the same ones do not
        same = P.logical_or(P.eq(a, b), P.logical_and(P.isnan(a), P.isnan(b)))
        if not _all(P.logical_or(both, same)):
            return True, math.inf
        a, b = P.where(both, a, 0.0), P.where(both, b, 0.0)
    diff = _largest(P.sub(a, b))
    rel = diff / scale if scale > 0 else (0.0 if diff == 0 else math.inf)
    return diff > atol + rtol * scale, rel


@P.shielded()
def first_departing_op(
    reference: Sequence[Mapping[str, Any]],
    ranks: Sequence[Sequence[Mapping[str, Any]]],
    atol: float,
    rtol: float,
) -> DivergentOp | None:
    """The first op, in the reference's call order, whose value on the ranks departs from the
    reference's (`against="reference"`), None when every op every rank recorded matches."""
    by_rank = [{r["key"]: r for r in recs} for recs in ranks]
    compared = 0
    for ref in reference:
        ref_value = _tensor(ref)
        found = [m.get(ref["key"]) for m in by_rank]
        values = [_tensor(g) for g in found]
        if ref_value is None or any(
            v is None or g is None or g["level"] != ref["level"] for v, g in zip(values, found)
        ):
            continue
        got = [v for v in values if v is not None]
        if ref["level"] == "per_atom":  # [Σ w·r, Σ w·|r|, Σ w] over each rank's owned atoms
            if any(v.shape != ref_value.shape or v.shape[0] != 3 for v in got):
                continue
            total = P.sum(P.stack(got), dim=0)
            scale = abs(P.float_of(P.getitem(ref_value, 1)))
            size = P.float_of(P.getitem(ref_value, 2))
            departs, rel = _departs(P.getitem(total, 0), P.getitem(ref_value, 0), scale, atol * size, rtol)
            compared += 1
            if departs:
                return _op(ref, "reference", list(range(len(got))), rel, compared - 1)
            continue
        if any(v.shape != ref_value.shape for v in got):
            continue
        off, worst = _departing(got, ref_value, atol, rtol)
        compared += 1
        if off:
            return _op(ref, "reference", off, worst, compared - 1)
    return None


def _departing(
    values: Sequence[Any], against: Any, atol: float, rtol: float, start: int = 0
) -> tuple[list[int], float]:
    """The ranks (numbered from `start`) whose value departs from `against`, and the largest relative
    departure among them (0.0 when none departs)."""
    scale = _largest(against)
    off: list[int] = []
    worst = 0.0
    for r, v in enumerate(values, start=start):
        departs, rel = _departs(v, against, scale, atol, rtol)
        if departs:
            off.append(r)
            worst = max(worst, rel)
    return off, worst


@P.shielded()
def first_disagreeing_op(ranks: Sequence[Sequence[Mapping[str, Any]]], atol: float, rtol: float) -> DivergentOp | None:
    """The first op, in rank 0's call order, that is not `per_atom` and whose value on some rank
    departs from rank 0's (`against="ranks"`; `ranks` those ranks), None when the ranks agree on every
    such op all of them recorded."""
    if len(ranks) < 2:
        return None
    by_rank = [{r["key"]: r for r in recs} for recs in ranks]
    compared = 0
    for rec in ranks[0]:
        first = _tensor(rec)
        if first is None or rec["level"] == "per_atom":
            continue
        found = [m.get(rec["key"]) for m in by_rank[1:]]
        values = [_tensor(g) for g in found]
        if any(
            v is None or g is None or g["level"] != rec["level"] or v.shape != first.shape
            for v, g in zip(values, found)
        ):
            continue
        off, worst = _departing([v for v in values if v is not None], first, atol, rtol, start=1)
        compared += 1
        if off:
            return _op(rec, "ranks", off, worst, compared - 1)
    return None


def name_first_ops(
    layer: LayerDivergence | None,
    disagreements: Sequence[RankDisagreement],
    reference: Mapping[str, Any],
    instrumentation: Sequence[Mapping[str, Any] | None],
    atol: float,
    rtol: float,
) -> None:
    """Set the first op of a failed attempt's records: `layer.first_op`, the first op departing from
    the reference, and each disagreement's `first_op`, that op, else the first op the ranks disagree
    on. Nothing is set when some rank (or, for `layer`, the reference) kept no op trace."""
    rank_ops = [op_records(i) for i in instrumentation]
    if not rank_ops or any(r is None for r in rank_ops):
        return
    ranks = [r for r in rank_ops if r is not None]
    ref_ops = op_records(reference)
    departing = first_departing_op(ref_ops, ranks, atol, rtol) if ref_ops is not None else None
    if layer is not None:
        layer.first_op = departing
    if disagreements:
        op = departing or first_disagreeing_op(ranks, atol, rtol)
        for d in disagreements:
            d.first_op = op


MAX_DIAGNOSTIC_RUNS = 2
"""The most diagnostic runs one validation makes (the first attempts that need one)."""


def needs_diagnostic_run(attempt: Attempt) -> bool:
    """Whether a failed attempt has a divergence whose first op is not named yet: outputs compared and
    failed (a divergent module, ranks that disagree, or outputs off the reference where no module
    tells: the whole forward is searched), no error, the layer diagnostic on, and no op named (its
    ranks ran without the op trace)."""
    if attempt.passed or attempt.error is not None or attempt.layer_divergence is None:
        return False
    layer = attempt.layer_divergence
    if not (attempt.failing_outputs or attempt.rank_disagreements):
        return False
    named = (layer is not None and layer.first_op is not None) or any(
        d.first_op is not None for d in attempt.rank_disagreements
    )
    return not named


def name_from_run(
    attempt: Attempt, run: Any, reference: Mapping[str, Any], atol: float, rtol: float, seconds: float
) -> None:
    """Name `attempt`'s first ops from a diagnostic run of its spec (`run`: a `DistributedRun` whose
    ranks traced their ops; anything else, a run that failed, names nothing) and record its
    `diagnostic_run` seconds in the attempt's timings."""
    attempt.timings["diagnostic_run"] = seconds
    instrumentation = getattr(run, "instrumentation", None)
    if not isinstance(instrumentation, list):
        return
    name_first_ops(attempt.layer_divergence, attempt.rank_disagreements, reference, instrumentation, atol, rtol)
