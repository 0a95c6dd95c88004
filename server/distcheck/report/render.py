"""The report as text for terminals and CI logs: `render_text` (ANSI colors on request).

Control characters in user-supplied text are shown as `\\xNN` escapes; everything else (Unicode, quotes,
backslashes) is printed as is. The open parts (`meta`, `target`, `partition_health`, `halo_completeness`,
`layer_divergence`) are read through their `parts` records, never by guessed keys.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Mapping
from typing import TYPE_CHECKING

import orjson

from ..safe_text import for_terminal
from ..spec.edit import describe_change
from .atoms import describe_index
from .checks import receptive_line, suspicious_line
from .ops import DivergentOp
from .parts import LayerDivergence
from .values import _enc_free

if TYPE_CHECKING:
    from .document import TraceReport
    from .model import Attempt, HelperDiagnosis, WorkerError

__all__ = ["render_text", "tolerance_for"]


def render_text(report: TraceReport, color: bool = False) -> str:
    """A compact human report (ANSI colors only when `color`).

    First line: the verdict and the first line of `next_action`. Then, per attempt: index, rule and
    rationale, PASS/FAIL, a table of outputs against the tolerances in `meta`, handler counts, the
    error (type, message, hint, innermost frame), flagged helpers with their remedy as JSON, the
    first divergent module, partition health per rank and degenerate messages. Last, the final spec
    as JSON.
    """
    return _Renderer(report, color).render()


_ANSI = {"red": "31", "green": "32", "yellow": "33", "bold": "1", "dim": "2"}
_VERDICT_COLOR = {"passed": "green", "failed": "red", "inconclusive": "yellow", "error": "red"}


def _clean(text: object, *, one_line: bool = False) -> str:
    """`text` as the terminal may show it (`safe_text.for_terminal`; if `one_line`, newlines as spaces)."""
    s = str(text)
    if one_line:
        s = " ".join(s.split("\n"))
    return for_terminal(s).replace("\t", "    ")


def _op_line(op: DivergentOp) -> str:
    """`first op whose value departs: `matmul` at m.py:26 in reduce (Tensor.matmul), /path/m.py:26`."""
    return _clean(f"first op whose value departs: {op.where} ({op.op}), {op.file}:{op.line}", one_line=True)


def _num(x: object) -> str:
    if x is None:
        return "-"
    if isinstance(x, bool) or not isinstance(x, numbers.Real):
        return _clean(x, one_line=True)
    v = float(x)
    if math.isnan(v):
        return "NaN"
    if math.isinf(v):
        return "inf" if v > 0 else "-inf"
    if isinstance(x, numbers.Integral):
        return str(int(x))
    return f"{v:.3g}"


def _json_line(value: object) -> str:
    """Compact JSON of a free-form value (non-finite floats as strings, Unicode kept)."""
    try:
        return orjson.dumps(_enc_free(value, ())).decode()
    except TypeError:
        return _clean(repr(value), one_line=True)


def tolerance_for(tol: object, name: str, kind: str) -> object:
    """The tolerance that applies to output `name` of `kind`: `tol` itself, or its entry by name, then kind,
    then `"default"` when `tol` is a mapping (None when none applies)."""
    if isinstance(tol, Mapping):
        for key in (name, kind, "default"):
            if key in tol:
                return tol[key]
        return None
    return tol


class _Renderer:
    def __init__(self, report: TraceReport, color: bool) -> None:
        self.report = report
        self.meta = report.meta
        self.color = color
        self.lines: list[str] = []

    def paint(self, text: str, style: str) -> str:
        if not self.color:
            return text
        return f"\x1b[{_ANSI[style]}m{text}\x1b[0m"

    def add(self, text: str, indent: int = 0) -> None:
        pad = " " * indent
        for line in text.split("\n"):
            self.lines.append(pad + line if line else "")

    def render(self) -> str:
        r = self.report
        verdict = r.verdict
        action_lines = _clean(r.next_action).strip("\n").split("\n") if r.next_action.strip() else []
        if r.state == "passed_after_fix":  # the spec as given still fails: not a plain pass
            head = self.paint("PASSED AFTER FIX", "yellow")
        else:
            head = self.paint(verdict.upper(), _VERDICT_COLOR[verdict])
        self.add(f"{head}: {action_lines[0]}" if action_lines else head)
        for line in action_lines[1:]:
            self.add(line, 2)
        self.render_meta()
        for attempt in r.attempts:
            self.add("")
            self.render_attempt(attempt)
        self.add("")
        self.add(self.paint("final spec:", "bold"))
        self.add(_clean(r.spec.to_json()).rstrip("\n"))
        return "\n".join(self.lines) + "\n"

    def render_meta(self) -> None:
        r, meta = self.report, self.meta
        shown = {"world_size": meta.world_size, "device": meta.device, "backend": meta.backend}
        parts = [f"{key} {_num(value)}" for key, value in shown.items() if value is not None]
        parts += [
            f"{key} {_json_line(value) if isinstance(value, Mapping) else _num(value)}"
            for key, value in (("atol", meta.atol), ("rtol", meta.rtol))
            if value is not None
        ]
        if parts:
            self.add(", ".join(parts), 2)
        if meta.launcher == "torchrun" and meta.hosts is not None:
            hosts = meta.hosts
            self.add(_clean(f"ranks started by torchrun on {len(hosts)} host(s): {', '.join(hosts)}"), 2)
        factory = r.target.factory if r.target is not None else None
        if factory is not None:
            line = "?" if factory.line is None else factory.line
            where = f"{factory.file or '?'}:{line}"
            self.add(_clean(f"target: {factory.qualname or '?'} ({where})", one_line=True), 2)
        words = r.target.spec_words() if r.target is not None else None
        if words is not None:
            saved = r.target.spec_path if r.target is not None and not r.target.spec_read else None
            line = f"spec: {words}" + (f"; a fix is saved to {saved}" if saved else "")
            self.add(_clean(line, one_line=True), 2)
        fix = r.fix_applied
        if fix is not None:
            self.add(_clean(f"fix applied: {fix}", one_line=True), 2)
        self.render_checks()

    def render_checks(self) -> None:
        """The receptive field, the round-off floor and the sample warnings, one line each."""
        r = self.report
        if r.receptive_field is not None:
            line = receptive_line(r.receptive_field)
            style = "yellow" if r.receptive_field.under_declared else "dim"
            self.add(self.paint(line.split(":", 1)[0] + ":", style) + _clean(line.split(":", 1)[1], one_line=True), 2)
        if r.roundoff is not None and r.roundoff.status == "measured":
            floors = ", ".join(f"{k} {_num(v)}" for k, v in r.roundoff.floors.items())
            text = f"round-off floor ({r.roundoff.note}): {floors}"
            self.add(_clean(text, one_line=True), 2)
        for w in r.sample_warnings:
            self.add(self.paint("sample:", "yellow") + " " + _clean(f"{w.message} {w.remedy}", one_line=True), 2)

    def render_attempt(self, a: Attempt) -> None:
        status = self.paint("PASS", "green") if a.passed else self.paint("FAIL", "red")
        rule = f" [{a.rule}]" if a.rule else ""
        reused = " (re-consolidated an earlier run)" if a.reused_run else ""
        self.add(_clean(f"attempt {a.index + 1}{rule} ", one_line=True) + status + _clean(f"{reused}", one_line=True))
        if a.rationale:
            self.add(_clean(a.rationale), 2)
        self.render_outputs(a)
        if a.handler_counts:
            counts = ", ".join(f"{name}={n}" for name, n in a.handler_counts.items())
            self.add(_clean(f"handlers: {counts}", one_line=True), 2)
        else:
            self.add("handlers: none fired", 2)
        for x in a.suspicious:
            self.add(self.paint("suspicious:", "yellow") + " " + _clean(suspicious_line(x), one_line=True), 2)
        for u in a.unrouted:
            where = f" (called from {u.call_file}:{u.call_line})" if u.call_file else ""
            text = f"{u.op} ×{u.count} {u.aggregation} in {u.origin} at {u.location}{where}"
            self.add(self.paint("unrouted:", "yellow") + " " + _clean(text, one_line=True), 2)
            if u.kernel is not None:
                self.add(_clean(u.kernel.summary, one_line=True), 4)
        for d in a.rank_disagreements:
            self.add(self.paint("ranks disagree:", "red") + " " + _clean(d.summary, one_line=True), 2)
            m = d.first_module
            if m is not None:
                text = f"first module whose per-system value differs across ranks: {m.module} ({m.cls}), max |Δ| "
                self.add(_clean(text + _num(m.max_abs), one_line=True), 4)
            if d.first_op is not None:
                self.add(_op_line(d.first_op), 4)
        if a.rolled_back is not None:
            text = f"rolled back to attempt {a.rolled_back.to_attempt + 1}: {a.rolled_back.reason}"
            self.add(self.paint("rolled back:", "yellow") + " " + _clean(text, one_line=True), 2)
        for f in a.fixes:
            text = f"{f.rule}: {describe_change(f.edit())}"
            self.add(self.paint("fix:", "yellow") + " " + _clean(text, one_line=True), 2)
        for skip in a.skipped_fixes:
            self.add(self.paint("not tried:", "yellow") + " " + _clean(f"{skip.rule}: {skip.reason}", one_line=True), 2)
        if a.error is not None:
            self.render_error(a.error)
        for c in a.crash_traces:
            last = c.last_module or "none"
            counts = ", ".join(f"{name}={n}" for name, n in c.handler_counts.items()) or "none fired"
            text = f"before the crash on rank {c.rank} ({c.phase}): handlers {counts}; last module returned: {last}"
            self.add(_clean(text, one_line=True), 4)
        for h in a.helper_diagnostics:
            if h.flagged:
                self.render_helper(h)
        quiet = [
            f"{h.qualname} (adapter declared)" if h.already_wrapped else h.qualname
            for h in a.helper_diagnostics
            if not h.flagged
        ]
        if quiet:
            self.add(_clean("helpers traced: " + ", ".join(quiet), one_line=True), 2)
        if a.layer_divergence is not None:
            self.render_layers(a.layer_divergence)
        self.render_partition(a)

    def render_outputs(self, a: Attempt) -> None:
        names = list(a.verdicts) + [n for n in (*a.max_abs_diff, *a.max_rel_diff) if n not in a.verdicts]
        names = list(dict.fromkeys(names))
        if not names:
            return
        atol, rtol = self.meta.atol, self.meta.rtol
        rows = [["output", "kind", "max abs", "atol", "max rel", "rtol", "status"]]
        styles: list[str | None] = [None]
        for name in names:
            v = a.verdicts.get(name)
            kind = v.kind if v else "?"
            abs_diff = v.max_abs_diff if v else a.max_abs_diff.get(name)
            rel_diff = v.max_rel_diff if v else a.max_rel_diff.get(name)
            if v is None:
                state, style = "-", None
            elif v.passed:
                state, style = v.status, "green"
            else:
                state, style = f"{v.status} ({v.n_failing}/{v.n_total})", "red"
                if v.worst_index is not None:
                    state += f" worst at {describe_index(v.worst_index, v.kind)}"
            cells = [name, kind, _num(abs_diff), _num(tolerance_for(atol, name, kind))]
            cells += [_num(rel_diff), _num(tolerance_for(rtol, name, kind)), state]
            rows.append([_clean(c, one_line=True) for c in cells])
            styles.append(style)
        widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]) - 1)]
        for row, style in zip(rows, styles):
            text = "  ".join(cell.ljust(w) for cell, w in zip(row, widths))
            last = row[-1]
            self.add(f"{text}  {self.paint(last, style) if style else last}".rstrip(), 2)

    def render_error(self, e: WorkerError) -> None:
        where = f"rank {e.rank}" if e.rank is not None else "reference/parent"
        head = self.paint("error:", "red")
        self.add(f"{head} " + _clean(f"{e.type} on {where} during {e.phase}: {e.message}", one_line=True), 2)
        if e.hint:
            self.add(_clean(f"hint: {e.hint}"), 4)
        root = self.meta.root
        frame = e.innermost_in(root) if root else None
        frame = frame or e.innermost
        if frame is not None:
            self.add(_clean(f"at {frame.file}:{frame.line} in {frame.function}", one_line=True), 4)

    def render_helper(self, h: HelperDiagnosis) -> None:
        calls = ", ".join(f"rank {r}: {n}" for r, n in sorted(h.n_calls_per_rank.items()))
        text = f"helper {h.qualname}: pattern {h.pattern} ({_num(h.pattern_confidence)}), calls ref {h.n_calls_ref}"
        self.add(
            self.paint("flagged", "yellow") + " " + _clean(text + (f"; {calls}" if calls else ""), one_line=True), 2
        )
        if h.source:
            self.add(_clean(f"defined at {h.source.get('file', '?')}:{h.source.get('line', '?')}", one_line=True), 4)
        if h.consistency_check:
            outcome = {True: "passed", False: "failed", None: "not run"}[h.consistency_passed]
            self.add(_clean(f"check {h.consistency_check}: {outcome}", one_line=True), 4)
        if h.suspected_gap:
            self.add(_clean(f"suspected gap: {h.suspected_gap}", one_line=True), 4)
        if h.likely_remedy is not None:
            self.add("remedy (third_party_helpers entry): " + _clean(_json_line(h.likely_remedy)), 4)
        for note in h.divergence_notes:
            self.add(_clean(f"- {note}", one_line=True), 4)

    def render_layers(self, ld: LayerDivergence | None) -> None:
        if ld is None:
            return
        first = ld.first_divergent
        if first is None:
            self.add(_clean(f"layer divergence: no module diverged ({ld.checked} module call(s) checked)"), 2)
        else:
            text = f"first divergent module: {first.module or first.key or '?'}"
            if first.cls:
                text += f" ({first.cls})"
            text += f", rel diff {_num(first.rel_diff)}"
            self.add(_clean(text, one_line=True), 2)
        if ld.first_op is not None:
            self.add(_op_line(ld.first_op), 2)

    def render_partition(self, a: Attempt) -> None:
        health = a.partition_health
        if health.per_rank:
            cells = []
            for rank, c in sorted(health.per_rank.items()):
                cells.append(f"rank {rank}: owned {c.owned} halo {c.halo} remote {c.remote}")
            self.add(_clean("partition: " + "; ".join(cells), one_line=True), 2)
        for message in a.degenerate:
            self.add(self.paint("degenerate:", "yellow") + " " + _clean(message, one_line=True), 2)
        halo = a.halo_completeness
        if halo.matches is False:
            text = halo.interpretation or "the halo is shallower than the model needs"
            self.add(self.paint("halo incomplete:", "yellow") + " " + _clean(text, one_line=True), 2)
