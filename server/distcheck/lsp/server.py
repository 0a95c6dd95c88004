"""The distcheck language server (`python -m distcheck.lsp`, script `distcheck-lsp`): LSP over stdio.

The daemon is a pygls 2 server on one asyncio event loop. It never imports torch or the user's code:
validations run in a child runner (`runner.py`, reached through `runner_client.py`), everything it
places in an editor comes from the report's files and lines or from text / AST scans (`locate.py`),
and no handler waits on the runner — `distcheck.validate` starts an asyncio task and returns at once.

Features (the contract is docs/protocol.md): commands `distcheck.validate`, `distcheck.cancel`,
`distcheck.saveSpec`; `$/progress` on a server-created, cancellable token; diagnostics per target
(replaced on every run, cleared when it passes), per spec document (`spec-invalid`) and per pyproject
(`config-invalid`); quick fixes resolved lazily into versioned `WorkspaceEdit`s; the notification
`distcheck/report` and the requests `distcheck/lastReport`, `distcheck/targets` and
`distcheck/debugInfo` (facts about this process, for tests and bug reports).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import time
import traceback
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.lsp.server import LanguageServer
from pygls.uris import from_fs_path, to_fs_path

from .. import __version__, importguard
from ..report import TraceReport
from ..spec import validate_json
from . import actions, diagnostics, locate, trust
from .config import (
    Settings,
    TargetInfo,
    WorkspaceTargets,
    convert_options,
    file_target,
    load_workspace_targets,
    read_disk,
    read_settings,
)
from .runner_client import RunCancelled, RunnerClient, RunnerDied, RunnerError, describe_exit

__all__ = ["DistcheckServer", "create_server", "main"]

ALREADY_RUNNING = -32002
REQUEST_FAILED = -32803
_LEVELS = {"error": 0, "warning": 1, "info": 2, "debug": 3}
_TRACE_THRESHOLD = {"off": 1, "messages": 2, "verbose": 3}
_MESSAGE_TYPES = {
    "error": types.MessageType.Error,
    "warning": types.MessageType.Warning,
    "info": types.MessageType.Info,
    "debug": types.MessageType.Log,
}
_READY_TIMEOUT = 180.0
_MAX_RESTARTS = 3
_RESTART_WINDOW = 60.0


class AlreadyRunning(JsonRpcException):
    """A validation of the target is already running (LSP error -32002)."""

    CODE = ALREADY_RUNNING


class RequestFailed(JsonRpcException):
    """A request that was understood but could not be carried out (LSP error -32803)."""

    CODE = REQUEST_FAILED


class OutsideWorkspace(RequestFailed):
    """The target would import code from outside the workspace: `data` is
    `{"kind": "outside-workspace", "target": name, "paths": [...]}`, for the client to confirm."""


@dataclass
class Run:
    """One validation: queued, then holding the runner (`active`), until it ends."""

    target: TargetInfo
    overrides: dict[str, Any]
    token: str
    task: asyncio.Task[None] | None = None
    active: bool = False
    cancelled: bool = False
    progress: bool = False
    started: float = field(default_factory=time.monotonic)
    ranks: dict[int, int] = field(default_factory=dict)


def _path(uri: str) -> str | None:
    path = to_fs_path(uri)
    return os.path.normpath(os.path.abspath(path)) if path else None


def _uri(path: str) -> str:
    uri = from_fs_path(os.path.abspath(path))
    return uri if uri is not None else "file://" + os.path.abspath(path)


class DistcheckServer(LanguageServer):
    """The daemon's state: settings, the runner, running validations, last reports, diagnostics."""

    def __init__(self) -> None:
        super().__init__("distcheck", __version__)
        self.settings = Settings()
        self.runner: RunnerClient | None = None
        self.runner_lock = asyncio.Lock()
        self.runs: dict[str, Run] = {}
        self.reports: dict[str, dict[str, Any]] = {}
        self.report_targets: dict[str, TargetInfo] = {}
        self._diags: dict[str, dict[str, list[types.Diagnostic]]] = {}
        self._owned: dict[str, set[str]] = {}
        self._open: dict[str, str] = {}
        self._spec_paths: set[str] = set()
        self._exits: list[float] = []
        self._runner_broken: str | None = None
        self._notice_shown = False
        self._shutting_down = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self._encoding = "utf-16"
        # Until the client says otherwise the workspace is untrusted: nothing of it is run.
        self.trusted = False
        self._confirmed_outside: set[str] = set()

    # ---- small helpers

    def spawn(self, coro: Any, name: str) -> asyncio.Task[Any]:
        """Start a background task and keep a reference to it until it ends."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None:
            exc = task.exception()
            assert exc is not None
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.log("error", f"internal error in {task.get_name()}: {exc}\n{tb}")

    def log(self, level: str, message: str) -> None:
        """`window/logMessage` when `level` passes the `distcheck.trace.server` threshold."""
        if _LEVELS.get(level, 3) > _TRACE_THRESHOLD.get(self.settings.trace, 2):
            return
        with contextlib.suppress(Exception):
            self.window_log_message(types.LogMessageParams(type=_MESSAGE_TYPES[level], message=message))

    def show(self, level: str, message: str) -> None:
        """`window/showMessage` (and the log)."""
        self.log(level, message)
        with contextlib.suppress(Exception):
            self.window_show_message(types.ShowMessageParams(type=_MESSAGE_TYPES[level], message=message))

    def roots(self) -> list[str]:
        """The workspace folders as paths (the root path when there are no folders)."""
        found: list[str] = []
        with contextlib.suppress(Exception):
            for folder in self.workspace.folders.values():
                path = _path(folder.uri)
                if path:
                    found.append(path)
        if not found:
            with contextlib.suppress(Exception):
                root = self.workspace.root_path
                if root:
                    found.append(os.path.abspath(root))
        return found or [os.getcwd()]

    def text_of(self, path: str) -> str | None:
        """The open buffer of `path`, else the file on disk, else None."""
        uri = self._open.get(os.path.normpath(os.path.abspath(path)))
        if uri is not None:
            doc = self.workspace.text_documents.get(uri)
            if doc is not None:
                source: str = doc.source
                return source
        return read_disk(path)

    def doc_state(self, path: str) -> tuple[str | None, int | None, str]:
        """(text, open-buffer version or None, uri) of a file; text None when it does not exist."""
        norm = os.path.normpath(os.path.abspath(path))
        uri = self._open.get(norm)
        if uri is not None:
            doc = self.workspace.text_documents.get(uri)
            if doc is not None:
                return doc.source, doc.version, uri
        return read_disk(norm), None, _uri(norm)

    def open_texts(self) -> dict[str, str]:
        """A snapshot of every open buffer, by path (safe to read from a worker thread)."""
        out: dict[str, str] = {}
        for path, uri in list(self._open.items()):
            doc = self.workspace.text_documents.get(uri)
            if doc is not None:
                with contextlib.suppress(Exception):
                    out[path] = doc.source
        return out

    @property
    def document_changes(self) -> bool:
        caps = self.client_capabilities
        edit = caps.workspace.workspace_edit if caps.workspace else None
        return bool(edit and edit.document_changes)

    @property
    def supports_progress(self) -> bool:
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)

    # ---- diagnostics store

    def set_diagnostics(self, owner: str, by_path: Mapping[str, Sequence[types.Diagnostic]]) -> None:
        """Replace every diagnostic of `owner` (a target, `spec-invalid:<path>`, `config-invalid`)."""
        new = {_uri(path): list(diags) for path, diags in by_path.items() if diags}
        old = self._owned.get(owner, set())
        for uri in old - set(new):
            self._diags.get(uri, {}).pop(owner, None)
        for uri, diags in new.items():
            self._diags.setdefault(uri, {})[owner] = diags
        self._owned[owner] = set(new)
        for uri in old | set(new):
            self.publish(uri)

    def publish(self, uri: str) -> None:
        """Send every stored diagnostic of `uri`."""
        merged = [d for diags in self._diags.get(uri, {}).values() for d in diags]
        self.text_document_publish_diagnostics(types.PublishDiagnosticsParams(uri=uri, diagnostics=merged))

    def stored(self, uri: str) -> list[types.Diagnostic]:
        """The diagnostics currently published for `uri`."""
        return [d for diags in self._diags.get(uri, {}).values() for d in diags]

    # ---- settings and config

    async def refresh_settings(self) -> None:
        """Pull the `distcheck` section with `workspace/configuration` (when the client offers it)."""
        caps = self.client_capabilities
        if not (caps.workspace and caps.workspace.configuration):
            return
        try:
            result = await asyncio.wait_for(
                self.workspace_configuration_async(
                    types.ConfigurationParams(items=[types.ConfigurationItem(section="distcheck")])
                ),
                timeout=5.0,
            )
        except Exception as exc:
            self.log("warning", f"could not read the distcheck settings ({exc}); using the defaults")
            return
        raw = result[0] if result else None
        self.apply_settings(raw)

    def apply_settings(self, raw: Any) -> None:
        settings = read_settings(raw)
        old = self.settings.problems
        self.settings = settings
        for problem in settings.problems:
            if problem not in old:
                self.show("warning", f"{problem}. It is ignored until fixed in your settings.")

    def workspace_targets(self) -> list[WorkspaceTargets]:
        """Targets of every workspace folder, from their configs (buffers first)."""
        return [load_workspace_targets(root, self.text_of) for root in self.roots()]

    def check_configs(self) -> list[WorkspaceTargets]:
        """Re-read every config; publish one `config-invalid` per broken config; remember spec paths."""
        found = self.workspace_targets()
        by_path: dict[str, list[types.Diagnostic]] = {}
        spec_paths: set[str] = set()
        for wt in found:
            for t in wt.targets:
                spec_paths.add(os.path.normpath(t.spec_path))
            p = wt.problem
            if p is not None:
                text = self.text_of(p.path)
                by_path[p.path] = [
                    diagnostics.config_diagnostic(p.path, text, p.line, p.column, p.message, p.hint, self._encoding)
                ]
                self.log("warning", f"{p.path}:{p.line}: {p.message} — {p.hint}")
        self._spec_paths = spec_paths
        self.set_diagnostics("config-invalid", by_path)
        return found

    def is_spec(self, path: str) -> bool:
        return path.endswith(".distspec.json") or os.path.normpath(path) in self._spec_paths

    def check_spec_document(self, path: str) -> None:
        """Publish `spec-invalid` for the spec document at `path` (its buffer, else the disk)."""
        text = self.text_of(path)
        found = [] if text is None else diagnostics.spec_invalid_diagnostics(text, path, self._encoding)
        self.set_diagnostics(f"spec-invalid:{path}", {path: found})

    # ---- targets

    def all_targets(self, found: list[WorkspaceTargets] | None = None) -> list[TargetInfo]:
        found = found if found is not None else self.workspace_targets()
        return [t for wt in found for t in wt.targets]

    def file_targets(self, found: list[WorkspaceTargets]) -> list[TargetInfo]:
        """Open Python files that are targets of their own (no config target uses them)."""
        configured = {os.path.normpath(t.factory_file) for t in self.all_targets(found) if t.factory_file}
        out: list[TargetInfo] = []
        for path, text in self.open_texts().items():
            if not path.endswith(".py") or path in configured:
                continue
            wt = self._workspace_of(path, found)
            info = file_target(path, text, wt)
            if info is not None:
                out.append(info)
        return out

    def _workspace_of(self, path: str, found: list[WorkspaceTargets]) -> WorkspaceTargets:
        best = None
        for wt in found:
            root = wt.root.rstrip(os.sep) + os.sep
            if path.startswith(root) and (best is None or len(wt.root) > len(best.root)):
                best = wt
        return best or (found[0] if found else WorkspaceTargets(os.path.dirname(path), None, [], None, []))

    def resolve_target(self, arg: str | None) -> TargetInfo:
        """The target named by `arg` (a name, a file URI or path, or None for the only one)."""
        found = self.check_configs()
        targets = self.all_targets(found)
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
            path = _path(arg) if arg.startswith("file:") else None
            if path is None:
                paths = [os.path.join(wt.root, arg) for wt in found] if not os.path.isabs(arg) else [arg]
                path = next((os.path.normpath(c) for c in paths if os.path.isfile(c)), None)
            if path is not None:
                for t in targets:
                    if t.factory_file and os.path.normpath(t.factory_file) == path:
                        return t
                text = self.text_of(path)
                info = file_target(path, text, self._workspace_of(path, found)) if text is not None else None
                if info is not None:
                    return info
                raise JsonRpcInvalidParams(
                    f"{path} defines no model_factory and sample_batch at module scope, and no [tool.distcheck] "
                    f"target uses it (targets: {names}); add both functions, or a target in pyproject.toml"
                )
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

    def spec_param(self, target: TargetInfo) -> Any:
        """The prior spec for the runner: the open buffer's JSON, else the file's path, else None.
        Raises `JsonRpcInvalidParams` when the spec has errors."""
        text, version, _ = self.doc_state(target.spec_path)
        if text is None:
            return None
        errors = validate_json(text)
        if errors:
            first = errors[0]
            where = f"line {first.line}: " if first.line else ""
            raise JsonRpcInvalidParams(
                f"the spec {target.spec_path} has {len(errors)} error(s) ({where}{first}); fix them (see the "
                "spec-invalid diagnostics) and validate again"
            )
        if version is not None:
            return orjson.loads(text)
        return target.spec_path

    # ---- the runner

    async def ensure_runner(self) -> RunnerClient:
        """The running, ready runner (started if needed)."""
        runner = self.runner
        if runner is None or not runner.alive:
            runner = await self.start_runner()
        await runner.wait_ready(_READY_TIMEOUT)
        return runner

    async def start_runner(self) -> RunnerClient:
        if self.runner is not None and self.runner.alive:
            return self.runner
        # Never the workspace: the runner must import nothing from it before a validation asks it to.
        runner = RunnerClient(cwd=importguard.private_dir(), log=self.log, on_exit=self._runner_exited)
        self.runner = runner
        await runner.start()
        return runner

    def _runner_exited(self, runner: RunnerClient, returncode: int | None, expected: bool) -> None:
        if runner is not self.runner or self._shutting_down:
            return
        self.runner = None
        if expected:
            self.log("info", "runner stopped as asked; starting a fresh one")
            self.spawn(self.start_runner(), "distcheck-runner-restart")
            return
        active = [r.target.name for r in self.runs.values() if r.active]
        self.spawn(runner.cleanup_orphans(), "distcheck-runner-cleanup")
        tail = "\n".join(list(runner.stderr_tail)[-10:])
        now = time.monotonic()
        self._exits = [t for t in self._exits if now - t < _RESTART_WINDOW] + [now]
        if not runner.ready.is_set():
            last = runner.stderr_tail[-1] if runner.stderr_tail else "no output"
            reason = (
                f"The distcheck runner could not start ({describe_exit(returncode)}: {last}). Check that torch and "
                f"distcheck are installed for {sys.executable} (the distcheck output channel has the details)"
            )
        else:
            during = f" while validating {', '.join(active)}" if active else ""
            reason = (
                f"The distcheck runner (pid {runner.pid}) stopped unexpectedly ({describe_exit(returncode)}){during}"
            )
        self.log("warning", f"{reason}\nlast runner output:\n{tail}")
        if len(self._exits) > _MAX_RESTARTS:
            self._runner_broken = reason
            self.show(
                "error",
                f"{reason}. It stopped {len(self._exits)} times in a minute, so it is not restarted; fix the "
                "problem, then run Distcheck: Validate to start it again.",
            )
            return
        again = " Run the validation again." if active else ""
        self.show("warning", f"{reason}. It has been restarted.{again}")
        self.spawn(self.start_runner(), "distcheck-runner-restart")

    # ---- validation

    def start_validation(self, args: Sequence[Any]) -> dict[str, Any]:
        """`distcheck.validate`: check the request, register the run, start its task (never awaits)."""
        if not self.trusted:
            raise RequestFailed(trust.UNTRUSTED)
        arg: str | None = None
        raw_overrides: Any = None
        confirmed: list[str] = []
        for item in args:
            if isinstance(item, str) and arg is None:
                arg = item
            elif isinstance(item, Mapping) and "confirmOutsideWorkspace" in item:
                paths = item["confirmOutsideWorkspace"]
                if not isinstance(paths, list) or not all(isinstance(p, str) for p in paths):
                    raise JsonRpcInvalidParams("confirmOutsideWorkspace takes a list of paths")
                confirmed = list(paths)
            elif isinstance(item, Mapping):
                raw_overrides = item
            elif item is not None:
                raise JsonRpcInvalidParams(
                    f"distcheck.validate takes [target?: string, overrides?: object], got {type(item).__name__}"
                )
        target = self.resolve_target(arg)
        self._confirmed_outside.update(os.path.realpath(p) for p in confirmed)
        outside = trust.code_outside(target, self.roots(), self._confirmed_outside)
        if outside:
            raise OutsideWorkspace(
                f"validating {target.name} would import and run code from outside the workspace "
                f"({', '.join(outside)}); confirm that you trust it, or move it into a workspace folder",
                data={"kind": trust.OUTSIDE_WORKSPACE, "target": target.name, "paths": outside},
            )
        if target.name in self.runs:
            raise AlreadyRunning(
                f"a validation of this target is already running ({target.name}); wait for it to finish or "
                "cancel it (Distcheck: Cancel)"
            )
        overrides: dict[str, Any] = {}
        if raw_overrides:
            overrides, problems = convert_options(raw_overrides, "override ")
            if problems:
                raise JsonRpcInvalidParams("; ".join(problems))
        self.spec_param(target)  # a broken spec is refused now, not after queueing
        if self._runner_broken is not None:
            self._runner_broken = None
            self._exits.clear()
        run = Run(target=target, overrides=overrides, token=f"distcheck-{uuid.uuid4().hex[:12]}")
        self.runs[target.name] = run
        run.task = self.spawn(self._run(run), f"distcheck-validate-{target.name}")
        return {"started": True, "target": target.name, "token": run.token}

    def _progress(self, run: Run, kind: str, message: str, percentage: int | None = None) -> None:
        if not run.progress:
            return
        with contextlib.suppress(Exception):
            if kind == "report":
                self.work_done_progress.report(
                    run.token, types.WorkDoneProgressReport(message=message, percentage=percentage, cancellable=True)
                )
            elif kind == "end":
                self.work_done_progress.end(run.token, types.WorkDoneProgressEnd(message=message))

    async def _begin_progress(self, run: Run) -> None:
        if not self.supports_progress:
            return
        try:
            await asyncio.wait_for(self.work_done_progress.create_async(run.token), timeout=5.0)
        except Exception as exc:
            self.log("warning", f"the client did not create a progress token ({exc}); no progress shown")
            return
        run.progress = True
        self.work_done_progress.begin(
            run.token,
            types.WorkDoneProgressBegin(
                title=f"Distcheck: {run.target.name}", cancellable=True, message="starting", percentage=0
            ),
        )

    def _on_event(self, run: Run, event: str, info: Mapping[str, Any]) -> None:
        if event == "reference_started":
            self._progress(run, "report", "reference run", 5)
        elif event == "attempt_started":
            index = int(info.get("index", 0))
            total = max(1, int(info.get("total", 1)))
            rule = str(info.get("rule") or "initial spec")
            self._progress(run, "report", f"attempt {index + 1}/{total}: {rule}", 10 + int(85 * index / total))
        elif event == "rank_started":
            rank = info.get("rank")
            if isinstance(rank, int) and isinstance(info.get("pid"), int):
                run.ranks[rank] = int(info["pid"])
            self._progress(run, "report", f"rank {rank} started")
        elif event == "rank_finished":
            self._progress(run, "report", f"rank {info.get('rank')} finished")
        self.log("debug", f"{run.target.name}: {event} {dict(info)}")

    async def _run(self, run: Run) -> None:
        name = run.target.name
        try:
            await self._begin_progress(run)
            await self.refresh_settings()
            options = {**self.settings.options, **run.target.options, **run.overrides}
            if self.runner_lock.locked():
                busy = ", ".join(r.target.name for r in self.runs.values() if r.active) or "another target"
                self._progress(run, "report", f"waiting for the validation of {busy} to finish")
            async with self.runner_lock:
                run.active = True
                if run.cancelled:
                    raise RunCancelled()
                if self.runner is None or not self.runner.ready.is_set():
                    self._progress(run, "report", "starting the runner (importing torch)")
                runner = await self.ensure_runner()
                if run.cancelled:
                    raise RunCancelled()
                spec = self.spec_param(run.target)
                params = run.target.runner_params(options, spec)
                self.log("info", f"validating {name} (options {options}, spec {run.target.spec_path})")
                t0 = time.monotonic()
                result, notice = await runner.validate(params, lambda e, i: self._on_event(run, e, i))
                runner.forget_processes()
                self.log("info", f"{name}: validation finished in {time.monotonic() - t0:.1f} s")
                run.active = False
            await self._finish(run, result, notice)
        except (RunCancelled, asyncio.CancelledError):
            self._progress(run, "end", "cancelled")
            self.log("info", f"the validation of {name} was cancelled")
        except RunnerDied as err:
            if run.cancelled:
                self._progress(run, "end", "cancelled")
            else:
                self._progress(run, "end", f"interrupted: the runner stopped ({describe_exit(err.returncode)})")
        except RunnerError as err:
            self._runner_error(run, err)
        except JsonRpcException as err:
            self._progress(run, "end", f"not started: {err.message}")
            self.show("error", f"Distcheck could not validate {name}: {err.message}")
        except TimeoutError as err:
            self._progress(run, "end", f"not started: {err}")
            self.show("error", f"Distcheck could not validate {name}: {err}; check the distcheck output channel")
        except Exception as exc:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.log("error", f"internal error while validating {name}: {exc}\n{tb}")
            self._progress(run, "end", f"internal error: {exc}")
            self.show(
                "error",
                f"Distcheck hit an internal error while validating {name}: {exc}. The output channel has the "
                "traceback; please report it.",
            )
        finally:
            run.active = False
            if self.runs.get(name) is run:
                del self.runs[name]

    def _place_context(self, target: TargetInfo, texts: Mapping[str, str]) -> diagnostics.PlaceContext:
        roots = self.roots()

        def read(path: str) -> str | None:
            norm = os.path.normpath(os.path.abspath(path))
            return texts[norm] if norm in texts else read_disk(norm)

        spec_norm = os.path.normpath(target.spec_path)
        spec_text = texts[spec_norm] if spec_norm in texts else read_disk(spec_norm)
        sample_file = None
        if target.sample and not target.sample_is_file:
            where = target.sample.rpartition(":")[0]
            sample_file = where if where.endswith(".py") else None
        return diagnostics.PlaceContext(
            target=target.name,
            spec_path=target.spec_path,
            spec_text=spec_text,
            roots=roots,
            search_dirs=target.search_dirs,
            read=read,
            files=lambda: locate.iter_python_files(roots),
            factory_file=target.factory_file,
            sample_file=sample_file,
            encoding=self._encoding,
        )

    async def _finish(self, run: Run, result: Any, notice: Any) -> None:
        name = run.target.name
        report = TraceReport.from_dict(result)
        ctx = self._place_context(run.target, self.open_texts())
        placed = await asyncio.to_thread(diagnostics.report_diagnostics, report, ctx)
        self.set_diagnostics(f"target:{name}", placed)
        payload = {
            "target": name,
            "specUri": _uri(run.target.spec_path),
            "report": result,
            "notice": notice if isinstance(notice, str) else None,
        }
        self.reports[name] = payload
        self.report_targets[name] = run.target
        line = diagnostics.first_line(report.next_action) or report.verdict
        self._progress(run, "end", line)
        count = sum(len(v) for v in placed.values())
        self.log("info", f"{name}: {report.verdict} — {line} ({count} diagnostic(s))")
        if isinstance(notice, str):
            self.log("info", notice)
            if not self._notice_shown:
                self._notice_shown = True
                self.show("info", f"Distcheck: {notice}.")
        # Last, so a client that reacts to the report has already seen everything else this run sends.
        self.protocol.notify("distcheck/report", payload)

    def _runner_error(self, run: Run, err: RunnerError) -> None:
        name = run.target.name
        ctx = self._place_context(run.target, self.open_texts())
        placed = diagnostics.runner_error_diagnostics(err.type, err.message, err.hint, err.frames, ctx)
        self.set_diagnostics(f"target:{name}", placed)
        self._progress(run, "end", f"error: {err.message}")
        hint = f" What to do: {err.hint}" if err.hint else ""
        self.show("error", f"Distcheck could not validate {name}: {err.message}.{hint}")
        if err.traceback:
            self.log("error", err.traceback)

    async def cancel(self, names: Iterable[str] | None) -> list[str]:
        """Cancel the named runs (all when None): kill the runner (and everything it started) if one of
        them holds it, drop the queued ones. Returns the names cancelled."""
        wanted = list(self.runs) if names is None else [n for n in names if n in self.runs]
        cancelled: list[str] = []
        kill = False
        runner_alive = self.runner is not None and self.runner.alive
        for name in wanted:
            run = self.runs.get(name)
            if run is None:
                continue
            run.cancelled = True
            cancelled.append(name)
            if run.active and runner_alive:
                kill = True
            elif run.task is not None:
                run.task.cancel()
        if kill and self.runner is not None:
            t0 = time.monotonic()
            killed = await self.runner.kill()
            self.log("info", f"cancelled {', '.join(cancelled)}: killed pids {killed} in {time.monotonic() - t0:.2f} s")
        return cancelled

    # ---- code actions

    def code_actions(self, params: types.CodeActionParams) -> list[types.CodeAction]:
        only = params.context.only
        path = _path(params.text_document.uri)

        def wanted(kind: str) -> bool:
            return not only or any(kind == k or kind.startswith(f"{k}.") for k in only)

        out: list[types.CodeAction] = []
        if wanted(types.CodeActionKind.QuickFix):
            stored = self.stored(params.text_document.uri)
            for d in params.context.diagnostics:
                if d.source != diagnostics.SOURCE:
                    continue
                data = d.data if isinstance(d.data, Mapping) else self._stored_data(stored, d)
                if not isinstance(data, Mapping):
                    continue
                code = str(data.get("code") or d.code or "")
                if code not in actions.FIXABLE:
                    continue
                spec_path = str(data.get("specPath") or "")
                if not spec_path:
                    continue
                exists = self.text_of(spec_path) is not None
                title = actions.action_title(code, data, os.path.basename(spec_path), exists)
                if title is None:
                    continue
                out.append(
                    types.CodeAction(
                        title=title,
                        kind=types.CodeActionKind.QuickFix,
                        diagnostics=[d],
                        is_preferred=code in ("spec-fix", "undeclared-helper", "spec-missing"),
                        data={"code": code, "target": data.get("target"), "specPath": spec_path, "fix": dict(data)},
                    )
                )
        if wanted(types.CodeActionKind.Source) and path is not None:
            for name, payload in self.reports.items():
                target = self.report_targets.get(name)
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

    @staticmethod
    def _stored_data(stored: Sequence[types.Diagnostic], d: types.Diagnostic) -> Any:
        for s in stored:
            if s.code == d.code and s.range == d.range:
                return s.data
        return None

    def save_spec_edit(self, name: str) -> tuple[types.WorkspaceEdit, str]:
        payload = self.reports.get(name)
        target = self.report_targets.get(name)
        if payload is None or target is None:
            raise RequestFailed(f"{name} has not been validated yet; run Distcheck: Validate first")
        if payload["report"].get("verdict") != "passed":
            raise RequestFailed(
                f"the last validation of {name} did not pass ({payload['report'].get('verdict')}); fix it and "
                "validate again before saving its spec"
            )
        data = {"code": "save-spec", "target": name, "spec": payload["report"]["spec"], "specPath": target.spec_path}
        return self._edit_for("save-spec", data, target.spec_path), _uri(target.spec_path)

    def _edit_for(self, code: str, data: Mapping[str, Any], spec_path: str) -> types.WorkspaceEdit:
        current, version, uri = self.doc_state(spec_path)
        try:
            new = actions.new_spec_text(code, data, current)
            return actions.workspace_edit(
                uri, current, version, new, encoding=self._encoding, document_changes=self.document_changes
            )
        except actions.ActionError as err:
            raise RequestFailed(str(err)) from err

    def resolve_action(self, action: types.CodeAction) -> types.CodeAction:
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

    # ---- documents

    def document_opened(self, uri: str) -> None:
        path = _path(uri)
        if path is None:
            return
        self._open[path] = uri
        self.document_changed(uri)

    def document_changed(self, uri: str) -> None:
        path = _path(uri)
        if path is None:
            return
        if os.path.basename(path) == "pyproject.toml":
            self.check_configs()
        elif self.is_spec(path):
            self.check_spec_document(path)

    def document_closed(self, uri: str) -> None:
        path = _path(uri)
        if path is None:
            return
        self._open.pop(path, None)
        self.document_changed(uri)

    def debug_info(self) -> dict[str, Any]:
        roots = self.roots()
        user_modules = sorted(
            name
            for name, module in list(sys.modules.items())
            if isinstance(getattr(module, "__file__", None), str) and locate.is_user_file(str(module.__file__), roots)
        )
        runner = self.runner
        return {
            "pid": os.getpid(),
            "python": sys.executable,
            "version": __version__,
            "torchLoaded": "torch" in sys.modules,
            "userModules": user_modules,
            "runner": None
            if runner is None
            else {
                "pid": runner.pid,
                "alive": runner.alive,
                "ready": runner.ready.is_set(),
                "info": runner.info,
            },
            "runs": {
                name: {"active": run.active, "token": run.token, "ranks": run.ranks} for name, run in self.runs.items()
            },
            "roots": roots,
        }

    def targets_info(self) -> list[dict[str, Any]]:
        found = self.check_configs()
        out: list[dict[str, Any]] = []
        for t in [*self.all_targets(found), *self.file_targets(found)]:
            factory_line = None
            if t.factory_file:
                text = self.text_of(t.factory_file)
                name = t.factory.rpartition(":")[2].split(".")[-1]
                loc = locate.definition(text, name, t.factory_file) if text is not None else None
                factory_line = loc.line - 1 if loc is not None else None
            out.append(
                {
                    "name": t.name,
                    "factory": t.factory,
                    "sample": t.sample,
                    "spec": t.spec_path,
                    "specUri": _uri(t.spec_path),
                    "specConfigured": t.spec_configured,
                    "source": t.source,
                    "uri": _uri(t.defined_in),
                    "line": (t.line - 1) if t.line else 0,
                    "factoryUri": _uri(t.factory_file) if t.factory_file else None,
                    "factoryLine": factory_line,
                    "running": t.name in self.runs,
                }
            )
        return out

    async def shutdown_all(self) -> None:
        self._shutting_down = True
        for run in list(self.runs.values()):
            run.cancelled = True
            if run.task is not None and not run.active:
                run.task.cancel()
        runner = self.runner
        if runner is not None:
            if any(r.active for r in self.runs.values()):
                await runner.kill()
            else:
                await runner.stop()


# --------------------------------------------------------------------------------------------------
# feature handlers (the first parameter is named `ls`, so pygls passes the server)


def _on_initialize(ls: DistcheckServer, params: types.InitializeParams) -> None:
    encoding: Any = ls.workspace.position_encoding
    ls._encoding = str(getattr(encoding, "value", encoding) or "utf-16")
    options = params.initialization_options
    if isinstance(options, Mapping) and isinstance(options.get("settings"), Mapping):
        ls.apply_settings(options["settings"])
    ls.trusted = isinstance(options, Mapping) and options.get("trusted") is True


def _on_trust(ls: DistcheckServer, params: Any) -> None:
    """`distcheck/trust` `{trusted}`: the user granted (or, in a new window, withdrew) workspace trust."""
    trusted = getattr(params, "trusted", None)
    if trusted is None and isinstance(params, Mapping):
        trusted = params.get("trusted")
    ls.trusted = trusted is True
    state = "trusted: validation enabled" if ls.trusted else "not trusted: validation disabled"
    ls.log("info", f"workspace {state}")
    if not ls.trusted:
        ls.spawn(ls.cancel(None), "distcheck-untrusted-cancel")


async def _on_initialized(ls: DistcheckServer, params: types.InitializedParams) -> None:
    await ls.refresh_settings()
    ls.log("info", f"distcheck {__version__} language server (pid {os.getpid()}, {sys.executable})")
    ls.check_configs()
    # The runner starts with the first validation, not here: before the user asks for one, nothing
    # that could import the workspace's code runs.


async def _on_change_configuration(ls: DistcheckServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, Mapping) and isinstance(settings.get("distcheck"), Mapping):
        ls.apply_settings(settings["distcheck"])
    else:
        await ls.refresh_settings()


def _on_open(ls: DistcheckServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.document_opened(params.text_document.uri)


def _on_change(ls: DistcheckServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.document_changed(params.text_document.uri)


def _on_save(ls: DistcheckServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.document_changed(params.text_document.uri)


def _on_close(ls: DistcheckServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.document_closed(params.text_document.uri)


def _on_code_action(ls: DistcheckServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    return ls.code_actions(params)


def _on_code_action_resolve(ls: DistcheckServer, params: types.CodeAction) -> types.CodeAction:
    return ls.resolve_action(params)


def _on_progress_cancel(ls: DistcheckServer, params: types.WorkDoneProgressCancelParams) -> None:
    for name, run in list(ls.runs.items()):
        if run.token == params.token:
            ls.spawn(ls.cancel([name]), "distcheck-cancel")


async def _on_shutdown(ls: DistcheckServer, params: Any) -> None:
    await ls.shutdown_all()


async def _cmd_validate(ls: DistcheckServer, *args: Any) -> dict[str, Any]:
    return ls.start_validation(args)


async def _cmd_cancel(ls: DistcheckServer, *args: Any) -> dict[str, Any]:
    names = [a for a in args if isinstance(a, str)]
    return {"cancelled": await ls.cancel(names or None)}


async def _cmd_save_spec(ls: DistcheckServer, *args: Any) -> dict[str, Any]:
    name = next((a for a in args if isinstance(a, str)), None)
    if name is None:
        if len(ls.reports) != 1:
            raise JsonRpcInvalidParams("distcheck.saveSpec takes [target: string]")
        name = next(iter(ls.reports))
    edit, uri = ls.save_spec_edit(name)
    if _is_noop(edit):
        # The file already holds the validated spec; editors report an empty edit as "not applied".
        return {"saved": uri, "unchanged": True}
    result = await ls.workspace_apply_edit_async(
        types.ApplyWorkspaceEditParams(edit=edit, label=f"Save validated spec ({name})")
    )
    if not result.applied:
        reason = result.failure_reason or "no reason given"
        raise RequestFailed(f"the editor did not apply the edit ({reason}); save the spec again")
    return {"saved": uri}


def _is_noop(edit: types.WorkspaceEdit) -> bool:
    """True when `edit` changes nothing (no file to create, no text edit)."""
    if edit.document_changes:
        return all(isinstance(c, types.TextDocumentEdit) and not c.edits for c in edit.document_changes)
    return not any(edit.changes.values()) if edit.changes else True


def _on_watched_files(ls: DistcheckServer, params: types.DidChangeWatchedFilesParams) -> None:
    """pyproject.toml and spec files changed on disk (outside an open editor): re-check them."""
    for change in params.changes:
        ls.document_changed(change.uri)


def _req_last_report(ls: DistcheckServer, params: Any) -> dict[str, Any] | None:
    name = getattr(params, "target", None) if params is not None else None
    if name is None and isinstance(params, Mapping):
        name = params.get("target")
    if name is None:
        return None
    return ls.reports.get(str(name))


def _req_targets(ls: DistcheckServer, params: Any) -> list[dict[str, Any]]:
    return ls.targets_info()


def _req_debug_info(ls: DistcheckServer, params: Any) -> dict[str, Any]:
    return ls.debug_info()


def create_server() -> DistcheckServer:
    """A server with every feature registered."""
    ls = DistcheckServer()
    ls.feature(types.INITIALIZE)(_on_initialize)
    ls.feature(types.INITIALIZED)(_on_initialized)
    ls.feature(types.WORKSPACE_DID_CHANGE_CONFIGURATION)(_on_change_configuration)
    ls.feature(types.TEXT_DOCUMENT_DID_OPEN)(_on_open)
    ls.feature(types.TEXT_DOCUMENT_DID_CHANGE)(_on_change)
    ls.feature(types.TEXT_DOCUMENT_DID_SAVE)(_on_save)
    ls.feature(types.TEXT_DOCUMENT_DID_CLOSE)(_on_close)
    ls.feature(types.WORKSPACE_DID_CHANGE_WATCHED_FILES)(_on_watched_files)
    ls.feature(
        types.TEXT_DOCUMENT_CODE_ACTION,
        types.CodeActionOptions(
            code_action_kinds=[types.CodeActionKind.QuickFix, types.CodeActionKind.Source], resolve_provider=True
        ),
    )(_on_code_action)
    ls.feature(types.CODE_ACTION_RESOLVE)(_on_code_action_resolve)
    ls.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)(_on_progress_cancel)
    ls.feature(types.SHUTDOWN)(_on_shutdown)
    ls.command("distcheck.validate")(_cmd_validate)
    ls.command("distcheck.cancel")(_cmd_cancel)
    ls.command("distcheck.saveSpec")(_cmd_save_spec)
    ls.feature("distcheck/lastReport")(_req_last_report)
    ls.feature("distcheck/targets")(_req_targets)
    ls.feature("distcheck/debugInfo")(_req_debug_info)
    ls.feature("distcheck/trust")(_on_trust)
    return ls


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server on stdio (`--stdio` is accepted and is the only transport) until the editor's
    pipe closes or it says `exit`; returns the exit code (`transport.serve_stdio`). Badly framed
    messages are dropped and logged; nothing the daemon started outlives it."""
    from .transport import serve_stdio

    parser = argparse.ArgumentParser(prog="distcheck-lsp", description="The distcheck language server (stdio).")
    parser.add_argument("--stdio", action="store_true", help="talk LSP on stdin/stdout (the default)")
    parser.add_argument("--log-level", default="WARNING", help="Python logging level for pygls on stderr")
    args, _unknown = parser.parse_known_args(argv)
    logging.basicConfig(level=getattr(logging, str(args.log_level).upper(), logging.WARNING), stream=sys.stderr)
    logging.getLogger("pygls").setLevel(max(logging.WARNING, logging.getLogger().level))
    return serve_stdio(create_server())
