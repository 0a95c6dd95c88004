"""The daemon's stdio transport: pygls' loop over stdin/stdout behind distcheck's own framer, and the
daemon's wind-down.

`FramedReader` reads stdin in a daemon thread and hands pygls one clean frame at a time from a
`framing.FrameParser`, so a badly framed message is dropped and logged rather than losing every later
one; when the parser gives up on the stream (the peer does not speak LSP) the daemon exits with code
1, so the editor restarts it.

`serve_stdio` runs a pygls server over stdin/stdout with that reader behind pygls' own loop, and on
the end of stdin (the editor's pipe closed), the `exit` notification, SIGTERM or SIGHUP winds the
daemon down: every validation is cancelled and the runner is killed with every process it started,
within about two seconds, before the process exits.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import signal
import sys
import threading
from collections.abc import Awaitable, Callable
from typing import Any, BinaryIO, Protocol

from lsprotocol import types
from pygls.exceptions import JsonRpcException
from pygls.io_ import StdoutWriter, run_async

from .framing import FrameParser

__all__ = ["FramedReader", "serve_stdio"]

logger = logging.getLogger(__name__)

_READ_SIZE = 65536
_WIND_DOWN_SEC = 3.0
_INVALID_REQUEST = -32600
EXIT_BROKEN_STREAM = 1


class _Stdin(Protocol):
    def fileno(self) -> int: ...


class FramedReader:
    """pygls' `AsyncReader` over a `FrameParser`: each `readline()` / `readexactly()` pair yields one
    clean frame, so pygls' own loop only ever sees well-formed messages.

    stdin is read by a daemon thread (never pygls' thread pool), so a read that is still blocked when
    the daemon decides to exit (a signal) cannot hold the process up. `stop()` makes the next read
    return end-of-stream.
    """

    def __init__(self, stdin: _Stdin, parser: FrameParser | None = None) -> None:
        self.parser = parser or FrameParser()
        self._fd = stdin.fileno()
        self._chunks: asyncio.Queue[bytes | None] | None = None
        self._stopped: asyncio.Event | None = None
        self._body: bytes | None = None
        self._header_sent = False
        self.eof = False
        self.error: str | None = None
        self.signal = 0
        self.last_body: bytes | None = None
        """The body handed to pygls last (the message it is handling)."""

    def _start(self) -> asyncio.Queue[bytes | None]:
        if self._chunks is None:
            loop = asyncio.get_running_loop()
            self._chunks = asyncio.Queue()
            self._stopped = asyncio.Event()
            chunks = self._chunks
            threading.Thread(target=self._pump, args=(loop, chunks), daemon=True, name="distcheck-stdin").start()
        return self._chunks

    def _pump(self, loop: asyncio.AbstractEventLoop, chunks: asyncio.Queue[bytes | None]) -> None:
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except InterruptedError:
                continue
            except OSError as exc:
                self.error = f"reading stdin failed: {exc}"
                data = b""
            with contextlib.suppress(RuntimeError):  # the loop is closed: the daemon is exiting
                loop.call_soon_threadsafe(chunks.put_nowait, data or None)
            if not data:
                return

    def stop(self, signum: int = 0) -> None:
        """End the stream now (a signal): the pending or next read returns end-of-stream."""
        self.signal = self.signal or signum
        if self._stopped is not None:
            self._stopped.set()
        self.eof = True

    async def _next_body(self) -> bytes | None:
        chunks = self._start()
        assert self._stopped is not None
        while not self.eof:
            body = self.parser.next_frame()
            if body is not None:
                return body
            if self.parser.broken is not None:
                return None
            getter = asyncio.ensure_future(chunks.get())
            stopper = asyncio.ensure_future(self._stopped.wait())
            try:
                await asyncio.wait({getter, stopper}, return_when=asyncio.FIRST_COMPLETED)
            finally:
                stopper.cancel()
                if not getter.done():
                    getter.cancel()
            if self._stopped.is_set():
                break
            data = getter.result()
            if data is None:
                self.eof = True
                self.parser.finish()
                break
            self.parser.feed(data)
        return None

    async def readline(self) -> bytes:
        """The header of the next clean frame, then the blank line; b"" at the end of the stream."""
        if self._body is None:
            self._body = await self._next_body()
            self._header_sent = False
            if self._body is None:
                return b""
        if not self._header_sent:
            self._header_sent = True
            return b"Content-Length: %d\r\n" % len(self._body)
        return b"\r\n"

    async def readexactly(self, n: int) -> bytes:
        """The body announced by the last header (pygls asks for exactly its length)."""
        body, self._body = self._body or b"", None
        self.last_body = body
        return body


def _unhandled(protocol: Any, reader: FramedReader) -> Callable[[Exception, Any], None]:
    """pygls' error handler for a well-framed JSON message it could not handle (not a JSON-RPC
    message, params of the wrong shape): log it — never pop it up in the editor — and, when it was a
    request, answer it with an error so that the editor does not wait for it forever."""

    def handle(error: Exception, source: Any) -> None:
        logger.error(
            "distcheck-lsp: ignored a message that is not a valid LSP message (%s: %s); if this repeats, "
            "report it with this log",
            type(error).__name__,
            error,
        )
        msg_id = _request_id(reader.last_body)
        if msg_id is None:
            return
        cause = error if isinstance(error, JsonRpcException) else error.__cause__
        code = cause.code if isinstance(cause, JsonRpcException) else _INVALID_REQUEST
        message = f"not a valid LSP request ({type(error).__name__}: {error}); distcheck ignored it"
        with contextlib.suppress(Exception):
            protocol._send_response(msg_id, error=types.ResponseError(code=code, message=message))

    return handle


def _request_id(body: bytes | None) -> int | str | None:
    """The id of a JSON-RPC request body (an object with a `method` and an integer or string id)."""
    if body is None:
        return None
    try:
        data = json.loads(body)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "method" not in data:
        return None
    msg_id = data.get("id")
    return msg_id if isinstance(msg_id, (int, str)) and not isinstance(msg_id, bool) else None


class _Server(Protocol):
    """What `serve_stdio` needs of the daemon (a pygls `LanguageServer` with `shutdown_all`)."""

    protocol: Any

    @property
    def runner(self) -> Any: ...

    def shutdown(self) -> None: ...

    def shutdown_all(self) -> Awaitable[None]: ...


async def wind_down(server: _Server, timeout: float = _WIND_DOWN_SEC) -> None:
    """Cancel every validation and kill the runner with every process it started; then cancel the
    loop's other tasks. Bounded by about `timeout` + 2 s; never raises."""
    try:
        await asyncio.wait_for(server.shutdown_all(), timeout)
    except Exception as exc:  # a wind-down must go on whatever the server's state
        logger.warning("distcheck-lsp: stopping the validations failed (%s: %s)", type(exc).__name__, exc)
    await _kill_runner(server)
    current = asyncio.current_task()
    others = [t for t in asyncio.all_tasks() if t is not current]
    for task in others:
        task.cancel()
    if others:
        await asyncio.wait(others, timeout=1.0)
    await _kill_runner(server)  # a runner whose start was under way when the tasks were cancelled


async def _kill_runner(server: _Server) -> None:
    runner = server.runner
    proc = getattr(runner, "proc", None)
    if runner is None or proc is None or proc.returncode is not None:
        return
    try:
        await asyncio.wait_for(runner.kill(), 3.0)
    except Exception as exc:
        logger.warning("distcheck-lsp: killing the runner (pid %s) failed (%s: %s)", proc.pid, type(exc).__name__, exc)


def serve_stdio(server: _Server, stdin: BinaryIO | None = None, stdout: BinaryIO | None = None) -> int:
    """Serve LSP on stdin/stdout until the stream ends, `exit`, SIGTERM or SIGHUP; return the exit code.

    0 at the end of stdin and on `exit` after `shutdown`; 1 on `exit` without `shutdown` (as LSP
    asks) and when the stream was given up (`FrameParser.broken`) or could not be read; 128 + the
    signal's number on SIGTERM / SIGHUP. Every validation and process the daemon started is gone when it returns.
    """
    reader = FramedReader(stdin or sys.stdin.buffer)
    server.protocol.set_writer(StdoutWriter(stdout or sys.stdout.buffer))
    stop_event = threading.Event()
    code = 0
    # pygls' loop logs a traceback for each message it cannot handle; `_unhandled` says it in one line
    loop_logger = logging.getLogger(f"{__name__}.loop")
    loop_logger.setLevel(logging.DEBUG if logger.isEnabledFor(logging.DEBUG) else logging.CRITICAL)

    async def serve() -> None:
        nonlocal code
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGHUP):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, reader.stop, signum)
        try:
            await run_async(
                stop_event=stop_event,
                reader=reader,
                protocol=server.protocol,
                logger=loop_logger,
                error_handler=_unhandled(server.protocol, reader),
            )
        except SystemExit as exc:  # pygls' `exit` handler
            code = exc.code if isinstance(exc.code, int) else 0
        except BrokenPipeError:
            logger.warning("distcheck-lsp: the connection to the editor is lost; shutting down")
        finally:
            await wind_down(server)

    try:
        asyncio.run(serve())
    except SystemExit as exc:  # `exit` handled from a callback rather than inside the loop's read
        code = exc.code if isinstance(exc.code, int) else 0
    except KeyboardInterrupt:
        code = 130
    finally:
        stop_event.set()
        with contextlib.suppress(Exception):
            server.shutdown()
    broken = reader.parser.broken or reader.error
    if broken is not None:
        logger.error("distcheck-lsp: %s; exiting so that the editor restarts the server", broken)
        return EXIT_BROKEN_STREAM
    return 128 + reader.signal if reader.signal else code
