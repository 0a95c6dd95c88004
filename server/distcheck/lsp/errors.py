"""The daemon's own JSON-RPC errors (beside pygls' `-32602` `JsonRpcInvalidParams`): docs/protocol.md."""

from __future__ import annotations

from pygls.exceptions import JsonRpcException

__all__ = ["ALREADY_RUNNING", "REQUEST_FAILED", "AlreadyRunning", "OutsideWorkspace", "RequestFailed"]

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
