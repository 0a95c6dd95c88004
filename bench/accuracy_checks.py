"""The accuracy scoreboard's judgements of one report (`bench/accuracy.py`): the outcome, whether the
cause was named, which fixes the spec it stands on carries, and whether `next_action` is consistent
with the attempts.

"Advice consistent with attempts" is mechanical. An advice line is a line of `next_action` that is
not an attempt's record (`attempt N (...)`) and does not report something already tried (`rolled
back`, `tried`). The advice is inconsistent when a line

- advises a change an attempt tried and that was rolled back or failed: the key it changed and the
  value it set (a number within 1 %) on one line;
- advises a spec value that the spec as given already has (`set scatter_mode = "local"` when it is);
- advises `num_interactions = N` with N no deeper than the wrapper already declares, or with a halo
  of N × cutoff that an attempt already ran under `local` and failed;
- advises `cutoff = X` no longer than the wrapper already declares, or one whose halo (X, times the
  declared depth under `local`) an attempt already ran with and failed;
- advises a `halo_width` no wider than one an attempt already ran with and failed.

No torch here: it reads a `TraceReport` only.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

from distcheck import TraceReport
from distcheck.report import Attempt

__all__ = ["advice_consistent", "fix_rules", "named", "outcome"]

_NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
_DEPTH = re.compile(r"num_interactions\s*(?:=|to)\s*(\d+)")
_CUTOFF = re.compile(r"\bcutoff\s*(?:=|to)\s*(\d+(?:\.\d+)?)")
_HALO = re.compile(r"halo_width\s*(?:=|to|:)\s*(\d+(?:\.\d+)?)")
_SET = re.compile(r"\bset\s+(?:[\w.]+\.)?(\w+)\s*(?:=|to|:)\s*\"?([\w.\-]+)\"?")
_FACT_WORDS = ("rolled back", "was tried", " tried ", "made it worse", "was dropped")


def outcome(report: TraceReport) -> str:
    """`pass`, `pass after fix` (the report's own state: a spec distcheck changed passed), `fail`, or the
    verdict (`inconclusive`, `error`)."""
    return {"passed": "pass", "passed_after_fix": "pass after fix", "failed": "fail"}.get(report.state, report.state)


def named(report: TraceReport, words: tuple[str, ...]) -> bool:
    """Is every entry of `words` (`"a|b"`: either) in `next_action`, an attempt's rationale or an unrouted
    op's name, function or file (case-insensitive)?"""
    text = "\n".join(
        [report.next_action, *(a.rationale for a in report.attempts)]
        + [f"{u.op} {u.function} {u.file}" for attempt in report.attempts for u in attempt.unrouted]
    ).lower()
    return all(any(alt.lower() in text for alt in word.split("|")) for word in words)


def fix_rules(report: TraceReport) -> list[str]:
    """The rules of the fixes the best attempt's spec carries (`Attempt.fixes`), in order, each once."""
    best = report.best_attempt
    rules: list[str] = []
    for fix in best.fixes if best is not None else []:
        if fix.rule not in rules:
            rules.append(fix.rule)
    return rules


def _advice_lines(report: TraceReport) -> list[str]:
    lines = [line.strip() for line in report.next_action.splitlines()]
    return [
        line
        for line in lines
        if line and not re.match(r"attempt \d+", line) and not any(w in line.lower() for w in _FACT_WORDS)
    ]


def _leaves(data: Any, path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...], Any]]:
    if isinstance(data, dict):
        for key, value in data.items():
            yield from _leaves(value, (*path, str(key)))
    else:
        yield path, data


def _mentions(line: str, value: Any) -> bool:
    """Does `line` hold `value` (a number within 1 %, else the text as a word)?"""
    if isinstance(value, bool) or value is None:
        return False
    if isinstance(value, (int, float)):
        return any(abs(float(n) - value) <= 0.01 * max(abs(value), 1e-12) for n in _NUMBER.findall(line))
    if isinstance(value, str):
        return re.search(rf"(?<![\w-]){re.escape(value)}(?![\w-])", line) is not None
    if isinstance(value, list):
        return bool(value) and all(_mentions(line, v) for v in value)
    return False


def _failed_tries(report: TraceReport) -> list[Attempt]:
    """Attempts after the first whose change did not stand: rolled back, or not passed and not the best."""
    return [
        a for a in report.attempts[1:] if a.rolled_back is not None or (not a.passed and a is not report.best_attempt)
    ]


def _tried_changes(report: TraceReport) -> list[tuple[int, str, Any]]:
    """(attempt index, key, value) of every fix a failed try carried that the spec as given lacks."""
    given = dict(_leaves(report.attempts[0].spec.to_dict())) if report.attempts else {}
    out = []
    for attempt in _failed_tries(report):
        for fix in attempt.fixes:
            if fix.op == "set" and fix.path and given.get(tuple(fix.path)) != fix.value:
                out.append((attempt.index, fix.path[-1], fix.value))
    return out


def _halo(attempt: Attempt) -> float | None:
    width = attempt.halo_completeness.halo_width
    return width if width is not None else attempt.spec.distribution.policy.halo_width


def advice_consistent(report: TraceReport) -> tuple[bool, str]:
    """`(True, "")` when `next_action` passes every check of the module docstring, else `(False, why)`."""
    if not report.attempts:
        return True, ""
    lines = _advice_lines(report)
    wrapper = report.meta.wrapper
    declared = wrapper.num_interactions if wrapper is not None else None
    cutoff = wrapper.cutoff if wrapper is not None else None
    given = dict(_leaves(report.attempts[0].spec.to_dict()))
    failed = [a for a in report.attempts if not a.passed]
    for line in lines:
        for index, key, value in _tried_changes(report):
            if key in line and _mentions(line, value):
                return False, f"advises {key} = {value!r}, which attempt {index} tried and did not keep"
        for match in _SET.finditer(line):
            key, text = match.group(1), match.group(2)
            for path, value in given.items():
                if path and path[-1] == key and value is not None and _mentions(text, value):
                    return False, f"advises {key} = {text}, which the spec as given already has"
        for match in _DEPTH.finditer(line):
            depth = int(match.group(1))
            if declared is not None and depth <= declared:
                return False, f"advises num_interactions = {depth}; the wrapper already declares {declared}"
            for a in failed:
                halo = _halo(a)
                local = a.spec.distribution.policy.scatter_mode == "local"
                if local and cutoff is not None and halo is not None and halo >= depth * cutoff:
                    return False, f"advises num_interactions = {depth}; attempt {a.index} ran its halo ({halo:g} Å)"
        for match in _CUTOFF.finditer(line):
            longer = float(match.group(1))
            if cutoff is not None and longer <= cutoff:
                return False, f"advises cutoff = {longer:g}; the wrapper already declares {cutoff:g}"
            for a in failed:
                halo = _halo(a)
                local = a.spec.distribution.policy.scatter_mode == "local"
                needed = longer * (declared or 1) if local else longer
                if halo is not None and halo >= needed:
                    return False, f"advises cutoff = {longer:g}; attempt {a.index} ran a halo of {halo:g} Å and failed"
        for match in _HALO.finditer(line):
            width = float(match.group(1))
            for a in failed:
                halo = _halo(a)
                if halo is not None and halo >= width * 0.99:
                    return False, f"advises halo_width {width:g} Å; attempt {a.index} ran with {halo:g} Å and failed"
    return True, ""
