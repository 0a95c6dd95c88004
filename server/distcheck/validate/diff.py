"""Compare distributed outputs with the single-process reference, element by element, in atom order.

An element passes when `|got - ref| <= atol` **or** `|got - ref| / max(|ref|, tiny) <= rtol`, where
`tiny` is the smallest normal number of the compared dtype (so the relative difference stays finite
where the reference is zero). Outputs are compared in the order they come in — global atom order for
per-node outputs — and never sorted: a row-sorted or order-free comparison would let forces that
landed on the wrong atoms pass.

A verdict is a plain dict with the keys of the report's `OutputVerdict`:
`name, kind, passed, max_abs_diff, max_rel_diff, status, worst_index, n_failing, n_total`.

- `status`: `"ok"`, `"mismatch"`, `"missing"` (absent from the distributed outputs), `"shape"` (shapes
  differ) or `"nonfinite"` (NaN/Inf in the distributed output where the reference is finite).
- `max_abs_diff` / `max_rel_diff`: float64 maxima over the elements where both sides are finite
  (`None` for `missing`/`shape`, or when no element is finite on both sides).
- `worst_index`: multi-index of the element with the largest absolute difference; for `nonfinite` the
  first non-finite element (worse than any finite difference); `None` when there is nothing to point at.
- `n_total`: atoms (rows) for `per_node` outputs, elements otherwise; `n_failing` counts failing atoms
  (rows with any failing element) or failing elements likewise. For `missing`/`shape` every unit counts
  as failing (`n_failing == n_total`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..batch import Batch
from ..option_check import Tolerance, tolerance_of
from ..report.atoms import DEFAULT_BINS, DEFAULT_WORST, AtomErrors, RankInterval, WorstAtom
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
    return torch.complex128 if (got.is_complex() or ref.is_complex()) else torch.float64


def _tiny(got: torch.Tensor, ref: torch.Tensor) -> float:
    """Smallest normal number of the dtype the two tensors compare in (float64's for integer inputs)."""
    dtype = torch.promote_types(got.dtype, ref.dtype)
    if dtype.is_complex:
        dtype = torch.float64 if dtype == torch.complex128 else torch.float32
    if not dtype.is_floating_point:
        dtype = torch.float64
    return float(torch.finfo(dtype).tiny)


def _elementwise(got: torch.Tensor, ref: torch.Tensor, atol: float, rtol: float) -> dict[str, torch.Tensor]:
    """Per-element masks and differences for tensors of equal shape (computed in float64 on ref's device)."""
    work = _work_dtype(got, ref)
    r = ref.detach().to(dtype=work)
    g = got.detach().to(device=r.device, dtype=work)
    g_fin = torch.isfinite(g)
    r_fin = torch.isfinite(r)
    both = g_fin & r_fin
    zero = torch.zeros((), dtype=torch.float64, device=r.device)
    abs_diff = torch.where(both, (g - r).abs(), zero)
    rel_diff = torch.where(both, abs_diff / r.abs().clamp_min(_tiny(got, ref)), zero)
    close = both & ((abs_diff <= atol) | (rel_diff <= rtol))
    # Non-finite reference values match only the same non-finite value (NaN with NaN, +Inf with +Inf).
    same_nonfinite = ~r_fin & ~g_fin & ((g == r) | (torch.isnan(g) & torch.isnan(r)))
    return {
        "fail": ~(close | same_nonfinite),
        "abs": abs_diff,
        "rel": rel_diff,
        "both": both,
        "bad": ~g_fin & r_fin,
    }


def _unravel(flat: int, shape: Sequence[int]) -> list[int]:
    index: list[int] = []
    for size in reversed(shape):
        index.append(flat % size)
        flat //= size
    return index[::-1]


def _row_failures(fail: torch.Tensor) -> torch.Tensor:
    """Per-row failure mask: a row fails when any of its elements fails (a 0-d tensor is one row)."""
    if fail.dim() == 0:
        return fail.reshape(1)
    if fail.numel() == 0:
        return torch.zeros(fail.shape[0], dtype=torch.bool, device=fail.device)
    return fail.reshape(fail.shape[0], -1).any(dim=1)


def _n_total(ref: torch.Tensor, kind: str) -> int:
    if kind == PER_NODE and ref.dim() > 0:
        return int(ref.shape[0])
    return int(ref.numel())


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
    }


def compare_output(
    name: str,
    got: torch.Tensor | None,
    ref: torch.Tensor,
    kind: str,
    atol: float,
    rtol: float,
) -> dict[str, Any]:
    """Verdict for one output (`got` is the distributed output, `None` when it is missing)."""
    n_total = _n_total(ref, kind)
    if got is None:
        return _verdict(name, kind, "missing", n_total=n_total, n_failing=n_total)
    if tuple(got.shape) != tuple(ref.shape):
        return _verdict(name, kind, "shape", n_total=n_total, n_failing=n_total)
    if ref.numel() == 0:
        return _verdict(name, kind, "ok", n_total=n_total, n_failing=0, max_abs=0.0, max_rel=0.0)
    e = _elementwise(got, ref, atol, rtol)
    fail, both, bad = e["fail"], e["both"], e["bad"]
    if kind == PER_NODE:
        n_failing = int(_row_failures(fail).sum())
    else:
        n_failing = int(fail.sum())
    max_abs: float | None = None
    max_rel: float | None = None
    worst: list[int] | None = None
    if bool(both.any()):
        max_abs = float(e["abs"].max())
        max_rel = float(e["rel"].max())
        ranked = torch.where(both, e["abs"], torch.full_like(e["abs"], -1.0))
        worst = _unravel(int(ranked.reshape(-1).argmax()), ref.shape)
    if bool(bad.any()):
        status = "nonfinite"
        worst = _unravel(int(bad.reshape(-1).nonzero()[0, 0]), ref.shape)
    elif n_failing:
        status = "mismatch"
        if not bool((fail & both).any()):
            # Only elements where the reference is non-finite fail (no finite difference): point at the first.
            worst = _unravel(int(fail.reshape(-1).nonzero()[0, 0]), ref.shape)
    else:
        status = "ok"
    return _verdict(
        name, kind, status, n_total=n_total, n_failing=n_failing, max_abs=max_abs, max_rel=max_rel, worst=worst
    )


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
    return _row_failures(_elementwise(got, ref, atol, rtol)["fail"])


def nonfinite_report(rank_outputs: Sequence[Mapping[str, torch.Tensor]]) -> list[dict[str, Any]]:
    """`{"rank", "output", "count"}` for every rank output holding NaN or Inf (count = such elements)."""
    found: list[dict[str, Any]] = []
    for rank, outputs in enumerate(rank_outputs):
        for name, value in outputs.items():
            if not isinstance(value, torch.Tensor) or not (value.is_floating_point() or value.is_complex()):
                continue
            count = int((~torch.isfinite(value.detach())).sum())
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
    cut = partition.cuts[system]
    g = got[sl].detach().to(device="cpu", dtype=torch.float64).reshape(sl.stop - sl.start, -1)
    r = ref[sl].detach().to(device="cpu", dtype=torch.float64).reshape(sl.stop - sl.start, -1)
    diff = (g - r).abs()
    # A non-finite difference where the reference is finite is worse than any finite one.
    diff = torch.where(torch.isfinite(r) & ~torch.isfinite(diff), torch.full_like(diff, math.inf), diff)
    diff = torch.nan_to_num(diff, nan=0.0, posinf=math.inf)
    per_atom, component = (
        diff.max(dim=1)
        if diff.shape[1]
        else (torch.zeros(diff.shape[0], dtype=torch.float64), torch.zeros(diff.shape[0], dtype=torch.long))
    )
    pos = batch.positions[sl].detach().cpu().to(torch.float64)
    u_all, _, _ = _normal_coordinates(pos, batch.cell[system].detach().cpu().to(torch.float64), batch.pbc[system].cpu())
    u = u_all[:, cut.axis]
    coord = torch.remainder(u, cut.length) if cut.periodic and cut.length > 0 else u - cut.origin
    n_bins = max(1, bins)
    if cut.length > 0:
        where = torch.clamp(torch.floor(coord / cut.length * n_bins).to(torch.long), 0, n_bins - 1)
    else:
        where = torch.zeros(coord.shape[0], dtype=torch.long)
    profile = torch.zeros(n_bins, dtype=torch.float64).scatter_reduce(0, where, per_atom, reduce="amax")
    owner = partition.owner[sl]
    order = torch.argsort(per_atom, descending=True, stable=True)[: max(0, worst)]
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
                rank=int(owner[i]),
                position=float(coord[i]),
                abs_diff=float(per_atom[i]),
                component=int(component[i]),
            )
            for i in order.tolist()
        ],
        profile=[float(v) for v in profile.tolist()],
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
