"""Validations: `distcheck.validate` / `distcheck.cancel`, their `$/progress`, their reports.

`start` checks a request and registers the run without awaiting anything (no handler waits on the
runner); the run's task then queues for the runner (one validation at a time), sends its progress on
a server-created, cancellable token, and ends by replacing the target's diagnostics, keeping the
report for `distcheck/lastReport` and the code actions, and notifying `distcheck/report` last.
Cancelling a run that holds the runner kills the runner and every process it started.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
import traceback
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from lsprotocol import types
from pygls.exceptions import JsonRpcException

from ..report import TraceReport
from ..safe_text import for_editor
from . import diagnostics, locate, trust
from .config import TargetInfo, load_workspace_targets, read_disk
from .errors import AlreadyRunning, OutsideWorkspace, RequestFailed
from .runner_client import RunCancelled, RunnerDied, RunnerError, describe_exit
from .runner_slot import RunnerSlot
from .store import DiagnosticsStore
from .uris import uri_of
from .workspace import WorkspaceState

if TYPE_CHECKING:
    from .server import DistcheckServer

__all__ = ["Run", "Runs", "end_message"]


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
    # the target's files whose unsaved buffer edits this run does not see (it runs what is on disk)
    unsaved: list[str] = field(default_factory=list)


def end_message(state: str, headline: str, unsaved: list[str]) -> str:
    """The progress end message of a finished run: the headline, led by "fix available — apply the best
    spec" when only an auto-fixed spec passed (`TraceReport.state`), and followed by the files whose
    unsaved edits were not validated."""
    line = f"fix available — apply the best spec: {headline}" if state == "passed_after_fix" else headline
    if unsaved:
        names = ", ".join(os.path.basename(p) for p in unsaved)
        line += f" (validated the saved files: unsaved edits in {names} were not; save and validate again)"
    return line


class Runs:
    """Running validations (`runs`, by target name), the runner they share, and the last reports."""

    def __init__(self, server: DistcheckServer, workspace: WorkspaceState, store: DiagnosticsStore) -> None:
        self._server = server
        self._workspace = workspace
        self._store = store
        self.runs: dict[str, Run] = {}
        self.reports: dict[str, dict[str, Any]] = {}
        self.report_targets: dict[str, TargetInfo] = {}
        self.slot = RunnerSlot(server.log, server.show, server.spawn, self._active_names)
        self._confirmed_outside: set[str] = set()
        self._notice_shown = False

    def _active_names(self) -> list[str]:
        return [r.target.name for r in self.runs.values() if r.active]

    def start(self, arg: str | None, overrides: dict[str, Any], confirmed: Iterable[str]) -> dict[str, Any]:
        """Check a `distcheck.validate` request (trust, target, code outside the workspace, a run
        already going, the spec), register the run and start its task; never awaits."""
        if not self._server.trusted:
            raise RequestFailed(trust.UNTRUSTED)
        target = self._workspace.resolve_target(arg)
        self._confirmed_outside.update(os.path.realpath(p) for p in confirmed)
        try:
            outside = trust.code_outside(target, self._workspace.roots(), self._confirmed_outside)
        except trust.Unclassified as err:
            raise RequestFailed(
                f"validating {target.name} was refused: {err}; make the module a file in the workspace or an "
                "installed package, or validate it from a terminal (distcheck validate) if you trust it"
            ) from err
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
        self._workspace.spec_param(target)  # a broken spec is refused now, not after queueing
        self.slot.forgive()
        run = Run(target=target, overrides=dict(overrides), token=f"distcheck-{uuid.uuid4().hex[:12]}")
        self.runs[target.name] = run
        run.task = self._server.spawn(self._run(run), f"distcheck-validate-{target.name}")
        return {"started": True, "target": target.name, "token": run.token}

    async def cancel(self, names: Iterable[str] | None) -> list[str]:
        """Cancel the named runs (all when None): kill the runner (and everything it started) if one of
        them holds it, drop the queued ones. Returns the names cancelled."""
        wanted = list(self.runs) if names is None else [n for n in names if n in self.runs]
        cancelled: list[str] = []
        kill = False
        runner = self.slot.runner
        runner_alive = runner is not None and runner.alive
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
        if kill and self.slot.runner is not None:
            t0 = time.monotonic()
            killed = await self.slot.runner.kill()
            self._server.log(
                "info", f"cancelled {', '.join(cancelled)}: killed pids {killed} in {time.monotonic() - t0:.2f} s"
            )
        return cancelled

    def cancel_token(self, token: Any) -> None:
        """The client cancelled the progress `token`: cancel the run it belongs to."""
        for name, run in list(self.runs.items()):
            if run.token == token:
                self._server.spawn(self.cancel([name]), "distcheck-cancel")

    async def shutdown(self) -> None:
        """Cancel every run and stop the runner for good (killed when a run holds it)."""
        self.slot.shutting_down = True
        for run in list(self.runs.values()):
            run.cancelled = True
            if run.task is not None and not run.active:
                run.task.cancel()
        await self.slot.stop(kill=any(r.active for r in self.runs.values()))

    # ---- progress

    def _progress(self, run: Run, kind: str, message: str, percentage: int | None = None) -> None:
        if not run.progress:
            return
        progress = self._server.work_done_progress
        message = for_editor(message)  # the target's and the user's text, shown escaped
        with contextlib.suppress(Exception):
            if kind == "report":
                progress.report(
                    run.token, types.WorkDoneProgressReport(message=message, percentage=percentage, cancellable=True)
                )
            elif kind == "end":
                progress.end(run.token, types.WorkDoneProgressEnd(message=message))

    async def _begin_progress(self, run: Run) -> None:
        if not self._server.supports_progress:
            return
        progress = self._server.work_done_progress
        try:
            await asyncio.wait_for(progress.create_async(run.token), timeout=5.0)
        except Exception as exc:
            self._server.log("warning", f"the client did not create a progress token ({exc}); no progress shown")
            return
        run.progress = True
        progress.begin(
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
        self._server.log("debug", f"{run.target.name}: {event} {dict(info)}")

    # ---- one run

    async def _run(self, run: Run) -> None:
        name = run.target.name
        log, show = self._server.log, self._server.show
        try:
            await self._begin_progress(run)
            await self._server.refresh_settings()
            options = {**self._server.settings.options, **run.target.options, **run.overrides}
            if self.slot.lock.locked():
                busy = ", ".join(self._active_names()) or "another target"
                self._progress(run, "report", f"waiting for the validation of {busy} to finish")
            async with self.slot.lock:
                run.active = True
                if run.cancelled:
                    raise RunCancelled()
                if not self.slot.ready:
                    self._progress(run, "report", "starting the runner (importing torch)")
                runner = await self.slot.ensure(run.target.job(options).to_wire())  # a runner serves one target
                if run.cancelled:
                    raise RunCancelled()
                spec = self._workspace.spec_param(run.target)
                run.unsaved = self._workspace.unsaved_files(run.target)
                params = run.target.runner_params(options, spec)
                log("info", f"validating {name} (options {options}, spec {run.target.spec_path})")
                t0 = time.monotonic()
                result, notice = await runner.validate(params, lambda e, i: self._on_event(run, e, i))
                runner.forget_processes()
                log("info", f"{name}: validation finished in {time.monotonic() - t0:.1f} s")
                run.active = False
            await self._finish(run, result, notice)
        except (RunCancelled, asyncio.CancelledError):
            self._progress(run, "end", "cancelled")
            log("info", f"the validation of {name} was cancelled")
        except RunnerDied as err:
            if run.cancelled:
                self._progress(run, "end", "cancelled")
            else:
                self._progress(run, "end", f"interrupted: the runner stopped ({describe_exit(err.returncode)})")
        except RunnerError as err:
            self._runner_error(run, err)
        except JsonRpcException as err:
            self._progress(run, "end", f"not started: {err.message}")
            show("error", f"Distcheck could not validate {name}: {err.message}")
        except TimeoutError as err:
            self._progress(run, "end", f"not started: {err}")
            show("error", f"Distcheck could not validate {name}: {err}; check the distcheck output channel")
        except Exception as exc:
            tb = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
            log("error", f"internal error while validating {name}: {exc}\n{tb}")
            self._progress(run, "end", f"internal error: {exc}")
            show(
                "error",
                f"Distcheck hit an internal error while validating {name}: {exc}. The output channel has the "
                "traceback; please report it.",
            )
        finally:
            run.active = False
            if self.runs.get(name) is run:
                del self.runs[name]

    def _place_context(self, target: TargetInfo, texts: dict[str, str]) -> diagnostics.PlaceContext:
        roots = self._workspace.roots()
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
            read=self._workspace.reader(texts),
            files=lambda: locate.iter_python_files(roots),
            factory_file=target.factory_file,
            sample_file=sample_file,
            encoding=self._server.encoding,
            others=self._other_targets_files(target, roots),
        )

    def _other_targets_files(self, target: TargetInfo, roots: list[str]) -> set[str]:
        """The model and spec files of every target but `target`: its diagnostics are not shown there."""
        found = [load_workspace_targets(root, self._workspace.text_of) for root in roots]
        targets = [*(t for wt in found for t in wt.targets), *self._workspace.file_targets(found)]
        paths = (p for t in targets if t.name != target.name for p in (t.factory_file, t.spec_path))
        return {os.path.abspath(p) for p in paths if p}

    async def _finish(self, run: Run, result: Any, notice: Any) -> None:
        name = run.target.name
        report = TraceReport.from_dict(result)
        ctx = self._place_context(run.target, self._workspace.open_texts())
        placed = await asyncio.to_thread(diagnostics.report_diagnostics, report, ctx)
        self._store.replace(f"target:{name}", placed)
        payload = {
            "target": name,
            "specUri": uri_of(run.target.spec_path),
            "report": result,
            "notice": notice if isinstance(notice, str) else None,
            "unsaved": [uri_of(p) for p in run.unsaved],
        }
        self.reports[name] = payload
        self.report_targets[name] = run.target
        line = end_message(report.state, diagnostics.first_line(report.next_action) or report.verdict, run.unsaved)
        self._progress(run, "end", line)
        count = sum(len(v) for v in placed.values())
        self._server.log("info", f"{name}: {report.verdict} — {line} ({count} diagnostic(s))")
        if isinstance(notice, str):
            self._server.log("info", notice)
            if not self._notice_shown:
                self._notice_shown = True
                self._server.show("info", f"Distcheck: {notice}.")
        # Last, so a client that reacts to the report has already seen everything else this run sends.
        self._server.protocol.notify("distcheck/report", payload)

    def _runner_error(self, run: Run, err: RunnerError) -> None:
        name = run.target.name
        ctx = self._place_context(run.target, self._workspace.open_texts())
        placed = diagnostics.runner_error_diagnostics(
            err.type, err.message, err.hint, err.user_frame, ctx, cause=err.cause
        )
        self._store.replace(f"target:{name}", placed)
        if err.report is not None:  # the panel shows the error, not the previous run's report
            payload = {"target": name, "specUri": uri_of(run.target.spec_path), "report": err.report, "notice": None}
            self.reports[name] = payload
            self.report_targets[name] = run.target
            self._server.protocol.notify("distcheck/report", payload)
        self._progress(run, "end", f"error: {err.message}")
        hint = f" What to do: {err.hint}" if err.hint else ""
        self._server.show("error", f"Distcheck could not validate {name}: {err.message}.{hint}")
        if err.traceback:
            self._server.log("error", err.traceback)

    def debug_info(self) -> dict[str, Any]:
        """The runner and the runs, for `distcheck/debugInfo`."""
        runner = self.slot.runner
        return {
            "runner": None
            if runner is None
            else {"pid": runner.pid, "alive": runner.alive, "ready": runner.ready.is_set(), "info": runner.info},
            "runs": {
                name: {"active": run.active, "token": run.token, "ranks": run.ranks} for name, run in self.runs.items()
            },
        }
