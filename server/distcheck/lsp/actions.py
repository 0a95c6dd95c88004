"""Quick fixes → `WorkspaceEdit`s on the spec JSON that keep its formatting and key order.

A fix is computed from the spec document's current text — the open editor buffer when there is one,
so unsaved changes are kept, else the file on disk — and returned as minimal `TextEdit`s in a
`TextDocumentEdit` whose `OptionalVersionedTextDocumentIdentifier` carries the buffer's version
(null for a file that is not open), so a client refuses the edit if the buffer changed in between.
When the spec file does not exist yet, the edit creates it (`CreateFile`) and fills it with the
spec, 2-space indented as `MLIPSpec.to_json` writes it.

`new_spec_text(kind, data, current)` is the pure part: the spec text after the fix. The text edits
themselves are the data model's (`distcheck.spec.edit`, shared with `MLIPSpec.save`).

`report_fixes(report, spec_path)` lists every spec fix a report holds — each helper adapter the
helper trace has ready, each undeclared `torch.ops` kernel's ready `custom_ops` entry
(`custom_op_fixes`), and the passing auto-fix's changes — as the same `(code, data)` the
diagnostics carry, so a fix can be offered wherever a diagnostic of that report shows (the spec
JSON, the factory, a call site) and all of them applied at once (`all_fixes_text`).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from lsprotocol import types

from ..report import TraceReport
from ..spec import MLIPSpec, SpecError, validate_json
from ..spec.edit import append_item, apply_changes, describe_change, minimal_edits, set_value, spec_changes
from ..spec.jsontext import JsonEditError, find, parse
from .diagnostics_evidence import kernel_entries
from .text import LineIndex

__all__ = [
    "FIXABLE",
    "ActionError",
    "action_title",
    "all_fixes_text",
    "apply_changes",
    "custom_op_fixes",
    "helper_fixes",
    "new_spec_text",
    "report_fixes",
    "workspace_edit",
]

FIXABLE = ("spec-fix", "failing-output", "undeclared-helper", "undeclared-custom-op", "spec-missing", "save-spec")
"""Diagnostic codes (and the `save-spec` source action) that have a quick fix when their data allows."""


class ActionError(ValueError):
    """A fix that cannot be made; the message says what to do instead."""


def _pretty(spec: Mapping[str, Any]) -> str:
    try:
        return MLIPSpec.coerce(dict(spec)).to_json()
    except (SpecError, TypeError, ValueError):
        return json.dumps(spec, indent=2, ensure_ascii=False) + "\n"


def _helper_text(current: str | None, data: Mapping[str, Any]) -> str:
    """Insert the helper's adapter into `distribution.third_party_helpers` (replacing the entry for the
    same function)."""
    remedy = data.get("remedy")
    if not isinstance(remedy, Mapping):
        raise ActionError(
            "distcheck has no ready adapter entry for this helper; declare it by hand in "
            'distribution.third_party_helpers ({"kind": "python", ..., "replacement": "module:function"})'
        )

    def same(value: Any) -> bool:
        return (
            isinstance(value, Mapping)
            and value.get("module_path") == remedy.get("module_path")
            and value.get("attr_name") == remedy.get("attr_name")
        )

    return _put_entry(current, data, "third_party_helpers", remedy, same)


def _custom_op_text(current: str | None, data: Mapping[str, Any]) -> str:
    """Insert the kernel's entry into `distribution.custom_ops` (replacing an entry of the same op)."""
    entry = data.get("entry")
    if not isinstance(entry, Mapping) or not isinstance(entry.get("op"), str):
        raise ActionError(
            "distcheck has no ready custom_ops entry for this kernel (see the diagnostic's reason); declare it by "
            'hand in distribution.custom_ops ({"op": "ns::name", "arg_transforms": {...}, "output_transforms": {...}})'
        )
    return _put_entry(
        current, data, "custom_ops", entry, lambda value: isinstance(value, Mapping) and value.get("op") == entry["op"]
    )


def _put_entry(
    current: str | None,
    data: Mapping[str, Any],
    key: str,
    entry: Mapping[str, Any],
    same: Callable[[Any], bool],
) -> str:
    """The spec text with `entry` in the list `distribution.<key>`, in place of an item `same` holds
    for, else appended. With no text (`current` None) the spec is `data`'s `baseSpec` (an empty spec
    without one), written whole."""
    if current is None:
        base = data.get("baseSpec")
        spec: dict[str, Any] = dict(base) if isinstance(base, Mapping) else {"format": "distcheck-spec", "version": 1}
        distribution = dict(spec.get("distribution") or {})
        kept = [item for item in distribution.get(key) or [] if not same(item)]
        distribution[key] = [*kept, dict(entry)]
        spec["distribution"] = distribution
        return _pretty(spec)
    path = ["distribution", key]
    node = find(parse(current), path)
    if node is not None and node.kind == "array":
        for index, item in enumerate(node.items):
            if same(json.loads(current[item.start : item.end])):
                return set_value(current, [*path, index], dict(entry))
    return append_item(current, path, dict(entry))


def _full_spec_text(current: str | None, spec: Any) -> str:
    if not isinstance(spec, Mapping):
        raise ActionError("there is no validated spec to save; run Distcheck: Validate first")
    if current is None:
        return _pretty(spec)
    try:
        old = json.loads(current)
    except ValueError:
        return _pretty(spec)
    if not isinstance(old, Mapping):
        return _pretty(spec)
    return apply_changes(current, spec_changes(old, spec))


def new_spec_text(code: str, data: Mapping[str, Any], current: str | None) -> str:
    """The spec document's text after the fix for a diagnostic `code` with `data` (`current` is its text
    now, None when the file does not exist). Raises `ActionError` when the fix cannot be made."""
    try:
        if code in ("spec-fix", "failing-output"):
            changes = data.get("edits")
            if current is None:
                return _full_spec_text(None, data.get("spec"))
            if not isinstance(changes, list) or not changes:
                raise ActionError("this diagnostic carries no spec change; run Distcheck: Validate again")
            return apply_changes(current, changes)
        if code == "undeclared-helper":
            return _helper_text(current, data)
        if code == "undeclared-custom-op":
            return _custom_op_text(current, data)
        if code in ("spec-missing", "save-spec"):
            return _full_spec_text(current, data.get("spec"))
    except JsonEditError as err:
        raise ActionError(
            f"cannot edit the spec file: {err}; fix its JSON (see the spec-invalid diagnostics) and try again"
        ) from err
    raise ActionError(f"no quick fix for {code!r}")


def helper_fixes(report: TraceReport, spec_path: str) -> list[dict[str, Any]]:
    """The `undeclared-helper` fix data of each flagged helper of the user's attempt that has a ready
    adapter entry (`likely_remedy`), as its diagnostics carry it."""
    if not report.attempts:
        return []
    first = report.attempts[0]
    return [
        {
            "code": "undeclared-helper",
            "qualname": h.qualname,
            "remedy": h.likely_remedy,
            "baseSpec": first.spec.to_dict(),
            "specPath": spec_path,
        }
        for h in first.helper_diagnostics
        if h.flagged and not h.already_wrapped and isinstance(h.likely_remedy, Mapping)
    ]


def custom_op_fixes(report: TraceReport, spec_path: str) -> list[dict[str, Any]]:
    """The `undeclared-custom-op` fix data of each undeclared kernel of the user's attempt with one ready
    `custom_ops` entry (`UnroutedOp.kernel.entry`; none for a kernel whose calls need different ones),
    as its diagnostics carry it."""
    if not report.attempts:
        return []
    first = report.attempts[0]
    return [
        {
            "code": "undeclared-custom-op",
            "op": op,
            "entry": entry,
            "baseSpec": first.spec.to_dict(),
            "specPath": spec_path,
        }
        for op, entry in kernel_entries(first).items()
        if entry is not None
    ]


def report_fixes(report: TraceReport, spec_path: str) -> list[dict[str, Any]]:
    """Every spec fix of `report`: the passing fix's changes (code `spec-fix`: `report.fix_edits()`),
    then each ready helper adapter (`undeclared-helper`) and
    each undeclared kernel's ready entry (`undeclared-custom-op`)."""
    out: list[dict[str, Any]] = []
    best = report.best_attempt
    if best is not None:
        changes = report.fix_edits()  # from the spec as given: a fix before the first run too
        if changes:
            spec = report.spec.to_dict()
            out.append({"code": "spec-fix", "rule": best.rule, "edits": changes, "spec": spec, "specPath": spec_path})
    out.extend(helper_fixes(report, spec_path))
    out.extend(custom_op_fixes(report, spec_path))
    return out


def all_fixes_text(fixes: list[dict[str, Any]], current: str | None) -> str:
    """The spec text after applying every fix of `fixes` in order (each to the text the previous one
    left); a fix that the ones before already made (the same adapter) changes nothing."""
    if not fixes:
        raise ActionError("the last validation found no spec fix; run Distcheck: Validate again")
    text = current
    for fix in fixes:
        text = new_spec_text(str(fix["code"]), fix, text)
    assert text is not None
    return text


def action_title(code: str, data: Mapping[str, Any], spec_name: str, exists: bool) -> str | None:
    """The quick-fix title for a diagnostic, or None when it has no fix."""
    if code in ("spec-fix", "failing-output"):
        changes = data.get("edits")
        if not isinstance(changes, list) or not changes:
            return None
        rule = data.get("rule") or "auto-fix"
        if not exists:
            return f"Write the working spec found by auto-fix '{rule}' to {spec_name}"
        edit = data.get("edit") if code == "spec-fix" else None
        first = edit if isinstance(edit, Mapping) else changes[0]
        more = len(changes) - 1
        return f"Apply auto-fix '{rule}': {describe_change(first)}" + (f" (and {more} more)" if more > 0 else "")
    if code == "undeclared-helper":
        remedy = data.get("remedy")
        if not isinstance(remedy, Mapping):
            return None
        what = "a method adapter" if remedy.get("kind") == "method" else "a reduction adapter"
        return f"Declare {data.get('qualname')} as {what} in {spec_name}"
    if code == "undeclared-custom-op":
        if not isinstance(data.get("entry"), Mapping):
            return None
        return f"Declare the kernel {data.get('op')} in distribution.custom_ops of {spec_name}"
    if code == "spec-missing":
        return f"Save the validated spec to {spec_name}"
    if code == "save-spec":
        return f"Save validated spec ({data.get('target')}) to {spec_name}"
    return None


def workspace_edit(
    uri: str,
    current: str | None,
    version: int | None,
    new_text: str,
    *,
    encoding: str = "utf-16",
    document_changes: bool = True,
    check_spec: bool = True,
) -> types.WorkspaceEdit:
    """The `WorkspaceEdit` that turns the document `uri` (text `current`, open at `version`; None when
    the file does not exist) into `new_text`, creating the file when it is missing.

    With `check_spec`, an edit that would make a valid spec invalid raises `ActionError` instead.
    """
    if check_spec:
        errors = validate_json(new_text)
        if errors and (current is None or not validate_json(current)):
            raise ActionError(
                f"the fix would leave the spec invalid ({errors[0]}); edit the spec by hand or run Distcheck: "
                "Validate again"
            )
    if current is None:
        insert = types.TextEdit(
            range=types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
            new_text=new_text,
        )
        if not document_changes:
            return types.WorkspaceEdit(changes={uri: [insert]})
        return types.WorkspaceEdit(
            document_changes=[
                types.CreateFile(uri=uri, options=types.CreateFileOptions(overwrite=False, ignore_if_exists=True)),
                types.TextDocumentEdit(
                    text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=None),
                    edits=[insert],
                ),
            ]
        )
    index = LineIndex(current, encoding)
    plain: list[types.TextEdit] = []
    for e in minimal_edits(current, new_text):
        plain.append(types.TextEdit(range=index.range(e.start, e.end), new_text=e.new_text))
    if not document_changes:
        return types.WorkspaceEdit(changes={uri: plain})
    edits: list[types.TextEdit | types.AnnotatedTextEdit | types.SnippetTextEdit] = list(plain)
    return types.WorkspaceEdit(
        document_changes=[
            types.TextDocumentEdit(
                text_document=types.OptionalVersionedTextDocumentIdentifier(uri=uri, version=version),
                edits=edits,
            )
        ]
    )
