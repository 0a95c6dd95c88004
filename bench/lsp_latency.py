"""LSP daemon latency: requests answered while a validation runs, and time to the first diagnostic.

Starts `python -m distcheck.lsp` over stdio on a fresh copy of `examples/` (as `<tmp>/examples`) and:

1. cold: right after `initialized` (the runner is still importing torch), runs `distcheck.validate
   mpnn` and times the command → the first `textDocument/publishDiagnostics` for `mpnn.py`;
2. warm: the same again with the runner warm;
3. while a third validation runs, sends N `textDocument/codeAction` and N `distcheck/lastReport`
   requests (interleaved, one at a time) and prints p50 / p99 / max latency; the same with the
   daemon idle, for comparison.

Prints figures; asserts nothing. Usage: `python bench/lsp_latency.py [--requests 200] [--target mpnn]`.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from lsprotocol import converters, types
from pygls.lsp.client import LanguageClient
from pygls.protocol import (
    JsonRPCNotification,
    JsonRPCRequestMessage,
    JsonRPCResponseMessage,
    _params_field_structure_hook,
)
from pygls.uris import from_fs_path

ROOT = Path(__file__).resolve().parents[1]


def _converter() -> Any:
    """pygls's converter, except that results stay plain JSON values: its default turns every object of a
    custom request's result into a namedtuple (a class per object), which costs the *client* milliseconds
    for a report and would be counted as the daemon's latency."""
    converter = converters.get_converter()
    converter.register_structure_hook(JsonRPCRequestMessage, _params_field_structure_hook)
    converter.register_structure_hook(JsonRPCNotification, _params_field_structure_hook)
    converter.register_structure_hook(JsonRPCResponseMessage, lambda obj, cls: cls(**obj))
    return converter


class Client(LanguageClient):
    def __init__(self) -> None:
        super().__init__("distcheck-bench", "1", converter_factory=_converter)
        self.events: list[tuple[float, str, Any]] = []
        self.changed = asyncio.Event()

    def record(self, method: str, params: Any) -> None:
        self.events.append((time.perf_counter(), method, params))
        self.changed.set()

    async def wait_for(self, since: int, method: str, match: Any = None, timeout: float = 300) -> tuple[float, Any]:
        deadline = time.perf_counter() + timeout
        index = since
        while True:
            while index < len(self.events):
                t, m, params = self.events[index]
                index += 1
                if m == method and (match is None or match(params)):
                    return t, params
            if time.perf_counter() > deadline:
                raise TimeoutError(method)
            self.changed.clear()
            try:
                await asyncio.wait_for(self.changed.wait(), timeout=0.5)
            except asyncio.TimeoutError:
                pass


def make_client(settings: dict[str, Any] | None = None) -> Client:
    """A recording client whose `workspace/configuration` answer is `settings` (none by default)."""
    client = Client()

    @client.feature(types.WORKSPACE_CONFIGURATION)
    def configuration(params: types.ConfigurationParams) -> list[Any]:
        return [dict(settings or {}) for _ in params.items]

    @client.feature(types.WINDOW_WORK_DONE_PROGRESS_CREATE)
    def create(params: types.WorkDoneProgressCreateParams) -> None:
        return None

    for method in (
        types.PROGRESS,
        types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS,
        types.WINDOW_LOG_MESSAGE,
        types.WINDOW_SHOW_MESSAGE,
        "distcheck/report",
    ):

        def handler(params: Any, method: str = method) -> None:
            client.record(method, params)

        client.feature(method)(handler)
    return client


def _percentiles(samples: list[float]) -> str:
    ordered = sorted(samples)
    p50 = statistics.median(ordered)
    p99 = ordered[min(len(ordered) - 1, round(0.99 * (len(ordered) - 1)))]
    return f"p50 {p50 * 1e3:6.2f} ms  p99 {p99 * 1e3:6.2f} ms  max {ordered[-1] * 1e3:6.2f} ms  (n={len(ordered)})"


async def _validate_to_first_diagnostic(
    client: Client, target: str, doc_uri: str
) -> tuple[float, float, dict[str, Any]]:
    since = len(client.events)
    t0 = time.perf_counter()
    result = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="distcheck.validate", arguments=[target])
    )
    t_diag, _ = await client.wait_for(since, types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS, lambda p: p.uri == doc_uri)
    t_report, _ = await client.wait_for(since, "distcheck/report", lambda p: getattr(p, "target", None) == target)
    return t_diag - t0, t_report - t0, result


async def _latencies(
    client: Client, doc_uri: str, diagnostics: list[types.Diagnostic], n: int, target: str
) -> tuple[list[float], list[float]]:
    action_params = types.CodeActionParams(
        text_document=types.TextDocumentIdentifier(uri=doc_uri),
        range=diagnostics[0].range
        if diagnostics
        else types.Range(start=types.Position(line=0, character=0), end=types.Position(line=0, character=0)),
        context=types.CodeActionContext(diagnostics=diagnostics),
    )
    actions: list[float] = []
    reports: list[float] = []
    for _ in range(n):
        t0 = time.perf_counter()
        await client.text_document_code_action_async(action_params)
        actions.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        await client.protocol.send_request_async("distcheck/lastReport", {"target": target})
        reports.append(time.perf_counter() - t0)
    return actions, reports


async def _during_validations(
    client: Client, doc_uri: str, diagnostics: list[types.Diagnostic], n: int, target: str
) -> tuple[list[float], list[float], int, float]:
    """Latencies of requests sent while a validation runs: validations are started back to back
    (each after the previous report) until `n` requests of each kind were sent during one."""
    actions: list[float] = []
    reports: list[float] = []
    runs = 0
    t_begin = time.perf_counter()
    while len(actions) < n:
        since = len(client.events)
        await client.workspace_execute_command_async(
            types.ExecuteCommandParams(command="distcheck.validate", arguments=[target])
        )
        runs += 1
        while len(actions) < n and not any(m == "distcheck/report" for _, m, _ in client.events[since:]):
            a, r = await _latencies(client, doc_uri, diagnostics, 1, target)
            actions.extend(a)
            reports.extend(r)
        await client.wait_for(since, "distcheck/report")
    return actions, reports, runs, time.perf_counter() - t_begin


def _descendants(pid: int) -> dict[int, float]:
    import psutil

    out: dict[int, float] = {}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out[child.pid] = child.create_time()
        except psutil.NoSuchProcess:
            continue
    return out


def _any_alive(procs: dict[int, float]) -> bool:
    import psutil

    for pid, created in procs.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                return True
        except psutil.NoSuchProcess:
            continue
    return False


async def _cancel_mid_run(client: Client, target: str) -> tuple[float, float]:
    """Seconds from `window/workDoneProgress/cancel` (sent once both ranks run) to the progress end,
    and to the last process of that validation gone."""
    since = len(client.events)
    started = await client.workspace_execute_command_async(
        types.ExecuteCommandParams(command="distcheck.validate", arguments=[target])
    )
    token = started["token"] if isinstance(started, dict) else started.token
    await client.wait_for(
        since, types.PROGRESS, lambda p: isinstance(p.value, dict) and p.value.get("message") == "rank 1 started"
    )
    info = await client.protocol.send_request_async("distcheck/debugInfo", {})
    procs = _descendants(int(info["pid"]))
    t0 = time.perf_counter()
    client.window_work_done_progress_cancel(types.WorkDoneProgressCancelParams(token=token))
    while _any_alive(procs):
        await asyncio.sleep(0.005)
    gone = time.perf_counter() - t0
    t_end, _ = await client.wait_for(
        since,
        types.PROGRESS,
        lambda p: p.token == token and isinstance(p.value, dict) and p.value.get("kind") == "end",
    )
    return t_end - t0, gone


async def main(requests: int, target: str) -> None:
    tmp = Path(tempfile.mkdtemp(prefix="distcheck-lsp-bench-"))
    workspace = tmp / "examples"
    shutil.copytree(ROOT / "examples", workspace, ignore=shutil.ignore_patterns("__pycache__", "*.distspec.json"))
    doc = workspace / f"{target}.py"
    doc_uri = from_fs_path(str(doc))
    root_uri = from_fs_path(str(workspace))
    assert doc_uri is not None and root_uri is not None
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "server"), *filter(None, env.get("PYTHONPATH", "").split(os.pathsep))]
    )
    client = make_client()
    await client.start_io(sys.executable, "-m", "distcheck.lsp", "--stdio", env=env, cwd=str(workspace))
    try:
        caps = types.ClientCapabilities(
            workspace=types.WorkspaceClientCapabilities(
                configuration=True, workspace_edit=types.WorkspaceEditClientCapabilities(document_changes=True)
            ),
            window=types.WindowClientCapabilities(work_done_progress=True),
        )
        t_start = time.perf_counter()
        await client.initialize_async(
            types.InitializeParams(
                capabilities=caps,
                root_uri=root_uri,
                workspace_folders=[types.WorkspaceFolder(uri=root_uri, name="examples")],
            )
        )
        client.initialized(types.InitializedParams())
        t_init = time.perf_counter() - t_start
        client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(uri=doc_uri, language_id="python", version=1, text=doc.read_text())
            )
        )
        cold_diag, cold_report, _ = await _validate_to_first_diagnostic(client, target, doc_uri)
        warm_diag, warm_report, _ = await _validate_to_first_diagnostic(client, target, doc_uri)
        published = [
            p for _, m, p in client.events if m == types.TEXT_DOCUMENT_PUBLISH_DIAGNOSTICS and p.uri == doc_uri
        ]
        diagnostics = list(published[-1].diagnostics)

        idle_actions, idle_reports = await _latencies(client, doc_uri, diagnostics, requests, target)

        busy_actions, busy_reports, runs, spent = await _during_validations(
            client, doc_uri, diagnostics, requests, target
        )
        cancel_end, cancel_gone = await _cancel_mid_run(client, target)

        reports = [p for _, m, p in client.events if m == "distcheck/report"]
        meta = getattr(getattr(reports[-1], "report", None), "meta", None) if reports else None
        where = f"device {getattr(meta, 'device', '?')}, backend {getattr(meta, 'backend', '?')}"
        print(f"distcheck LSP latency ({target}, {os.cpu_count()} CPUs, {sys.executable}; validated on {where})")
        if reports and getattr(reports[-1], "notice", None):
            print(f"  notice: {reports[-1].notice}")
        print(f"  initialize round trip:                  {t_init * 1e3:7.1f} ms")
        print(f"  validate → first diagnostic, cold runner: {cold_diag:6.2f} s   (report {cold_report:.2f} s)")
        print(f"  validate → first diagnostic, warm runner: {warm_diag:6.2f} s   (report {warm_report:.2f} s)")
        print(f"  while validations run ({runs} run back to back, {spent:.2f} s; requests sent while one ran):")
        print(f"    textDocument/codeAction  {_percentiles(busy_actions)}")
        print(f"    distcheck/lastReport     {_percentiles(busy_reports)}")
        print("  idle daemon:")
        print(f"    textDocument/codeAction  {_percentiles(idle_actions)}")
        print(f"    distcheck/lastReport     {_percentiles(idle_reports)}")
        print(
            f"  cancel after 'rank 1 started': every process gone in {cancel_gone * 1e3:.0f} ms, "
            f"progress ended in {cancel_end * 1e3:.0f} ms"
        )
    finally:
        try:
            await asyncio.wait_for(client.shutdown_async(None), timeout=10)
            client.exit(None)
        except Exception:
            pass
        await client.stop()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200, help="requests of each kind (default 200)")
    parser.add_argument("--target", default="mpnn", help="example target to validate (default mpnn)")
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.target))
