"""The daemon's own JSON-RPC errors (beside pygls' `-32602` `JsonRpcInvalidParams`): docs/protocol.md."""

from __future__ import annotations

import logging

from pygls.exceptions import JsonRpcException, JsonRpcInternalError

__all__ = [
    "ALREADY_RUNNING",
    "REQUEST_FAILED",
    "AlreadyRunning",
    "ExpectedErrorsWithoutTraceback",
    "OutsideWorkspace",
    "RequestFailed",
    "is_expected",
    "refusal_line",
]

ALREADY_RUNNING = -32002
REQUEST_FAILED = -32803


class AlreadyRunning(JsonRpcException):
    """A validation of the target is already running (LSP error -32002)."""

    CODE = ALREADY_RUNNING


class RequestFailed(JsonRpcException):
    """A request that was understood but could not be carried out (LSP error -32803)."""

    CODE = REQUEST_FAILED


class OutsideWorkspace(RequestFailed):
    """The target would import code from outside the workspace: `data` is
    `{"kind": "outside-workspace", "target": name, "paths": [...]}`, for the client to confirm."""


def is_expected(error: BaseException | None) -> bool:
    """True for an error a handler raised on purpose to refuse a request (unknown target, bad argument,
    a run already going, code outside the workspace): the user's to fix, so no traceback. An internal
    error (any other exception, which pygls wraps in `JsonRpcInternalError`) is a bug and keeps one."""
    return isinstance(error, JsonRpcException) and not isinstance(error, JsonRpcInternalError)


def refusal_line(error: JsonRpcException) -> str:
    """The one line the log shows for a refused request: the error's own message (which says what to
    do next), without pygls' traceback."""
    message = (error.message or str(error)).strip().splitlines()
    return f"request refused: {message[0] if message else type(error).__name__}"


class ExpectedErrorsWithoutTraceback(logging.Filter):
    """On pygls' JSON-RPC logger: drops its `logger.exception` records for expected errors (the server
    logs those itself as one `window/logMessage` warning); every other record passes unchanged."""

    def filter(self, record: logging.LogRecord) -> bool:
        """False (drop) only for a record whose exception is an expected error."""
        exc = record.exc_info[1] if record.exc_info else None
        return not is_expected(exc)
