"""Helper-diagnosis classifier: what each watched helper does and whether it is safe when distributed.

Patterns (from the reference's sampled calls): `per_system_reduction` (per-atom input → one row per
system), `count` (an integer per system), `gather` (per-system input → per-atom), `scatter`
(per-edge → per-atom), `elementwise` (per-atom → per-atom) and `other`. Per-system reductions
are checked on every sampled call: a rank's result equal to the reference is fine; results that add
up to the reference only once halo rows are excluded mean the helper sums behind the runtime's back
and needs the generic `reduction` adapter — of kind `method` (`"Class.method"`, its atom argument
counted after `self`/`cls`) when the trace recorded a method of a class.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from ..runtime import pristine as P
from ..spec import MLIPSpec

__all__ = ["diagnose_helpers"]


def _rows(shape: list[int] | None) -> int | None:
    return shape[0] if shape else None


def _classify(samples: Sequence[Mapping[str, Any]], n_atoms: int, n_systems: int) -> tuple[str, float]:
    votes: dict[str, int] = {}
    for s in samples:
        out_rows = _rows(s.get("out_shape"))
        atom = s.get("atom_arg")
        dtype = s.get("out_dtype") or ""
        arg_rows = [_rows(a) for a in s.get("arg_shapes", [])]
        if out_rows in (n_systems, n_systems + 1) and n_systems < n_atoms:
            pattern = (
                "count"
                if ("int" in dtype or "long" in dtype)
                else ("per_system_reduction" if atom is not None or n_atoms in arg_rows else "other")
            )
        elif out_rows in (n_atoms, n_atoms + 1):
            if atom is None and any(r in (n_systems, n_systems + 1) for r in arg_rows):
                pattern = "gather"
            elif atom is not None:
                pattern = "elementwise"
            elif any(r is not None and r not in (n_atoms, n_atoms + 1, n_systems) for r in arg_rows):
                pattern = "scatter"
            else:
                pattern = "other"
        else:
            pattern = "other"
        votes[pattern] = votes.get(pattern, 0) + 1
    if not votes:
        return "other", 0.0
    best = max(votes, key=lambda k: votes[k])
    return best, votes[best] / sum(votes.values())


def _close(a: Any, b: Any, rtol: float = 1e-6) -> bool:
    if not isinstance(a, torch.Tensor) or not isinstance(b, torch.Tensor) or a.shape != b.shape:
        return False
    if not P.numel(b):
        return True
    with P.shielded():  # the user's replaced torch functions never judge
        a64, b64 = P.to(a, P.float64), P.to(b, P.float64)
        scale = P.float_of(P.amax(P.abs(b64)))
        return P.float_of(P.amax(P.abs(P.sub(a64, b64)))) <= rtol * max(scale, 1e-12)


def diagnose_helpers(
    reference: Mapping[str, Any],
    ranks: Sequence[Mapping[str, Any] | None],
    spec: MLIPSpec,
    n_atoms: int,
    n_systems: int,
) -> list[dict[str, Any]]:
    """One diagnosis dict (the report's HelperDiagnosis fields) per watched helper the reference called."""
    declared = {h.qualname for h in spec.distribution.third_party_helpers}
    out = []
    ref_calls: Mapping[str, Any] = reference.get("calls", {})
    for qualname, rec in ref_calls.items():
        module, function = _split(qualname, rec)
        rank_recs = [(r or {}).get("calls", {}).get(qualname) for r in ranks]
        samples = rec.get("samples", [])
        pattern, confidence = _classify(samples, n_atoms, n_systems)
        wrapped = qualname in declared
        notes: list[str] = []
        consistency = "not checked: not a per-system reduction"
        passed: bool | None = None
        gap: str | None = None
        partials_add_up = False
        atom_arg = next((s.get("atom_arg") for s in samples if s.get("atom_arg") is not None), 0)
        if pattern in ("per_system_reduction", "count") and all(r is not None for r in rank_recs):
            consistency = "each sampled call: rank results vs reference, with and without halo rows"
            by_rank = [{s["call"]: s for s in r["samples"]} for r in rank_recs]  # type: ignore[index]
            verdicts = []
            kinds: set[str] = set()  # failing calls: "partial", "agree_off_reference", "disagree"
            for s in samples:
                k = s["call"]
                found = [m.get(k) for m in by_rank]
                got = [g for g in found if g is not None]
                if len(got) != len(found):
                    continue
                ref_out = s["out"]
                if wrapped:
                    total = _sum([g["out"] for g in got])
                    ok = _close(total, ref_out)
                    verdicts.append(ok)
                    notes.append(
                        f"call {k}: adapter in place; owned-row results {'add up' if ok else 'do NOT add up'} "
                        "to the reference"
                    )
                    continue
                replicated = all(_close(g["out"], ref_out) for g in got)
                owned_total = _sum([g["out_owned"] for g in got])
                partial = owned_total is not None and _close(owned_total, ref_out)
                if replicated:
                    verdicts.append(True)
                    notes.append(f"call {k}: every rank returns the reference value")
                elif partial:
                    verdicts.append(False)
                    kinds.add("partial")
                    notes.append(
                        f"call {k}: per-rank results are partial sums; with halo rows excluded they add "
                        "up to the reference"
                    )
                elif len(got) > 1 and all(_close(g["out"], got[0]["out"]) for g in got[1:]):
                    verdicts.append(False)
                    kinds.add("agree_off_reference")
                    notes.append(
                        f"call {k}: every rank returns the same value, but not the reference's: the helper "
                        "already gives each rank the global result, from inputs that differ upstream"
                    )
                else:
                    verdicts.append(False)
                    kinds.add("disagree")
                    notes.append(
                        f"call {k}: the ranks disagree with each other, and their owned-row results do not "
                        "add up to the reference: its inputs already differ upstream, or it is not a sum over atoms"
                    )
            if verdicts:
                passed = all(verdicts)
                if not passed and not wrapped:
                    gap = _gap(qualname, kinds)
                    partials_add_up = kinds == {"partial"}
        elif pattern in ("per_system_reduction", "count") and not wrapped:
            notes.append("not called on every rank: cannot check consistency")
        remedy = None
        # A reduction adapter sums owned-row partials: proposed only when that sum is the reference
        # (or, unchecked, from the pattern alone); otherwise it would hide or double a real divergence.
        if partials_add_up or (pattern == "per_system_reduction" and not wrapped and passed is None):
            remedy = {
                "kind": "method" if rec.get("method") else "reduction",
                "module_path": module,
                "attr_name": function,
                "atom_arg": int(atom_arg or 0),
                "atom_dim": 0,
            }
        if gap is None and remedy is not None:
            gap = f"{qualname} looks like a per-system reduction that is not declared in third_party_helpers"
        out.append(
            {
                "module": module,
                "function": function,
                "n_calls_ref": int(rec.get("n_calls", 0)),
                "n_calls_per_rank": {i: int((r or {}).get("n_calls", 0)) for i, r in enumerate(rank_recs)},
                "pattern": pattern,
                "pattern_confidence": round(confidence, 3),
                "consistency_check": consistency,
                "consistency_passed": passed,
                "already_wrapped": wrapped,
                "suspected_gap": gap,
                "likely_remedy": remedy,
                "source": rec.get("source"),
                "divergence_notes": notes,
            }
        )
    return out


def _split(qualname: str, rec: Mapping[str, Any]) -> tuple[str, str]:
    """(module, attribute in it) of a traced helper: as the trace recorded them (a method is
    `"Class.method"` in its module), else the qualname's last dot."""
    module, attr = rec.get("module"), rec.get("attr")
    if isinstance(module, str) and isinstance(attr, str) and f"{module}.{attr}" == qualname:
        return module, attr
    head, _, tail = qualname.rpartition(".")
    return head, tail


def _gap(qualname: str, kinds: set[str]) -> str:
    """What the failing calls of an undeclared per-system helper mean, and what to do about it."""
    if kinds == {"partial"}:
        return (
            f"{qualname} reduces per system over the rows each rank holds (halo included), so each "
            "rank gets a partial or double-counted sum; the runtime cannot see inside it"
        )
    if kinds == {"agree_off_reference"}:
        return (
            f"the ranks agree on {qualname}'s result but it differs from the reference: the helper is already "
            "global (no adapter needed, one would double-count); its inputs differ upstream, so fix the first "
            "divergent layer the report names"
        )
    if "partial" in kinds:
        return (
            f"{qualname}'s owned-row results add up to the reference on some calls only: its inputs differ "
            "upstream on the others; fix the first divergent layer the report names, then declare a reduction "
            "adapter for it if it still fails"
        )
    return (
        f"the ranks disagree on {qualname}'s result and their owned-row results do not add up to the "
        "reference: its inputs differ upstream or it is not a plain sum over atoms; fix the first divergent "
        'layer the report names, or declare a "python" adapter that computes it from owned rows'
    )


def _sum(values: Sequence[Any]) -> torch.Tensor | None:
    tensors = [v for v in values if isinstance(v, torch.Tensor)]
    if len(tensors) != len(values) or not tensors or any(t.shape != tensors[0].shape for t in tensors):
        return None
    with P.shielded():
        return P.sum(P.stack([P.to(t, P.float64) for t in tensors]), dim=0)
