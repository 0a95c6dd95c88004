"""`next_action` lines for the trust checks: suspicious outputs, the receptive field, the sample.

No torch here (`next_action` is imported where torch must not be).
"""

from __future__ import annotations

from ..report import Attempt, TraceReport, receptive_line
from .field_advice import field_remedy

__all__ = ["GRAPH_SKIP", "suspicious_head", "trust_lines"]

GRAPH_SKIP = "a coupling that skips the neighbour graph"
"""Words of a receptive-field note (`receptive.py`) for an atom that moved past a hop level where nothing
moved: the model reads a fixed row (or an atom count), which every rank sees differently."""


def suspicious_head(best: Attempt) -> str | None:
    """The headline when the attempt failed only because outputs within tolerance are suspicious."""
    if not best.suspicious or any(v.status != "suspicious" for v in best.verdicts.values() if not v.passed):
        return None
    worst = max(best.suspicious, key=lambda s: s.ratio)
    names = ", ".join(f"{s.name} ({s.ratio:.3g}×)" for s in best.suspicious)
    head = (
        f"FAIL — SUSPICIOUS: {names} within atol/rtol but far above the round-off floor of this comparison "
        f"(worst: {worst.name}, max abs {worst.max_abs_diff:.3g} against a floor of {worst.floor:.3g} measured by a "
        "replicated control run, threshold "
        f"{worst.threshold:g}×): a real distributed error too small for the tolerances; "
    )
    policy = best.spec.distribution.policy
    if policy.kind == "halo" and policy.scatter_mode == "local":
        width = f"{policy.halo_width:g} Å" if policy.halo_width is not None else "derived from the wrapper"
        return head + (
            f"under scatter_mode 'local' (halo {width}) it is the mark of a halo shallower than the receptive field: "
            "raise num_interactions on the wrapper to its real depth, or distribution.policy.halo_width, until it "
            "goes away"
        )
    return head + (
        "tighten atol/rtol below the error to make the comparison fail where it is, then follow the first "
        "divergent module"
    )


def trust_lines(report: TraceReport) -> list[str]:
    """Supporting lines: an under-declared receptive field (what was done, and `field_remedy`'s
    remedy: the depth or the cutoff to declare), and every sample warning with its remedy."""
    lines: list[str] = []
    field = report.receptive_field
    remedy = field_remedy(field) if field is not None else None
    if field is not None and remedy is not None:
        meanwhile = (
            f" (report.spec keeps halo_width {field.halo_width_set:g} Å meanwhile)"
            if field.halo_width_set is not None
            else ""
        )
        lines.append(f"{receptive_line(field)}; {remedy}{meanwhile}")
    skip = next((part for part in field.note.split("; ") if GRAPH_SKIP in part), None) if field else None
    if skip is not None:
        lines.append(
            f"receptive field: {skip}. A rank holds other rows, so such code sees another atom there: compute it "
            "from per-atom or per-system quantities (index_add/scatter over batch.batch) instead"
        )
    lines += [f"sample: {w.message} {w.remedy}" for w in report.sample_warnings]
    return lines
