"""The distcheck language server (`python -m distcheck.lsp`, script `distcheck-lsp`): LSP over stdio.

The daemon is a pygls 2 server on one asyncio event loop. It never imports torch or the user's code:
validations run in a child runner (`jobs/runner.py`, reached through `runner_client.py`), everything
it places in an editor comes from the report's files and lines or from text / AST scans
(`locate.py`), and no handler waits on the runner — `distcheck.validate` starts an asyncio task and
returns at once.

This module is the wiring: the `LanguageServer` subclass (settings, trust, logging, capabilities),
the feature and command registration, and `main`. The jobs are elsewhere: `workspace.py` (folders,
buffers, configs, targets), `runs.py` and `runner_slot.py` (validations, progress, the runner),
`store.py` (published diagnostics), `code_actions.py` (quick fixes, saving the spec), `commands.py`
(typed command arguments). The contract is docs/protocol.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import sys
import traceback
from collections.abc import Coroutine, Mapping, Sequence
from typing import Any, TypeVar

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.lsp.server import LanguageServer

from .. import __version__
from ..runtime.module_namespace import module_file
from ..safe_text import for_editor
from . import commands, locate
from .code_actions import CodeActions
from .commands import HelperFixParams, LastReportParams, LocateModuleParams, TargetArg, TrustParams, ValidateExtra
from .config import Settings, read_settings
from .errors import (
    ALREADY_RUNNING,
    REQUEST_FAILED,
    AlreadyRunning,
    ExpectedErrorsWithoutTraceback,
    OutsideWorkspace,
    RequestFailed,
    is_expected,
    refusal_line,
)
from .runner_client import RunnerClient
from .runs import Run, Runs
from .store import DiagnosticsStore
from .text import LineIndex
from .uris import uri_of
from .workspace import WorkspaceState

__all__ = [
    "ALREADY_RUNNING",
    "REQUEST_FAILED",
    "AlreadyRunning",
    "DistcheckServer",
    "OutsideWorkspace",
    "RequestFailed",
    "Run",
    "create_server",
    "main",
]

_P = TypeVar("_P")
_LEVELS = {"error": 0, "warning": 1, "info": 2, "debug": 3}
_TRACE_THRESHOLD = {"off": 1, "messages": 2, "verbose": 3}
_MESSAGE_TYPES = {
    "error": types.MessageType.Error,
    "warning": types.MessageType.Warning,
    "info": types.MessageType.Info,
    "debug": types.MessageType.Log,
}


class DistcheckServer(LanguageServer):
    """The daemon: settings and trust, plus its parts — `docs` (workspace and targets), `store`
    (diagnostics), `jobs` (validations and the runner) and `actions` (code actions)."""

    def __init__(self) -> None:
        self.command_arity: dict[str, int] = {}
        super().__init__("distcheck", __version__, converter_factory=commands.converter_factory(self.command_arity))
        self.settings = Settings()
        self.encoding = "utf-16"
        # Until the client says otherwise the workspace is untrusted: nothing of it is run.
        self.trusted = False
        self._tasks: set[asyncio.Task[Any]] = set()
        self.store = DiagnosticsStore(self.text_document_publish_diagnostics)
        self.docs = WorkspaceState(self, self.store)
        self.jobs = Runs(self, self.docs, self.store)
        self.actions = CodeActions(self, self.docs, self.store, self.jobs)

    @property
    def runner(self) -> RunnerClient | None:
        """The runner child, None while there is none (`transport.serve_stdio` kills it on exit)."""
        return self.jobs.slot.runner

    async def shutdown_all(self) -> None:
        """Cancel every validation and stop the runner (killed when a validation holds it)."""
        await self.jobs.shutdown()

    def spawn(self, coro: Coroutine[Any, Any, Any], name: str) -> asyncio.Task[Any]:
        """Start a background task, keep a reference to it until it ends, log it if it fails."""
        task: asyncio.Task[Any] = asyncio.ensure_future(coro)
        task.set_name(name)
        self._tasks.add(task)
        task.add_done_callback(self._task_done)
        return task

    def _task_done(self, task: asyncio.Task[Any]) -> None:
        self._tasks.discard(task)
        if not task.cancelled() and (exc := task.exception()) is not None:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            self.log("error", f"internal error in {task.get_name()}: {exc}\n{tb}")

    def log(self, level: str, message: str) -> None:
        """`window/logMessage` when `level` passes the `distcheck.trace.server` threshold (user text
        shown escaped: `safe_text.for_editor`)."""
        if _LEVELS.get(level, 3) > _TRACE_THRESHOLD.get(self.settings.trace, 2):
            return
        with contextlib.suppress(Exception):
            self.window_log_message(types.LogMessageParams(type=_MESSAGE_TYPES[level], message=for_editor(message)))

    def report_server_error(self, error: Exception, source: Any) -> None:
        """A refused request (an expected error) is one `window/logMessage` warning with its message;
        anything else goes to pygls' reporter (a real bug: its traceback stays on stderr)."""
        if is_expected(error):
            assert isinstance(error, JsonRpcException)
            self.log("warning", refusal_line(error))
            return
        super().report_server_error(error, source)

    def show(self, level: str, message: str) -> None:
        """`window/showMessage` (and the log), user text shown escaped (`safe_text.for_editor`)."""
        self.log(level, message)
        with contextlib.suppress(Exception):
            self.window_show_message(types.ShowMessageParams(type=_MESSAGE_TYPES[level], message=for_editor(message)))

    @property
    def document_changes(self) -> bool:
        """True when the client applies `documentChanges` (versioned edits, file creation)."""
        caps = self.client_capabilities
        edit = caps.workspace.workspace_edit if caps.workspace else None
        return bool(edit and edit.document_changes)

    @property
    def supports_progress(self) -> bool:
        """True when the client shows server-created `$/progress`."""
        window = self.client_capabilities.window
        return bool(window and window.work_done_progress)

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
        self.apply_settings(result[0] if result else None)

    def apply_settings(self, raw: Any) -> None:
        """Take the client's `distcheck` settings; warn once about each new problem in them."""
        settings = read_settings(raw)
        old = self.settings.problems
        self.settings = settings
        for problem in settings.problems:
            if problem not in old:
                self.show("warning", f"{problem}. It is ignored until fixed in your settings.")

    def debug_info(self) -> dict[str, Any]:
        """`distcheck/debugInfo`: facts about this process, for tests and bug reports."""
        roots = self.docs.roots()
        user_modules = sorted(
            name
            for name, module in list(sys.modules.items())
            if (file := module_file(module)) is not None and locate.is_user_file(file, roots)
        )
        return {
            "pid": os.getpid(),
            "python": sys.executable,
            "version": __version__,
            "torchLoaded": "torch" in sys.modules,
            "userModules": user_modules,
            **self.jobs.debug_info(),
            "roots": roots,
        }


# --------------------------------------------------------------------------------------------------
# feature handlers (the first parameter is named `ls`, so pygls passes the server)


def _on_initialize(ls: DistcheckServer, params: types.InitializeParams) -> None:
    encoding: Any = ls.workspace.position_encoding
    ls.encoding = str(getattr(encoding, "value", encoding) or "utf-16")
    options = params.initialization_options
    if isinstance(options, Mapping) and isinstance(options.get("settings"), Mapping):
        ls.apply_settings(options["settings"])
    ls.trusted = isinstance(options, Mapping) and options.get("trusted") is True


def _on_trust(ls: DistcheckServer, params: Any) -> None:
    """`distcheck/trust` `{trusted}`: the user granted (or, in a new window, withdrew) workspace trust."""
    ls.trusted = _params(ls, params, TrustParams).trusted
    state = "trusted: validation enabled" if ls.trusted else "not trusted: validation disabled"
    ls.log("info", f"workspace {state}")
    if not ls.trusted:
        ls.spawn(ls.jobs.cancel(None), "distcheck-untrusted-cancel")


async def _on_initialized(ls: DistcheckServer, params: types.InitializedParams) -> None:
    await ls.refresh_settings()
    ls.log("info", f"distcheck {__version__} language server (pid {os.getpid()}, {sys.executable})")
    ls.docs.check_configs()
    # The runner starts with the first validation, not here: before the user asks for one, nothing
    # that could import the workspace's code runs.


async def _on_change_configuration(ls: DistcheckServer, params: types.DidChangeConfigurationParams) -> None:
    settings = params.settings
    if isinstance(settings, Mapping) and isinstance(settings.get("distcheck"), Mapping):
        ls.apply_settings(settings["distcheck"])
    else:
        await ls.refresh_settings()


def _on_open(ls: DistcheckServer, params: types.DidOpenTextDocumentParams) -> None:
    ls.docs.document_opened(params.text_document.uri)


def _on_change(ls: DistcheckServer, params: types.DidChangeTextDocumentParams) -> None:
    ls.docs.document_changed(params.text_document.uri)


def _on_save(ls: DistcheckServer, params: types.DidSaveTextDocumentParams) -> None:
    ls.docs.document_changed(params.text_document.uri)


def _on_close(ls: DistcheckServer, params: types.DidCloseTextDocumentParams) -> None:
    ls.docs.document_closed(params.text_document.uri)


def _on_watched_files(ls: DistcheckServer, params: types.DidChangeWatchedFilesParams) -> None:
    """pyproject.toml and spec files changed on disk (outside an open editor): re-check them."""
    for change in params.changes:
        ls.docs.document_changed(change.uri)


def _on_code_action(ls: DistcheckServer, params: types.CodeActionParams) -> list[types.CodeAction]:
    return ls.actions.offer(params)


def _on_code_action_resolve(ls: DistcheckServer, params: types.CodeAction) -> types.CodeAction:
    return ls.actions.resolve(params)


def _on_progress_cancel(ls: DistcheckServer, params: types.WorkDoneProgressCancelParams) -> None:
    ls.jobs.cancel_token(params.token)


async def _on_shutdown(ls: DistcheckServer, params: Any) -> None:
    await ls.shutdown_all()


# Commands: pygls structures each argument by its annotation (`commands.py`); a missing trailing
# argument arrives as None, and arguments beyond the last parameter land in `extra`.


async def _cmd_validate(
    ls: DistcheckServer,
    target: TargetArg | None,
    first: ValidateExtra | None,
    second: ValidateExtra | None,
    *extra: Any,
) -> dict[str, Any]:
    if extra:
        raise commands.too_many("distcheck.validate", extra)
    objects = [o for o in (first, second) if o is not None]
    overrides = {k: v for o in objects for k, v in o.overrides.items()}
    confirmed = [p for o in objects for p in o.confirmed]
    return ls.jobs.start(target.value if target else None, overrides, confirmed)


async def _cmd_cancel(ls: DistcheckServer, target: TargetArg | None, *extra: Any) -> dict[str, Any]:
    if extra:
        raise commands.too_many("distcheck.cancel", extra)
    return {"cancelled": await ls.jobs.cancel([target.value] if target else None)}


async def _cmd_save_spec(ls: DistcheckServer, target: TargetArg | None, *extra: Any) -> dict[str, Any]:
    if extra:
        raise commands.too_many("distcheck.saveSpec", extra)
    return await ls.actions.save_spec(target.value if target else None)


def _params(ls: DistcheckServer, params: Any, kind: type[_P]) -> _P:
    """A distcheck request's raw params as `kind`, through the server's converter (`commands.py`)."""
    return commands.structure_params(ls.protocol._converter, params, kind)


def _req_last_report(ls: DistcheckServer, params: Any) -> dict[str, Any] | None:
    target = _params(ls, params, LastReportParams).target
    return ls.jobs.reports.get(target)


def _req_locate_module(ls: DistcheckServer, params: Any) -> types.Location | None:
    """`distcheck/locateModule`: where the module class `cls` is defined, None when not in the workspace."""
    p = _params(ls, params, LocateModuleParams)
    targets = [t for wt in ls.docs.check_configs() for t in wt.targets] + list(ls.jobs.report_targets.values())
    if p.target is not None:
        targets = [t for t in targets if t.name == p.target]
    search_dirs = list(dict.fromkeys(d for t in targets for d in t.search_dirs)) + ls.docs.roots()
    found = locate.locate_class(p.cls, search_dirs, ls.docs.roots(), ls.docs.reader(ls.docs.open_texts()))
    if found is None:
        return None
    text = ls.docs.text_of(found.path) or ""
    index = LineIndex(text, ls.encoding)
    line = found.line - 1
    start, end = index.column_units(line, found.start), index.column_units(line, found.end)
    where = types.Range(start=types.Position(line=line, character=start), end=types.Position(line=line, character=end))
    return types.Location(uri=uri_of(found.path), range=where)


def _req_helper_fix(ls: DistcheckServer, params: Any) -> types.CodeAction | None:
    """`distcheck/helperFix`: the resolved quick fix declaring an adapter for `qualname`, None when none."""
    p = _params(ls, params, HelperFixParams)
    return ls.actions.helper_fix(p.qualname, p.target)


def _req_targets(ls: DistcheckServer, params: Any) -> list[dict[str, Any]]:
    return ls.docs.targets_info(ls.jobs.runs)


def _req_debug_info(ls: DistcheckServer, params: Any) -> dict[str, Any]:
    return ls.debug_info()


_COMMANDS = {
    "distcheck.validate": _cmd_validate,
    "distcheck.cancel": _cmd_cancel,
    "distcheck.saveSpec": _cmd_save_spec,
}


def create_server() -> DistcheckServer:
    """A server with every feature and command registered."""
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
            code_action_kinds=[
                types.CodeActionKind.QuickFix,
                types.CodeActionKind.Source,
                types.CodeActionKind.SourceFixAll,
            ],
            resolve_provider=True,
        ),
    )(_on_code_action)
    ls.feature(types.CODE_ACTION_RESOLVE)(_on_code_action_resolve)
    ls.feature(types.WINDOW_WORK_DONE_PROGRESS_CANCEL)(_on_progress_cancel)
    ls.feature(types.SHUTDOWN)(_on_shutdown)
    for name, handler in _COMMANDS.items():
        ls.command(name)(handler)
        ls.command_arity[name] = commands.arity(handler)
    ls.feature("distcheck/lastReport")(_req_last_report)
    ls.feature("distcheck/targets")(_req_targets)
    ls.feature("distcheck/debugInfo")(_req_debug_info)
    ls.feature("distcheck/locateModule")(_req_locate_module)
    ls.feature("distcheck/helperFix")(_req_helper_fix)
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
    # a refused request is logged once, as a warning without traceback (DistcheckServer.report_server_error)
    logging.getLogger("pygls.protocol.json_rpc").addFilter(ExpectedErrorsWithoutTraceback())
    return serve_stdio(create_server())
