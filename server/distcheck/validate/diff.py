"""Compare distributed outputs with the single-process reference, element by element, in atom order.

An element passes when `|got - ref| <= atol` **or** `|got - ref| / max(|ref|, tiny) <= rtol`, where
`tiny` is the smallest normal number of the compared dtype (so the relative difference stays finite
where the reference is zero). Outputs are compared in the order they come in — global atom order for
per-node outputs — and never sorted: a row-sorted or order-free comparison would let forces that
landed on the wrong atoms pass.

A verdict is a plain dict with the keys of the report's `OutputVerdict`:
`name, kind, passed, max_abs_diff, max_rel_diff, status, worst_index, n_failing, n_total, expected_value,
actual_value`.

- `status`: `"ok"`, `"mismatch"`, `"missing"` (absent from the distributed outputs), `"shape"` (shapes
  differ) or `"nonfinite"` (NaN/Inf in the distributed output where the reference is finite).
- `max_abs_diff` / `max_rel_diff`: float64 maxima over the elements where both sides are finite
  (`None` for `missing`/`shape`, or when no element is finite on both sides).
- `worst_index`: multi-index of the element with the largest absolute difference; for `nonfinite` the
  first non-finite element (worse than any finite difference); `None` when there is nothing to point at.
- `expected_value` / `actual_value`: the reference's and the distributed run's value at `worst_index`
  (float64; `None` when there is no worst element or the output is complex).
- `n_total`: atoms (rows) for `per_node` outputs, elements otherwise; `n_failing` counts failing atoms
  (rows with any failing element) or failing elements likewise. For `missing`/`shape` every unit counts
  as failing (`n_failing == n_total`).

Every tensor operation here goes through `runtime.pristine`, inside `pristine.shielded()`: a model
module that replaced a torch function in this process (at import, in its factory) changes its own
outputs as a fresh process would, never the comparison.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..batch import Batch
from ..option_check import Tolerance, tolerance_of
from ..report.atoms import DEFAULT_BINS, DEFAULT_WORST, AtomErrors, RankInterval, WorstAtom
from ..runtime import pristine as P
from ..runtime.partition import Partition, _normal_coordinates

__all__ = [
    "atom_errors",
    "compare_output",
    "compare_outputs",
    "failing_atom_errors",
    "failing_rows",
    "nonfinite_report",
]

PER_NODE = "per_node"


def _work_dtype(got: torch.Tensor, ref: torch.Tensor) -> torch.dtype:
    return P.complex128 if (got.is_complex() or ref.is_complex()) else P.float64


def _tiny(got: torch.Tensor, ref: torch.Tensor) -> float:
    """Smallest normal number of the dtype the two tensors compare in (float64's for integer inputs)."""
    dtype = P.promote_types(got.dtype, ref.dtype)
    if dtype.is_complex:
        dtype = P.float64 if dtype == P.complex128 else P.float32
    if not dtype.is_floating_point:
        dtype = P.float64
    return float(P.finfo(dtype).tiny)


def _elementwise(got: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> dict[str, torch.Tensor]:
    """Per-element masks and differences for tensors of equal shape (computed in float64 on ref's device)."""
    work = _work_dtype(got, ref)
    r = P.to(P.detach(ref), dtype=work)
    g = P.to(P.detach(got), device=r.device, dtype=work)
    g_fin = P.isfinite(g)
    r_fin = P.isfinite(r)
    both = P.logical_and(g_fin, r_fin)
    zero = P.zeros((), dtype=P.float64, device=r.device)
    abs_diff = P.where(both, P.abs(P.sub(g, r)), zero)
    rel_diff = P.where(both, P.div(abs_diff, P.clamp_min(P.abs(r), _tiny(got, ref))), zero)
    close = P.logical_and(both, P.logical_or(P.le(abs_diff, atol), P.le(rel_diff, rtol)))
    # Non-finite reference values match only the same non-finite value (NaN with NaN, +Inf with +Inf).
    same = P.logical_or(P.eq(g, r), P.logical_and(P.isnan(g), P.isnan(r)))
    same_nonfinite = P.logical_and(P.logical_and(P.logical_not(r_fin), P.logical_not(g_fin)), same)
    return {
        "fail": P.logical_not(P.logical_or(close, same_nonfinite)),
        "abs": abs_diff,
        "rel": rel_diff,
        "both": both,
        "bad": P.logical_and(P.logical_not(g_fin), r_fin),
    }


def _unravel(flat: int, shape: Sequence[int]) -> list[int]:
    index: list[int] = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return index[::-1]


def _row_failures(fail: torch.Tensor) -> torch.Tensor:
    """Per-row failure mask: a row fails when any of its elements fails (a 0-d tensor is one row)."""
    if fail.ndim == 0:
        return P.reshape(fail, (1,))
    if P.numel(fail) == 0:
        return P.zeros(fail.shape[0], dtype=P.bool_, device=fail.device)
    return P.any(P.reshape(fail, (fail.shape[0], -1)), dim=1)


def _n_total(ref: torch.Tensor, kind: str) -> int:
    if kind == PER_NODE and ref.ndim > 0:
        return int(ref.shape[0])
    return int(P.numel(ref))


def _verdict(
    name: str,
    kind: str,
    status: str,
    *,
    n_total: int,
    n_failing: int,
    max_abs: float | None = None,
    max_rel: float | None = None,
    worst: list[int] | None = None,
    values: tuple[float, float] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "kind": kind,
        "passed": status == "ok",
        "max_abs_diff": max_abs,
        "max_rel_diff": max_rel,
        "status": status,
        "worst_index": worst,
        "n_failing": n_failing,
        "n_total": n_total,
        "expected_value": None if values is None else values[0],
        "actual_value": None if values is None else values[1],
    }


def _values_at(got: torch.Tensor, ref: torch.Tensor, worst: list[int] | None) -> tuple[float, float] | None:
    """(reference value, distributed value) at the multi-index `worst`, None without one (or complex)."""
    if worst is None or ref.dtype.is_complex or got.dtype.is_complex:
        return None
    flat = 0
    for size, i in zip(ref.shape, worst, strict=True):
        flat = flat * int(size) + int(i)
    return _value(ref, flat), _value(got, flat)


def _value(t: torch.Tensor, flat: int) -> float:
    return P.float_of(P.getitem(P.reshape(P.to(P.detach(t), dtype=P.float64), (-1,)), flat))


def compare_output(
    name: str,
    got: torch.Tensor | None,
    ref: torch.Tensor,
    kind: str,
    atol: float,
    rtol: float,
) -> dict[str, Any]:
    """Verdict for one output (`got` is the distributed output, `None` when it is missing)."""
    with P.shielded():
        return _compare_output(name, got, ref, kind, atol, rtol)


def _compare_output(
    name: str, got: torch.Tensor | None, ref: torch.Tensor, kind: str, atol: float, rtol: float
) -> dict[str, Any]:
    n_total = _n_total(ref, kind)
    if got is None:
        return _verdict(name, kind, "missing", n_total=n_total, n_failing=n_total)
    if tuple(got.shape) != tuple(ref.shape):
        return _verdict(name, kind, "shape", n_total=n_total, n_failing=n_total)
    if P.numel(ref) == 0:
        return _verdict(name, kind, "ok", n_total=n_total, n_failing=0, max_abs=0.0, max_rel=0.0)
    e = _elementwise(got, ref, atol, rtol)
    fail, both, bad = e["fail"], e["both"], e["bad"]
    if kind == PER_NODE:
        n_failing = P.int_of(P.sum(_row_failures(fail)))
    else:
        n_failing = P.int_of(P.sum(fail))
    max_abs: float | None = None
    max_rel: float | None = None
    worst: list[int] | None = None
    if P.truth(P.any(both)):
        max_abs = P.float_of(P.amax(e["abs"]))
        max_rel = P.float_of(P.amax(e["rel"]))
        ranked = P.where(both, e["abs"], P.full_like(e["abs"], -1.0))
        worst = _unravel(P.int_of(P.argmax(P.reshape(ranked, (-1,)))), ref.shape)
    if P.truth(P.any(bad)):
        status = "nonfinite"
        worst = _unravel(_first_true(bad), ref.shape)
    elif n_failing:
        status = "mismatch"
        if not P.truth(P.any(P.logical_and(fail, both))):
            # Only elements where the reference is non-finite fail (no finite difference): point at the first.
            worst = _unravel(_first_true(fail), ref.shape)
    else:
        status = "ok"
    return _verdict(
        name,
        kind,
        status,
        n_total=n_total,
        n_failing=n_failing,
        max_abs=max_abs,
        max_rel=max_rel,
        worst=worst,
        values=_values_at(got, ref, worst),
    )


def _first_true(mask: torch.Tensor) -> int:
    """The flat index of the first True element of `mask` (which has one)."""
    return P.int_of(P.getitem(P.nonzero(P.reshape(mask, (-1,))), (0, 0)))


def compare_outputs(
    got: Mapping[str, torch.Tensor],
    ref: Mapping[str, torch.Tensor],
    kinds: Mapping[str, str],
    atol: Tolerance,
    rtol: Tolerance,
) -> dict[str, dict[str, Any]]:
    """Verdicts for every reference output, keyed by name, in the reference's order, each under its own
    tolerances (`atol` / `rtol`: a number, or per output name, output kind and `"default"`; see
    `option_check.tolerance_of`).

    Outputs only `got` has are ignored; an output without an entry in `kinds` is compared element by
    element (kind `"global"`).
    """
    out: dict[str, dict[str, Any]] = {}
    for name, r in ref.items():
        kind = kinds.get(name, "global")
        a, t = tolerance_of(atol, name, kind), tolerance_of(rtol, name, kind)
        out[name] = compare_output(name, got.get(name), r, kind, a, t)
    return out


def failing_rows(got: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> torch.Tensor:
    """Per-row failure mask (`[n_rows]` bool, on ref's device) for a per-node output: row i fails when
    any of its elements fails the atol-or-rtol test (or is non-finite where the reference is finite)."""
    if tuple(got.shape) != tuple(ref.shape):
        raise ValueError(f"shapes differ: got {list(got.shape)}, reference {list(ref.shape)}")
    with P.shielded():
        return _row_failures(_elementwise(got, ref, atol, rtol)["fail"])


def nonfinite_report(rank_outputs: Sequence[Mapping[str, torch.Tensor]]) -> list[dict[str, Any]]:
    """`{"rank", "output", "count"}` for every rank output holding NaN or Inf (count = such elements)."""
    found: list[dict[str, Any]] = []
    with P.shielded():
        for rank, outputs in enumerate(rank_outputs):
            for name, value in outputs.items():
                if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
                    continue
                count = P.int_of(P.sum(P.logical_not(P.isfinite(P.detach(value)))))
                if count:
                    found.append({"rank": rank, "output": name, "count": count})
    return found


def atom_errors(
    name: str,
    got: torch.Tensor,
    ref: torch.Tensor,
    batch: Batch,
    partition: Partition,
    system: int = 0,
    *,
    worst: int = DEFAULT_WORST,
    bins: int = DEFAULT_BINS,
) -> AtomErrors:
    """Per-atom errors of the per-node output `name` in system `system` of `batch`, cut as `partition`
    cut it: at most `worst` atoms (largest |Δ| first; non-finite differences rank first) and a profile of
    `bins` bins of the largest |Δ| along the cut axis. The size is bounded by `worst` and `bins`, not by
    the number of atoms. Positions are measured as the partition measures them (from the cut's origin,
    wrapped into the period when periodic), so the worst atoms fall inside their owner's interval."""
    if tuple(got.shape) != tuple(ref.shape) or ref.dim() == 0:
        raise ValueError(
            f"{name}: per-atom errors need equal per-atom shapes, got {list(got.shape)} and {list(ref.shape)}"
        )
    sl = batch.system_slices()[system]
    with P.shielded():
        return _atom_errors(name, got, ref, batch, partition, system, sl, worst, bins)


def _atom_errors(
    name: str,
    got: torch.Tensor,
    ref: torch.Tensor,
    batch: Batch,
    partition: Partition,
    system: int,
    sl: slice,
    worst: int,
    bins: int,
) -> AtomErrors:
    cut = partition.cuts[system]

    def rows(t: torch.Tensor) -> torch.Tensor:
        return P.to(P.detach(P.getitem(t, sl)), device="cpu", dtype=P.float64)

    g = P.reshape(rows(got), (sl.stop - sl.start, -1))
    r = P.reshape(rows(ref), (sl.stop - sl.start, -1))
    diff = P.abs(P.sub(g, r))
    # A non-finite difference where the reference is finite is worse than any finite one.
    lost = P.logical_and(P.isfinite(r), P.logical_not(P.isfinite(diff)))
    diff = P.where(lost, P.full_like(diff, math.inf), diff)
    diff = P.nan_to_num(diff, nan=0.0, posinf=math.inf)
    per_atom, component = (
        P.max(diff, dim=1)
        if diff.shape[1]
        else (P.zeros(diff.shape[0], dtype=P.float64), P.zeros(diff.shape[0], dtype=P.long))
    )
    pos = rows(batch.positions)
    cell = P.to(P.detach(P.getitem(batch.cell, system)), device="cpu", dtype=P.float64)
    u_all, _, _ = _normal_coordinates(pos, cell, P.to(P.getitem(batch.pbc, system), device="cpu"))
    u = P.getitem(u_all, (slice(None), cut.axis))
    coord = P.remainder(u, cut.length) if cut.periodic and cut.length > 0 else P.sub(u, cut.origin)
    n_bins = max(1, bins)
    if cut.length > 0:
        scaled = P.floor(P.mul(P.div(coord, cut.length), n_bins))
        where = P.clamp(P.to(scaled, P.long), 0, n_bins - 1)
    else:
        where = P.zeros(coord.shape[0], dtype=P.long)
    profile = P.scatter_reduce(P.zeros(n_bins, dtype=P.float64), 0, where, per_atom, reduce="amax")
    owner = P.getitem(partition.owner, sl)
    order = P.getitem(P.argsort(per_atom, descending=True, stable=True), slice(None, max(0, worst)))
    width = cut.length / partition.world_size if cut.length > 0 else 0.0
    replicated = math.isinf(partition.halo_width) or all(
        r.num_halo + r.num_owned == partition.num_atoms for r in partition.ranks
    )
    return AtomErrors(
        output=name,
        system=system,
        axis=cut.axis,
        length=float(cut.length),
        periodic=bool(cut.periodic),
        halo_width=None if replicated and partition.world_size > 1 else float(partition.halo_width),
        n_atoms=int(per_atom.shape[0]),
        n_components=int(diff.shape[1]),
        ranks=[RankInterval(rank=k, lo=k * width, hi=(k + 1) * width) for k in range(partition.world_size)],
        worst=[
            WorstAtom(
                index=sl.start + int(i),
                rank=P.int_of(P.getitem(owner, i)),
                position=P.float_of(P.getitem(coord, i)),
                abs_diff=P.float_of(P.getitem(per_atom, i)),
                component=P.int_of(P.getitem(component, i)),
            )
            for i in P.tolist(order)
        ],
        profile=[float(v) for v in P.tolist(profile)],
    )


def failing_atom_errors(
    failing: Sequence[str],
    outputs: Mapping[str, torch.Tensor],
    ref: Mapping[str, torch.Tensor],
    kinds: Mapping[str, str],
    batch: Batch,
    partition: Partition,
) -> list[AtomErrors]:
    """One `atom_errors` record for each per-node output named in `failing` that both sides have with
    equal shapes, in the system holding its largest |Δ| (the others are left out so the size stays
    bounded by the number of outputs, not of systems). Outputs that cannot be compared atom by atom are
    skipped: their verdict already says why."""
    found: list[AtomErrors] = []
    for name in failing:
        if kinds.get(name) != PER_NODE or name not in outputs or name not in ref:
            continue
        got, want = outputs[name], ref[name]
        if tuple(got.shape) != tuple(want.shape) or want.dim() == 0 or want.shape[0] != batch.num_atoms:
            continue
        peaks = [
            max(
                (w.abs_diff for w in atom_errors(name, got, want, batch, partition, s, worst=1, bins=1).worst),
                default=-1.0,
            )
            for s in range(batch.num_systems)
        ]
        if peaks:
            found.append(atom_errors(name, got, want, batch, partition, peaks.index(max(peaks))))
    return found
