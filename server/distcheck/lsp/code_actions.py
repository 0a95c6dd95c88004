"""Code actions: quick fixes for the daemon's diagnostics, the `Save validated spec` source action,
and `distcheck.saveSpec`.

Actions are offered without an edit and resolved lazily (`codeAction/resolve`): the edit is made
from the spec document as it is when the user picks the fix — its open buffer, versioned, else the
disk — by `actions.py`. A diagnostic the client sends back without its `data` is matched to the
stored one (same code, same range).
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcInvalidParams

from . import actions, diagnostics
from .errors import RequestFailed
from .runs import Runs
from .store import DiagnosticsStore
from .uris import path_of, uri_of
from .workspace import WorkspaceState

if TYPE_CHECKING:
    from .server import DistcheckServer

__all__ = ["CodeActions", "is_noop"]

_PREFERRED = ("spec-fix", "undeclared-helper", "spec-missing")


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
        return out

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
            if code not in actions.FIXABLE or not spec_path:
                continue
            exists = self._workspace.text_of(spec_path) is not None
            title = actions.action_title(code, data, os.path.basename(spec_path), exists)
            if title is None:
                continue
            out.append(
                types.CodeAction(
                    title=title,
                    kind=types.CodeActionKind.QuickFix,
                    diagnostics=[d],
                    is_preferred=code in _PREFERRED,
                    data={"code": code, "target": data.get("target"), "specPath": spec_path, "fix": dict(data)},
                )
            )
        return out

    def _save_actions(self, path: str) -> list[types.CodeAction]:
        out: list[types.CodeAction] = []
        for name, payload in self._runs.reports.items():
            target = self._runs.report_targets.get(name)
            if target is None or payload["report"].get("verdict") != "passed":
                continue
            related = {os.path.normpath(target.spec_path)}
            if target.factory_file:
                related.add(os.path.normpath(target.factory_file))
            if path not in related:
                continue
            out.append(
                types.CodeAction(
                    title=f"Save validated spec ({name})",
                    kind=types.CodeActionKind.Source,
                    data={"code": "save-spec", "target": name, "specPath": target.spec_path},
                )
            )
        return out

    def resolve(self, action: types.CodeAction) -> types.CodeAction:
        """The action with its edit; `RequestFailed` saying what to do when it cannot be made."""
        data = action.data if isinstance(action.data, Mapping) else {}
        code = str(data.get("code") or "")
        if code == "save-spec":
            action.edit, _ = self.save_spec_edit(str(data.get("target")))
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
        current, version, uri = self._workspace.doc_state(spec_path)
        try:
            new = actions.new_spec_text(code, data, current)
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
