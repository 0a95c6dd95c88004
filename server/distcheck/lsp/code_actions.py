"""Code actions: quick fixes for the daemon's diagnostics, the `Save validated spec` source action,
the `source.fixAll` action, `distcheck/helperFix` and `distcheck.saveSpec`.

A fix is offered wherever a diagnostic it would clear shows: its own diagnostic's, and — on a
diagnostic of a failed validation that has no fix of its own (a failing output in the spec JSON or
at the factory, the first divergent module's class line ...) — every spec fix of that report
(`actions.report_fixes`: the passing auto-fix, each ready helper adapter). The fix-all applies every
spec fix of the report in one edit. Fixes come from diagnostic `data` and the stored report, never
from message text.

Actions are offered without an edit and resolved lazily (`codeAction/resolve`): the edit is made
from the spec document as it is when the user picks the fix — its open buffer, versioned, else the
disk — by `actions.py`. A diagnostic the client sends back without its `data` is matched to the
stored one (same code, same range).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from ..report import TraceReport
from . import actions, diagnostics
from .config import TargetInfo
from .errors import RequestFailed
from .runs import Runs
from .store import DiagnosticsStore
from .uris import path_of, uri_of
from .workspace import WorkspaceState

if TYPE_CHECKING:
    from .server import DistcheckServer

__all__ = ["CodeActions", "is_noop"]

_PREFERRED = ("spec-fix", "undeclared-helper", "spec-missing")

_RELATED = ("failing-output", "first-divergent-module", "unrouted-aggregation", "rank-disagreement")
"""Codes of diagnostics that a report's spec fixes clear, so they are offered there too."""


class CodeActions:
    """`textDocument/codeAction`, `codeAction/resolve` and the spec saving they share."""

    def __init__(self, server: DistcheckServer, workspace: WorkspaceState, store: DiagnosticsStore, runs: Runs) -> None:
        self._server = server
        self._workspace = workspace
        self._store = store
        self._runs = runs

    def offer(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        """The quick fixes of the request's distcheck diagnostics, and `Save validated spec` for a
        spec or factory file whose target passed its last validation (filtered by `only`)."""
        only = params.context.only

        def wanted(kind: str) -> bool:
            return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)

        out: list[types.CodeAction] = []
        if wanted(types.CodeActionKind.QuickFix):
            out.extend(self._quick_fixes(params))
        path = path_of(params.text_document.uri)
        if wanted(types.CodeActionKind.Source) and path is not None:
            out.extend(self._save_actions(path))
        if wanted(types.CodeActionKind.SourceFixAll) and path is not None:
            out.extend(self._fix_all_actions(path, params.text_document.uri))
        return out

    def _fix_action(self, title: str, fix: Mapping[str, Any], d: types.Diagnostic | None) -> types.CodeAction:
        code = str(fix.get("code") or "")
        return types.CodeAction(
            title=title,
            kind=types.CodeActionKind.QuickFix,
            diagnostics=[d] if d is not None else None,
            is_preferred=code in _PREFERRED,
            data={"code": code, "target": fix.get("target"), "specPath": fix.get("specPath"), "fix": dict(fix)},
        )

    def _title(self, fix: Mapping[str, Any]) -> str | None:
        spec_path = str(fix.get("specPath") or "")
        exists = self._workspace.text_of(spec_path) is not None
        return actions.action_title(str(fix.get("code") or ""), fix, os.path.basename(spec_path), exists)

    def _reports_for(self, spec_path: str | None) -> list[tuple[str, TraceReport]]:
        """The stored reports of the target with `spec_path` (every target's when None), typed."""
        out: list[tuple[str, TraceReport]] = []
        for name, payload in self._runs.reports.items():
            target = self._runs.report_targets.get(name)
            if target is None or (spec_path and os.path.normpath(target.spec_path) != os.path.normpath(spec_path)):
                continue
            try:
                out.append((target.spec_path, TraceReport.from_dict(payload["report"])))
            except (KeyError, TypeError, ValueError):
                continue
        return out

    def _report_fixes(self, spec_path: str | None) -> list[dict[str, Any]]:
        return [fix for path, report in self._reports_for(spec_path) for fix in actions.report_fixes(report, path)]

    def _quick_fixes(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        out: list[types.CodeAction] = []
        stored = self._store.stored(params.text_document.uri)
        for d in params.context.diagnostics:
            if d.source != diagnostics.SOURCE:
                continue
            data = d.data if isinstance(d.data, Mapping) else _stored_data(stored, d)
            if not isinstance(data, Mapping):
                continue
            code = str(data.get("code") or d.code or "")
            spec_path = str(data.get("specPath") or "")
            own = {**data, "code": code}
            title = self._title(own) if code in actions.FIXABLE and spec_path else None
            if title is not None:
                out.append(self._fix_action(title, own, d))
            elif code in _RELATED:
                for fix in self._report_fixes(spec_path or None):
                    related = self._title(fix)
                    if related is not None and all(a.title != related for a in out):
                        out.append(self._fix_action(related, fix, d))
        return out

    def _fix_all_actions(self, path: str, uri: str) -> list[types.CodeAction]:
        """`source.fixAll` for each target with spec fixes whose spec, factory or diagnostics are in `path`."""
        here = {
            os.path.normpath(str(d.data["specPath"]))
            for d in self._store.stored(uri)
            if isinstance(d.data, Mapping) and d.data.get("specPath")
        }
        out: list[types.CodeAction] = []
        for name, target in self._runs.report_targets.items():
            if path not in _files_of(target) and os.path.normpath(target.spec_path) not in here:
                continue
            fixes = self._report_fixes(target.spec_path)
            if not fixes:
                continue
            count = f"{len(fixes)} fix" + ("es" if len(fixes) > 1 else "")
            title = f"Apply every distcheck spec fix of {name} ({count}) to {os.path.basename(target.spec_path)}"
            out.append(_target_action(title, types.CodeActionKind.SourceFixAll, "fix-all", name, target))
        return out

    def fix_all_edit(self, spec_path: str) -> types.WorkspaceEdit:
        """One edit that applies every spec fix of the report of the target with `spec_path`."""
        fixes = self._report_fixes(spec_path)
        return self._edit_to(spec_path, lambda current: actions.all_fixes_text(fixes, current))

    def helper_fix(self, qualname: str, target: str | None) -> types.CodeAction | None:
        """`distcheck/helperFix`: the resolved quick fix that declares an adapter for `qualname`, from the
        last report of `target` (of any target when None); None when no report has a ready one."""
        if target is not None and target not in self._runs.reports:
            raise JsonRpcInvalidParams(
                f"{target} has no report yet ({', '.join(self._runs.reports) or 'none has'}); validate it first"
            )
        for name, payload in self._runs.reports.items():
            info = self._runs.report_targets.get(name)
            if (target is not None and name != target) or info is None:
                continue
            try:
                report = TraceReport.from_dict(payload["report"])
            except (KeyError, TypeError, ValueError):
                continue
            for fix in actions.helper_fixes(report, info.spec_path):
                if fix["qualname"] == qualname:
                    title = self._title(fix) or f"Declare {qualname} as a reduction adapter"
                    return self.resolve(self._fix_action(title, {**fix, "target": name}, None))
        return None

    def _save_actions(self, path: str) -> list[types.CodeAction]:
        out: list[types.CodeAction] = []
        for name, payload in self._runs.reports.items():
            target = self._runs.report_targets.get(name)
            if target is None or payload["report"].get("verdict") != "passed" or path not in _files_of(target):
                continue
            out.append(
                _target_action(f"Save validated spec ({name})", types.CodeActionKind.Source, "save-spec", name, target)
            )
        return out

    def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """The action with its edit; `RequestFailed` saying what to do when it cannot be made."""
        data = action.data if isinstance(action.data, Mapping) else {}
        code = str(data.get("code") or "")
        if code == "save-spec":
            action.edit, _ = self.save_spec_edit(str(data.get("target")))
            return action
        if code == "fix-all":
            action.edit = self.fix_all_edit(str(data.get("specPath") or ""))
            return action
        fix = data.get("fix")
        spec_path = data.get("specPath")
        if not isinstance(fix, Mapping) or not isinstance(spec_path, str):
            raise RequestFailed("this code action carries no fix; run Distcheck: Validate again")
        action.edit = self._edit_for(code, fix, spec_path)
        return action

    def save_spec_edit(self, name: str) -> tuple[types.WorkspaceEdit, str]:
        """The edit that writes target `name`'s last validated spec, and the spec file's URI."""
        payload = self._runs.reports.get(name)
        target = self._runs.report_targets.get(name)
        if payload is None or target is None:
            raise RequestFailed(f"{name} has not been validated yet; run Distcheck: Validate first")
        if payload["report"].get("verdict") != "passed":
            raise RequestFailed(
                f"the last validation of {name} did not pass ({payload['report'].get('verdict')}); fix it and "
                "validate again before saving its spec"
            )
        data = {"code": "save-spec", "target": name, "spec": payload["report"]["spec"], "specPath": target.spec_path}
        return self._edit_for("save-spec", data, target.spec_path), uri_of(target.spec_path)

    def _edit_for(self, code: str, data: Mapping[str, Any], spec_path: str) -> types.WorkspaceEdit:
        return self._edit_to(spec_path, lambda current: actions.new_spec_text(code, data, current))

    def _edit_to(self, spec_path: str, new_text: Callable[[str | None], str]) -> types.WorkspaceEdit:
        """The versioned edit from the spec document as it is now to `new_text(its text)`."""
        current, version, uri = self._workspace.doc_state(spec_path)
        try:
            new = new_text(current)
            return actions.workspace_edit(
                uri,
                current,
                version,
                new,
                encoding=self._server.encoding,
                document_changes=self._server.document_changes,
            )
        except actions.ActionError as err:
            raise RequestFailed(str(err)) from err

    async def save_spec(self, name: str | None) -> dict[str, Any]:
        """`distcheck.saveSpec`: apply the edit through `workspace/applyEdit` (nothing to apply when
        the file already holds the spec); `name` may be None when one target has a report."""
        if name is None:
            if len(self._runs.reports) != 1:
                raise JsonRpcInvalidParams(
                    f"distcheck.saveSpec takes [target: string]: {len(self._runs.reports)} targets have a report "
                    f"({', '.join(self._runs.reports)}); pass the one whose spec to save"
                    if self._runs.reports
                    else "distcheck.saveSpec: no target has been validated yet; run Distcheck: Validate first"
                )
            name = next(iter(self._runs.reports))
        edit, uri = self.save_spec_edit(name)
        if is_noop(edit):
            # The file already holds the validated spec; editors report an empty edit as "not applied".
            return {"saved": uri, "unchanged": True}
        result = await self._server.workspace_apply_edit_async(
            types.ApplyWorkspaceEditParams(edit=edit, label=f"Save validated spec ({name})")
        )
        if not result.applied:
            reason = result.failure_reason or "no reason given"
            raise RequestFailed(f"the editor did not apply the edit ({reason}); save the spec again")
        return {"saved": uri}


def _files_of(target: TargetInfo) -> set[str]:
    """The target's spec file and, when known, its factory's file (normalised paths)."""
    return {
        os.path.normpath(target.spec_path),
        *([os.path.normpath(target.factory_file)] if target.factory_file else []),
    }


def _target_action(
    title: str, kind: types.CodeActionKind, code: str, name: str, target: TargetInfo
) -> types.CodeAction:
    """An action of target `name` without an edit: `resolve` makes it from `code` and the target's spec path."""
    return types.CodeAction(title=title, kind=kind, data={"code": code, "target": name, "specPath": target.spec_path})


def _stored_data(stored: Sequence[types.Diagnostic], d: types.Diagnostic) -> Any:
    for s in stored:
        if s.code == d.code and s.range == d.range:
            return s.data
    return None


def is_noop(edit: types.WorkspaceEdit) -> bool:
    """True when `edit` changes nothing (no file to create, no text edit)."""
    if edit.document_changes:
        return all(isinstance(c, types.TextDocumentEdit) and not c.edits for c in edit.document_changes)
    return not any(edit.changes.values()) if edit.changes else True
