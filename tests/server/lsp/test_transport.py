"""The daemon's framing: a badly framed message is dropped and the stream resynchronised (pure parser
and a real daemon on raw stdin bytes); a stream that is not LSP ends the daemon with code 1; the end
of stdin, `exit` and SIGTERM end it promptly with nothing it started left behind."""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from distcheck.lsp.framing import MAX_BODY, MAX_JUNK, FrameParser

from .harness import ROOT, add_slow_target, copy_examples, uri


def body(obj: Any) -> bytes:
    return json.dumps(obj).encode()


def frame(obj: Any) -> bytes:
    data = body(obj)
    return b"Content-Length: %d\r\n\r\n" % len(data) + data


def request(msg_id: int, method: str = "distcheck/debugInfo", params: Any = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params}


LOST = body(request(5))
# Each shape of a badly framed message; every one is followed by a good frame in the tests.
BROKEN = {
    "length not a number": b"Content-Length: abc\r\n\r\n" + LOST,
    "negative length": b"Content-Length: -5\r\n\r\n" + LOST,
    "no length header": b"Content-Type: application/vscode-jsonrpc\r\n\r\n" + LOST,
    "body not JSON": b"Content-Length: 9\r\n\r\n{notjson}",
    "body not UTF-8": b"Content-Length: 4\r\n\r\n\xff\xfe\xfd\xfc",
    "empty body": b"Content-Length: 0\r\n\r\n",
    "garbage before the header": b"xyz\x00\x01" + frame(request(5))[:-1],
    "garbage header lines": b"Content-Length: %d\r\nGARBAGE\r\nContent-Length: 5\r\n" % len(LOST) + LOST,
    "body shorter than its length": b"Content-Length: %d\r\n\r\n" % (len(LOST) + 40) + LOST,
    "body longer than its length": b"Content-Length: %d\r\n\r\n" % (len(LOST) - 10) + LOST,
    "length over the limit": b"Content-Length: %d\r\n\r\n" % (MAX_BODY + 1) + LOST,
    "absurd length": b"Content-Length: 999999999999\r\n\r\n" + LOST,
    "no blank line after the header": b"Content-Length: %d\r\n" % len(LOST) + LOST,
    "header block never ends": b"Content-Length: 10\r\n" + b"x" * 9000,
}


def parse(stream: bytes, chunk: int = 0) -> tuple[list[bytes], list[str], FrameParser]:
    """Every frame `stream` yields (fed whole, or `chunk` bytes at a time) and the resync messages."""
    logged: list[str] = []
    parser = FrameParser(on_resync=logged.append)
    out: list[bytes] = []
    pieces = [stream] if chunk <= 0 else [stream[i : i + chunk] for i in range(0, len(stream), chunk)]
    for piece in pieces:
        parser.feed(piece)
        while (got := parser.next_frame()) is not None:
            out.append(got)
    parser.finish()
    return out, logged, parser


# ---- the parser alone


@pytest.mark.parametrize("shape", sorted(BROKEN))
@pytest.mark.parametrize("chunk", [0, 1, 7])
def test_parser_drops_a_broken_frame_and_keeps_the_next(shape: str, chunk: int) -> None:
    before, after = body(request(1)), body(request(7))
    stream = frame(request(1)) + BROKEN[shape] + frame(request(7)) + frame(request(8))
    frames, logged, parser = parse(stream, chunk)
    assert frames == [before, after, body(request(8))], shape
    assert len(logged) == 1 and "dropped" in logged[0] and "resynchronised" in logged[0], logged
    assert parser.broken is None


def test_parser_takes_what_clients_legitimately_send() -> None:
    tricky = {"jsonrpc": "2.0", "method": "x", "params": {"text": "Content-Length: 5\r\n\r\n{}", "é": "\u2028"}}
    stream = (
        frame(request(1))
        + b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n" % len(body(tricky))
        + body(tricky)
        + b"content-length:%d\n\n" % len(body(request(2)))
        + body(request(2))
        + b"\r\n"  # stray blank line between messages
        + frame(request(3))
    )
    for chunk in (0, 1, 3):
        frames, logged, _ = parse(stream, chunk)
        assert frames == [body(request(1)), body(tricky), body(request(2)), body(request(3))]
        assert logged == []


@settings(max_examples=60, deadline=None)
@given(
    st.lists(st.sampled_from(sorted(BROKEN)), min_size=1, max_size=4),
    st.lists(st.integers(min_value=1, max_value=300), min_size=1, max_size=6),
)
def test_parser_recovers_every_good_frame_after_any_mix_of_breakage(shapes: list[str], chunks: list[int]) -> None:
    stream = b""
    expected = []
    for n, shape in enumerate(shapes):
        stream += BROKEN[shape] + frame(request(100 + n))
        expected.append(body(request(100 + n)))
    pieces, pos, k = [], 0, 0
    while pos < len(stream):
        size = chunks[k % len(chunks)]
        pieces.append(stream[pos : pos + size])
        pos, k = pos + size, k + 1
    logged: list[str] = []
    parser = FrameParser(on_resync=logged.append)
    out = []
    for piece in pieces:
        parser.feed(piece)
        while (got := parser.next_frame()) is not None:
            out.append(got)
    assert out == expected
    assert len(logged) == len(shapes)


def test_parser_gives_up_on_a_stream_that_is_not_lsp() -> None:
    logged: list[str] = []
    parser = FrameParser(on_resync=logged.append)
    for _ in range(MAX_JUNK // 4096 + 2):
        parser.feed(b"this is not LSP\n" * 256)
        assert parser.next_frame() is None
        if parser.broken:
            break
    assert parser.broken is not None and "without one well-framed LSP message" in parser.broken
    assert logged and "given up" in logged[-1]


def test_parser_does_not_buffer_a_huge_length_waiting_for_its_body() -> None:
    parser = FrameParser(on_resync=lambda message: None)
    parser.feed(b"Content-Length: 60000000\r\n\r\n{")
    for _ in range(50):
        parser.feed(b"x" * 1000)
        assert parser.next_frame() is None
    parser.feed(frame(request(9)))
    assert parser.next_frame() == body(request(9))


# ---- a real daemon on raw bytes


class RawDaemon:
    """`python -m distcheck.lsp` driven with raw bytes on stdin; answers its requests to the client."""

    def __init__(self, cwd: Path) -> None:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "server"), *filter(None, env.get("PYTHONPATH", "").split(":"))])
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "distcheck.lsp", "--stdio"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=str(cwd),
        )
        self._buf = b""
        self.messages: list[dict[str, Any]] = []

    def send(self, data: bytes) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def initialize(self, workspace: Path | None = None) -> None:
        params: dict[str, Any] = {
            "processId": os.getpid(),
            "capabilities": {},
            "initializationOptions": {"trusted": True},
        }
        if workspace is not None:
            params["rootUri"] = uri(workspace)
            params["workspaceFolders"] = [{"uri": uri(workspace), "name": workspace.name}]
        else:
            params["rootUri"] = None
        self.send(frame(request(1, "initialize", params)))
        self.wait_for(lambda m: m.get("id") == 1 and "result" in m)
        self.send(frame({"jsonrpc": "2.0", "method": "initialized", "params": {}}))

    def _read(self, timeout: float) -> bool:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return True
        data = os.read(self.proc.stdout.fileno(), 65536)
        if not data:
            return False
        self._buf += data
        while True:
            head, sep, rest = self._buf.partition(b"\r\n\r\n")
            if not sep:
                break
            length = int(
                next(line for line in head.split(b"\r\n") if line.startswith(b"Content-Length:")).split(b":")[1]
            )
            if len(rest) < length:
                break
            message = json.loads(rest[:length])
            self._buf = rest[length:]
            self.messages.append(message)
            if "method" in message and "id" in message:  # a request to the client
                result: Any = None
                if message["method"] == "workspace/configuration":
                    result = [{} for _ in message["params"]["items"]]
                self.send(frame({"jsonrpc": "2.0", "id": message["id"], "result": result}))
        return True

    def wait_for(self, predicate: Any, timeout: float = 20.0) -> dict[str, Any]:
        deadline = time.monotonic() + timeout
        seen = 0
        while True:
            for message in self.messages[seen:]:
                if predicate(message):
                    return message
            seen = len(self.messages)
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(
                    f"no such message within {timeout} s; daemon exit {self.proc.poll()}; {self.stderr()}"
                )
            if not self._read(min(left, 0.2)):
                raise AssertionError(f"the daemon closed stdout (exit {self.proc.wait(5)}): {self.stderr()}")

    def answer(self, msg_id: int, timeout: float = 20.0) -> dict[str, Any]:
        return self.wait_for(lambda m: m.get("id") == msg_id and "method" not in m, timeout)

    def stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return "(still running)"
        return self.proc.stderr.read().decode("utf-8", "replace")[-3000:]

    def close(self) -> None:
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(5)
        for stream in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if stream is not None:
                stream.close()


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[RawDaemon]:
    d = RawDaemon(tmp_path)
    try:
        yield d
    finally:
        d.close()


def _exit_within(d: RawDaemon, seconds: float) -> tuple[int, float]:
    t0 = time.monotonic()
    code = d.proc.wait(timeout=seconds)
    return code, time.monotonic() - t0


@pytest.mark.procs
@pytest.mark.timeout(60)
@pytest.mark.parametrize("shape", sorted(BROKEN))
def test_daemon_answers_after_a_badly_framed_message(daemon: RawDaemon, shape: str) -> None:
    daemon.initialize()
    daemon.send(BROKEN[shape] + frame(request(7)))
    assert daemon.answer(7)["result"]["pid"] == daemon.proc.pid
    daemon.send(frame(request(8)))  # and the stream stays in step
    assert "result" in daemon.answer(8)
    assert daemon.proc.poll() is None
    daemon.proc.stdin.close()  # type: ignore[union-attr]
    code, _ = _exit_within(daemon, 10)
    assert code == 0
    assert "resynchronised on the next Content-Length header" in daemon.stderr()


@pytest.mark.procs
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("message", "code"),
    [
        ({"jsonrpc": "2.0", "id": 3, "method": 5}, -32603),
        ({"jsonrpc": "2.0", "id": 4, "method": "textDocument/codeAction", "params": 5}, -32602),
        ({"jsonrpc": "2.0", "id": 6, "method": "textDocument/codeAction"}, -32602),
    ],
)
def test_daemon_answers_an_invalid_request_with_an_error(daemon: RawDaemon, message: dict[str, Any], code: int) -> None:
    daemon.initialize()
    daemon.send(frame(message) + frame([1, 2]) + frame("x") + frame(request(7)))
    error = daemon.answer(message["id"])["error"]
    assert error["code"] == code and "not a valid LSP request" in error["message"]
    assert "result" in daemon.answer(7)
    assert not [m for m in daemon.messages if m.get("method") == "window/showMessage"]


@pytest.mark.procs
@pytest.mark.timeout(60)
def test_daemon_exits_1_on_a_stream_that_is_not_lsp(daemon: RawDaemon) -> None:
    daemon.initialize()
    try:
        daemon.send(b"not LSP at all\n" * (MAX_JUNK // 15 + 1000))
    except BrokenPipeError:
        pass
    code, _ = _exit_within(daemon, 15)
    assert code == 1
    err = daemon.stderr()
    assert "without one well-framed LSP message" in err and "restarts the server" in err


@pytest.mark.procs
@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("ending", "expected"),
    [("eof", 0), ("shutdown-exit", 0), ("exit-without-shutdown", 1), ("sigterm", 128 + signal.SIGTERM)],
)
def test_daemon_ends_promptly(daemon: RawDaemon, ending: str, expected: int) -> None:
    daemon.initialize()
    daemon.send(frame(request(2)))
    daemon.answer(2)
    if ending == "shutdown-exit":
        daemon.send(frame(request(3, "shutdown")))
        daemon.answer(3)
    if ending in ("shutdown-exit", "exit-without-shutdown"):
        daemon.send(frame({"jsonrpc": "2.0", "method": "exit", "params": None}))
    elif ending == "sigterm":
        daemon.proc.send_signal(signal.SIGTERM)
    else:
        daemon.proc.stdin.close()  # type: ignore[union-attr]
    code, took = _exit_within(daemon, 10)
    assert code == expected, daemon.stderr()
    assert took < 3.0, f"took {took:.1f} s"
    assert "Traceback" not in daemon.stderr()


def _descendants(pid: int) -> dict[int, float]:
    out: dict[int, float] = {}
    for child in psutil.Process(pid).children(recursive=True):
        try:
            if child.status() != psutil.STATUS_ZOMBIE:
                out[child.pid] = child.create_time()
        except psutil.NoSuchProcess:
            continue
    return out


def _alive(procs: dict[int, float]) -> list[int]:
    alive = []
    for pid, created in procs.items():
        try:
            p = psutil.Process(pid)
            if p.create_time() == created and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(pid)
        except psutil.NoSuchProcess:
            continue
    return alive


@pytest.mark.procs
@pytest.mark.slow
@pytest.mark.timeout(180)
@pytest.mark.parametrize("ending", ["eof", "sigterm"])
def test_closing_the_pipe_mid_validation_kills_the_runner_and_every_rank(tmp_path: Path, ending: str) -> None:
    ws = copy_examples(tmp_path)
    slow = add_slow_target(ws)
    cwd = tmp_path / "daemon-cwd"
    cwd.mkdir()
    d = RawDaemon(cwd)
    try:
        d.initialize(ws)
        d.send(frame(request(2, "workspace/executeCommand", {"command": "distcheck.validate", "arguments": [slow]})))
        assert "result" in d.answer(2), d.messages[-1]

        deadline = time.monotonic() + 150
        for msg_id in range(3, 10**6):  # until both ranks have started (debugInfo lists their pids)
            d.send(frame(request(msg_id)))
            info = d.answer(msg_id)["result"]
            ranks = [int(p) for p in info["runs"].get(slow, {}).get("ranks", {}).values()]
            if len(ranks) == 2:
                break
            assert time.monotonic() < deadline, info
            time.sleep(0.3)
        before = _descendants(d.proc.pid)
        assert info["runner"]["pid"] in before and ranks and all(p in before for p in ranks), (info, before)

        if ending == "eof":
            d.proc.stdin.close()  # type: ignore[union-attr]
        else:
            d.proc.send_signal(signal.SIGTERM)
        code, took = _exit_within(d, 10)
        assert code == (0 if ending == "eof" else 128 + signal.SIGTERM), d.stderr()
        assert took < 3.0, f"the daemon took {took:.1f} s to exit"
        # gone with the daemon, not 1 s later through the runner's watchdog
        time.sleep(0.1)
        assert not _alive(before), f"left behind: {_alive(before)}"
    finally:
        d.close()
