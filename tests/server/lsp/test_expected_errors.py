"""A refused request (the user's mistake: unknown target, bad argument, nothing validated yet) is one
`window/logMessage` warning with its message — never a traceback, in the log or on the daemon's stderr
(which the editor shows in its output). A real bug keeps its traceback."""

from __future__ import annotations

import asyncio
import logging
import sys
from pathlib import Path
from typing import Any

import pytest
from lsprotocol import types
from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcInvalidParams

from distcheck.lsp.errors import AlreadyRunning, ExpectedErrorsWithoutTraceback, RequestFailed, is_expected

from .harness import copy_examples, lsp_session


def _record(exc: BaseException) -> logging.LogRecord:
    try:
        raise exc
    except BaseException:
        return logging.getLogger("pygls.protocol.json_rpc").makeRecord(
            "pygls.protocol.json_rpc", logging.ERROR, __file__, 1, "failed", (), sys.exc_info()
        )


@pytest.mark.parametrize(
    "exc", [JsonRpcInvalidParams("unknown target 'x'"), RequestFailed("no report"), AlreadyRunning("busy")]
)
def test_expected_errors_lose_their_traceback(exc: JsonRpcException) -> None:
    assert is_expected(exc)
    assert ExpectedErrorsWithoutTraceback().filter(_record(exc)) is False


@pytest.mark.parametrize(
    "exc", [KeyError("spec"), JsonRpcInternalError("boom"), RuntimeError("bug"), ValueError("bad")]
)
def test_bugs_keep_their_traceback(exc: BaseException) -> None:
    assert not is_expected(exc)
    assert ExpectedErrorsWithoutTraceback().filter(_record(exc)) is True


def test_records_without_an_exception_pass() -> None:
    record = logging.LogRecord("pygls", logging.WARNING, __file__, 1, "unknown method", (), None)
    assert ExpectedErrorsWithoutTraceback().filter(record) is True


REFUSED: list[tuple[str, tuple[Any, ...], str]] = [
    ("command", ("distcheck.validate", "no_such_target"), "unknown target 'no_such_target'"),
    ("command", ("distcheck.validate", 5), "the target must be a string"),
    ("command", ("distcheck.saveSpec",), "no target has been validated yet"),
    ("command", ("distcheck.cancel", "pair_potential", "mpnn"), "distcheck.cancel takes"),
]


@pytest.mark.procs
@pytest.mark.asyncio
@pytest.mark.timeout(90)
async def test_refused_requests_are_warnings_without_traceback(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    ws = copy_examples(tmp_path)
    async with lsp_session(ws) as s:
        for kind, (name, *args), words in REFUSED:
            before = len(s.client.log_messages)
            try:
                if kind == "command":
                    await s.command(name, *args)
                else:
                    await s.request(name, args[0])
            except JsonRpcException as err:
                assert "Traceback" not in err.message, (name, args, err.message)
            else:
                if kind == "command":
                    pytest.fail(f"{name} {args} was not refused")
            for _ in range(50):
                if len(s.client.log_messages) > before and any(
                    words in m.message for m in s.client.log_messages[before:]
                ):
                    break
                await asyncio.sleep(0.1)
            mine = [m for m in s.client.log_messages[before:] if words in m.message]
            assert mine, (name, args, [m.message for m in s.client.log_messages[before:]])
            assert all(m.type in (types.MessageType.Warning, types.MessageType.Info) for m in mine), mine
        logged = [m.message for m in s.client.log_messages]
        assert not any("Traceback" in m for m in logged), logged
    sys.stderr.flush()
    stderr = capfd.readouterr().err
    assert "Traceback" not in stderr, stderr
