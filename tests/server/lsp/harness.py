"""A pytest-lsp client that records every notification in order, for the distcheck LSP tests."""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lsprotocol import types
from pygls.protocol import default_converter
from pygls.uris import from_fs_path, to_fs_path
from pytest_lsp import LanguageClient, client_capabilities
from pytest_lsp.client import DEFAULT_CLIENT_FEATURES

ROOT = Path(__file__).resolve().parents[3]
EXAMPLES = ROOT / "examples"


def uri(path: str | os.PathLike[str]) -> str:
    out = from_fs_path(str(path))
    assert out is not None
    return out


def copy_examples(tmp_path: Path) -> Path:
    """A fresh copy of `examples/` as `tmp_path/examples` (its pyproject's python_path [".."] makes
    `examples.*` importable from tmp_path)."""
    target = tmp_path / "examples"
    shutil.copytree(EXAMPLES, target, ignore=shutil.ignore_patterns("__pycache__", "*.distspec.json"))
    return target


SLOW_MODEL = """\"\"\"A pair potential whose ranks sleep in forward, so a validation stays busy.\"\"\"

import time

from distcheck.runtime import current_context
from examples import pair_potential


class Slow(pair_potential.PairPotential):
    def forward(self, batch):
        if current_context() is not None:  # ranks only: the reference run finishes at once
            time.sleep(60)
        return super().forward(batch)


def model_factory():
    return Slow().double()


sample_batch = pair_potential.sample_batch
"""


def add_slow_target(ws: Path) -> str:
    """Add target `slow` (ranks sleep 60 s in forward) to the copied workspace; return its name."""
    (ws / "slow_model.py").write_text(SLOW_MODEL)
    with (ws / "pyproject.toml").open("a") as fh:
        fh.write(
            '\n[[tool.distcheck.targets]]\nname = "slow"\nfactory = "slow_model.py:model_factory"\n'
            'sample = "slow_model.py:sample_batch"\ntimeout_sec = 300\n'
        )
    return "slow"


@dataclass
class Event:
    method: str
    params: Any
    t: float


@dataclass
class Recorder:
    events: list[Event] = field(default_factory=list)
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    def record(self, method: str, params: Any) -> None:
        self.events.append(Event(method, params, time.monotonic()))
        self.changed.set()

    def mark(self) -> int:
        return len(self.events)

    async def wait_for(self, predicate: Callable[[Event], bool], *, since: int = 0, timeout: float = 120.0) -> Event:
        deadline = time.monotonic() + timeout
        index = since
        while True:
            while index < len(self.events):
                event = self.events[index]
                index += 1
                if predicate(event):
                    return event
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                methods = [e.method for e in self.events[since:]]
                raise TimeoutError(f"no matching notification in {timeout} s; got {methods[-40:]}")
            self.changed.clear()
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self.changed.wait(), timeout=min(remaining, 0.5))

    def of(self, method: str, since: int = 0) -> list[Any]:
        return [e.params for e in self.events[since:] if e.method == method]


def _recording(method: str, fn: Callable[..., Any], rec: Recorder) -> Callable[..., Any]:
    def handler(client: LanguageClient, params: Any) -> Any:
        result = fn(client, params)
        rec.record(method, params)
        return result

    return handler


@dataclass
class Session:
    client: LanguageClient
    rec: Recorder
    workspace: Path

    async def request(self, method: str, params: Any) -> Any:
        return await self.client.protocol.send_request_async(method, params)

    async def command(self, command: str, *arguments: Any) -> Any:
        return await self.client.workspace_execute_command_async(
            types.ExecuteCommandParams(command=command, arguments=list(arguments))
        )

    def open(self, path: Path, language: str, version: int = 1) -> str:
        doc_uri = uri(path)
        self.client.text_document_did_open(
            types.DidOpenTextDocumentParams(
                text_document=types.TextDocumentItem(
                    uri=doc_uri, language_id=language, version=version, text=path.read_text()
                )
            )
        )
        return doc_uri

    def change(self, doc_uri: str, text: str, version: int) -> None:
        self.client.text_document_did_change(
            types.DidChangeTextDocumentParams(
                text_document=types.VersionedTextDocumentIdentifier(uri=doc_uri, version=version),
                content_changes=[types.TextDocumentContentChangeWholeDocument(text=text)],
            )
        )

    def diagnostics(self, doc_uri: str, since: int = 0) -> list[types.Diagnostic] | None:
        """The latest diagnostics published for `doc_uri` after `since`, or None."""
        found = None
        for params in self.rec.of("textDocument/publishDiagnostics", since):
            if params.uri == doc_uri:
                found = list(params.diagnostics)
        return found

    async def wait_report(self, target: str, since: int, timeout: float = 150.0) -> dict[str, Any]:
        event = await self.rec.wait_for(
            lambda e: e.method == "distcheck/report" and get_field(e.params, "target") == target,
            since=since,
            timeout=timeout,
        )
        return plain(event.params)

    def progress_messages(self, token: str, since: int = 0) -> list[tuple[str, str | None]]:
        out: list[tuple[str, str | None]] = []
        for params in self.rec.of("$/progress", since):
            if params.token != token:
                continue
            value = params.value
            kind = get_field(value, "kind")
            text = get_field(value, "title") if kind == "begin" else get_field(value, "message")
            out.append((str(kind), text))
        return out

    async def debug_info(self) -> dict[str, Any]:
        return plain(await self.request("distcheck/debugInfo", {}))


def get_field(obj: Any, key: str) -> Any:
    """`obj[key]` for a dict, else the attribute (None when absent): pygls hands payloads over as either."""
    if isinstance(obj, dict):
        return obj.get(key)
    return getattr(obj, key, None)


def plain(obj: Any) -> Any:
    """Namedtuples (how pygls hands over custom payloads) → dicts and lists."""
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, dict):
        return {k: plain(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [plain(v) for v in obj]
    return obj


@contextlib.asynccontextmanager
async def lsp_session(
    workspace: Path, settings: dict[str, Any] | None = None, *, trusted: bool = True
) -> AsyncIterator[Session]:
    """A real `python -m distcheck.lsp` over stdio, initialized on `workspace` (trusted, as the
    client says in `initializationOptions`, unless `trusted=False`)."""
    rec = Recorder()
    client = LanguageClient(converter_factory=default_converter, configuration={"": {"distcheck": settings or {}}})
    for method, fn in DEFAULT_CLIENT_FEATURES.items():
        client.feature(method)(_recording(method, fn, rec))

    @client.feature("distcheck/report")
    def _report(_client: LanguageClient, params: Any) -> None:
        rec.record("distcheck/report", params)

    @client.feature(types.WORKSPACE_APPLY_EDIT)
    def _apply_edit(_client: LanguageClient, params: types.ApplyWorkspaceEditParams) -> types.ApplyWorkspaceEditResult:
        """Apply the edit to the files on disk, as an editor that saves at once would."""
        rec.record(types.WORKSPACE_APPLY_EDIT, params)
        touched = {
            change.uri if isinstance(change, types.CreateFile) else change.text_document.uri
            for change in params.edit.document_changes or []
            if isinstance(change, (types.CreateFile, types.TextDocumentEdit))
        }
        texts = {}
        for doc in touched:
            path = Path(str(to_fs_path(doc)))
            texts[doc] = path.read_text() if path.exists() else ""
        for doc, text in apply_workspace_edit(params.edit, texts).items():
            Path(str(to_fs_path(doc))).write_text(text)
        return types.ApplyWorkspaceEditResult(applied=True)

    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "server"), *[p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]]
    )
    # As the extension does: never from the workspace, which `python -m` would put first on sys.path.
    daemon_cwd = workspace.parent / ".daemon-cwd"
    daemon_cwd.mkdir(exist_ok=True)
    await client.start_io(sys.executable, "-m", "distcheck.lsp", "--stdio", env=env, cwd=str(daemon_cwd))
    caps = client_capabilities("visual-studio-code")
    try:
        await client.initialize_session(
            types.InitializeParams(
                capabilities=caps,
                root_uri=uri(workspace),
                workspace_folders=[types.WorkspaceFolder(uri=uri(workspace), name=workspace.name)],
                initialization_options={"trusted": trusted},
            )
        )
        yield Session(client, rec, workspace)
    finally:
        with contextlib.suppress(Exception):
            await asyncio.wait_for(client.shutdown_session(), timeout=15)
        with contextlib.suppress(Exception):
            await client.stop()


def _offset(text: str, position: types.Position) -> int:
    """Code-point offset of an LSP position counted in UTF-16 code units (independent of the server's code)."""
    lines = text.splitlines(keepends=True)
    offset = sum(len(line) for line in lines[: position.line])
    line = lines[position.line] if position.line < len(lines) else ""
    units = 0
    for i, ch in enumerate(line):
        if units >= position.character:
            return offset + i
        units += len(ch.encode("utf-16-le")) // 2
    return offset + len(line.rstrip("\r\n")) if position.character > 0 else offset


def apply_text_edits(text: str, edits: list[Any]) -> str:
    spans = sorted(
        ((_offset(text, e.range.start), _offset(text, e.range.end), e.new_text) for e in edits), reverse=True
    )
    for start, end, new in spans:
        text = text[:start] + new + text[end:]
    return text


def apply_workspace_edit(edit: types.WorkspaceEdit, texts: dict[str, str]) -> dict[str, str]:
    """Apply `edit` to `texts` (uri → text; a created file starts empty); returns the changed texts."""
    out = dict(texts)
    for change in edit.document_changes or []:
        if isinstance(change, types.CreateFile):
            out.setdefault(change.uri, "")
        elif isinstance(change, types.TextDocumentEdit):
            doc = change.text_document.uri
            out[doc] = apply_text_edits(out.get(doc, ""), list(change.edits))
        else:
            raise AssertionError(f"unexpected document change {change!r}")
    for doc, edits in (edit.changes or {}).items():
        out[doc] = apply_text_edits(out.get(doc, ""), list(edits))
    return out
