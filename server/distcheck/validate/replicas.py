"""Replicated outputs compared rank against rank, as well as against the reference.

A per-graph or global output that is not in `all_reduce_outputs` is replicated: every rank must
hold the same value, and consolidation keeps rank 0's. So a rank whose value differs would pass
unseen if only the consolidated value were compared. `check_replicas` therefore

- compares every rank's value with the reference, and the output's verdict is the worst rank's;
- compares every pair of ranks with the same element test as the diff (`|a - b| <= atol` or
  `|a - b| / |reference| <= rtol`); ranks that differ beyond it are a `RankDisagreement`, which fails
  the output's verdict (status "mismatch") even when each rank alone is within tolerance of the
  reference;
- names the first module (in call order) whose per-system value differs across ranks, from the
  layer records every rank keeps (`validate.layers`).

Tensor operations go through `runtime.pristine` (the user's replaced torch functions never judge).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..option_check import Tolerance, tolerance_of
from ..report import DivergentModule, RankDisagreement
from ..runtime import pristine as P
from ..spec import MLIPSpec
from .diff import compare_output

__all__ = ["check_replicas", "first_divergent_module", "replicated_outputs"]

_REPLICATED_KINDS = ("per_graph", "global")


def replicated_outputs(kinds: Mapping[str, str], spec: MLIPSpec) -> list[str]:
    """Outputs every rank must hold whole: per-graph or global and not all-reduced, in `kinds` order."""
    return [n for n, k in kinds.items() if k in _REPLICATED_KINDS and n not in spec.all_reduce_outputs]


def _scale(ref: torch.Tensor) -> torch.Tensor:
    r = P.to(P.detach(ref), P.complex128 if ref.is_complex() else P.float64)
    tiny = float(P.finfo(P.float32 if ref.dtype in (P.float32, P.complex64) else P.float64).tiny)
    return P.clamp_min(P.abs(r), tiny)


def _pair(
    a: torch.Tensor, b: torch.Tensor, scale: torch.Tensor, atol: float, rtol: float
) -> tuple[torch.Tensor, float, float]:
    """Per-element "a and b differ beyond the tolerances", the largest finite |a - b| and the largest
    |a - b| / scale."""
    work = P.complex128 if (a.is_complex() or b.is_complex()) else P.float64
    x = P.to(P.detach(a), device=scale.device, dtype=work)
    y = P.to(P.detach(b), device=scale.device, dtype=work)
    both = P.logical_and(P.isfinite(x), P.isfinite(y))
    zero = P.zeros((), dtype=P.float64, device=scale.device)
    diff = P.where(both, P.abs(P.sub(x, y)), zero)
    same = P.logical_or(P.eq(x, y), P.logical_and(P.isnan(x), P.isnan(y)))
    same_nonfinite = P.logical_and(P.logical_not(both), same)
    relative = P.div(diff, scale)
    close = P.logical_and(both, P.logical_or(P.le(diff, atol), P.le(relative, rtol)))
    fail = P.logical_not(P.logical_or(close, same_nonfinite))
    if not P.numel(diff):
        return fail, 0.0, 0.0
    return fail, P.float_of(P.amax(diff)), P.float_of(P.amax(relative))


def _rows(fail: torch.Tensor) -> list[int]:
    """The leading-dimension indices with a failing element ([] for a 0-d tensor)."""
    if fail.ndim == 0:
        return []
    rows = P.any(P.reshape(fail, (fail.shape[0], -1)), dim=1)
    return [int(i) for i in P.tolist(P.reshape(P.nonzero(rows), (-1,)))]


def _verdict_order(v: Mapping[str, Any]) -> tuple[bool, int, float]:
    worst = v.get("max_abs_diff")
    return (bool(v["passed"]), -int(v["n_failing"]), -(math.inf if worst is None else float(worst)))


@P.shielded()
def check_replicas(
    rank_outputs: Sequence[Mapping[str, torch.Tensor]],
    kinds: Mapping[str, str],
    spec: MLIPSpec,
    reference: Mapping[str, torch.Tensor],
    verdicts: Mapping[str, Mapping[str, Any]],
    atol: Tolerance,
    rtol: Tolerance,
    *,
    reference_layers: Sequence[Mapping[str, Any]] = (),
    rank_layers: Sequence[Sequence[Mapping[str, Any]]] | None = None,
) -> tuple[dict[str, dict[str, Any]], list[RankDisagreement]]:
    """The verdicts with every replicated output judged on its worst rank, and the disagreements.

    `verdicts` are the diff's verdicts of the consolidated outputs (rank 0's value for replicated
    ones); the returned copy replaces each replicated output's verdict by its worst rank's and fails
    it when ranks disagree. `rank_layers` (per rank, the layer records) lets each disagreement name
    the first module whose per-system value differs across ranks; None or a missing rank: not named.
    Outputs absent on a rank or of another shape than the reference are left to `outputs.rank_problems`.
    """
    out = {name: dict(v) for name, v in verdicts.items()}
    found: list[RankDisagreement] = []
    module: DivergentModule | None = None
    module_searched = False
    for name in replicated_outputs(kinds, spec):
        ref = reference.get(name)
        values = [r.get(name) for r in rank_outputs]
        if ref is None or any(v is None or tuple(v.shape) != tuple(ref.shape) for v in values):
            continue
        tensors = [v for v in values if v is not None]
        kind = kinds[name]
        a, t = tolerance_of(atol, name, kind), tolerance_of(rtol, name, kind)  # this output's own tolerances
        per_rank = [compare_output(name, v, ref, kind, a, t) for v in tensors]
        worst = min(per_rank, key=_verdict_order)
        scale = _scale(ref)
        involved: set[int] = set()
        fail_any = P.zeros(ref.shape, dtype=P.bool_, device=scale.device)
        max_abs, max_rel = 0.0, 0.0
        for i in range(len(tensors)):
            for j in range(i + 1, len(tensors)):
                fail, largest, relative = _pair(tensors[i], tensors[j], scale, a, t)
                if P.truth(P.any(fail)):
                    involved |= {i, j}
                    fail_any = P.logical_or(fail_any, fail)
                    max_abs, max_rel = max(max_abs, largest), max(max_rel, relative)
        verdict = dict(worst)
        if involved:
            if verdict["passed"]:  # each rank within tolerance of the reference, but not of each other
                verdict.update(passed=False, status="mismatch", n_failing=P.int_of(P.sum(fail_any)))
            if not module_searched and rank_layers is not None:
                module = first_divergent_module(reference_layers, rank_layers, a, t)
                module_searched = True
            found.append(
                RankDisagreement(
                    output=name,
                    kind=kind,
                    ranks=sorted(involved),
                    off_reference=[r for r in sorted(involved) if not per_rank[r]["passed"]],
                    max_abs=max_abs,
                    max_rel=max_rel,
                    systems=_rows(fail_any) if kind == "per_graph" else [],
                    first_module=module,
                )
            )
        out[name] = verdict
    return out, found


def first_divergent_module(
    reference_layers: Sequence[Mapping[str, Any]],
    rank_layers: Sequence[Sequence[Mapping[str, Any]]],
    atol: float,
    rtol: float,
) -> DivergentModule | None:
    """The first per-system layer record (in the reference's call order, else rank 0's) whose value
    differs between rank 0 and another rank beyond the tolerances (scaled by the reference's value
    where it has the record); None when every rank agrees on every one, or a rank has no records."""
    if not rank_layers or any(not recs for recs in rank_layers):
        return None
    by_rank = [{r["key"]: r for r in recs} for recs in rank_layers]
    ref_by_key = {r["key"]: r for r in reference_layers}
    order = reference_layers if reference_layers else rank_layers[0]
    for rec in order:
        if rec.get("level") != "per_system":
            continue
        key = rec["key"]
        found = [m.get(key) for m in by_rank]
        if any(g is None or g.get("level") != "per_system" for g in found):
            continue
        values = [g["value"] for g in found if g is not None]
        first = values[0]
        if not isinstance(first, torch.Tensor) or any(
            not isinstance(v, torch.Tensor) or v.shape != first.shape for v in values
        ):
            continue
        ref_rec = ref_by_key.get(key)
        ref_value = ref_rec["value"] if ref_rec is not None else first
        if not isinstance(ref_value, torch.Tensor) or ref_value.shape != first.shape:
            ref_value = first
        scale = _scale(ref_value)
        ranks: list[int] = []
        fail_any = P.zeros(first.shape, dtype=P.bool_)
        max_abs = 0.0
        for r, v in enumerate(values[1:], start=1):
            fail, largest, _ = _pair(first, v, scale, atol, rtol)
            if P.truth(P.any(fail)):
                ranks.append(r)
                fail_any = P.logical_or(fail_any, P.to(fail, "cpu"))
                max_abs = max(max_abs, largest)
        if ranks:
            return DivergentModule(
                module=str(rec["module"]),
                cls=str(rec["class"]),
                key=str(key),
                ranks=ranks,
                max_abs=max_abs,
                systems=_rows(fail_any),
            )
    return None
