"""`next_action` lines for the trust checks: suspicious outputs, the receptive field, the sample.

No torch here (`next_action` is imported where torch must not be).
"""

from __future__ import annotations

from ..report import FEEDBACK_HIDES_FIELD, Attempt, ReceptiveField, TraceReport, receptive_line
from .field_advice import field_remedy

__all__ = ["GRAPH_SKIP", "suspicious_head", "trust_lines"]

GRAPH_SKIP = "a coupling that skips the neighbour graph"
"""Words of a receptive-field note (`receptive.py`) for an atom that moved past a hop level where nothing
moved: the model reads a fixed row (or an atom count), which every rank sees differently."""


def suspicious_head(best: Attempt, field: ReceptiveField | None = None) -> str | None:
    """The headline when the attempt failed only because outputs within tolerance are suspicious. Under
    `local` its advice follows the receptive field the reference measured (`field`): a halo short of
    it is widened to it, one that covers it is ruled out, and an unmeasured field, or one measured only
    as a lower bound (`FEEDBACK_HIDES_FIELD`), gives the next halo to try, one cutoff
    wider: a lower bound the halo covers rules nothing out."""
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
    follow = (
        "tighten atol/rtol below the error to make the comparison fail where it is, then follow the first "
        "divergent module"
    )
    policy = best.spec.distribution.policy
    if policy.kind != "halo" or policy.scatter_mode != "local":
        return head + follow
    width = policy.halo_width
    said = f"{width:g} Å" if width is not None else "derived from the wrapper"
    reach = _measured_reach(field)
    # a halo derived from the wrapper reaches its declared depth × cutoff (plus the skin)
    covered = width if width is not None else (field.declared_field if field is not None else None)
    bounded = field is not None and not field.lower_bound
    if bounded and reach is not None and covered is not None and covered >= reach:
        return head + (
            f"under scatter_mode 'local' its halo ({said}) covers the receptive field the reference measured "
            f"({reach:g} Å), so a shallow halo does not explain it: {follow}"
        )
    if reach is not None and (covered is None or covered < reach):
        return head + (
            f"under scatter_mode 'local' its halo ({said}) is shallower than the receptive field the reference "
            f"measured ({reach:g} Å): set distribution.policy.halo_width to at least {reach:g} Å plus the skin"
        )
    status = field.status if field is not None else "not measured"
    unmeasured = f"the field could not be measured here ({status})"
    if reach is not None:
        unmeasured = (
            f"the reference measured only a lower bound of the field ({reach:g} Å: {FEEDBACK_HIDES_FIELD}, "
            "hiding the rest)"
        )
    cutoff = field.cutoff if field is not None else None
    wider = (
        f"set distribution.policy.halo_width = {covered + cutoff:g} (one cutoff more)"
        if covered is not None and cutoff is not None
        else "widen distribution.policy.halo_width by one cutoff"
    )
    return head + (
        f"under scatter_mode 'local' (halo {said}) a halo shallower than the receptive field would do this, and "
        f"{unmeasured}: {wider} and validate again; if the error stays, {follow}"
    )


def _measured_reach(field: ReceptiveField | None) -> float | None:
    """The distance a halo must reach, in Å, by the reference's measurement (depth × cutoff, or the
    reach when farther), or None when it was not measured."""
    if field is None or field.status != "measured":
        return None
    found = [x for x in (field.measured_field, field.reach_angstrom) if x is not None]
    return max(found) if found else None


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
