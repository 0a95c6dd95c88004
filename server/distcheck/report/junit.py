"""JUnit XML of a validation report, for CI: one testcase per target, one failure per failing output
(the same records and text as the editor's Testing view: `failures.output_failures`), and a pass that
needed an auto-fix a failure too (the Testing view's text: the report's `fix_failure`)."""

from __future__ import annotations

import os
import socket
import xml.etree.ElementTree as ET
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from ..safe_text import for_xml

if TYPE_CHECKING:
    from .document import TraceReport

__all__ = ["fix_changes", "junit_xml", "write_junit"]


def _one_line(text: object) -> str:
    """`text` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def fix_changes(report: TraceReport) -> list[str]:
    """The fix of a report that passed only after one, as changes from the spec as given to the one that
    passed (`report.fix_edits()`: `set distribution.policy.halo_width to 7.5`, ...); empty otherwise."""
    from distcheck.spec.edit import describe_change

    return [describe_change(c) for c in report.fix_edits()]


def junit_xml(
    report: TraceReport, suite_name: str, *, save_command: str | None = None, accept_fixed: bool = False
) -> ET.Element:
    """JUnit XML for CI (the `<testsuites>` root): one testsuite holding one testcase named `suite_name`
    (the target, as the editor's Testing view names its item). The testcase has one `<failure>` per
    failing output of the best attempt (message and expected/actual text from `report.failures`, the
    records the Testing view shows too), a `<failure>` when the partition is degenerate or nothing was
    compared, an `<error>` carrying the worker/setup error when the run failed, and a `<failure
    type="fixed-pass">` when only an auto-fixed spec passed (message `report.fix_failure`, the Testing
    view's; text: the fix and `save_command`, the command that saves it), unless `accept_fixed` (the
    CLI's --accept-fixed: such a pass exits 0, and its testcase passes; the suite's `state` property
    still says "passed_after_fix")."""
    best = report.best_attempt
    classname = f"distcheck.{suite_name}"
    meta = report.meta
    case = ET.Element("testcase", {"classname": classname, "name": suite_name})
    if best is None:
        ET.SubElement(case, "error", {"message": "no attempt was made", "type": "error"})
    else:
        for f in report.failures:
            failure = ET.SubElement(case, "failure", {"message": f.message, "type": f"output:{f.output}"})
            failure.text = f"expected: {f.expected}\nactual: {f.actual}\nspec tried: {best.rationale}"
        if best.degenerate:
            failure = ET.SubElement(
                case,
                "failure",
                {"message": "degenerate partition: a pass proves nothing", "type": "degenerate"},
            )
            failure.text = "\n".join(best.degenerate)
        if best.error is not None:
            e = best.error
            error = ET.SubElement(case, "error", {"message": _one_line(f"{e.type}: {e.message}"), "type": e.type})
            where = e.user_frame
            location = f"at {where.file}:{where.line}" if where is not None else ""
            error.text = "\n".join(x for x in (location, e.hint, e.traceback) if x)
        elif not best.verdicts:
            ET.SubElement(case, "failure", {"message": "no outputs were compared", "type": "no-verdicts"})
        if report.fix_failure is not None and not accept_fixed:
            failure = ET.SubElement(case, "failure", {"message": report.fix_failure, "type": "fixed-pass"})
            lines = [f"fix: {_one_line(report.fix_applied)}", *(f"  {c}" for c in fix_changes(report))]
            if save_command:
                lines.append(f"save it: {save_command}")
            failure.text = "\n".join(lines)
    cases = [case]
    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    total = (meta.timings or {}).get("total")
    counts = {"tests": str(len(cases)), "failures": str(failures), "errors": str(errors), "skipped": "0"}
    seconds = f"{float(total):.3f}" if isinstance(total, (int, float)) else "0"
    root = ET.Element("testsuites", {"name": "distcheck", **counts, "time": seconds})
    suite = ET.SubElement(
        root,
        "testsuite",
        {
            "name": classname,
            **counts,
            "time": seconds,
            "timestamp": datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S"),
            "hostname": socket.gethostname(),
        },
    )
    properties = ET.SubElement(suite, "properties")
    props = {"verdict": report.verdict, "state": report.state, "next_action": report.next_action.split("\n")[0]}
    for key in ("world_size", "device", "backend", "atol", "rtol", "factory"):
        if getattr(meta, key) is not None:
            props[key] = _one_line(getattr(meta, key))
    target = report.target
    if target is not None and target.spec_rule is not None:
        props["spec"] = _one_line(target.spec_words())
    for key, value in props.items():
        ET.SubElement(properties, "property", {"name": key, "value": value})
    suite.extend(cases)
    out = ET.SubElement(suite, "system-out")
    out.text = report.render_text(color=False)
    _well_formed(root)
    ET.indent(root)
    return root


def _well_formed(root: ET.Element) -> None:
    """Every attribute and text of `root`'s tree as XML 1.0 may hold it (`safe_text.for_xml`: what the
    user's code named or raised may carry control characters, which no parser would read back)."""
    for element in root.iter():
        element.attrib.update({k: for_xml(v) for k, v in element.attrib.items()})
        if element.text:
            element.text = for_xml(element.text)
        if element.tail:
            element.tail = for_xml(element.tail)


def write_junit(
    report: TraceReport, name: str, path: str, *, save_command: str | None = None, accept_fixed: bool = False
) -> None:
    """Write `junit_xml(report, name, ...)` to `path` (its directory created); `OSError` when it cannot."""
    root = junit_xml(report, name, save_command=save_command, accept_fixed=accept_fixed)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
