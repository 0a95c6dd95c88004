"""JUnit XML of a validation report, for CI: one testcase per output of the best attempt."""

from __future__ import annotations

import os
import socket
import xml.etree.ElementTree as ET
from collections.abc import Mapping
from datetime import datetime, timezone
from typing import TYPE_CHECKING

from .render import tolerance_for

if TYPE_CHECKING:
    from .document import TraceReport

__all__ = ["junit_xml", "write_junit"]


def _one_line(text: object) -> str:
    """`text` with every run of whitespace (newlines included) made one space."""
    return " ".join(str(text).split())


def _fmt(x: object) -> str:
    if isinstance(x, float):
        return f"{x:.3g}"
    return "-" if x is None else str(x)


def junit_xml(report: TraceReport, suite_name: str) -> ET.Element:
    """JUnit XML for CI (the `<testsuites>` root): one testsuite, one testcase per output of the best
    attempt (a `<failure>` with the abs/rel differences when it is out of tolerance), a `partition`
    testcase failing when the partition is degenerate, and a `run` testcase carrying the error when a
    run failed."""
    best = report.best_attempt
    classname = f"distcheck.{suite_name}"
    cases: list[ET.Element] = []
    meta = report.meta
    if best is not None:
        for name, v in best.verdicts.items():
            case = ET.Element("testcase", {"classname": classname, "name": name})
            if not v.passed:
                atol = tolerance_for(meta.get("atol"), name, v.kind)
                rtol = tolerance_for(meta.get("rtol"), name, v.kind)
                message = (
                    f"{name} ({v.kind}): {v.status}, max abs diff {_fmt(v.max_abs_diff)} (atol {_fmt(atol)}), "
                    f"max rel diff {_fmt(v.max_rel_diff)} (rtol {_fmt(rtol)}), "
                    f"{v.n_failing}/{v.n_total} elements out of tolerance"
                )
                failure = ET.SubElement(case, "failure", {"message": message, "type": v.status})
                details = [message]
                if v.worst_index is not None:
                    details.append(f"worst element at index {v.worst_index}")
                details.append(f"spec tried: {best.rationale}")
                failure.text = "\n".join(details)
            cases.append(case)
        partition = ET.Element("testcase", {"classname": classname, "name": "partition"})
        if best.degenerate:
            failure = ET.SubElement(
                partition,
                "failure",
                {"message": "degenerate partition: a pass proves nothing", "type": "degenerate"},
            )
            failure.text = "\n".join(best.degenerate)
        cases.append(partition)
        if best.error is not None or not best.verdicts:
            run = ET.Element("testcase", {"classname": classname, "name": "run"})
            if best.error is not None:
                e = best.error
                error = ET.SubElement(run, "error", {"message": _one_line(f"{e.type}: {e.message}"), "type": e.type})
                error.text = "\n".join(x for x in (e.hint, e.traceback) if x)
            else:
                ET.SubElement(run, "failure", {"message": "no outputs were compared", "type": "no-verdicts"})
            cases.append(run)
    else:
        run = ET.Element("testcase", {"classname": classname, "name": "run"})
        ET.SubElement(run, "error", {"message": "no attempt was made", "type": "error"})
        cases.append(run)
    failures = sum(1 for c in cases if c.find("failure") is not None)
    errors = sum(1 for c in cases if c.find("error") is not None)
    total = meta.get("timings", {}).get("total") if isinstance(meta.get("timings"), Mapping) else None
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
    props = {"verdict": report.verdict, "next_action": report.next_action.split("\n")[0]}
    for key in ("world_size", "device", "backend", "atol", "rtol", "factory"):
        if key in meta:
            props[key] = _one_line(meta[key])
    for key, value in props.items():
        ET.SubElement(properties, "property", {"name": key, "value": value})
    suite.extend(cases)
    out = ET.SubElement(suite, "system-out")
    out.text = report.render_text(color=False)
    ET.indent(root)
    return root


def write_junit(report: TraceReport, name: str, path: str) -> None:
    """Write `junit_xml(report, name)` to `path` (its directory created); `OSError` when it cannot."""
    root = junit_xml(report, name)
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    ET.ElementTree(root).write(path, encoding="utf-8", xml_declaration=True)
