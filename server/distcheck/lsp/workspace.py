"""The workspace as the daemon sees it: folders, open buffers, configs, spec documents and targets.

Every read for checking and placing goes through the open buffer first (unsaved edits count), then the
disk; a validation runs what is on disk (`spec_param`, `unsaved_files`). Configs are
re-read on every question (they are small and the user edits them), each broken one publishing a
`config-invalid` diagnostic, and spec documents are checked as they are opened, edited and saved
(`spec-invalid`). `resolve_target` turns what `distcheck.validate` was given — a target name, a
file URI or path, or nothing — into one `TargetInfo`, or a `-32602` error saying what to do.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Container
from typing import TYPE_CHECKING, Any

from pygls.exceptions import JsonRpcInvalidParams
from pygls.workspace import Workspace

from ..spec import validate_json
from . import diagnostics, discovery, locate
from .config import TargetInfo, WorkspaceTargets, file_target, file_target_at, load_workspace_targets, read_disk
from .store import DiagnosticsStore
from .uris import norm, path_of, uri_of

if TYPE_CHECKING:
    from .server import DistcheckServer

__all__ = ["WorkspaceState"]


class WorkspaceState:
    """Folders, buffers, configs and targets of the editor's workspace (`server.workspace`)."""

    def __init__(self, server: DistcheckServer, store: DiagnosticsStore) -> None:
        self._server = server
        self._store = store
        self._open: dict[str, str] = {}
        self._spec_paths: set[str] = set()
        self._files = discovery.FileMemo()

    @property
    def _workspace(self) -> Workspace:
        workspace: Workspace = self._server.workspace
        return workspace

    def _log(self, level: str, message: str) -> None:
        self._server.log(level, message)

    # ---- files and buffers

    def roots(self) -> list[str]:
        """The workspace folders as paths (the root path when there are no folders, else the cwd)."""
        found: list[str] = []
        with contextlib.suppress(Exception):
            for folder in self._workspace.folders.values():
                path = path_of(folder.uri)
                if path:
                    found.append(path)
        if not found:
            with contextlib.suppress(Exception):
                root = self._workspace.root_path
                if root:
                    found.append(os.path.abspath(root))
        return found or [os.getcwd()]

    def text_of(self, path: str) -> str | None:
        """The open buffer of `path`, else the file on disk, else None."""
        return self.doc_state(path)[0]

    def doc_state(self, path: str) -> tuple[str | None, int | None, str]:
        """(text, open-buffer version or None, uri) of a file; text None when it does not exist."""
        key = norm(path)
        uri = self._open.get(key)
        if uri is not None:
            doc = self._workspace.text_documents.get(uri)
            if doc is not None:
                return doc.source, doc.version, uri
        return read_disk(key), None, uri_of(key)

    def open_texts(self) -> dict[str, str]:
        """A snapshot of every open buffer, by path (safe to read from a worker thread)."""
        out: dict[str, str] = {}
        for path, uri in list(self._open.items()):
            doc = self._workspace.text_documents.get(uri)
            if doc is not None:
                with contextlib.suppress(Exception):
                    out[path] = doc.source
        return out

    def document_opened(self, uri: str) -> None:
        """A buffer opened: remember it and check it (config or spec document)."""
        path = path_of(uri)
        if path is not None:
            self._open[path] = uri
            self.document_changed(uri)

    def document_changed(self, uri: str) -> None:
        """A buffer or file changed: re-check it when it is a config or a spec document."""
        path = path_of(uri)
        if path is None:
            return
        if os.path.basename(path) == "pyproject.toml":
            self.check_configs()
        elif self.is_spec(path):
            self.check_spec_document(path)

    def document_closed(self, uri: str) -> None:
        """A buffer closed: from now on the disk speaks for it; re-check it."""
        path = path_of(uri)
        if path is not None:
            self._open.pop(path, None)
            self.document_changed(uri)

    # ---- configs and spec documents

    def check_configs(self) -> list[WorkspaceTargets]:
        """Re-read every config; publish one `config-invalid` per broken config; remember spec paths."""
        found = [load_workspace_targets(root, self.text_of) for root in self.roots()]
        by_path: dict[str, list[Any]] = {}
        self._spec_paths = {os.path.normpath(t.spec_path) for wt in found for t in wt.targets}
        for wt in found:
            p = wt.problem
            if p is not None:
                text = self.text_of(p.path)
                encoding = self._server.encoding
                by_path[p.path] = [
                    diagnostics.config_diagnostic(p.path, text, p.line, p.column, p.message, p.hint, encoding)
                ]
                self._log("warning", f"{p.path}:{p.line}: {p.message} — {p.hint}")
        self._store.replace("config-invalid", by_path)
        return found

    def is_spec(self, path: str) -> bool:
        """True for a `*.distspec.json` file or the spec file of a configured target."""
        return path.endswith(".distspec.json") or os.path.normpath(path) in self._spec_paths

    def check_spec_document(self, path: str) -> None:
        """Publish `spec-invalid` for the spec document at `path` (its buffer, else the disk)."""
        text = self.text_of(path)
        found = [] if text is None else diagnostics.spec_invalid_diagnostics(text, path, self._server.encoding)
        self._store.replace(f"spec-invalid:{path}", {path: found})

    def spec_param(self, target: TargetInfo) -> Any:
        """The prior spec for the runner: the spec file's path, or None when there is no file on disk.

        The runner imports the model from disk, so it validates the spec on disk too, never an unsaved
        buffer (the editor saves first, or the report says what was not validated: `unsaved_files`).
        Raises `JsonRpcInvalidParams` when the spec on disk has errors."""
        text = read_disk(norm(target.spec_path))
        if text is None:
            return None
        errors = validate_json(text)
        if errors:
            first = errors[0]
            where = f"line {first.line}: " if first.line else ""
            unsaved = norm(target.spec_path) in self.unsaved_files(target)
            remedy = (
                "save the file (its unsaved edits are not validated) or fix the errors"
                if unsaved
                else "fix them (see the spec-invalid diagnostics)"
            )
            raise JsonRpcInvalidParams(
                f"the spec {target.spec_path} on disk has {len(errors)} error(s) ({where}{first}); {remedy} and "
                "validate again"
            )
        return target.spec_path

    def unsaved_files(self, target: TargetInfo) -> list[str]:
        """The target's model file and spec file whose open buffer differs from the file on disk: edits a
        validation does not see (it runs what is on disk)."""
        out: list[str] = []
        for path in (target.factory_file, target.spec_path):
            if not path:
                continue
            key = norm(path)
            text, version, _ = self.doc_state(key)
            if version is not None and text != read_disk(key) and key not in out:
                out.append(key)
        return out

    # ---- targets

    def file_targets(self, found: list[WorkspaceTargets]) -> list[TargetInfo]:
        """The workspace's Python files that are targets of their own (`discovery.scan`: every folder, open
        buffers first; no config target uses them), a module that does not parse included; publishes one
        `model-syntax-error` diagnostic per such module."""
        configured = {os.path.normpath(t.factory_file) for wt in found for t in wt.targets if t.factory_file}
        out: list[TargetInfo] = []
        broken: dict[str, list[Any]] = {}
        candidates = discovery.scan(self.roots(), self.open_texts(), self._files, lambda m: self._log("info", m))
        for path, text in sorted(candidates.items()):
            info = file_target(path, text, _workspace_of(path, found)) if path not in configured else None
            bad = discovery.broken_module(path, text) if info is None else None
            if bad is not None:
                broken[path] = [discovery.syntax_diagnostic(bad, text, self._server.encoding)]
                if path not in configured:
                    info = file_target_at(path, bad.line, _workspace_of(path, found))
            if info is not None:
                out.append(info)
        self._store.replace("model-syntax-error", broken)
        return out

    def resolve_target(self, arg: str | None) -> TargetInfo:
        """The target named by `arg` (a name, a file URI or path, or None for the only one); raises
        `JsonRpcInvalidParams` saying what to do when there is no such target or several."""
        found = self.check_configs()
        targets = [t for wt in found for t in wt.targets]
        problems = [wt.problem for wt in found if wt.problem is not None]
        names = ", ".join(t.name for t in targets) or "none"
        if not arg:
            candidates = targets or self.file_targets(found)
            if len(candidates) == 1:
                return candidates[0]
            if problems and not targets:
                p = problems[0]
                raise JsonRpcInvalidParams(
                    f"the distcheck config {p.path}:{p.line} is invalid: {p.message}; fix it (see the "
                    "config-invalid diagnostic) and validate again"
                )
            if not candidates:
                raise JsonRpcInvalidParams(
                    "no distcheck target here: add [tool.distcheck] to pyproject.toml, or open a Python file that "
                    "defines model_factory and sample_batch at module scope and validate it"
                )
            raise JsonRpcInvalidParams(
                f"several targets ({', '.join(t.name for t in candidates)}): pass the one to validate"
            )
        if arg.startswith("file:") or arg.endswith(".py"):
            path = path_of(arg) if arg.startswith("file:") else None
            if path is None:
                paths = [os.path.join(wt.root, arg) for wt in found] if not os.path.isabs(arg) else [arg]
                path = next((os.path.normpath(c) for c in paths if os.path.isfile(c)), None)
            if path is not None:
                return self._file_target(path, found, names)
        for t in targets:
            if t.name == arg:
                return t
        for info in self.file_targets(found):
            if info.name == arg:
                return info
        if problems:
            p = problems[0]
            raise JsonRpcInvalidParams(
                f"unknown target {arg!r}: the distcheck config {p.path}:{p.line} is invalid ({p.message}); fix it "
                "(see the config-invalid diagnostic) and validate again"
            )
        raise JsonRpcInvalidParams(f"unknown target {arg!r}; the targets are: {names}")

    def _file_target(self, path: str, found: list[WorkspaceTargets], names: str) -> TargetInfo:
        for wt in found:
            for t in wt.targets:
                if t.factory_file and os.path.normpath(t.factory_file) == path:
                    return t
        text = self.text_of(path)
        info = file_target(path, text, _workspace_of(path, found)) if text is not None else None
        bad = discovery.broken_module(path, text) if info is None and text is not None else None
        if bad is not None:  # validated anyway: the report says the module does not import, and where
            info = file_target_at(path, bad.line, _workspace_of(path, found))
        if info is not None:
            return info
        raise JsonRpcInvalidParams(
            f"{path} defines no model_factory and sample_batch at module scope, and no [tool.distcheck] "
            f"target uses it (targets: {names}); add both functions, or a target in pyproject.toml"
        )

    def targets_info(self, running: Container[str]) -> list[dict[str, Any]]:
        """`distcheck/targets`: every config target and file target, with where it is defined."""
        found = self.check_configs()
        out: list[dict[str, Any]] = []
        for t in [*(t for wt in found for t in wt.targets), *self.file_targets(found)]:
            out.append(
                {
                    "name": t.name,
                    "factory": t.factory,
                    "sample": t.sample,
                    "spec": t.spec_path,
                    "specUri": uri_of(t.spec_path),
                    "specConfigured": t.spec_configured,
                    "specRule": t.spec_source().rule,
                    "source": t.source,
                    "uri": uri_of(t.defined_in),
                    "line": (t.line - 1) if t.line else 0,
                    "factoryUri": uri_of(t.factory_file) if t.factory_file else None,
                    "factoryLine": self._factory_line(t),
                    "running": t.name in running,
                }
            )
        return out

    def _factory_line(self, t: TargetInfo) -> int | None:
        if not t.factory_file:
            return None
        text = self.text_of(t.factory_file)
        name = t.factory.rpartition(":")[2].split(".")[-1]
        loc = locate.definition(text, name, t.factory_file) if text is not None else None
        return loc.line - 1 if loc is not None else None

    def reader(self, texts: dict[str, str]) -> Callable[[str], str | None]:
        """A file reader over the snapshot `texts` (open buffers by path), then the disk."""

        def read(path: str) -> str | None:
            key = norm(path)
            return texts[key] if key in texts else read_disk(key)

        return read


def _workspace_of(path: str, found: list[WorkspaceTargets]) -> WorkspaceTargets:
    """The innermost workspace folder holding `path` (the first one, or a bare one, otherwise)."""
    best = None
    for wt in found:
        root = wt.root.rstrip(os.sep) + os.sep
        if path.startswith(root) and (best is None or len(wt.root) > len(best.root)):
            best = wt
    return best or (found[0] if found else WorkspaceTargets(os.path.dirname(path), None, [], None, []))
